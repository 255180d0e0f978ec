"""The transformers Trainer (through accelerate) trains on tpu with
ACCELERATE_TORCH_DEVICE=tpu, its losses equal to the same run on CPU: fp32, bf16
autocast and gradient accumulation, with the default fused AdamW lowered.

Each run is its own process: accelerate keeps its device in a process-wide
singleton (PartialState), so a CPU and a tpu run cannot share one."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("accelerate", reason="accelerate is in requirements-dev.txt")
pytest.importorskip("transformers")

SCRIPT = textwrap.dedent("""
    import json, os, sys, tempfile
    device, bf16, accumulate = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
    kind, steps = sys.argv[4], int(sys.argv[5])
    if device == "tpu":
        os.environ["ACCELERATE_TORCH_DEVICE"] = "tpu"   # the one line a user adds
    import torch, transformers, torchtpu

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if kind == "bert":
        config = transformers.BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32, num_labels=3,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = transformers.BertForSequenceClassification(config)
        ids = torch.randint(1, 64, (32, 12), generator=g)
        labels = torch.randint(0, 3, (32,), generator=g)
        data = [{"input_ids": ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                 "labels": labels[i]} for i in range(32)]
    else:
        config = transformers.GPT2Config(
            vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(config)
        ids = torch.randint(1, 64, (32, 16), generator=g)
        data = [{"input_ids": ids[i], "labels": ids[i]} for i in range(32)]
    args = transformers.TrainingArguments(
        output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, max_steps=steps,
        gradient_accumulation_steps=accumulate, logging_steps=1, report_to=[],
        use_cpu=device == "cpu", save_strategy="no", seed=0, learning_rate=1e-3,
        bf16=bf16, disable_tqdm=True, dataloader_num_workers=0)
    torchtpu.metrics.reset()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    trainer.train()
    print(json.dumps({
        "device": str(next(trainer.model.parameters()).device),
        "optimizer": type(trainer.optimizer.optimizer).__name__,
        "fused": trainer.optimizer.param_groups[0].get("fused"),
        "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
        "fallbacks": torchtpu.metrics.fallback_counts()}))
""")


def train(device, bf16=False, accumulate=1, kind="bert", steps=5):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("ACCELERATE_TORCH_DEVICE", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT, device, str(int(bf16)), str(accumulate), kind,
                        str(steps)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind,steps,bf16,accumulate,rtol", [
    ("bert", 5, False, 1, 1e-4), ("bert", 5, True, 2, 2e-2), ("gpt2", 20, False, 1, 1e-4)],
    ids=["bert-fp32", "bert-bf16-accumulate2", "gpt2-20-steps"])
def test_trainer_on_tpu_matches_cpu(kind, steps, bf16, accumulate, rtol):
    cpu = train("cpu", bf16, accumulate, kind, steps)
    tpu = train("tpu", bf16, accumulate, kind, steps)
    assert cpu["device"] == "cpu" and tpu["device"] == "tpu:0"
    assert tpu["fused"], "Trainer's default AdamW is the fused one"
    assert tpu["fallbacks"] == {}
    assert len(tpu["losses"]) == steps
    assert tpu["losses"] == pytest.approx(cpu["losses"], rel=rtol)
