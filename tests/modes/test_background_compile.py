"""Strict mode's background compiles (csrc/runtime/compile_pool.h): an op whose
program is not loaded is recorded while the program compiles on a pool of
threads, and runs at the first read. Results must be bit-equal to compiling
in the open; the ops must really have waited (``deferred_ops``) and several
programs must really have compiled at once (``background_compiles_peak``).

Each run is a fresh process with no persistent cache, so every program is
new to it.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from _util import SLOW_KERNEL

# Forward, backward and SGD steps of a small MLP, then a tensor built in
# place from slices and an int64 cumsum: distinct programs whose values feed
# each other. Prints the values (as lists, exact) and the metrics.
WORKLOAD = r"""
import json, sys, torch, torchtpu
torchtpu.set_eager_mode("strict", background_compile=sys.argv[1] == "1")
torch.manual_seed(0)
x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.GELU(), torch.nn.LayerNorm(24),
                            torch.nn.Linear(24, 4)).to("tpu")
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
losses = []
for _ in range(3):
    loss = torch.nn.functional.cross_entropy(model(x.to("tpu")), y.to("tpu"))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
t = torch.zeros(6, 5, device="tpu")
t[1:3] += torch.arange(10.0, device="tpu").reshape(2, 5)
t[:, 4].mul_(-2)
c = torch.arange(30, device="tpu").reshape(6, 5).cumsum(1) + t.long()
m = torchtpu.metrics.metrics()
out = {"losses": [l.item() for l in losses], "t": t.cpu().tolist(), "c": c.cpu().tolist(),
       "params": [p.detach().cpu().flatten().tolist() for p in model.parameters()],
       "deferred_ops": m["deferred_ops"], "peak": m["background_compiles_peak"],
       "fallbacks": torchtpu.metrics.total_fallbacks()}
print(json.dumps(out))
"""


def run(background, extra_env=None):
    env = dict(os.environ, TORCHTPU_CACHE_DIR="", TORCHTPU_CACHE="0")
    env.pop("TORCHTPU_BACKGROUND_COMPILE", None)
    env.update(extra_env or {})
    p = subprocess.run([sys.executable, "-c", WORKLOAD, "1" if background else "0"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_results_equal_compiling_in_the_open():
    on, off = run(True), run(False)
    assert off["deferred_ops"] == 0 and off["peak"] == 0
    # Every first op of the workload waited for its program on the pool.
    assert on["deferred_ops"] > 20, on["deferred_ops"]
    assert on["peak"] >= 2, "no two programs compiled at once"
    for k in ("losses", "t", "c", "params"):
        assert on[k] == off[k], k  # bit-equal: the same programs ran
    assert on["fallbacks"] == off["fallbacks"] == 0
    assert on["losses"][2] < on["losses"][0]


def test_one_compile_thread_still_runs_everything():
    one = run(True, {"TORCHTPU_COMPILE_THREADS": "1"})
    assert one["peak"] == 1
    assert one == dict(run(False), deferred_ops=one["deferred_ops"], peak=1)


def run_py(src, cache_dir=None, env=None):
    """Runs `src` with background compiles on, `env` added and, without
    `cache_dir`, no persistent compile cache."""
    cache = {"TORCHTPU_CACHE_DIR": str(cache_dir)} if cache_dir else {
        "TORCHTPU_CACHE_DIR": "", "TORCHTPU_CACHE": "0"}
    env = dict(os.environ, TORCHTPU_BACKGROUND_COMPILE="1", **cache, **(env or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                          text=True, timeout=300, env=env)


def test_exit_with_compiles_queued_is_clean():
    # Many programs still queued or compiling when the script ends, nothing
    # ever read: the exit waits for them instead of crashing inside XLA.
    p = run_py("""
        import torch, torchtpu
        x = torch.ones(8, device="tpu")
        outs = [(x[: n] * n).sum() for n in range(1, 9)]
        assert torchtpu.metrics.metrics()["deferred_ops"] >= 8
        print("issued")
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "issued"


