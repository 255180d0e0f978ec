"""The dispatch cache (csrc/aten/dispatch_cache.h): a repeated call of
add / sub / mul / div, their scalar forms, a few unary ops, the comparisons,
bitwise and logical ops, where, the plain reductions and the matrix products,
functional,
in-place or out=, runs its program again (strict mode) or appends its recorded
graph again (fused mode) without being lowered. Every result
must equal CPU PyTorch's and the uncached call's, whatever changes between
calls: the values of the inputs, scalar values and kinds, aliasing, views,
layouts, dtypes, the default dtype.
"""

import os
import subprocess
import sys

import pytest
import torch

import torchtpu
from _util import run_both


@pytest.fixture(autouse=True)
def strict_mode():
    # Without background compiles: a call whose program is still compiling
    # is recorded, not run, and the cache remembers only calls that ran their
    # program, so the counts below would depend on how fast XLA was.
    previous = torchtpu.get_eager_mode()
    background = torchtpu.background_compile()
    torchtpu.set_eager_mode("strict", background_compile=False)
    yield
    torchtpu.set_eager_mode(previous, background_compile=background)


def hits():
    return torchtpu.metrics.metrics()["dispatch_cache_hits"]


# run_both(fn, *cpu_args, **LAYOUT): fn on tpu copies of cpu_args equals fn on
# CPU, strides too; with no no_fallback block (it resets the metrics the hit
# counts here read: the tests check total_fallbacks() themselves).
LAYOUT = dict(check_stride=True, fallback_ok=True)


def test_repeated_add_is_replayed_and_exact():
    a, b = torch.randn(64), torch.randn(64)
    ta, tb = a.to("tpu"), b.to("tpu")
    torchtpu.metrics.reset()
    first = ta + tb
    before = hits()
    results = [ta + tb for _ in range(5)]
    assert hits() - before == 5
    m = torchtpu.metrics.metrics()
    assert m["compiles"] + m["persistent_hits"] <= 1  # the first call's program only
    assert torchtpu.metrics.total_fallbacks() == 0
    for r in [first] + results:
        assert torch.equal(r.cpu(), a + b)


def test_new_input_values_are_read():
    a, b = torch.randn(16), torch.randn(16)
    ta, tb = a.to("tpu"), b.to("tpu")
    ta + tb
    ta.mul_(3)  # a new buffer behind the same storage
    tb.copy_(torch.arange(16.0))
    torch.testing.assert_close((ta + tb).cpu(), a * 3 + torch.arange(16.0))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_ops_across_argument_kinds(op):
    f = getattr(torch, op)
    x = torch.randn(4, 6)
    y = torch.randn(4, 6)
    for _ in range(2):  # the second round replays each call
        run_both(f, x, y, **LAYOUT)
        run_both(f, x, y[0], **LAYOUT)                # broadcast
        run_both(f, x, x, **LAYOUT)                   # one storage twice
        run_both(lambda p: f(p, p), x, **LAYOUT)      # the same tensor twice
        run_both(lambda p, q: f(p.t(), q.t()), x, y, **LAYOUT)   # transposed views
        run_both(lambda p, q: f(p[1:], q[:-1]), x, y, **LAYOUT)  # offset views
        run_both(f, x, 2.5, **LAYOUT)                 # Python float
        run_both(f, x, 3, **LAYOUT)                   # Python int
        run_both(f, x.to(torch.int32), 2, **LAYOUT)   # integer arithmetic (div: true division)
        run_both(f, x.to(torch.int32), 2.5, **LAYOUT)  # promotion by a float scalar
        run_both(f, x.to(torch.int64), y.to(torch.int16), **LAYOUT)
        run_both(f, x.double(), y, **LAYOUT)
        run_both(f, x.to(memory_format=torch.contiguous_format), y.t().contiguous().t(), **LAYOUT)


def test_scalar_values_and_alpha_change():
    x, y = torch.randn(32), torch.randn(32)
    for alpha in (1, 2, 2, -0.5, -0.5, 1):
        run_both(lambda p, q: torch.add(p, q, alpha=alpha), x, y, **LAYOUT)
        run_both(lambda p, q: torch.sub(p, q, alpha=alpha), x, y, **LAYOUT)
    for s in (0.5, 0.5, 7.0, 7, True, True):
        run_both(lambda p: p * s, x, **LAYOUT)
        run_both(lambda p: p + s, x, **LAYOUT)


