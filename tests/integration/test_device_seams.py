"""The places where PyTorch's own Python asks the device module of a tensor
(``torch.get_device_module``, ``getattr(torch, device.type)``) and what it
reads there, with torch.tpu in the role of torch.cuda (docs/device-seams.md
lists every call site). Also the torch.cuda functions scripts call that torch.tpu
answers or refuses by name (never AttributeError)."""

import io
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.nn as nn

import torchtpu

from _util import (assert_close_cpu, bert_grads_without_and_with_gradient_checkpointing,
                   grads_without_and_with_checkpoint, max_diff)


# --- torch.utils.checkpoint: the RNG state is stashed only when _initialized


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_replays_dropout_masks(use_reentrant):
    """The recomputed forward draws the dropout masks of the first one, so the
    gradients equal the uncheckpointed ones (checkpoint reads
    ``torch.tpu._initialized``; without it they differ by ~6)."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Dropout(0.3),
                          nn.Linear(64, 32)).to("tpu")
    x = torch.randn(16, 32).to("tpu").requires_grad_(use_reentrant)
    assert max_diff(*grads_without_and_with_checkpoint(block, block, x, use_reentrant)) < 1e-6


@pytest.mark.filterwarnings("ignore:.*is deprecated:FutureWarning")  # transformers 5 renames
def test_hf_bert_gradient_checkpointing_same_grads():
    """transformers' gradient_checkpointing_enable() on a tiny random BERT in
    train mode (hidden and attention dropout 0.1): the same gradients as
    without it."""
    pytest.importorskip("transformers")
    assert max_diff(*bert_grads_without_and_with_gradient_checkpointing()) < 1e-6


def test_initialized_follows_the_runtime():
    """False in a fresh process until the first tpu tensor, then True (as
    torch.cuda._initialized); other missing names still raise AttributeError."""
    code = ("import torch, torchtpu\n"
            "print(torch.tpu._initialized, getattr(torch.tpu, '_initialized', None))\n"
            "torch.ones(1, device='tpu')\n"
            "print(torch.tpu._initialized)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "True"]
    torch.ones(1, device="tpu")
    assert torch.tpu._initialized is True
    with pytest.raises(AttributeError, match="no_such_thing"):
        torch.tpu.no_such_thing  # noqa: B018


def test_hasattr_probes_stay_off():
    """PyTorch switches paths on ``hasattr(device_module, ...)``: CUDA-graph-safe
    RNG (_get_generator, default_generators), serialization's _utils, sparse
    storages, HPU's set_rng_ctx. torch.tpu has none of these, so each probe
    takes its generic path."""
    for name in ("_get_generator", "default_generators", "_utils", "sparse", "set_rng_ctx"):
        assert not hasattr(torch.tpu, name), name


# --- torch.random.fork_rng


@pytest.mark.parametrize("device_type", ["tpu", None])
def test_fork_rng_restores_tpu_state(device_type):
    """Draws inside fork_rng (device_type "tpu", or None: the current
    accelerator) do not advance the generator outside it."""
    torch.tpu.manual_seed(1)
    expected = torch.rand(3, device="tpu").cpu()
    torch.tpu.manual_seed(1)
    with torch.random.fork_rng(device_type=device_type):
        inside = torch.rand(3, device="tpu").cpu()
        torch.rand(5, device="tpu")
    assert torch.equal(inside, expected)
    assert torch.equal(torch.rand(3, device="tpu").cpu(), expected)


# --- device-module lookups elsewhere in torch


def test_device_module_lookups_find_torch_tpu():
    assert torch.get_device_module("tpu") is torch.tpu
    assert torch.get_device_module() is torch.tpu  # the current accelerator
    assert torch._utils._get_device_module("tpu") is torch.tpu
    assert torch._utils._get_available_device_type() == "tpu"
    assert torch._utils._get_current_device_index() == torch.tpu.current_device()


def test_fake_tensor_device_gets_current_index():
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.ones(1, device="tpu")
    with FakeTensorMode():
        t = torch.empty(2, device="tpu")
    assert t.device == torch.device("tpu", torch.tpu.current_device())


def test_torch_load_checks_device_count():
    """serialization's _validate_device: a location beyond device_count() is a
    RuntimeError naming torch.tpu.device_count(), as on CUDA."""
    buf = io.BytesIO()
    torch.save(torch.arange(3.0), buf)
    buf.seek(0)
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match=rf"torch.tpu.device_count\(\) is {n}"):
        torch.load(buf, map_location=f"tpu:{n}")
    buf.seek(0)
    assert_close_cpu(torch.load(buf, map_location="tpu"), torch.arange(3.0))


def test_save_on_cpu_pinned_grads_equal_cpu():
    """autograd.graph.save_on_cpu(pin_memory=True, device_type="tpu") reads
    torch.tpu.is_available() and packs into pinned memory."""
    w = torch.randn(8, 8)

    def run(device):
        a = w.to(device).requires_grad_()
        with torch.autograd.graph.save_on_cpu(pin_memory=True, device_type="tpu"):
            y = torch.tanh(a @ a).sum()
        y.backward()
        return a.grad

    assert_close_cpu(run("tpu"), run("cpu"))


def test_dcp_overlapping_loader_round_trip():
    """torch.distributed.checkpoint with one writer thread uses
    _OverlappingCpuLoader: torch.tpu.current_stream() and stream() around
    non-blocking copies to CPU. Values survive a save/load."""
    import torch.distributed.checkpoint as dcp

    expected = {"w": torch.randn(64, 3), "b": torch.arange(10.0)}
    state = {k: v.to("tpu") for k, v in expected.items()}
    with tempfile.TemporaryDirectory() as d:
        with pytest.warns(UserWarning, match="torch.distributed is disabled"):
            dcp.save(state, storage_writer=dcp.FileSystemWriter(d, thread_count=1))
        loaded = {k: torch.zeros_like(v) for k, v in state.items()}
        with pytest.warns(UserWarning, match="torch.distributed is disabled"):
            dcp.load(loaded, storage_reader=dcp.FileSystemReader(d))
    for k in expected:
        assert_close_cpu(loaded[k], expected[k])


def test_memory_tracker_reads_tpu_memory():
    """torch.distributed._tools.MemoryTracker reads empty_cache, memory_stats,
    memory_allocated and memory_reserved from torch.get_device_module()."""
    from torch.distributed._tools.memory_tracker import MemoryTracker

    m = nn.Linear(256, 256).to("tpu")
    tracker = MemoryTracker()
    tracker.start_monitor(m)
    m(torch.randn(64, 256, device="tpu")).sum().backward()
    tracker.stop()
    peak_mib = max(v for _, v in tracker.memories_allocated.values())
    assert peak_mib * 2**20 >= 256 * 256 * 4  # at least the weight


# --- torch.cuda functions scripts call on the device module


def _summary_row(summary, label):
    row = next(line for line in summary.splitlines() if line.startswith(f"| {label} "))
    return [cell.strip() for cell in row.strip("|").split("|")[1:]]


def test_memory_summary_shows_memory_stats():
    x = torch.empty(4 * 2**20 // 4, device="tpu")  # 4 MiB
    stats = torch.tpu.memory_stats()
    summary = torch.tpu.memory_summary()
    assert "PyTorch tpu memory summary, device ID 0" in summary
    current = stats["allocated_bytes.all.current"]
    assert current >= 4 * 2**20
    # torch.cuda's units: the next unit from 768 of it on, so 4 MiB shows as KiB
    assert current < 768 * 2**20
    assert _summary_row(summary, "Allocated memory")[0] == f"{current // 1024} KiB"
    count = stats["allocation.all.current"]
    assert _summary_row(summary, "Allocations")[0] == str(count)
    assert torch.tpu.memory_summary(0, abbreviated=True).count("\n") == summary.count("\n")
    with pytest.raises(IndexError):
        torch.tpu.memory_summary(torch.tpu.device_count())
    del x


def test_fsdp1_device_handle_memory_summary():
    """FSDP1 logs ``_device_handle.memory_summary()`` (debug level DETAIL)."""
    from torch.distributed.fsdp._common_utils import _FSDPDeviceHandle

    handle = _FSDPDeviceHandle.from_device(torch.device("tpu", 0))
    assert "tpu memory summary" in handle.memory_summary()


def test_memory_fraction_validated_recorded_not_enforced(monkeypatch):
    monkeypatch.setattr(torchtpu._device_memory, "_memory_fractions", {})
    assert torch.tpu.get_per_process_memory_fraction() == 1.0
    with pytest.raises(TypeError, match="must be `float`"):
        torch.tpu.set_per_process_memory_fraction(1)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="Allowed range: 0~1"):
            torch.tpu.set_per_process_memory_fraction(bad)
    with pytest.raises(IndexError):
        torch.tpu.set_per_process_memory_fraction(0.5, torch.tpu.device_count())
    with pytest.warns(UserWarning, match="not enforced"):
        torch.tpu.set_per_process_memory_fraction(0.5)
    assert torch.tpu.get_per_process_memory_fraction(0) == 0.5


@pytest.mark.parametrize("name", ["utilization", "memory_usage", "temperature",
                                  "power_draw", "clock_rate"])
def test_device_telemetry_refused_by_name(name):
    fn = getattr(torch.tpu, name)
    with pytest.raises(NotImplementedError, match=f"torch.tpu.{name}"):
        fn()
    with pytest.raises(IndexError):
        fn(torch.tpu.device_count())


def test_memory_snapshot_refused_by_name():
    with pytest.raises(NotImplementedError, match="torch.tpu.memory_snapshot"):
        torch.tpu.memory_snapshot()


def test_build_info_and_ipc_collect():
    assert torch.tpu.get_arch_list() == []
    assert torch.tpu.get_gencode_flags() == ""
    assert torch.tpu.ipc_collect() is None


def test_data_parallel_names_the_alternative():
    # nn.DataParallel needs torch._C._scatter & co., absent from CPU builds of
    # torch: a clear error at construction, not an AttributeError mid-forward.
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        nn.DataParallel(nn.Linear(2, 2).to("tpu"))


def test_dlpack_round_trip_shares_the_storage():
    # Tensor.__dlpack_device__ recognizes PrivateUse1 by the name "privateuse1",
    # which a renamed backend never has; torchtpu answers kDLExtDev for tpu.
    t = torch.arange(4.0, device="tpu")
    assert t.__dlpack_device__() == (torch.utils.dlpack.DLDeviceType.kDLExtDev, 0)
    u = torch.from_dlpack(t)
    assert u.device == t.device and u.data_ptr() == t.data_ptr()
    u.add_(1)
    assert t.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    v = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    assert v.device == t.device and torch.equal(v.cpu(), t.cpu())
    assert torch.from_dlpack(torch.arange(3.0)).device.type == "cpu"
    np = pytest.importorskip("numpy")
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(t)  # NumPy cannot read device storage: .cpu() first
