"""accelerate 1.15 (and the transformers Trainer over it) where it picks
devices or a compiler from lists without tpu (docs/device-seams.md, section
"Libraries"), and torchtpu.integrations.accelerate, which the transformers
enable() also runs. Real libraries, tiny random models, tpu against CPU. A
test named ``*_still_*`` asserts accelerate's (or transformers') present
behaviour: it fails the day the library changes, and the docs row should
change with it.

The Trainer runs each in its own process: accelerate keeps its device in a
process-wide singleton (PartialState)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from _util import no_fallback

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _llama_config(**kwargs):
    return transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, **kwargs)


def _save_llama(tmp_path):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_llama_config())
    model.save_pretrained(tmp_path)
    return model


# --- device_map="auto": accelerate's memory budget


def test_device_map_auto_fills_tpu(tmp_path):
    """device_map="auto" puts the weights on tpu first, as on a GPU, with the
    saved values; a max_memory with a tpu index works too, and one beyond the
    device count is an error naming tpu."""
    reference = _save_llama(tmp_path)
    ids = torch.randint(0, 64, (1, 5))
    with torch.no_grad():
        expected = reference(ids).logits
    for max_memory in (None, {0: "1GiB", "cpu": "1GiB"}):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            tmp_path, device_map="auto", max_memory=max_memory)
        assert {p.device for p in model.parameters()} == {torch.device("tpu", 0)}
        with no_fallback(), torch.no_grad():
            got = model(ids.to("tpu")).logits
        assert (got.cpu() - expected).abs().max() < 1e-5
    beyond = torch.tpu.device_count()
    with pytest.raises(ValueError, match=f"tpu:{beyond}"):
        transformers.AutoModelForCausalLM.from_pretrained(
            tmp_path, device_map="auto", max_memory={beyond: "1GiB", "cpu": "1GiB"})


# --- Trainer and Accelerator

_ACCELERATE_PROBE = textwrap.dedent("""
    import json, sys, tempfile
    import torch, transformers, torchtpu
    from accelerate import Accelerator, PartialState
    from accelerate.state import AcceleratorState
    out = {}

    def devices():
        AcceleratorState._reset_state(reset_partial_state=True)
        args = transformers.TrainingArguments(tempfile.mkdtemp(), report_to=[])
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64))
        path = tempfile.mkdtemp()
        model.save_pretrained(path)
        def placed(**kwargs):
            model = transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
            return sorted({str(p.device) for p in model.parameters()})

        return {"args": str(args.device), "accelerate": str(PartialState().device),
                "device_map": placed(device_map="auto"),
                "max_memory": placed(device_map="auto", max_memory={0: "1GiB", "cpu": "1GiB"})}

    if sys.argv[1] == "devices":
        out = devices()
        if sys.argv[2:] == ["enable"]:
            import torchtpu.integrations.transformers as tpu_transformers
            tpu_transformers.enable()
            tpu_transformers.enable()  # idempotent
            out["enabled"] = devices()
    elif sys.argv[1] in ("train", "train-cpu"):
        def train(**kwargs):
            torch.manual_seed(0)
            g = torch.Generator().manual_seed(1)
            config = transformers.BertConfig(
                vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=32, num_labels=3,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
            model = transformers.BertForSequenceClassification(config)
            ids = torch.randint(1, 64, (12, 8), generator=g)
            labels = torch.randint(0, 3, (12,), generator=g)
            data = [{"input_ids": ids[i], "labels": labels[i]} for i in range(12)]
            args = transformers.TrainingArguments(
                tempfile.mkdtemp(), per_device_train_batch_size=4, max_steps=3, logging_steps=1,
                report_to=[], save_strategy="no", seed=0, learning_rate=1e-3, disable_tqdm=True,
                use_cpu=sys.argv[1] == "train-cpu", **kwargs)
            trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
            trainer.train()
            out["device"] = str(next(trainer.model.parameters()).device)
            out["accelerate"] = str(trainer.accelerator.device)
            return [h["loss"] for h in trainer.state.log_history if "loss" in h]

        out["losses"] = train()
        if sys.argv[1] == "train":
            AcceleratorState._reset_state(reset_partial_state=True)
            out["compiled_losses"] = train(torch_compile=True)  # "inductor" by default
    else:
        try:
            Accelerator(mixed_precision="fp16")
            out["fp16"] = "ok"
        except ValueError as e:
            out["fp16"] = str(e)
        AcceleratorState._reset_state(reset_partial_state=True)
        acc = Accelerator(mixed_precision="bf16")
        layer = torch.nn.Linear(4, 4).to(acc.device)
        with acc.autocast():
            out["bf16"] = [str(acc.device), str(layer(torch.ones(2, 4, device=acc.device)).dtype)]
    print(json.dumps(out))
""")


def _probe(mode, env_device=None, fixes=True, then=()):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ACCELERATE_TORCH_DEVICE", "TORCHTPU_LIBRARY_FIXES")}
    if env_device:
        env["ACCELERATE_TORCH_DEVICE"] = env_device
    if not fixes:
        env["TORCHTPU_LIBRARY_FIXES"] = "0"
    run = subprocess.run([sys.executable, "-c", _ACCELERATE_PROBE, mode, *then], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_devices_without_enable():
    """A fresh process that never calls enable(): TrainingArguments and
    accelerate's PartialState both pick tpu, and device_map="auto" puts the
    weights on tpu, as both pick cuda on a CUDA host."""
    assert _probe("devices") == {"args": "tpu:0", "accelerate": "tpu",
                                 "device_map": ["tpu:0"], "max_memory": ["tpu:0"]}


def test_devices_still_disagree_without_the_fixes():
    """With TORCHTPU_LIBRARY_FIXES=0: TrainingArguments picks tpu:0
    (is_torch_tpu_available: the accelerator is "tpu"), accelerate's
    PartialState picks CPU (its fixed list), so a Trainer moves the model to
    tpu and the batches stay on CPU: "Expected all tensors to be on the same
    device" at the first step; and accelerate's get_max_memory lists no tpu,
    so device_map="auto" puts every weight on CPU (a max_memory with index 0
    works: an int device is the current accelerator, tpu). The one-liners:
    ACCELERATE_TORCH_DEVICE=tpu (tests/integration/test_trainer.py trains with it),
    device_map="tpu". enable() (twice) then applies the fixes by hand."""
    out = _probe("devices", fixes=False, then=["enable"])
    assert out.pop("enabled") == {"args": "tpu:0", "accelerate": "tpu",
                                  "device_map": ["tpu:0"], "max_memory": ["tpu:0"]}
    assert out == {"args": "tpu:0", "accelerate": "cpu", "device_map": ["cpu"],
                   "max_memory": ["tpu:0"]}


def test_trainer_on_tpu_without_env():
    """In a fresh process that never calls enable(): accelerate's default
    device is tpu, so a Trainer trains on tpu with no ACCELERATE_TORCH_DEVICE,
    with CPU's losses, also
    with torch_compile=True (transformers asks accelerate for Inductor, which
    raised InductorError on tpu; now torchtpu's backend); use_cpu=True still
    trains on CPU (the variable would override it)."""
    tpu = _probe("train")
    cpu = _probe("train-cpu")
    assert tpu["device"] == "tpu:0" and tpu["accelerate"] == "tpu"
    assert cpu["device"] == "cpu" and cpu["accelerate"] == "cpu"
    assert len(tpu["losses"]) == len(tpu["compiled_losses"]) == 3
    for losses in (tpu["losses"], tpu["compiled_losses"]):
        assert max(abs(a - b) for a, b in zip(losses, cpu["losses"])) < 1e-4, (losses, cpu)


def test_accelerate_bf16_autocasts_fp16_still_refused():
    """With ACCELERATE_TORCH_DEVICE=tpu: bf16 autocasts on tpu; fp16 raises
    ValueError (accelerate's fp16 device list has no tpu): use bf16."""
    out = _probe("precision", "tpu")
    assert "fp16 mixed precision requires a device in" in out["fp16"]
    assert out["bf16"] == ["tpu", "torch.bfloat16"]