def test_channels_last_layout_replayed():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    y = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    for _ in range(3):
        run_both(torch.add, x, y, **LAYOUT)
        run_both(torch.mul, x, 0.25, **LAYOUT)


def test_default_dtype_is_part_of_the_key():
    a = torch.tensor([1, 2, 3])
    b = torch.tensor([2, 2, 2])
    run_both(torch.div, a, b, **LAYOUT)
    run_both(torch.div, a, b, **LAYOUT)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        run_both(torch.div, a, b, **LAYOUT)  # int / int gives the default dtype
    finally:
        torch.set_default_dtype(previous)
    run_both(torch.div, a, b, **LAYOUT)


def test_bool_and_errors_unchanged():
    p, q = torch.tensor([True, False, True]), torch.tensor([True, True, False])
    for _ in range(2):
        run_both(torch.add, p, q, **LAYOUT)
        run_both(torch.mul, p, q, **LAYOUT)
        with pytest.raises(RuntimeError, match="Subtraction"):
            p.to("tpu") - q.to("tpu")


def test_host_scalars_keyed_by_value():
    # `x * 0.5` passes 0.5 as a wrapped 0-d host tensor: replayed per value.
    x = torch.randn(8)
    tx = x.to("tpu")
    before = hits()
    for v in (1.5, 2.5, 1.5, 2.5, -3.0):
        torch.testing.assert_close((tx * v).cpu(), x * v)
        torch.testing.assert_close((tx * torch.tensor(v)).cpu(), x * v)
        torch.testing.assert_close((tx + torch.tensor(v, dtype=torch.float64)).cpu(),
                                   x + torch.tensor(v, dtype=torch.float64))
    assert hits() - before >= 6  # the repeated values
    xi = torch.arange(8, dtype=torch.int32)
    for v in (2, 2, 3, True, True):
        run_both(lambda p: p * v, xi, **LAYOUT)
        run_both(lambda p: p + torch.tensor(v), xi, **LAYOUT)


def test_results_feed_later_calls():
    x = torch.randn(128)
    tx = x.to("tpu")
    acc_cpu, acc = x.clone(), tx.clone()
    for _ in range(10):
        acc_cpu = acc_cpu + x * 0.5
        acc = acc + tx * 0.5
    torch.testing.assert_close(acc.cpu(), acc_cpu)


@pytest.fixture
def fused_mode():
    torchtpu.set_eager_mode("fused")
    yield
    torchtpu.set_eager_mode("strict")


def test_fused_repeated_ops_are_replayed_and_exact(fused_mode):
    # Fused mode appends a repeated call's recorded graph again: its inputs
    # are pending values (the chain) or buffers (after a read flushed).
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    tx, ty = x.to("tpu"), y.to("tpu")
    torchtpu.metrics.reset()
    acc_cpu, acc = x.clone(), tx.clone()
    for k in range(6):
        acc_cpu = (acc_cpu + y) * 0.5 - x.t().t()
        acc = (acc + ty) * 0.5 - tx.t().t()
        acc_cpu = -acc_cpu.sigmoid()
        acc = -acc.sigmoid()
        if k == 3:
            torch.testing.assert_close(acc.cpu(), acc_cpu)  # a read: buffers from here
    assert hits() >= 20
    torch.testing.assert_close(acc.cpu(), acc_cpu)
    assert torchtpu.metrics.total_fallbacks() == 0


def test_fused_argument_kinds(fused_mode):
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    for _ in range(2):  # the second round replays each call
        for f in (torch.add, torch.mul, torch.div):
            run_both(f, x, y, **LAYOUT)
            run_both(f, x, y[0], **LAYOUT)                # broadcast
            run_both(lambda p: f(p, p), x, **LAYOUT)      # the same tensor twice
            run_both(lambda p, q: f(p.t(), q.t()), x, y, **LAYOUT)   # transposed views
            run_both(lambda p, q: f(p[1:], q[:-1]), x, y, **LAYOUT)  # offset views
            run_both(f, x, 2.5, **LAYOUT)
            run_both(f, x.to(torch.int32), 2, **LAYOUT)
            run_both(f, x.to(torch.int64), y.to(torch.int16), **LAYOUT)
        run_both(lambda p: torch.add(p, p, alpha=2), x, **LAYOUT)
        run_both(torch.exp, x.t(), **LAYOUT)
        run_both(lambda p: torch.pow(p.abs(), 3), x, **LAYOUT)
    assert torchtpu.metrics.total_fallbacks() == 0


