"""The training recipes of torchtpu.spmd.recipes (data parallel, FSDP-style,
tensor parallel, 2-D) on a transformers Llama (tiny config) over 4 tpu devices
of one process, against the same model with torch.optim.AdamW on CPU. Run by
tests/distributed/test_spmd.py in a subprocess with TORCHTPU_CPU_DEVICES=4;
prints one JSON line: {check name: None or traceback}."""

import pytest
import torch

import torchtpu
import torchtpu.spmd as spmd
from _util import run_checks_main

transformers = pytest.importorskip("transformers")


def llama():
    cfg = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


def gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg)


def run_recipe(recipe, batch_spec, make=llama, eps=1e-8):
    """5 steps of ``recipe`` against torch.optim.AdamW on CPU."""
    mesh = spmd.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))
    model = make()
    ref = make()
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3, weight_decay=0.01, eps=eps, foreach=False)
    step = spmd.recipes.TrainStep(model, mesh, spmd.recipes.param_specs(model, mesh, recipe),
                                  batch_spec=batch_spec, eps=eps)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, 128, (8, 16), generator=g) for _ in range(5)]
    for i, ids in enumerate(batches):
        if i == 2:
            torchtpu.sync()
            assert not torchtpu.metrics.fallback_counts(), torchtpu.metrics.fallback_counts()
            torchtpu.metrics.reset()
        loss = step(ids)
        opt.zero_grad()
        want = ref(ids, labels=ids).loss
        want.backward()
        opt.step()
    m = torchtpu.metrics.metrics()
    assert not torchtpu.metrics.fallback_counts(), torchtpu.metrics.fallback_counts()
    # Steps 2-4: one execute over the mesh each, nothing compiled, no host
    # bytes (the embedding's index check is read with the loss below).
    assert m["executes"] == 3 and m["compiles"] == 0 and m["bytes_to_host"] == 0, m
    torch.testing.assert_close(loss.cpu(), want.detach(), atol=1e-5, rtol=0)
    got = step.state_dict()
    for name, p in ref.named_parameters():
        torch.testing.assert_close(got[name].cpu(), p.detach(), atol=1e-5, rtol=0, msg=name)
    return step


def check_data_parallel():
    step = run_recipe("dp", ("data", None))
    assert step.params[0].spec == (None, None)


def check_fsdp_style_holds_a_quarter_of_the_parameters_per_device():
    step = run_recipe("fsdp", (("data", "model"), None))
    total = sum(p.numel() * p.element_size() for p in step.params)
    assert step.param_bytes_per_device() == [total // 4] * 4, step.param_bytes_per_device()


def check_tensor_parallel():
    step = run_recipe("tp", (None, None))
    specs = dict(zip(step.names, (p.spec for p in step.params)))
    assert specs["model.layers.0.self_attn.q_proj.weight"] == ("model", None)
    assert specs["model.layers.0.mlp.down_proj.weight"] == (None, "model")
    assert specs["lm_head.weight"] == ("model", None)  # the vocabulary split


def check_tensor_parallel_gpt2_conv1d_names():
    # eps=1e-3: with AdamW's 1e-8, 1/sqrt(v) of GPT-2's smallest gradients
    # magnifies float32 summation-order differences (even CPU float32 against
    # float64 differs by 1e-5; tp against a 1-device mesh by 7.9e-5 in one
    # c_fc weight), while with 1e-3 tp equals the 1-device mesh within 1.2e-7.
    step = run_recipe("tp", (None, None), make=gpt2, eps=1e-3)
    specs = dict(zip(step.names, (p.spec for p in step.params)))
    assert specs["transformer.h.0.attn.c_attn.weight"] == (None, "model")
    assert specs["transformer.h.0.mlp.c_proj.weight"] == ("model", None)


def check_two_d_data_by_model():
    run_recipe("2d", ("data", None))


def check_unknown_recipe_is_a_clear_error():
    with pytest.raises(ValueError, match="no recipe 'zero3'"):
        spmd.recipes.param_specs(llama(), spmd.Mesh([0, 1]), "zero3")
    mesh = spmd.Mesh([0, 1], axis_names=("model",))
    with pytest.raises(ValueError, match="no parameter of this model has a name"):
        spmd.recipes.param_specs(torch.nn.Sequential(torch.nn.Linear(4, 4)), mesh, "tp")


def check_train_digits_spmd_equals_one_device():
    """`train_digits --spmd 4`: per-epoch losses and accuracies of the one-device run."""
    from torchtpu.examples import train_digits as td
    from torchtpu.examples.train_digits_spmd import train_spmd

    losses, accuracies, _ = train_spmd(td.DigitsCNN, td.load_data(0), 4, 2, 0, 64, log=None)
    want = td.train("tpu", epochs=2, progress=False, log=None)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(want.losses), atol=1e-5,
                               rtol=1e-5)
    assert accuracies == want.accuracies, (accuracies, want.accuracies)


if __name__ == "__main__":
    run_checks_main(globals(), devices=4)
