"""Fused mode on graphs that would compile for too long or too often: a long
chain is cut into pieces of bounded size (TORCHTPU_FUSION_MAX_NODES), and a
line whose graphs keep changing shape stops fusing (the storm detector,
torchtpu.config.fused_storm_threshold) with one warning. Results equal strict
mode's in every path."""

import inspect
import warnings

import pytest
import torch

import torchtpu
from _util import no_fallback


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.setattr(torchtpu.config, "recompile_warn_threshold", 100)
    monkeypatch.setattr(torchtpu.config, "recompile", "warn")
    monkeypatch.setattr(torchtpu.config, "fused_storm_threshold", 3)
    torchtpu.set_eager_mode("fused")
    torchtpu.metrics.reset()
    yield
    torchtpu.sync()
    torchtpu.set_eager_mode("strict")
    torchtpu.metrics.reset()  # forgets the lines that stopped fusing


def recompile_warnings(caught):
    return [w for w in caught if issubclass(w.category, torchtpu.RecompileWarning)]


def chain(x, n):
    for _ in range(n):
        x = torch.tanh(x * 1.25 + 0.0625)
    return x


def test_long_chain_flushes_in_pieces_with_default_settings(fused):
    # 1500 x 3 ops, about 2 IR nodes each (an op's scalar is a constant node;
    # a whole-storage input needs no slice node): ~9k nodes, past the default
    # cap (4000 nodes), which the measured compile-time curve puts where
    # XLA:CPU's time per node starts to grow (see csrc/runtime/fusion.cc).
    x = torch.linspace(-2, 2, 257)
    with no_fallback():
        got = chain(x.to("tpu"), 1500).cpu()
        m = torchtpu.metrics.metrics()
    assert m["fused_flushes"] >= 3, m
    # Pieces cut at the same op of the repeating pattern are the same program:
    # at most one per phase of the 3-op pattern, plus the last, shorter piece.
    assert m["compiles"] <= 4, m
    torchtpu.set_eager_mode("strict")
    want = chain(x.to("tpu"), 1500).cpu()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got, chain(x, 1500), rtol=1e-5, atol=1e-5)


def grow(n):
    # A loop whose graph changes shape every step, as a dynamic KV cache does.
    start = inspect.currentframe().f_lineno + 1
    x = torch.arange(n, dtype=torch.float32, device="tpu")  # the graph's first op
    y = (x * 2 + 1).cumsum(0) / (n + 1)
    return y.sum().item(), y.cpu(), start


def test_shape_changing_loop_switches_to_strict_once(fused):
    sizes = list(range(5, 17))
    with warnings.catch_warnings(record=True) as caught, no_fallback():
        warnings.simplefilter("always")
        results = [grow(n) for n in sizes]
        strict_ops = torchtpu.metrics.metrics()["fused_strict_ops"]
        counts = torchtpu.metrics.recompile_counts()
    start = results[0][2]
    line = f"{__file__}:{start}"
    # Graph 1 is new; graphs 2, 3 and 4 change shape: the 3rd change stops
    # fusing. Graphs 5.. run op by op, so no more fused graphs from that line.
    assert counts[line] == 4, counts
    assert strict_ops > 0
    found = recompile_warnings(caught)
    assert len(found) == 1, [str(w.message) for w in found]
    message = str(found[0].message)
    assert found[0].filename == __file__ and found[0].lineno == start
    assert "stops fusing" in message and "fused_storm_threshold = 3" in message
    assert "static" in message and "bucket" in message and "shape:" in message
    # A shape compiled before the switch still runs as its fused program.
    before = torchtpu.metrics.metrics()
    grow(6)
    after = torchtpu.metrics.metrics()
    assert after["compiles"] == before["compiles"]
    assert after["fused_strict_ops"] == before["fused_strict_ops"]
    torchtpu.set_eager_mode("strict")
    for n, (total, y, _) in zip(sizes, results):
        want_total, want_y, _ = grow(n)
        assert total == pytest.approx(want_total, rel=1e-6)
        torch.testing.assert_close(y, want_y, rtol=1e-6, atol=1e-6)


def two_part(n, w):
    h = torch.tanh(w * 1.5)  # the graph's first op; this part keeps its shape
    h = (h @ w).relu()
    v = torch.arange(n, dtype=torch.float32, device="tpu") * 0.5  # this part grows
    return (h.sum() + v.sum()).item(), h.cpu()


def test_ops_whose_shapes_stay_run_as_one_cached_segment(fused):
    torch.manual_seed(0)
    w = torch.randn(16, 16, device="tpu") / 4
    torchtpu.sync()  # w's graph is not one of the loop's
    per_shape = []
    with no_fallback():
        results = []
        for n in range(50, 62):
            before = torchtpu.metrics.metrics()["compiles"]
            results.append(two_part(n, w))
            per_shape.append(torchtpu.metrics.metrics()["compiles"] - before)
        assert torchtpu.metrics.metrics()["fused_strict_ops"] > 0
    # Graphs 1-4 fused (the 4th stops fusing at threshold 3), the 5th runs op
    # by op, the 6th groups the unchanged ops into a segment (one compile);
    # from then on a new length compiles only the ops it reaches (arange, mul,
    # sum: small programs), never the stable part again.
    assert all(c <= 3 for c in per_shape[6:]), per_shape
    torchtpu.set_eager_mode("strict")
    for n, (total, h) in zip(range(50, 62), results):
        want_total, want_h = two_part(n, w)
        assert total == pytest.approx(want_total, rel=1e-6)
        torch.testing.assert_close(h, want_h, rtol=1e-6, atol=1e-6)


def test_other_lines_still_fuse(fused):
    # Sizes no other test uses: each graph is new to the program cache.
    for n in range(20, 27):
        grow(n)
    assert torchtpu.metrics.metrics()["fused_strict_ops"] > 0
    before = torchtpu.metrics.metrics()
    # Another line, after the read: fused again (one flush, no strict ops).
    a = torch.full((7,), 3.0, device="tpu")
    b = (a * a + a).sum()
    assert b.item() == 84.0
    after = torchtpu.metrics.metrics()
    assert after["fused_strict_ops"] == before["fused_strict_ops"]
    assert after["fused_flushes"] == before["fused_flushes"] + 1


def test_metrics_reset_lets_the_line_fuse_again(fused):
    for n in range(30, 36):
        grow(n)
    assert torchtpu.metrics.metrics()["fused_strict_ops"] > 0
    torchtpu.metrics.reset()  # counters, counts and marks
    grow(36)
    m = torchtpu.metrics.metrics()
    assert m["fused_strict_ops"] == 0 and m["fused_flushes"] == 1


def test_values_changing_never_stop_fusing(fused):
    torch.manual_seed(0)
    w = torch.randn(6, 6, device="tpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(8):
            x = torch.randn(4, 6, device="tpu") * (step + 1)
            (x @ w).relu().sum().item()
    assert not recompile_warnings(caught)
    assert torchtpu.metrics.metrics()["fused_strict_ops"] == 0


def test_threshold_none_keeps_fusing(fused, monkeypatch):
    monkeypatch.setattr(torchtpu.config, "fused_storm_threshold", None)
    for n in range(40, 47):
        grow(n)
    assert torchtpu.metrics.metrics()["fused_strict_ops"] == 0
    assert max(torchtpu.metrics.recompile_counts().values()) == 7
