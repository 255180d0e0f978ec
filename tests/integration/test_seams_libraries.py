"""diffusers 0.42, peft 0.21, sentence-transformers 6.3, Lightning Fabric and
safetensors, where they decide by device type (docs/device-seams.md, section
"Libraries"). Real libraries, tiny random models, tpu against CPU.
A test named ``*_still_*`` asserts a library's present behaviour that needs a
one-liner on tpu: it fails the day the library changes, and the docs row
should change with it."""

import os

import pytest
import torch
import torch.nn as nn

from _util import no_fallback

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


# --- seeding helpers: each calls torch.manual_seed, then its own device list


def test_library_seeders_seed_the_tpu_generator():
    """transformers.set_seed, accelerate's set_seed and Lightning's
    seed_everything seed CUDA/XPU/NPU/... by name and tpu through
    torch.manual_seed, which seeds every registered accelerator: the tpu draws
    after each equal those after torch.tpu.manual_seed."""
    transformers = pytest.importorskip("transformers")
    accelerate_utils = pytest.importorskip("accelerate.utils")
    lightning = pytest.importorskip("lightning")

    torch.tpu.manual_seed(5)
    expected = torch.rand(4, device="tpu").cpu()
    seeders = (transformers.set_seed, accelerate_utils.set_seed,
               lambda seed: lightning.seed_everything(seed, verbose=False))
    for seed_all in seeders:
        torch.tpu.manual_seed(99)
        seed_all(5)
        assert torch.equal(torch.rand(4, device="tpu").cpu(), expected), seed_all


# --- diffusers


def test_diffusers_picks_tpu_and_randn_tensor_follows_the_generator():
    """diffusers asks torch.accelerator for its default device (get_device:
    "tpu"); randn_tensor draws with a CPU generator on CPU and moves the result
    (the values of a CPU run), and with a tpu generator on tpu."""
    pytest.importorskip("diffusers")
    from diffusers.utils.torch_utils import get_device, randn_tensor

    assert get_device() == "tpu"
    tpu = torch.device("tpu")
    got = randn_tensor((2, 3), generator=torch.Generator().manual_seed(0), device=tpu)
    expected = randn_tensor((2, 3), generator=torch.Generator().manual_seed(0))
    assert got.device.type == "tpu" and torch.equal(got.cpu(), expected)
    generators = [torch.Generator(device="tpu").manual_seed(i) for i in range(2)]
    assert randn_tensor((2, 3), generator=generators, device=tpu).device.type == "tpu"


@pytest.mark.parametrize("offload", [None, "model", "sequential"])
def test_diffusers_pipeline_equals_cpu(offload):
    """A DDPM pipeline (UNet2DModel with attention blocks) on tpu, moved with
    .to("tpu"), with enable_model_cpu_offload(device="tpu") (weights on CPU
    between calls, run on tpu) or enable_sequential_cpu_offload(device="tpu")
    (weights kept on CPU, parameters meta), gives CPU's images."""
    diffusers = pytest.importorskip("diffusers")

    def run(device):
        torch.manual_seed(0)
        unet = diffusers.UNet2DModel(
            sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
            block_out_channels=(16, 32), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8)
        pipe = diffusers.DDPMPipeline(unet=unet,
                                      scheduler=diffusers.DDPMScheduler(num_train_timesteps=10))
        if offload == "model" and device == "tpu":
            pipe.enable_model_cpu_offload(device="tpu")
        elif offload == "sequential" and device == "tpu":
            pipe.enable_sequential_cpu_offload(device="tpu")
        else:
            pipe.to(device)
        if device == "tpu":
            assert pipe._execution_device == torch.device("tpu", 0)
        images = pipe(batch_size=1, generator=torch.Generator().manual_seed(0),
                      num_inference_steps=3, output_type="np").images
        return images, next(unet.parameters()).device.type

    expected, _ = run("cpu")
    with no_fallback():
        got, weights_on = run("tpu")
    assert weights_on == {None: "tpu", "model": "cpu", "sequential": "meta"}[offload]
    assert abs(got - expected).max() < 1e-5


@pytest.mark.parametrize("offload", [
    dict(offload_type="block_level", num_blocks_per_group=1),
    dict(offload_type="block_level", num_blocks_per_group=1, use_stream=True),
    dict(offload_type="leaf_level", use_stream=True)])