def test_fused_inplace_and_out(fused_mode):
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    tx, ty = x.to("tpu"), y.to("tpu")
    acc, cacc = tx.clone(), x.clone()
    out, cout = torch.empty(4, 6, device="tpu"), torch.empty(4, 6)
    view, cview = tx.clone(), x.clone()
    before = hits()
    for _ in range(4):  # the written storages' values stay pending between calls
        acc.add_(ty).mul_(0.5)
        cacc.add_(y).mul_(0.5)
        torch.sub(acc, ty, out=out)
        torch.sub(cacc, y, out=cout)
        torch.neg(out, out=out)
        torch.neg(cout, out=cout)
        view[1:, 2:].mul_(ty[1:, 2:])  # through a view: the base sees it
        cview[1:, 2:].mul_(y[1:, 2:])
        acc.abs_()
        cacc.abs_()
    assert hits() - before >= 12
    torch.testing.assert_close(acc.cpu(), cacc)
    torch.testing.assert_close(out.cpu(), cout)
    torch.testing.assert_close(view.cpu(), cview)
    for _ in range(2):  # errors are raised as before, cached or not
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            tx[:, :1].add_(ty)
        with pytest.raises(RuntimeError, match="can't be cast"):
            torch.arange(4, device="tpu").mul_(torch.ones(4, device="tpu"))
    assert torchtpu.metrics.total_fallbacks() == 0


def test_fused_never_written_storage_is_not_replayed(fused_mode):
    # torch.empty's storage has no value: lowered (read as zeros) every time.
    y = torch.randn(8)
    for _ in range(3):
        e = torch.empty(8, device="tpu")
        r = e * 0 + y.to("tpu")
        torch.testing.assert_close(r.cpu(), y)


UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos",
         "reciprocal", "relu"]


def _positive(x):
    return x.abs() + 0.5


@pytest.mark.parametrize("op", UNARY)
def test_unary_ops_replayed_and_exact(op):
    x = _positive(torch.randn(5, 7))  # log, sqrt, rsqrt take positive values
    f = getattr(torch, op)
    tx = x.to("tpu")
    f(tx)
    before = hits()
    for _ in range(3):
        run_both(f, x, **LAYOUT)
        run_both(lambda p: f(p.t()), x, **LAYOUT)          # a transposed view keeps its layout
        run_both(lambda p: f(p[1:, ::2]), x, **LAYOUT)     # an offset, strided view
    assert hits() - before >= 6
    if op not in ("relu", "neg", "abs"):
        run_both(f, torch.arange(6, dtype=torch.int32) + 1, **LAYOUT)  # the default float dtype
    assert torchtpu.metrics.total_fallbacks() == 0


def test_scalar_variants():
    x = torch.randn(3, 4)
    for _ in range(2):
        for e in (2, 3, 0.5, 2, -1.5):
            run_both(lambda p: torch.pow(p.abs(), e), x, **LAYOUT)
        for s in (1.5, 2, 1.5):
            run_both(lambda p: torch.rsub(p, s), x, **LAYOUT)
            run_both(lambda p: torch.rsub(p, s, alpha=2), x, **LAYOUT)
            run_both(lambda p: s - p, x, **LAYOUT)


def _inplace(op, *args):
    return lambda t, *rest: getattr(t.clone(), op + "_")(*rest, *args)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_inplace_binary(op):
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    tx, ty = x.to("tpu"), y.to("tpu")
    cx = x.clone()
    acc = tx.clone()
    before = hits()
    for _ in range(4):  # the same storage written again and again
        getattr(acc, op + "_")(ty)
        getattr(cx, op + "_")(y)
    assert hits() - before >= 3
    torch.testing.assert_close(acc.cpu(), cx)
    for _ in range(2):
        run_both(lambda p, q: getattr(p.clone(), op + "_")(q), x, y, **LAYOUT)
        run_both(lambda p, q: getattr(p.clone(), op + "_")(q[0]), x, y, **LAYOUT)     # broadcast
        run_both(lambda p: getattr(p.clone(), op + "_")(2.5), x, **LAYOUT)           # Python scalar
        run_both(lambda p, q: getattr(p.clone().t(), op + "_")(q.t()), x, y, **LAYOUT)  # views

        def into_view(p, q):  # writing through a view: the base sees it
            base = p.clone()
            getattr(base[1:, 2:], op + "_")(q[1:, 2:])
            return base
        run_both(into_view, x, y, **LAYOUT)

        def self_alias(p):  # reading the written storage
            t = p.clone()
            getattr(t, op + "_")(t)
            return t
        run_both(self_alias, x, **LAYOUT)
    assert torchtpu.metrics.total_fallbacks() == 0


