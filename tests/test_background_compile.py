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


def run_py(src):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, TORCHTPU_CACHE_DIR="", TORCHTPU_CACHE="0",
                                   TORCHTPU_BACKGROUND_COMPILE="1"))


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