def test_diffusers_group_offload_onto_tpu_equals_cpu(offload):
    """enable_group_offload(onload_device=tpu): weights stay on CPU, each group
    is copied in for its forward; with use_stream=True on a torch.tpu.Stream
    (hooks/group_offloading.py uses any device module with a Stream)."""
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(
        sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
        block_out_channels=(16, 32), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8).eval()
    x, t = torch.randn(1, 3, 8, 8), torch.tensor([3])
    with torch.no_grad():
        expected = unet(x, t).sample
    unet.enable_group_offload(onload_device=torch.device("tpu"),
                              offload_device=torch.device("cpu"), **offload)
    with no_fallback(), torch.no_grad():
        got = unet(x.to("tpu"), t.to("tpu")).sample
    assert next(unet.parameters()).device.type == "cpu"
    assert (got.cpu() - expected).abs().max() < 1e-5


# --- safetensors: shared storages of tpu tensors


def test_safetensors_finds_shared_tpu_storages(tmp_path):
    """safetensors tells shared tensors apart by storage address
    (torch.py storage_ptr, _find_shared_tensors); tpu storages have real,
    distinct addresses, so save_model of a GPT-2 on tpu (tied LM head) writes
    the tied weight once and loads back equal."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import _find_shared_tensors, load_model, save_model

    a, b = torch.randn(4, 4, device="tpu"), torch.randn(4, 4, device="tpu")
    shared = _find_shared_tensors({"a": a, "alias": a, "row": a[1], "b": b})
    assert sorted(map(sorted, shared)) == [["a", "alias", "row"], ["b"]]
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=1,
                                     n_head=2, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).to("tpu")
    assert model.lm_head.weight is model.transformer.wte.weight
    save_model(model, str(tmp_path / "m.safetensors"))
    loaded = transformers.GPT2LMHeadModel(config)
    load_model(loaded, str(tmp_path / "m.safetensors"))
    for p, q in zip(model.parameters(), loaded.parameters()):
        assert torch.equal(p.cpu(), q)


# --- peft


def _lora_llama(tmp_path=None):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1,
                                      intermediate_size=64)
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(config)
    return transformers, peft, config, base


def test_peft_adapter_loads_onto_tpu_model_and_merges(tmp_path):
    """PeftModel.from_pretrained reads the adapter to peft's infer_device()
    (cuda/mps/mlu/xpu/npu, else "cpu": never tpu) and copies it into the LoRA
    layers, which follow the base model onto tpu: logits and merge_and_unload
    equal CPU's. torch_device="tpu" raises in safetensors; torch_device=0
    reads to tpu."""
    transformers, peft, config, base = _lora_llama()
    assert peft.utils.other.infer_device() == "cpu"  # still: tpu is not in its list
    lora = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = peft.get_peft_model(base, lora)
    model.save_pretrained(tmp_path)
    ids = torch.randint(0, 64, (2, 6))
    with torch.no_grad():
        expected = model(ids).logits
        expected_merged = model.merge_and_unload()(ids).logits
    torch.manual_seed(0)
    tpu_base = transformers.LlamaForCausalLM(config).to("tpu")
    for low_cpu_mem_usage in (False, True):
        loaded = peft.PeftModel.from_pretrained(tpu_base, tmp_path,
                                                low_cpu_mem_usage=low_cpu_mem_usage)
        lora_devices = {p.device.type for n, p in loaded.named_parameters() if "lora_" in n}
        assert lora_devices == {"tpu"}
        with no_fallback(), torch.no_grad():
            got = loaded(ids.to("tpu")).logits
        assert (got.cpu() - expected).abs().max() < 1e-5
        tpu_base = loaded.unload()
    # torch_device="tpu" reaches safetensors' device parser, which refuses it
    # (docs/integrations.md); an index is the current accelerator, tpu.
    from safetensors import SafetensorError

    with pytest.raises(SafetensorError, match="device tpu is invalid"):
        peft.PeftModel.from_pretrained(transformers.LlamaForCausalLM(config).to("tpu"),
                                       tmp_path, torch_device="tpu")
    loaded = peft.PeftModel.from_pretrained(tpu_base, tmp_path, torch_device=0)
    with no_fallback(), torch.no_grad():
        got = loaded.merge_and_unload()(ids.to("tpu")).logits
    assert (got.cpu() - expected_merged).abs().max() < 1e-5


def test_peft_dora_ephemeral_offload_still_needs_cuda():
    """DoRA's ephemeral_gpu_offload moves weights to "cuda" (or "xpu") for any
    other device (tuners/lora/variants.py): on tpu it raises. The one-liner:
    leave it off (the default) and move the model to tpu first; DoRA itself
    works there."""
    transformers, peft, config, base = _lora_llama()
    from peft.tuners.lora import LoraRuntimeConfig

    offload = LoraRuntimeConfig(ephemeral_gpu_offload=True)
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        peft.get_peft_model(base.to("tpu"), peft.LoraConfig(
            r=4, target_modules=["q_proj"], use_dora=True, runtime_config=offload))
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(config)
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, target_modules=["q_proj"],
                                                      use_dora=True, init_lora_weights=False))
    ids = torch.randint(0, 64, (2, 6))
    with torch.no_grad():
        expected = model(ids).logits
        model.to("tpu")
        got = model(ids.to("tpu")).logits
    assert (got.cpu() - expected).abs().max() < 1e-5


def _lorafa_lora_b(device):
    """lora_B of a tiny LoRA Llama after 3 LoRA-FA steps on `device`."""
    transformers, peft, config, _ = _lora_llama()
    torch.manual_seed(0)
    model = peft.get_peft_model(
        transformers.LlamaForCausalLM(config),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    model.to(device)
    optimizer = peft.optimizers.create_lorafa_optimizer(model, r=4, lora_alpha=8, lr=1e-2)
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        optimizer.zero_grad()
        model(ids.to(device), labels=ids.to(device)).loss.backward()
        optimizer.step()
    return [p.detach().cpu() for n, p in model.named_parameters() if "lora_B" in n]


def _max_diff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def test_peft_lorafa_autocasts_on_tpu_as_on_cpu(monkeypatch):
    """The LoRA-FA optimizer wraps its projected gradient in
    autocast(device_type=infer_device()), "cpu" here, bfloat16 on CPU and
    CUDA. torchtpu's fix (torchtpu/integrations/peft.py, on by default) makes
    that autocast cover tpu too: tpu's lora_B is CPU's bfloat16 result, not
    its float32 one (before: float32, 9.2e-5 from it after 3 steps). How near
    depends on the host: CPU's bfloat16 kernels differ by ISA (tpu was within
    2e-6 of CPU on the AMD EPYC hosts of earlier runs, 3.2e-6 on a Xeon with
    AMX-BF16), so the bound is a tenth of the float32-bfloat16 distance."""
    pytest.importorskip("peft")
    import peft.optimizers.lorafa as lorafa

    assert hasattr(lorafa.autocast, "_torchtpu_original")
    cpu_bf16, tpu = _lorafa_lora_b("cpu"), _lorafa_lora_b("tpu")
    monkeypatch.setattr(lorafa, "is_bf16_available", lambda: False)
    bf16_effect = _max_diff(_lorafa_lora_b("cpu"), cpu_bf16)
    assert bf16_effect > 1e-5  # the comparison can see bf16
    assert _max_diff(tpu, cpu_bf16) < 0.1 * bf16_effect


def test_peft_lorafa_still_autocasts_on_cpu_only(monkeypatch):
    """peft's own autocast device is still "cpu": with peft's autocast back
    (what TORCHTPU_LIBRARY_FIXES=0 leaves), tpu computes in float32. Fails
    the day peft autocasts on the parameters' device: then drop the fix."""
    pytest.importorskip("peft")
    import peft.optimizers.lorafa as lorafa

    cpu_with_fix = _lorafa_lora_b("cpu")
    monkeypatch.setattr(lorafa, "autocast", lorafa.autocast._torchtpu_original)
    assert _max_diff(_lorafa_lora_b("cpu"), cpu_with_fix) == 0  # the fix leaves CPU alone
    tpu = _lorafa_lora_b("tpu")
    monkeypatch.setattr(lorafa, "is_bf16_available", lambda: False)
    assert _max_diff(tpu, _lorafa_lora_b("cpu")) < 1e-6