@pytest.mark.parametrize("op", UNARY)
def test_inplace_unary(op):
    x = _positive(torch.randn(16))
    for _ in range(3):
        run_both(lambda p: getattr(p.clone(), op + "_")(), x, **LAYOUT)
        run_both(lambda p: getattr(p.clone()[::2], op + "_")(), x, **LAYOUT)


def test_inplace_errors_stay():
    a = torch.randn(4, 1).to("tpu")
    b = torch.randn(4, 3).to("tpu")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            a.add_(b)
    i = torch.arange(4).to("tpu")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="can't be cast"):
            i.mul_(torch.ones(4, device="tpu"))
    t = torch.randn(4, 4).to("tpu")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="unsupported operation"):
            t.t().mul_(t)  # partial overlap, refused as on CPU


def test_out_variants():
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    tx, ty = x.to("tpu"), y.to("tpu")
    out = torch.empty(4, 6, device="tpu")
    cpu_out = torch.empty(4, 6)
    for op in ("add", "sub", "mul", "div", "exp", "neg", "sigmoid"):
        f = getattr(torch, op)
        binary = op in ("add", "sub", "mul", "div")
        before = hits()
        for _k in range(3):
            args = (tx, ty) if binary else (tx,)
            r = f(*args, out=out)
            assert r is out
            f(*((x, y) if binary else (x,)), out=cpu_out)
            torch.testing.assert_close(out.cpu(), cpu_out)
        assert hits() - before >= 1, op
    # An out that must be resized: not replayed under its old sizes.
    for _ in range(2):
        small = torch.empty(0, device="tpu")
        torch.add(tx, ty, out=small)
        assert small.shape == (4, 6)
        torch.testing.assert_close(small.cpu(), x + y)
    # An out of another dtype: cast as on CPU.
    d = torch.empty(4, 6, dtype=torch.float64, device="tpu")
    for _ in range(2):
        torch.mul(tx, ty, out=d)
        torch.testing.assert_close(d.cpu(), (x * y).double())
    assert torchtpu.metrics.total_fallbacks() == 0


def test_same_as_uncached_path():
    """Every call kind in a process with TORCHTPU_DISPATCH_CACHE=0 gives the
    same bits as here."""
    script = r"""
import sys, torch, torchtpu
torchtpu.set_eager_mode(sys.argv[2])
g = torch.Generator().manual_seed(0)
x = (torch.randn(6, 5, generator=g).abs() + 0.5).to("tpu")
y = torch.randn(6, 5, generator=g).to("tpu")
res = []
for _ in range(3):
    res += [x + y, x * 0.5, 2 - x, x.pow(3), x.exp(), x.rsqrt(), x.t().sigmoid(), y.relu()]
    res += [x.sum(0), y.sum([0, 1]), y.mean(1, keepdim=True), x.amax(0), y.argmax(1),
            y.max(0).indices, x > y, torch.where(x > y, x, y), (y > 0).any(1), y.t().sum(1)]
    t = x.clone(); t.add_(y); t.mul_(0.25); t.sqrt_(); res.append(t)
    o = torch.empty(6, 5, device="tpu"); torch.div(x, y, out=o); torch.neg(o, out=o)
    res.append(o)
torch.save([r.cpu() for r in res], sys.argv[1])
m = torchtpu.metrics.metrics()
print(m["dispatch_cache_hits"], m["fused_flushes"])
"""
    import tempfile
    for mode in ("strict", "fused"):
        with tempfile.TemporaryDirectory() as d:
            outs, counts = [], []
            for flag in ("1", "0"):
                path = os.path.join(d, f"r{flag}.pt")
                env = dict(os.environ, TORCHTPU_DISPATCH_CACHE=flag,
                           TORCHTPU_BACKGROUND_COMPILE="0")  # (see strict_mode)
                p = subprocess.run([sys.executable, "-c", script, path, mode], env=env,
                                   capture_output=True, text=True, timeout=120)
                assert p.returncode == 0, p.stderr[-2000:]
                counts.append([int(v) for v in p.stdout.strip().splitlines()[-1].split()])
                outs.append(torch.load(path))
        assert counts[0][0] > 0 and counts[1][0] == 0, mode
        assert counts[0][1] == counts[1][1], mode  # fused: the same graphs run
        for a, b in zip(*outs, strict=True):
            assert a.dtype == b.dtype and a.stride() == b.stride()
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)  # the same bits


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_lazily_negated_operands_are_not_replayed(mode):
    # The cache is looked up before the kernel's checks: a lazily negated
    # tensor (or host scalar) holds bits that are not its value, so its call
    # must not match the plain call remembered with the same metadata.
    torchtpu.set_eager_mode(mode)
    x = torch.randn(5)
    tx = x.to("tpu")
    two = torch.tensor(2.0)
    for _ in range(2):
        torch.testing.assert_close((tx * two).cpu(), x * 2)
        torch.testing.assert_close((tx + tx).cpu(), x + x)
    torch.testing.assert_close((tx * torch._neg_view(two)).cpu(), x * -2)
    torch.testing.assert_close((torch._neg_view(tx) + tx).cpu(), torch.zeros(5))


