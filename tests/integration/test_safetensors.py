"""safetensors files onto tpu (torchtpu.integrations.safetensors), and Hugging
Face ``from_pretrained(..., device_map="tpu")``: the same tensors as a CPU load."""

import pytest
import torch

import torchtpu
from _util import assert_close_cpu, no_fallback

safetensors = pytest.importorskip("safetensors", reason="safetensors is not installed")
import safetensors.torch  # noqa: E402, F811

from torchtpu.integrations.safetensors import load_file, safe_open  # noqa: E402

# One tensor per dtype safetensors stores that tpu has, with odd shapes.
_TENSORS = {
    "f32": torch.randn(3, 5, generator=torch.Generator().manual_seed(0)),
    "f16": torch.randn(7, generator=torch.Generator().manual_seed(1)).half(),
    "bf16": torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(2)).bfloat16(),
    "f64": torch.randn(4, generator=torch.Generator().manual_seed(3)).double(),
    "f8e4m3": torch.randn(6, generator=torch.Generator().manual_seed(4)).to(torch.float8_e4m3fn),
    "i64": torch.arange(-5, 5),
    "i32": torch.arange(12, dtype=torch.int32).reshape(3, 4),
    "i8": torch.arange(-3, 3, dtype=torch.int8),
    "u8": torch.arange(250, 256, dtype=torch.uint8),
    "bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 3),
}


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "t.safetensors"
    safetensors.torch.save_file(_TENSORS, p)
    return p


def _assert_same(loaded, expected):
    assert loaded.keys() == expected.keys()
    for name, want in expected.items():
        got = loaded[name]
        assert got.device.type == "tpu", name
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert torch.equal(got.cpu().view(torch.uint8) if want.dtype == torch.float8_e4m3fn
                           else got.cpu(),
                           want.view(torch.uint8) if want.dtype == torch.float8_e4m3fn
                           else want), name


@pytest.mark.parametrize("device", ["tpu", "tpu:0", torch.device("tpu", 0), 0])
def test_load_file_onto_tpu(path, device):
    with no_fallback():
        loaded = load_file(path, device=device)
    _assert_same(loaded, safetensors.torch.load_file(path))


def test_load_file_other_devices_pass_through(path):
    loaded = load_file(path, device="cpu")
    assert all(t.device.type == "cpu" for t in loaded.values())


def test_safe_open_get_tensor_and_slice(path):
    with no_fallback(), safe_open(path, framework="pt", device="tpu") as f:
        assert set(f.keys()) == set(_TENSORS)
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        part = f.get_slice("i32")[1:, ::2]
    _assert_same(tensors, _TENSORS)
    assert_close_cpu(part, _TENSORS["i32"][1:, ::2])


def test_safetensors_still_refuses_tpu_by_name(path):
    # When this fails, safetensors accepts "tpu" itself and the wrappers in
    # torchtpu.integrations.safetensors (and docs/integrations.md's section)
    # can go: users call safetensors.torch.load_file(path, device="tpu").
    with pytest.raises(safetensors.SafetensorError, match="device tpu is invalid"):
        safetensors.torch.load_file(path, device="tpu")
    with pytest.raises(safetensors.SafetensorError, match="device tpu:0 is invalid"):
        safetensors.safe_open(path, framework="pt", device="tpu:0")


def test_a_bare_index_resolves_to_tpu():
    # What the wrappers rely on: safetensors moves tensors with .to(index),
    # and torch takes a bare index as the current accelerator (PrivateUse1 first).
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.device(0) == torch.device("tpu", 0)


def test_from_pretrained_device_map_tpu(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128,
                                     n_positions=64)
    transformers.GPT2LMHeadModel(config).to(torch.bfloat16).save_pretrained(tmp_path)
    cpu = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, dtype="auto").eval()
    torchtpu.metrics.reset()
    tpu = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, dtype="auto",
                                                       device_map="tpu").eval()
    assert not torchtpu.metrics.fallback_counts()
    tensors = dict(tpu.named_parameters()) | dict(tpu.named_buffers())
    assert {t.device for t in tensors.values()} == {torch.device("tpu", 0)}
    assert {p.dtype for p in tpu.parameters()} == {torch.bfloat16}
    # Tied weights stay tied (the load does not go through Module.to).
    assert tpu.lm_head.weight is tpu.transformer.wte.weight
    for name, want in cpu.state_dict().items():
        assert torch.equal(tpu.state_dict()[name].cpu(), want), name
    ids = torch.randint(1, 128, (1, 5))
    with torch.no_grad():
        expected = cpu(ids).logits
        with no_fallback():
            actual = tpu(ids.to("tpu")).logits
    assert_close_cpu(actual, expected, rtol=1.6e-2, atol=1e-2)