# --- sentence-transformers


def _tiny_sentence_model(path, device=None):
    transformers = pytest.importorskip("transformers")
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer import modules as models
    if not os.path.exists(path / "config.json"):
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "tpu", "cpu"]
        words += [chr(c) for c in range(ord("a"), ord("z") + 1)]
        (path / "vocab.txt").write_text("\n".join(words) + "\n")
        transformers.BertTokenizerFast(str(path / "vocab.txt")).save_pretrained(path)
        torch.manual_seed(0)
        config = transformers.BertConfig(vocab_size=len(words), hidden_size=32,
                                         num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, max_position_embeddings=64)
        transformers.BertModel(config).save_pretrained(path)
    modules = [models.Transformer(str(path)), models.Pooling(32, "mean")]
    return st.SentenceTransformer(modules=modules, device=device)


def test_sentence_transformers_default_still_cpu_tpu_encode_equals_cpu(tmp_path):
    """Without device=, SentenceTransformer picks from cuda/mps/npu/xpu/hpu/
    neuron, else CPU (util/environment.py get_device_name): it runs on CPU where
    a CUDA host would use the GPU. The one-liner: device="tpu". encode then
    batches on tpu with CPU's embeddings."""
    from sentence_transformers.util.environment import get_device_name

    assert get_device_name() == "cpu"
    sentences = ["hello world", "tpu", "a b c d e f g", "cpu hello", "x"]
    cpu_model = _tiny_sentence_model(tmp_path)
    assert cpu_model.device.type == "cpu"
    expected = cpu_model.encode(sentences, batch_size=2, convert_to_tensor=True)
    model = _tiny_sentence_model(tmp_path, device="tpu")
    assert model.device == torch.device("tpu", 0)
    with no_fallback():
        got = model.encode(sentences, batch_size=2, convert_to_tensor=True)
    assert got.device.type == "tpu"
    assert (got.cpu() - expected).abs().max() < 1e-5
    assert abs(model.encode(sentences, batch_size=2) - expected.numpy()).max() < 1e-5