# Reductions, comparisons, bitwise/logical ops and where (int-list dims,
# keepdim and dtype arguments in the key). Each lambda runs on a [5, 5] float
# x (square: sum(0) and sum(1) have the same result metadata, so only the
# dims in the key tell them apart) and a bool b.
KEYED_CALLS = [
    lambda x, b: x.sum(0), lambda x, b: x.sum(1), lambda x, b: x.sum([0, 1]),
    lambda x, b: x.sum(0, keepdim=True), lambda x, b: x.sum(1, dtype=torch.float64),
    lambda x, b: x.sum(), lambda x, b: x.mean([1]), lambda x, b: x.mean(),
    lambda x, b: x.amax([0]), lambda x, b: x.amax(1), lambda x, b: x.amin([0, 1]),
    lambda x, b: x.max(), lambda x, b: x.max(0), lambda x, b: x.max(1, keepdim=True),
    lambda x, b: x.min(1), lambda x, b: x.argmax(), lambda x, b: x.argmax(0),
    lambda x, b: x.argmax(1), lambda x, b: x.argmin(0, True), lambda x, b: x.prod(),
    lambda x, b: b.any(), lambda x, b: b.all(0), lambda x, b: b.any(1),
    lambda x, b: b.any([0, 1]), lambda x, b: x.eq(x.t()), lambda x, b: x.gt(0.25),
    lambda x, b: x.le(x.t()), lambda x, b: torch.maximum(x, x.t()),
    lambda x, b: torch.where(b, x, -x), lambda x, b: torch.rsub(x, x.t()),
    lambda x, b: b & b.t(), lambda x, b: b | b.t(), lambda x, b: b ^ b.t(), lambda x, b: ~b,
    lambda x, b: b.logical_not(), lambda x, b: b.logical_and(b.t()),
    lambda x, b: x @ x, lambda x, b: x @ x.t(), lambda x, b: x.t() @ x,
    lambda x, b: torch.addmm(x, x, x.t(), beta=0.5, alpha=2), lambda x, b: torch.addmm(x[0], x, x),
    lambda x, b: torch.bmm(x[None], x.t()[None]), lambda x, b: torch.bmm(x.t()[None], x[None]),
    lambda x, b: torch.baddbmm(x[None], x[None], x[None], alpha=0.5),
    lambda x, b: torch.nn.functional.silu(x.t()),
]


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_reductions_comparisons_and_dims_replayed_and_exact(mode):
    torchtpu.set_eager_mode(mode, background_compile=False)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(5, 5, generator=g) for _ in range(3)]
    torchtpu.metrics.reset()
    for x in xs:  # new values every round; every call after the first round replays
        b = x > 0
        tx, tb = x.to("tpu"), b.to("tpu")
        for i, f in enumerate(KEYED_CALLS):
            got, want = f(tx, tb), f(x, b)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            for u, v in zip(got, want, strict=True):
                assert (u.dtype, u.shape, u.stride()) == (v.dtype, v.shape, v.stride()), i
                torch.testing.assert_close(u.cpu(), v, msg=lambda m, i=i: f"call {i}: {m}")
    # Each call's second and third rounds (and the moves to tpu after the
    # first) are hits; a key missing the dims would have returned sum(0) for
    # sum(1) above.
    assert hits() >= 2 * len(KEYED_CALLS), hits()
    assert torchtpu.metrics.total_fallbacks() == 0
