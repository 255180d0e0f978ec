"""torch.tpu streams and events, the memory APIs (torch.tpu.* and
torch.accelerator.*), device information, and storage resize_ as FSDP2 uses it
(free with resize_(0), regrow, copy in). CUDA's documented behaviour is the
reference; one device here (tests/device/test_multidevice.py covers two)."""

import time

import pytest
import torch
import torchtpu

from _util import assert_close_cpu, no_fallback

pytestmark = [pytest.mark.alone, pytest.mark.fused_pass]  # passes: tests/README.md

TPU = torch.device("tpu", 0)


# --- streams


def test_streams_like_cuda():
    default = torch.tpu.current_stream()
    assert default == torch.tpu.default_stream() and default.stream_id == 0
    s = torch.tpu.Stream(priority=-1)
    g = torch.Stream(device="tpu")
    assert isinstance(s, torch.Stream) and s != default and g != default
    assert s.device == TPU
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        x = torch.ones(4, device="tpu") * 2
    assert torch.tpu.current_stream() == default
    with torch.tpu.stream(None):
        assert torch.tpu.current_stream() == default
    default.wait_stream(s)  # nothing to insert: one queue per device; must not raise
    s.synchronize()
    assert s.query() and default.query()
    assert x.cpu().tolist() == [2.0] * 4
    x.record_stream(s)  # FSDP2 calls it; nothing to do with one queue
    torch.tpu.set_stream(s)
    assert torch.accelerator.current_stream() == s
    torch.tpu.set_stream(default)


# --- events


def test_event_record_sync_query_elapsed():
    start = torch.tpu.Event(enable_timing=True)
    end = torch.Event(device="tpu", enable_timing=True)
    assert start.query()  # never recorded: complete, as on CUDA
    a = torch.randn(256, 256, device="tpu")
    (a @ a).cpu()  # compile outside the timed region
    start.record()
    y = a
    for _ in range(8):
        y = torch.tanh(y @ a)
    end.record()
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and 0.0 <= ms < 60_000.0
    end.wait()  # on the current stream: already ordered
    assert torch.isfinite(y).all().item()


def test_event_elapsed_time_measures_device_work():
    a = torch.randn(384, 384, device="tpu")
    (a @ a).cpu()
    e0, e1 = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    e0.record()
    host0 = time.perf_counter()
    y = a
    for _ in range(20):
        y = y @ a / 384
    e1.record()
    enqueue_ms = (time.perf_counter() - host0) * 1e3
    e1.synchronize()
    wall_ms = (time.perf_counter() - host0) * 1e3
    ms = e0.elapsed_time(e1)
    # The events time the computation, not only the enqueueing: the second one
    # completes when the last matmul does (at most the wall time to it).
    assert 0.0 < ms <= wall_ms + 1.0, (ms, enqueue_ms, wall_ms)
    y.cpu()


def _matmul_chain(a, n):
    y = a
    for _ in range(n):
        y = y @ a / a.shape[0]
    return y


def test_synchronize_after_an_event_still_waits_for_the_work_before_it():
    # torch.tpu.synchronize() waits for everything enqueued, also work an
    # Event has listed (the event's bookkeeping once emptied the runtime's
    # in-flight list, and synchronize then returned at once).
    a = torch.randn(512, 512, device="tpu")
    _matmul_chain(a, 2).cpu()  # compile outside the timed part
    start = time.perf_counter()
    y = _matmul_chain(a, 24)
    torch.tpu.synchronize()
    chain_s = time.perf_counter() - start
    y = _matmul_chain(a, 24)
    event = torch.tpu.Event()
    event.record()
    torch.tpu.synchronize()
    # Everything before the event has finished: waiting for the event now
    # only collects its callbacks (it used to wait for the whole chain).
    start = time.perf_counter()
    event.synchronize()
    after_s = time.perf_counter() - start
    assert event.query()
    assert after_s < 0.25 * chain_s, (after_s, chain_s)
    assert torch.isfinite(y.cpu()).all()


def test_synchronize_and_events_wait_for_work_whose_results_were_freed():
    # CUDA's synchronize waits for every kernel queued, also those whose
    # outputs nobody holds any more: here 48 independent matmuls, each result
    # dropped at once. (It once returned at once: outputs were tracked weakly.)
    # Strict mode: fused mode never runs an op whose result was dropped.
    torchtpu.set_eager_mode("strict")
    a = torch.randn(768, 768, device="tpu")
    (a @ a).cpu()  # compile outside the checked part
    for _ in range(48):  # about a second of work on two cores
        a @ a
    event = torch.tpu.Event()
    event.record()
    assert not event.query()  # the matmuls are still running
    torch.tpu.synchronize()
    assert event.query()


