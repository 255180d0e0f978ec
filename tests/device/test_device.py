"""The tpu device as a PyTorch user meets it: creation, transfers, printing,
item, the torch.tpu module, RNG seeding, save/load, modules."""

import io
import warnings

import pytest
import torch

import torchtpu
from _util import TEST_MODE, assert_close_cpu, no_fallback

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md


def test_device_module():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 1
    assert torch.tpu.current_device() == 0
    assert torch.device("tpu").type == "tpu"
    torch.tpu.synchronize()


def test_round_trip_dtypes():
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                  torch.int32, torch.int8, torch.uint8, torch.bool):
        x = (torch.arange(-6, 6) * 3).to(dtype).reshape(3, 4)
        y = x.to("tpu")
        assert y.device.type == "tpu" and y.dtype == dtype and y.shape == x.shape
        torch.testing.assert_close(y.cpu(), x)


def test_int64_beyond_32_bits_round_trips():
    x = torch.tensor([2**40 + 1, -(2**50) - 3, 2**63 - 1], dtype=torch.int64)
    assert torch.equal(x.to("tpu").cpu(), x)
    with no_fallback():
        y = x.to("tpu") + 1
    assert torch.equal(y.cpu()[:2], x[:2] + 1)


def test_factories_and_print():
    with no_fallback():
        z = torch.zeros(2, 3, device="tpu")
        o = torch.ones(4, dtype=torch.int64, device="tpu")
        f = torch.full((2,), 3.5, device="tpu")
    assert_close_cpu(z, torch.zeros(2, 3))
    assert_close_cpu(o, torch.ones(4, dtype=torch.int64))
    assert_close_cpu(f, torch.full((2,), 3.5))
    text = str(f)
    assert "3.5" in text and "tpu" in text


def test_item_and_tolist():
    x = torch.tensor([1.5, -2.0]).to("tpu")
    assert (x[0] * 2).item() == 3.0
    assert x.tolist() == [1.5, -2.0]
    assert bool((x > 0)[0])


def test_empty_and_zero_dim():
    e = torch.empty(0, 3, device="tpu")
    assert e.shape == (0, 3)
    assert e.cpu().shape == (0, 3)
    s = torch.tensor(2.5).to("tpu")
    assert s.dim() == 0 and s.item() == 2.5


def test_model_to_tpu_and_state_dict_save_load():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    cpu_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("tpu")
    assert all(p.device.type == "tpu" for p in model.parameters())
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    loaded = torch.load(buf)
    for k, v in loaded.items():
        assert v.device.type == "tpu"
        torch.testing.assert_close(v.cpu(), cpu_state[k])
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    for k, v in on_cpu.items():
        torch.testing.assert_close(v, cpu_state[k])


def test_tensor_methods_generated():
    x = torch.ones(2)
    assert x.tpu().is_tpu
    assert not x.is_tpu


@pytest.mark.skipif(TEST_MODE != "strict", reason="counts one program per op")
def test_metrics_count_compiles_and_cache_hits():
    torchtpu.metrics.reset()
    a = torch.ones(7, 5, device="tpu")
    b = a + 1
    b = b + 1  # the same program again: a cache hit
    torchtpu.sync()  # (ops whose program was new ran at the sync)
    m = torchtpu.metrics.metrics()
    assert m["executes"] >= 2
    assert m["cache_hits"] >= 1
    assert m["bytes_to_host"] == 0
    b.cpu()
    assert torchtpu.metrics.metrics()["bytes_to_host"] == 7 * 5 * 4


def test_init_rejects_a_second_plugin(tmp_path):
    with pytest.raises(RuntimeError, match="already initialised"):
        torchtpu.init(plugin=str(tmp_path / "other.so"))


def test_module_to_keeps_parameter_identity():
    # Module.to swaps each parameter's data in place when ATen says the old and
    # new TensorImpls are compatible (as CPU <-> CUDA): the Parameter objects
    # stay, so tied weights stay tied (pytorch/pytorch#116255 for devices ATen
    # does not list).
    m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    m[1].weight = m[0].weight
    params = list(m.parameters())
    m.to("tpu")
    assert m[1].weight is m[0].weight and list(m.parameters()) == params
    assert all(p.device.type == "tpu" for p in params)
    m.to("cpu")
    assert m[1].weight is m[0].weight and params[0].device.type == "cpu"
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device="tpu"))
    assert torch._has_compatible_shallow_copy_type(torch.ones(1, device="tpu"), torch.ones(1))
    sparse = torch.ones(1).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(sparse, torch.ones(1, device="tpu"))


def test_tied_lm_head_trains_as_on_cpu():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100,
                                     n_positions=32, bos_token_id=0, eos_token_id=0,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    cpu = transformers.GPT2LMHeadModel(config)
    tpu = transformers.GPT2LMHeadModel(config)
    tpu.load_state_dict(cpu.state_dict())
    n = len(list(cpu.parameters()))
    tpu = tpu.to("tpu")
    assert tpu.lm_head.weight is tpu.transformer.wte.weight
    assert len(list(tpu.parameters())) == n
    ids = torch.randint(0, 100, (2, 8))
    for model, dev in ((cpu, "cpu"), (tpu, "tpu")):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            model(ids.to(dev), labels=ids.to(dev)).loss.backward()
            opt.step()
    assert_close_cpu(tpu.transformer.wte.weight, cpu.transformer.wte.weight, rtol=1e-5,
                     atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool, torch.complex64])
def test_storage_elements_and_slices_read_as_cpu(dtype):
    """A storage's elements, and a slice of its bytes (UntypedStorage[a:b], a
    storage of its own whose address is inside its parent's), read as on CPU;
    the slice used to crash the process (PyTorch's test_storage)."""
    cpu = torch.arange(15).reshape(3, 5).to(dtype)
    tpu = cpu.to("tpu")
    assert tpu.untyped_storage()[8] == cpu.untyped_storage()[8]
    size = cpu.element_size()
    for start in (0, size, 3 * size + 1):
        want = cpu.untyped_storage()[start:start + size]
        got = tpu.untyped_storage()[start:start + size]
        assert got.device.type == "tpu" and got.nbytes() == want.nbytes()
        assert got.tolist() == want.tolist()
        assert got.cpu().tolist() == want.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        assert tpu.storage()[14] == cpu.storage()[14]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_legacy_storage_classes_as_cuda_has_them(dtype):
    """Tensor.storage_type() is torch.tpu.<Name>Storage (as torch.cuda.<Name>Storage
    on CUDA; it was None), and such a class makes tpu storages."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        t = torch.ones(3, dtype=dtype, device="tpu")
        cls = t.storage_type()
        cpu_cls = t.cpu().storage_type()
        assert cls.__module__ == "torch.tpu" and cls.__name__ == cpu_cls.__name__
        assert cls is getattr(torch.tpu, cpu_cls.__name__)
        assert isinstance(t.storage(), cls) and not isinstance(t.cpu().storage(), cls)
        s = cls(4)
        assert s.device.type == "tpu" and s.dtype == dtype and s.size() == 4
