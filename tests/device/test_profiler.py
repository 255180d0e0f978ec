"""torch.profiler's device timeline on tpu: programs, compiles and copies.

Each test profiles real work with ProfilerActivity.CPU + PrivateUse1, exports
the chrome trace, parses it, and checks the device events against
torchtpu.metrics' counters for the same region.
"""

import json
import os

import torch
from torch.profiler import ProfilerActivity, profile

import torchtpu
from torchtpu import _C, metrics

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
# A shape no other test uses, so its programs compile here (the persistent
# cache is a fresh directory per test session, conftest.py).
N = 41 + os.getpid() % 53


def _profiled(fn):
    """Runs fn under the profiler; returns (prof, metrics delta)."""
    torchtpu.sync()
    metrics.reset()
    with profile(activities=ACTIVITIES) as prof:
        fn()
    return prof, metrics.metrics()


def _trace(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("ph") == "X"]


def _named(events, prefix):
    return [e for e in events if e["name"].startswith(prefix)]


def _check_counts(events, m):
    programs = _named(events, "XLA program: ")
    compiles = _named(events, "XLA compile: ")
    h2d = _named(events, "Memcpy HtoD")
    d2h = _named(events, "Memcpy DtoH")
    assert len(programs) == m["executes"]
    assert len(compiles) == m["compiles"]
    assert sum(e["args"]["bytes"] for e in h2d) == m["bytes_to_device"]
    assert sum(e["args"]["bytes"] for e in d2h) == m["bytes_to_host"]
    for e in programs + h2d + d2h:
        assert e["dur"] > 0, e
        assert e["cat"] in ("kernel", "gpu_memcpy"), e
    for e in compiles:
        assert e["dur"] > 0 and e["args"]["seconds"] > 0, e
    return programs, compiles, h2d, d2h


def test_strict_ops_compile_and_copies(tmp_path):
    torchtpu.set_eager_mode("strict")
    a = torch.randn(N, 3)
    b = torch.randn(N, 3)

    def work():
        x = a.to("tpu")
        y = b.to("tpu")
        z = (x * y).exp()
        return z.cpu()

    prof, m = _profiled(work)
    events = _trace(prof, tmp_path)
    programs, compiles, h2d, d2h = _check_counts(events, m)
    names = [e["name"] for e in programs]
    assert any("aten::mul" in n for n in names), names
    assert any("aten::exp" in n for n in names), names
    assert m["compiles"] >= 2 and len(compiles) == m["compiles"]
    assert any("aten::mul" in e["name"] for e in compiles)
    # Two uploads of N*3 floats, one download of the result.
    assert sum(e["args"]["bytes"] for e in h2d) >= 2 * N * 3 * 4
    assert sum(e["args"]["bytes"] for e in d2h) == N * 3 * 4
    # The device rows belong to device 0.
    assert all(e["pid"] == 0 for e in programs + h2d + d2h)


def test_key_averages_lists_device_rows():
    torchtpu.set_eager_mode("strict")
    x = torch.randn(N, 5, device="tpu")

    def work():
        (x.sin() + 1).cpu()

    prof, m = _profiled(work)
    avgs = {e.key: e for e in prof.key_averages()}
    device_rows = [e for k, e in avgs.items() if k.startswith("XLA program: ")]
    assert len(device_rows) >= 2
    for e in device_rows:
        assert e.device_type == torch.autograd.DeviceType.PrivateUse1
        assert e.self_device_time_total > 0
    assert sum(e.count for e in device_rows) == m["executes"]
    # A compile is host time only: no program's device time on its row (it
    # once shared the op's correlation id and showed the op's device time).
    compile_rows = [e for k, e in avgs.items() if k.startswith("XLA compile: ")]
    assert sum(e.count for e in compile_rows) == m["compiles"] > 0
    assert all(e.self_device_time_total == 0 for e in compile_rows)
    assert all(e.self_cpu_time_total > 0 for e in compile_rows)
    table = prof.key_averages().table(sort_by="self_device_time_total")
    assert "XLA program: aten::sin" in table
    assert "Memcpy DtoH" in table


def test_fused_graph_event(tmp_path):
    torchtpu.set_eager_mode("fused")
    a = torch.randn(N, 7)

    def work():
        x = a.to("tpu")
        ((x * 2 + 1).relu().sum(0)).cpu()

    prof, m = _profiled(work)
    events = _trace(prof, tmp_path)
    programs, compiles, _, _ = _check_counts(events, m)
    assert m["fused_flushes"] >= 1
    assert len(programs) == m["executes"] >= 1
    # One graph program holding the ops, not one program per op.
    assert len(programs) < 4
    assert len(compiles) == m["compiles"]


def test_off_records_nothing_and_changes_no_counter(tmp_path):
    torchtpu.set_eager_mode("strict")
    a = torch.randn(N, 2)

    def work():
        (a.to("tpu").cos() * 3).cpu()

    work()  # compiled: both runs below count the same programs
    torchtpu.sync()
    metrics.reset()
    work()
    plain = metrics.metrics()
    prof, profiled = _profiled(work)
    keys = ("executes", "compiles", "bytes_to_device", "bytes_to_host")
    assert {k: plain[k] for k in keys} == {k: profiled[k] for k in keys}
    assert not _C._profiler_recording()
    # A profile with only CPU activity shows no device events.
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        work()
    assert not _named(_trace(cpu_only, tmp_path), "XLA program: ")


def test_compiled_graph_event(tmp_path):
    f = torch.compile(lambda t: (t * 3).sin() + 1, backend="tpu")
    x = torch.randn(N, 4, device="tpu")
    expected = f(x).cpu()
    f(x)  # captured: the profiled call replays one program
    torchtpu.sync()

    got = []
    prof, m = _profiled(lambda: got.append(f(x).cpu()))
    torch.testing.assert_close(got[0], expected)
    events = _trace(prof, tmp_path)
    programs, _, _, _ = _check_counts(events, m)
    assert len(programs) == m["executes"] == 1
    assert "graph of 3 ops" in programs[0]["name"], programs[0]["name"]


def test_legacy_autograd_profiler_times_ops_on_tpu():
    # torch.autograd.profiler.profile(use_device="tpu") records a device event
    # around each op (profiler_legacy.cc); before, c10's default stubs warned
    # per op and left each op's host time unset (totals of -7e15 us).
    import time
    import warnings

    x = torch.randn(N, N, device="tpu")

    def work():
        return (x @ x).relu().sum().item()

    work()  # compiled outside the profiled region
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "PrivateUse1 used in profiler but not enabled"
        start = time.perf_counter()
        with torch.autograd.profiler.profile(use_device="tpu") as prof:
            value = work()
        wall_us = (time.perf_counter() - start) * 1e6
    assert value == work()
    rows = {e.key: e for e in prof.key_averages()}
    for op in ("aten::mm", "aten::relu", "aten::sum"):
        assert 0 < rows[op].cpu_time_total <= wall_us, (op, rows[op].cpu_time_total, wall_us)
        assert 0 <= rows[op].device_time_total <= wall_us, (op, rows[op].device_time_total)
    assert sum(r.self_device_time_total for r in rows.values()) > 0