def test_synchronize_and_sync_run_what_was_recorded():
    p = run_py("""
        import torch, torchtpu
        a = torch.arange(6.0, device="tpu")
        b = a.exp().cumsum(0)
        torch.tpu.synchronize()      # runs b's ops (waits for their compiles)
        c = (b * 2).tanh()
        torchtpu.sync()
        m = torchtpu.metrics.metrics()
        assert m["deferred_ops"] >= 3, m
        want = (torch.arange(6.0).exp().cumsum(0) * 2).tanh()
        assert torch.equal(c.cpu(), want) or torch.allclose(c.cpu(), want), (c, want)
        print("ok")
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "ok"


def test_large_results_compile_in_the_open():
    # An op making more than 256 MiB is not deferred: running out of memory
    # raises at the op, as without background compiles.
    import torch

    import torchtpu

    torchtpu.set_eager_mode("strict", background_compile=True)
    before = torchtpu.metrics.metrics()["deferred_ops"]
    with pytest.raises(RuntimeError, match="(?i)out of memory"):
        torch.zeros(2**36, device="tpu")  # 256 GiB
    assert torchtpu.metrics.metrics()["deferred_ops"] == before


def test_switch_is_checked():
    import torchtpu

    with pytest.raises(TypeError, match="background_compile must be a bool"):
        torchtpu.set_eager_mode("strict", background_compile="yes")
    torchtpu.set_eager_mode("strict", background_compile=False)
    assert not torchtpu.background_compile()
    torchtpu.set_eager_mode("strict", background_compile=True)
    assert torchtpu.background_compile()


@pytest.mark.parametrize("value,on", [(None, True), ("0", False), ("1", True)])
def test_on_by_default_and_the_variable_turns_it_off(value, on):
    env = dict(os.environ)
    env.pop("TORCHTPU_BACKGROUND_COMPILE", None)
    if value is not None:
        env["TORCHTPU_BACKGROUND_COMPILE"] = value
    code = "import torchtpu; print(torchtpu.background_compile())"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == str(on)


def test_interrupted_wait_keeps_the_values_of_the_ops_that_ran(tmp_path):
    # Ctrl-C while the recorded ops wait for a slow compile (_util.SLOW_KERNEL;
    # its graph of 1,000 parameters is past the node limit, set to 500, so
    # recording it runs what was recorded): the ops before it have run and
    # keep their values, w's in-place update included; slow_op's value is
    # lost; the device works on.
    p = run_py(SLOW_KERNEL + textwrap.dedent("""
        import os, signal, threading
        signal.signal(signal.SIGINT, signal.default_int_handler)
        w = torch.arange(4.0, device="tpu")
        torchtpu.sync()
        s = torch.full((4,), 2.0, device="tpu")   # new program: recorded
        w.mul_(s)                                 # reads s: recorded
        assert torchtpu.metrics.metrics()["deferred_ops"] >= 2
        threading.Timer(1.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            slow_op(*parts)                       # compiles for seconds
            raise SystemExit("slow_op compiled before the interrupt")
        except KeyboardInterrupt:
            pass
        assert w.cpu().tolist() == [0.0, 2.0, 4.0, 6.0], w.cpu()
        assert s.cpu().tolist() == [2.0] * 4
        assert (w + 1).sum().item() == 16.0
        print("ok")
    """), cache_dir=tmp_path, env={"TORCHTPU_FUSION_MAX_NODES": "500"})
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.stdout, p.stderr[-3000:])


def test_recorded_results_are_freed_after_their_last_reader():
    # 30 products of a 128 MiB tensor recorded behind its pending value and
    # dropped at once: run at the sync, each is freed as soon as it is made,
    # as in strict mode (kept until the end they took 3.9 GiB).
    p = run_py("""
        import resource, torch, torchtpu
        x = torch.ones(2**25, device="tpu")      # 128 MiB, recorded
        torchtpu.sync()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        y = torch.full((2**25,), 0.5, device="tpu")   # new program: recorded
        for i in range(30):
            (x * y * (i + 1)).sum()                 # read y: recorded, then dropped
        assert torchtpu.metrics.metrics()["deferred_ops"] >= 60
        torchtpu.sync()
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(grew // 1024)
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    grew_mib = int(p.stdout.strip())
    assert grew_mib < 1024, grew_mib


def test_large_result_reading_a_recorded_value_runs_at_its_op():
    # A recorded input does not make a 256 GiB result wait for a read: the
    # input is computed first, and running out of memory raises at the op.
    p = run_py("""
        import torch, torchtpu
        x = torch.full((1,), 3.0, device="tpu")    # new program: recorded
        try:
            x.expand(2**36).contiguous()
            raise SystemExit("no error")
        except RuntimeError as e:
            assert "out of memory" in str(e).lower(), e
        assert x.item() == 3.0
        print("ok")
    """)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.stdout, p.stderr[-3000:])


def test_exit_by_an_exception_drops_the_queued_compiles(tmp_path):
    # Sixty distinct programs queued, then the script dies: the exit waits
    # only for the compiles already running, not the queue, runs none of the
    # recorded ops and reports no error of theirs.
    p = run_py("""
        import torch, torchtpu
        x = torch.ones(64, device="tpu")
        torchtpu.sync()
        outs = [(x[: n] * 2).sum() for n in range(1, 61)]
        raise ValueError("the script failed")
    """, cache_dir=tmp_path)
    assert p.returncode == 1 and "ValueError: the script failed" in p.stderr, p.stderr[-3000:]
    assert "pending at interpreter exit" not in p.stderr, p.stderr[-3000:]
    cached = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert len(cached) < 40, len(cached)


# With one compile thread: t's programs loaded, then slow_op's compile
# (seconds, _util.SLOW_KERNEL) running on the pool's only thread while the
# compile queue is closed (as the exit hook closes it), so that any op recorded
# next has its compile dropped. The metrics reset waits for the compiles so
# far, so the peak shows slow_op's.
QUEUE_CLOSED = SLOW_KERNEL + """
import time
t = torch.arange(4.0, device="tpu")
assert (t + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
torchtpu.metrics.reset()
d = slow_op(*parts)
while torchtpu.metrics.metrics()["background_compiles_peak"] < 1:
    time.sleep(0.01)
torchtpu._C._drop_background_work()
"""


def test_reader_of_a_failed_recorded_op_fails_without_running():
    # y's compile fails (dropped by the queue the exit hook closes, here
    # closed early while slow_op's compile holds the only pool thread); z reads
    # y: both raise the compile's error at their reads, nothing crashes, and
    # the device works on.
    p = run_py(QUEUE_CLOSED + textwrap.dedent("""
        y = t * 3                           # queued, then dropped
        z = y + 1                           # reads y
        assert torchtpu.metrics.metrics()["deferred_ops"] >= 3
        for v in (z, y):
            try:
                v.cpu()
                raise SystemExit("a value of a failed compile was read")
            except RuntimeError as e:
                assert "dropped" in str(e), e
        assert (t + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
        print("ok")
    """), env={"TORCHTPU_COMPILE_THREADS": "1", "TORCHTPU_FUSION_MAX_NODES": "100000"})
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.stdout, p.stderr[-3000:])


def test_input_failed_by_another_threads_read_is_refused():
    # The main thread binds x while a reader thread's flush waits for x's
    # compile, which is then dropped: recording x + 1 must raise x's error
    # instead of reading an input with no buffer (it crashed the process).
    p = run_py(QUEUE_CLOSED + textwrap.dedent("""
        import threading
        x = t * 3                           # queued, dropped when slow_op is done
        errors = []
        def reader():
            try:
                x.cpu()
            except RuntimeError as e:
                errors.append(str(e))
        b = threading.Thread(target=reader)
        b.start()
        time.sleep(0.5)                     # b's flush now waits for x's compile
        try:
            y = x + 1
            y.cpu()
            raise SystemExit("a value computed from a failed input")
        except RuntimeError as e:
            assert "dropped" in str(e), e
        b.join()
        assert errors and "dropped" in errors[0], errors
        assert (t + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
        print("ok")
    """), env={"TORCHTPU_COMPILE_THREADS": "1", "TORCHTPU_FUSION_MAX_NODES": "100000"})
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.stdout, p.stderr[-3000:])