def test_sentence_transformers_pool_over_two_tpu_devices(tmp_path, monkeypatch):
    """start_multi_process_pool picks CPU workers unless told (base/model.py
    start_multi_process_pool); target_devices=["tpu:0", "tpu:1"] spawns one
    worker per device. Each spawned process needs two CPU-plugin devices to
    name tpu:1 (TORCHTPU_CPU_DEVICES, inherited); without it the worker's
    IndexError (naming the setting) reaches encode."""
    sentences = [f"hello world {c}" for c in "abcdefgh"]
    model = _tiny_sentence_model(tmp_path)
    expected = model.encode(sentences, batch_size=2, convert_to_tensor=True)

    def pooled():
        pool = model.start_multi_process_pool(target_devices=["tpu:0", "tpu:1"])
        try:
            return model.encode(sentences, pool=pool, batch_size=2, chunk_size=4,
                                convert_to_tensor=True)
        finally:
            model.stop_multi_process_pool(pool)

    monkeypatch.setenv("TORCHTPU_CPU_DEVICES", "2")
    assert (torch.as_tensor(pooled()).cpu() - expected).abs().max() < 1e-5


def test_sentence_transformers_gradcache_replays_tpu_dropout():
    """CachedMultipleNegativesRankingLoss's RandContext stashes device RNG
    states with torch.utils.checkpoint's get_device_states and replays them in
    fork_rng (default device type: the current accelerator, tpu): the second
    pass draws the first pass's dropout mask."""
    pytest.importorskip("sentence_transformers")
    from sentence_transformers.base.losses.gradcache import RandContext

    x = torch.ones(64, 64, device="tpu")
    context = RandContext(x)
    first = nn.functional.dropout(x, 0.5)
    torch.rand(10, device="tpu")  # the generator moves on
    with context:
        replay = nn.functional.dropout(x, 0.5)
    assert torch.equal(first.cpu(), replay.cpu())
    assert not torch.equal(nn.functional.dropout(x, 0.5).cpu(), first.cpu())


# --- Lightning Fabric (the Trainer's path is tests/integration/test_lightning.py)


def _fabric_losses(fabric, steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, y = torch.randn(8, 8, generator=g), torch.randn(8, 1, generator=g)
        loss = nn.functional.mse_loss(model(fabric.to_device(x)), fabric.to_device(y))
        optimizer.zero_grad()
        fabric.backward(loss)
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")
def test_fabric_bf16_string_still_targets_cuda_plugin_on_tpu_equals_cpu():
    """Fabric takes torchtpu's TPUAccelerator inside its SingleDeviceStrategy,
    but precision="bf16-mixed" builds MixedPrecision(device="cuda") for any
    accelerator flag but cpu/mps, which disables autocast here. The one-liner:
    plugins=MixedPrecision("bf16-mixed", "tpu"); the losses then equal CPU's
    bf16-mixed Fabric run."""
    L = pytest.importorskip("lightning")
    from lightning.fabric.plugins.precision import MixedPrecision
    from lightning.fabric.strategies import SingleDeviceStrategy

    from torchtpu.integrations.lightning import TPUAccelerator

    def strategy():
        return SingleDeviceStrategy(device=torch.device("tpu", 0), accelerator=TPUAccelerator())

    assert L.Fabric(strategy=strategy(), precision="bf16-mixed")._precision.device == "cuda"
    expected = _fabric_losses(L.Fabric(accelerator="cpu", precision="bf16-mixed"))
    fabric = L.Fabric(strategy=strategy(), plugins=MixedPrecision("bf16-mixed", "tpu"))
    with no_fallback():
        got = _fabric_losses(fabric)
    assert fabric.device == torch.device("tpu", 0)
    assert max(abs(a - b) for a, b in zip(got, expected)) < 1e-5, (got, expected)
