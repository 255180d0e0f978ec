"""Hybrid fused mode (``torchtpu.set_eager_mode("fused", hybrid=True)``): a graph
whose program is not compiled yet, and whose ops' own programs are at hand (a
strict run compiled them), runs op by op while its fused program compiles on a
background thread, and runs as one program once that compile is done; one whose
ops' programs are not at hand compiles as usual. Results equal those of the same
steps without background compilation: strict mode's bits while op by op, fused
mode's once fused."""

import subprocess
import sys
import textwrap
import time

import pytest
import torch

import torchtpu
from _util import no_fallback

pytestmark = pytest.mark.alone  # passes: tests/README.md


def wait_for_background(timeout=120.0):
    deadline = time.monotonic() + timeout
    while torchtpu._C._compiles_running():
        assert time.monotonic() < deadline, "a background compile did not finish"
        time.sleep(0.02)


@pytest.fixture
def hybrid(monkeypatch):
    monkeypatch.setattr(torchtpu.config, "recompile_warn_threshold", 100)
    torchtpu.set_eager_mode("fused", hybrid=True)
    torchtpu.metrics.reset()
    yield
    torchtpu.sync()
    torchtpu.set_eager_mode("strict", hybrid=False)
    wait_for_background()
    torchtpu.metrics.reset()


def step(x, w, k):
    # Float and integer work in one graph; its first op is on this line.
    h = torch.tanh(x @ w + 0.5)
    counts = (k * 3 + 1) % 7
    return h.sum(1), counts.cumsum(0)


def inputs(rows):
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 29, generator=g)
    w = torch.randn(29, 13, generator=g)
    k = torch.arange(rows, dtype=torch.int64)
    return x, w, k


def run(rows, mode, hybrid):
    torchtpu.set_eager_mode(mode, hybrid=hybrid)
    x, w, k = (t.to("tpu") for t in inputs(rows))
    out = step(x, w, k)
    return [t.cpu() for t in out]


def test_new_graph_compiles_in_the_open_when_its_ops_are_not_compiled(hybrid):
    rows = 31  # a shape no other test compiles
    with no_fallback():
        got = run(rows, "fused", hybrid=True)
        m = torchtpu.metrics.metrics()
    # (no background compile either: hybrid runs its ops one by one while
    # one compiles. _compiles_running() is no check: the thread of the
    # compile just made still counts for a moment after the read returns.)
    assert m["fused_strict_ops"] == 0, m
    for a, b in zip(got, run(rows, "fused", hybrid=False)):
        assert torch.equal(a, b)


def test_new_graph_runs_op_by_op_then_fused(hybrid):
    rows = 37  # a shape no other test compiles
    strict = run(rows, "strict", hybrid=False)  # compiles each op's program
    torchtpu.set_eager_mode("fused", hybrid=True)
    x, w, k = (t.to("tpu") for t in inputs(rows))
    with no_fallback():
        first = [t.cpu() for t in step(x, w, k)]
        m1 = torchtpu.metrics.metrics()
        assert m1["fused_strict_ops"] > 0, m1  # did not wait for the fused compile
        wait_for_background()
        compiled = torchtpu.metrics.metrics()["compiles"]
        second = [t.cpu() for t in step(x, w, k)]
        m2 = torchtpu.metrics.metrics()
    # The fused program was ready: no op ran alone and nothing compiled now.
    assert m2["fused_strict_ops"] == m1["fused_strict_ops"], (m1, m2)
    assert m2["compiles"] == compiled, (compiled, m2)
    fused = run(rows, "fused", hybrid=False)
    for a, b in zip(first, strict):
        assert torch.equal(a, b)
    for a, b in zip(second, fused):
        assert torch.equal(a, b)
    cpu = step(*inputs(rows))
    torch.testing.assert_close(first[0], cpu[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(first[1], cpu[1])


def test_training_loop_equals_fused_without_background(hybrid):
    def train(steps):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(19, 23), torch.nn.ReLU(),
                                    torch.nn.Linear(23, 5)).to("tpu")
        # foreach=False: strict mode runs a foreach step as one program per
        # call, so only the per-tensor step leaves each op's program at hand.
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
        g = torch.Generator().manual_seed(4)
        data = [(torch.randn(11, 19, generator=g), torch.randint(0, 5, (11,), generator=g))
                for _ in range(steps)]
        losses = []
        for xb, yb in data:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb.to("tpu")), yb.to("tpu"))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]

    torchtpu.set_eager_mode("strict", hybrid=True)
    strict_losses, _ = train(1)  # compiles each op's program
    torchtpu.set_eager_mode("fused")
    with no_fallback():
        got_losses, got_params = train(5)
        strict_ops = torchtpu.metrics.metrics()["fused_strict_ops"]
    assert strict_ops > 0
    torchtpu.set_eager_mode("fused", hybrid=False)
    want_losses, want_params = train(5)
    assert got_losses[0] == strict_losses[0]  # the first step ran op by op
    # Op by op equals strict; fused equals strict up to the last bits.
    torch.testing.assert_close(got_losses, want_losses, rtol=1e-6, atol=1e-7)
    for a, b in zip(got_params, want_params):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_warm_line_compiles_a_new_shape_in_the_open_then_goes_hybrid_again(hybrid):
    for rows in (41, 43, 47):
        run(rows, "strict", hybrid=True)
    for rows in (41, 41):
        run(rows, "fused", hybrid=True)
        wait_for_background()
    run(41, "fused", hybrid=True)  # found compiled: the line is warm
    before = torchtpu.metrics.metrics()["fused_strict_ops"]
    run(43, "fused", hybrid=True)  # new shape, recorded without per-op programs
    assert torchtpu.metrics.metrics()["fused_strict_ops"] == before
    run(47, "fused", hybrid=True)  # the line went cold: op by op again
    assert torchtpu.metrics.metrics()["fused_strict_ops"] > before


def test_hybrid_must_be_a_bool():
    with pytest.raises(TypeError, match="hybrid must be a bool"):
        torchtpu.set_eager_mode("fused", hybrid=1)
    assert torchtpu.fused_hybrid() is False


def test_exit_while_a_background_compile_runs():
    src = """
        import torch, torchtpu
        def chain():
            x = torch.ones(64, 64, device="tpu")
            for _ in range(300):
                x = torch.tanh(x @ x * 0.01 + 0.5)
            return float(x.sum())
        print(chain())  # strict: compiles each op's program
        torchtpu.set_eager_mode("fused", hybrid=True)
        print(chain())  # runs op by op; the fused program still compiles
        print("running", torchtpu._C._compiles_running())
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "running" in r.stdout