def test_programs_on_one_device_complete_in_enqueue_order():
    # What the test above relies on: the runtime waits for freed programs
    # through the device's last one (runtime.h, last_output_), which holds
    # because the plugin runs a device's programs in enqueue order. An add of
    # 4 elements enqueued after a second of matmuls it does not depend on
    # completes after them; a plugin that reorders fails here. Strict mode:
    # one program each.
    torchtpu.set_eager_mode("strict")
    a = torch.randn(768, 768, device="tpu")
    b = torch.ones(4, device="tpu")
    _matmul_chain(a, 2).cpu()
    (b + 1).cpu()
    y = _matmul_chain(a, 48)
    z = b + 1
    torch.testing.assert_close(z.cpu(), torch.full((4,), 2.0))
    event = torch.tpu.Event()
    event.record()  # covers y's program, if it is still running
    assert event.query()
    assert torch.isfinite(y.cpu()).all()


def test_event_without_timing_or_unrecorded_raises():
    a, b = torch.tpu.Event(), torch.tpu.Event()
    a.record()
    b.record()
    with pytest.raises(ValueError, match="enable_timing"):
        a.elapsed_time(b)
    c = torch.Event(device="tpu", enable_timing=True)
    d = torch.Event(device="tpu", enable_timing=True)
    with pytest.raises(ValueError, match="recorded"):
        c.elapsed_time(d)
    t1, t2 = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    t1.record()
    with pytest.raises(ValueError, match="recorded"):
        t1.elapsed_time(t2)


def test_stream_record_and_wait_event():
    s = torch.tpu.Stream()
    e = s.record_event()
    s.wait_event(e)
    e.synchronize()
    assert e.query()


# --- memory


def test_memory_allocated_grows_and_shrinks_with_tensors():
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base
    x = torch.empty(1000, device="tpu")
    y = torch.ones(10, 10, dtype=torch.float64, device="tpu")
    assert torch.tpu.memory_allocated() == base + 4000 + 800
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated()
    del x, y
    assert torch.tpu.memory_allocated() == base
    assert torch.tpu.max_memory_allocated() == base + 4800
    assert torch.tpu.max_memory_reserved() >= base + 4800
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base
    torch.tpu.empty_cache()


def test_memory_stats_keys_and_accelerator_agree():
    keep = torch.zeros(256, device="tpu")
    stats = torch.tpu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "active_bytes.all.current",
                "allocation.all.current", "num_ooms"):
        assert key in stats
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()
    assert torch.accelerator.max_memory_allocated() == torch.tpu.max_memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.tpu.memory_reserved()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == \
        stats["allocated_bytes.all.current"]
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.reset_accumulated_memory_stats()
    torch.accelerator.empty_cache()
    free, total = torch.accelerator.get_memory_info()
    assert 0 < free <= total
    del keep


def test_mem_get_info_and_device_properties():
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    name = torch.tpu.get_device_name()
    assert isinstance(name, str) and name
    props = torch.tpu.get_device_properties(0)
    assert props.name == name and props.total_memory == total
    assert torch.tpu.is_bf16_supported()
    assert torch.tpu.is_initialized()


def test_memory_apis_reject_missing_device():
    for fn in (torch.tpu.memory_allocated, torch.tpu.max_memory_allocated,
               torch.tpu.memory_reserved, torch.tpu.memory_stats, torch.tpu.mem_get_info,
               torch.tpu.reset_peak_memory_stats, torch.tpu.get_device_properties):
        with pytest.raises(IndexError):
            fn(1)
        with pytest.raises(IndexError):
            fn("tpu:5")
    with pytest.raises(IndexError):
        torch.accelerator.memory_allocated(1)


# --- storage resize_ (FSDP2's free and regrow)


def test_storage_resize_to_zero_then_regrow_like_fsdp2():
    p = torch.nn.Parameter(torch.arange(12.0, device="tpu").reshape(3, 4))
    ptr = p.data_ptr()
    base = torch.tpu.memory_allocated()
    storage = p.untyped_storage()
    storage.resize_(0)
    assert storage.size() == 0
    assert torch.tpu.memory_allocated() == base - 48
    storage.resize_(12 * 4)
    assert storage.size() == 48 and p.data_ptr() == ptr
    assert torch.tpu.memory_allocated() == base
    new = torch.randn(3, 4)
    with no_fallback():
        with torch.no_grad():
            p.copy_(new.to("tpu"))
        out = p @ torch.ones(4, 2, device="tpu")
    assert_close_cpu(out, new @ torch.ones(4, 2))
    assert_close_cpu(p.detach(), new)


def test_storage_grow_and_shrink_keep_contents_as_cpu():
    for device in ("cpu", "tpu"):
        x = torch.arange(6.0, device=device)
        x.untyped_storage().resize_(40)  # grow: old bytes kept at the start
        y = torch.empty(0, device=device).set_(x.untyped_storage(), 0, (6,))
        assert y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        x.untyped_storage().resize_(16)  # shrink: the prefix stays
        z = torch.empty(0, device=device).set_(x.untyped_storage(), 0, (4,))
        assert z.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_tensor_resize_grows_keeping_values():
    x = torch.arange(4.0, device="tpu")
    x.resize_(2, 4)
    assert x[0].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    x[1] = 7.0
    assert x.cpu()[1].tolist() == [7.0] * 4
