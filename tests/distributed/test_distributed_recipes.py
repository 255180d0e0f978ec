"""Training recipes across 2 processes on tpu equal to gloo-CPU's (or, for
SyncBatchNorm, which has no CPU form, to batch norm over the ranks' batches in
one process): every DDP comm hook (PowerSGD's hook waits inside its callbacks
for collectives it issues: it used to hang), SyncBatchNorm, a GPT-2 with a tied
LM head under DDP, and FSDP2's fully_shard of a model still on CPU with a tpu
mesh; tpu:{rank} in a per-rank process with no TORCHTPU_CPU_DEVICES; and
transformers' from_pretrained(tp_plan="auto") and diffusers' TensorParallelConfig
against the models on CPU. One launch of 2 processes
(tests/distributed/_dist_recipes.py), bounded by a timeout.
"""

import pytest

from test_distributed import _assert_check, launch

pytestmark = pytest.mark.alone  # passes: tests/README.md


@pytest.fixture(scope="module")
def recipes():
    return launch("recipes", worker="_dist_recipes.py")


CHECKS = ([f"comm_hook_{h}" for h in ("allreduce", "fp16_compress", "bf16_compress",
                                      "quantize_per_tensor", "quantize_per_channel",
                                      "powersgd", "batched_powersgd")]
          + ["sync_batch_norm", "tied_gpt2_ddp_10_steps", "fully_shard_cpu_model_tpu_mesh"])


@pytest.mark.parametrize("name", CHECKS)
def test_recipe(recipes, name):
    _assert_check(recipes, name)


def test_tpu_rank_device_per_local_rank():
    # TORCHTPU_CPU_DEVICES empty: as if unset (launch() sets 1 otherwise).
    results = launch("local_ranks", worker="_dist_recipes.py", TORCHTPU_CPU_DEVICES="")
    _assert_check(results, "tpu_rank_device_per_local_rank")


@pytest.fixture(scope="module")
def tensor_parallel_libraries(tmp_path_factory):
    # A tiny Llama with random weights (its config has a tp plan: q/k/v/gate/up
    # colwise, o/down rowwise); each rank loads it with tp_plan="auto" and no
    # process group of its own, as under torchrun. Then a tiny Flux
    # transformer (diffusers' _tp_plan), sharded by diffusers.
    import torch
    from diffusers import FluxTransformer2DModel
    from transformers import LlamaConfig, LlamaForCausalLM

    tmp_path = tmp_path_factory.mktemp("tp")

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    model.save_pretrained(tmp_path)
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(1))
    out = model(ids, labels=ids)
    out.loss.backward()
    torch.save({"input_ids": ids, "logits": out.logits.detach(),
                "grad": model.model.layers[0].mlp.down_proj.weight.grad},
               tmp_path / "reference.pt")

    torch.manual_seed(0)
    flux = FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
        axes_dims_rope=(4, 4, 8))
    flux.save_pretrained(tmp_path / "flux")
    g = torch.Generator().manual_seed(1)
    inputs = {"hidden_states": torch.randn(1, 16, 4, generator=g),
              "encoder_hidden_states": torch.randn(1, 8, 32, generator=g),
              "pooled_projections": torch.randn(1, 32, generator=g),
              "timestep": torch.tensor([0.5]), "img_ids": torch.randn(16, 3, generator=g),
              "txt_ids": torch.zeros(8, 3)}
    with torch.no_grad():
        sample = flux(**inputs).sample
    torch.save({"inputs": inputs, "sample": sample}, tmp_path / "flux" / "reference.pt")
    return launch("tp_plan", worker="_dist_recipes.py", TP_MODEL_DIR=str(tmp_path))


@pytest.mark.parametrize("name", ["transformers_tp_plan_auto", "diffusers_tensor_parallel"])
def test_tensor_parallel_libraries(tensor_parallel_libraries, name):
    _assert_check(tensor_parallel_libraries, name)


def _values(results_logs):
    results, logs = results_logs
    values = {}
    for r, log in logs.items():
        for line in log.splitlines():
            if line.startswith("VALUE "):
                _, name, value = line.split(" ", 2)
                values[(r, name)] = float(value)
    return values


def test_cpu_only_scripts_with_and_without_torchtpu():
    # What installing torchtpu changes for code that never names tpu is what a
    # GPU host changes: gloo serves the accelerator's tensors too, so FSDP2's
    # default mesh (the accelerator's) moves the model to tpu and trains as on
    # CPU; DDP and an explicit CPU mesh stay on CPU. Same values both ways.
    runs = {}
    for autoload in ("1", "0"):
        run = launch("scripts", worker="_dist_cpu_only.py", TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
        for name in ("ddp", "fsdp2", "dtensor"):
            _assert_check(run, name)
        runs[autoload] = _values(run)
    assert runs["1"].keys() == runs["0"].keys() and len(runs["1"]) == 6
    for key, value in runs["0"].items():
        assert abs(runs["1"][key] - value) < 1e-5, (key, runs["1"][key], value)
