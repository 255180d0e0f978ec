"""Pointwise math, special functions, value-dependent indexing, unpooling and the
legacy norm/trace/logcumsumexp reductions on tpu compared with CPU PyTorch
(values, dtype, shape) with no CPU fallback, and CPU's errors for bad input.

nonzero, masked_select, take and max_unpool read a count or an index range on
the host (a sync, as on CUDA); the tests only check results."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from _util import assert_close_cpu, no_fallback, run_both, same_error

NAN = float("nan")
INF = float("inf")


def floats(shape=(4, 5)):
    x = torch.randn(shape) * 3
    if x.numel() >= 8:
        flat = x.view(-1)
        flat[0], flat[1], flat[2], flat[3] = NAN, INF, -INF, 0.0
        flat[4] = -0.0
    return x


# ------------------------------------------------------------- binary pointwise

BINARY_FLOAT = [torch.logaddexp, torch.logaddexp2, torch.hypot]
BINARY_PROMOTING = [torch.copysign, torch.xlogy, torch.special.xlog1py]
BINARY_ANY = [torch.fmax, torch.fmin]


@pytest.mark.parametrize("fn", BINARY_FLOAT + BINARY_PROMOTING + BINARY_ANY)
def test_binary_float(fn):
    x, y = floats(), floats().flip(0)
    run_both(fn, x, y)
    run_both(fn, x, y[0])  # broadcast
    run_both(fn, x.t(), y.t())  # non-contiguous
    run_both(fn, torch.tensor(2.0), torch.tensor(-3.0))
    run_both(fn, torch.empty(0, 3), torch.empty(0, 3))
    run_both(fn, x.bfloat16(), y.bfloat16())


@pytest.mark.parametrize("fn", BINARY_PROMOTING + BINARY_ANY)
def test_binary_int_bool(fn):
    i = torch.randint(-4, 5, (3, 4))
    b = torch.rand(3, 4) > 0.5
    run_both(fn, i, i.flip(1))
    run_both(fn, b, b.flip(0))
    run_both(fn, i, b)


@pytest.mark.parametrize("fn", BINARY_FLOAT)
def test_binary_float_rejects_int(fn):
    same_error(fn, torch.tensor([1, 2]), torch.tensor([3, 4]))


def test_binary_scalar_overloads():
    x = floats().abs()
    run_both(lambda t: torch.xlogy(t, 2.0), x)
    run_both(lambda t: torch.xlogy(2, t), x)
    run_both(lambda t: torch.special.xlog1py(t, 2.0), x)
    run_both(lambda t: torch.copysign(t, -1.0), x)


def test_heaviside():
    x = floats()
    run_both(torch.heaviside, x, torch.full_like(x, 0.5))
    run_both(torch.heaviside, torch.randint(-2, 3, (4,)), torch.tensor([7, 8, 9, 10]))
    run_both(torch.heaviside, torch.tensor([True, False]), torch.tensor([False, True]))
    same_error(torch.heaviside, torch.tensor([1, 0]), torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_shifts(dtype):
    x = torch.randint(0 if dtype == torch.uint8 else -100, 100, (20,)).to(dtype)
    s = torch.randint(0 if dtype == torch.uint8 else -3, 70, (20,)).to(dtype)
    run_both(lambda a, b: a << b, x, s)
    run_both(lambda a, b: a >> b, x, s)
    run_both(torch.bitwise_left_shift, x, s)
    run_both(torch.bitwise_right_shift, x, s)
    run_both(lambda a: a << 2, x)
    run_both(lambda a: a >> 1, x)
    same_error(lambda a, b: a << b, x.float(), s)


def test_glu():
    x = torch.randn(3, 4, 6)
    run_both(F.glu, x)
    run_both(lambda t: F.glu(t, 1), x)
    run_both(lambda t: F.glu(t, 0), x[:2])
    same_error(lambda t: F.glu(t, 0), x)
    same_error(F.glu, torch.tensor(1.0))
    same_error(F.glu, torch.arange(4))


# ------------------------------------------------------------- special functions


@pytest.mark.parametrize("fn", [torch.sinc, torch.erfc, torch.special.entr, torch.angle])
def test_unary_special(fn):
    x = floats((6, 5))
    run_both(fn, x)
    run_both(fn, x.t())
    run_both(fn, torch.tensor(0.0))
    run_both(fn, torch.empty(0))
    run_both(fn, torch.randint(-3, 4, (7,)))
    run_both(fn, torch.tensor([True, False]))
    run_both(fn, x.bfloat16())


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n):
    x = torch.cat([torch.randn(30) * 4, torch.tensor([0.0, -1.0, -2.5, 0.5, 10.0, 1e-3])])
    run_both(lambda t: torch.polygamma(n, t), x)
    run_both(lambda t: torch.special.polygamma(n, t), x.reshape(6, 6).t())
    run_both(lambda t: torch.polygamma(n, t), torch.randint(1, 5, (4,)))


def test_polygamma_errors():
    same_error(lambda t: torch.polygamma(-1, t), torch.randn(3))


def test_zeta():
    x = torch.cat([torch.rand(20) * 5 + 1, torch.tensor([1.0, 0.5, 2.0, 3.0, 2.5, NAN])])
    q = torch.cat([torch.rand(20) * 5 + 0.1, torch.tensor([2.0, 2.0, -1.0, -2.5, -2.5, 1.0])])
    run_both(torch.special.zeta, x, q)
    run_both(lambda t: torch.special.zeta(t, 2.0), x)
    run_both(lambda t: torch.special.zeta(3.0, t), q.abs() + 0.5)
    run_both(torch.special.zeta, torch.tensor([2, 3]), torch.tensor([1, 4]))
    same_error(torch.special.zeta, x.bfloat16(), q.bfloat16())


# ------------------------------------------------- value-dependent indexing, take


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (7,), (4, 5), (2, 3, 4)])
def test_nonzero(shape):
    x = torch.randint(0, 2, shape).float()
    run_both(torch.nonzero, x)
    run_both(lambda t: torch.nonzero(t, as_tuple=True), x)
    run_both(torch.argwhere, x > 0)
    run_both(torch.nonzero, torch.zeros(shape))


def test_nonzero_nan_and_views():
    x = torch.tensor([[0.0, NAN], [1.0, 0.0]])
    run_both(torch.nonzero, x)
    run_both(lambda t: torch.nonzero(t.t()), x)
    run_both(lambda t: torch.where(t), x)


def test_masked_select():
    x = torch.randn(4, 5)
    run_both(torch.masked_select, x, torch.rand(4, 5) > 0.5)
    run_both(torch.masked_select, x, torch.rand(5) > 0.5)
    run_both(torch.masked_select, x[0], torch.rand(3, 5) > 0.5)
    run_both(torch.masked_select, torch.tensor(2.0), torch.tensor(True))
    run_both(torch.masked_select, x, torch.zeros(4, 5, dtype=torch.bool))
    run_both(torch.masked_select, torch.randint(0, 9, (3, 4)), torch.rand(3, 4) > 0.5)
    same_error(torch.masked_select, x, torch.ones(4, 5, dtype=torch.uint8))
    same_error(torch.masked_select, x, torch.ones(3, dtype=torch.bool))


def test_take():
    x = torch.randn(3, 4)
    run_both(torch.take, x, torch.tensor([[0, -1], [5, 11]]))
    run_both(torch.take, x.t(), torch.tensor([0, -12, 7]))
    run_both(torch.take, x, torch.empty(0, dtype=torch.int64))
    run_both(torch.take, torch.tensor(5.0), torch.tensor([0, -1]))
    same_error(torch.take, x, torch.tensor([0, 12]))
    same_error(torch.take, x, torch.tensor([-13]))
    same_error(torch.take, x, torch.tensor([1.0]))
    same_error(torch.take, torch.empty(0), torch.tensor([0]))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    warnings.filterwarnings("ignore", "index_reduce")
    idx = torch.tensor([0, 2, 0, 1, 2])
    run_both(lambda s, i, src: s.index_reduce(1, i, src, reduce, include_self=include_self),
             torch.randn(3, 4), idx, torch.randn(3, 5))
    run_both(lambda s, i, src: s.index_reduce(0, i, src, reduce, include_self=include_self),
             torch.randint(-5, 5, (4, 2)), idx, torch.randint(-5, 5, (5, 2)))
    run_both(lambda s, i, src: s.clone().index_reduce_(0, i, src, reduce, include_self=include_self),
             torch.randn(4), idx.int(), torch.randn(5))


def test_index_reduce_errors():
    warnings.filterwarnings("ignore", "index_reduce")
    x = torch.randn(2, 3)
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0, 5]),
               torch.randn(2, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "sum"), x, torch.tensor([0, 1]),
               torch.randn(2, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0, 1]),
               torch.randn(3, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0.0, 1]),
               torch.randn(2, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0, 1]),
               torch.randn(2, 3).double())


# ---------------------------------------------------------------------- unpool


def test_max_unpool2d():
    x = torch.randn(2, 3, 6, 6)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    run_both(lambda o, i: F.max_unpool2d(o, i, 2), out, idx)
    run_both(lambda o, i: F.max_unpool2d(o, i, 2), out[0], idx[0])
    run_both(lambda o, i: F.max_unpool2d(o, i, 2, output_size=(7, 7)), out, idx)
    out, idx = F.max_pool2d(x, 3, stride=2, return_indices=True)
    run_both(lambda o, i: F.max_unpool2d(o, i, 3, stride=2, output_size=(6, 6)), out, idx)
    run_both(lambda o, i: F.max_unpool2d(o, i, 2), out[:0], idx[:0])


def test_max_unpool1d_3d():
    x = torch.randn(2, 3, 8)
    out, idx = F.max_pool1d(x, 2, return_indices=True)
    run_both(lambda o, i: F.max_unpool1d(o, i, 2), out, idx)
    x = torch.randn(1, 2, 4, 4, 4)
    out, idx = F.max_pool3d(x, 2, return_indices=True)
    run_both(lambda o, i: F.max_unpool3d(o, i, 2), out, idx)


def test_max_unpool_errors():
    x = torch.randn(1, 2, 2, 2)
    i = torch.tensor([[[[0, 1], [2, 3]], [[0, 1], [2, 9]]]])
    unpool2d = torch.ops.aten.max_unpool2d
    same_error(lambda a, b: unpool2d(a, b, [3, 3]), x, i)
    # One bad index only: CPU's kernel reports the last bad one its (parallel,
    # per-plane) loop meets, which is racy when several planes have one.
    neg = torch.tensor([[[[0, 1], [2, 3]], [[0, 1], [-2, 3]]]])
    same_error(lambda a, b: unpool2d(a, b, [3, 3]), x, neg)
    same_error(lambda a, b: unpool2d(a, b, [3, 3]), x, i.float())
    same_error(lambda a, b: unpool2d(a, b, [3, 3]), x, i[0])
    same_error(lambda a, b: unpool2d(a, b, [3]), x, i)
    unpool3d = torch.ops.aten.max_unpool3d
    same_error(lambda a, b: unpool3d(a, b, [1, 3, 3], [1, 1, 1], [0, 0, 0]), x[None], i[None])
    same_error(lambda a, b: unpool3d(a, b, [1, 3, 3], [0, 1, 1], [0, 0, 0]), x[None], i[None])


def test_max_unpool2d_backward():
    x = torch.randn(1, 2, 4, 4)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    oc = out.clone().requires_grad_()
    ot = out.to("tpu").requires_grad_()
    g = torch.randn(1, 2, 4, 4)
    F.max_unpool2d(oc, idx, 2).backward(g)
    with no_fallback():
        F.max_unpool2d(ot, idx.to("tpu"), 2).backward(g.to("tpu"))
    assert_close_cpu(ot.grad, oc.grad)


# ------------------------------------------------ norm, trace, logcumsumexp


def test_norm():
    x = torch.randn(4, 5)
    for p in [None, 1, 2, 3.5, INF, -INF, 0]:
        run_both(lambda t: torch.norm(t, p, dim=1), x)
        run_both(lambda t: torch.norm(t, p, dim=(0, 1), keepdim=True), x)
    run_both(lambda t: torch.norm(t), x)
    run_both(lambda t: torch.norm(t, "fro"), x)
    run_both(lambda t: torch.norm(t, 2, dim=0, dtype=torch.float64), x)
    run_both(lambda t: torch.norm(t, 2, dim=1), x.bfloat16())
    same_error(lambda t: torch.norm(t, 2, dim=0), torch.arange(4))


def test_trace():
    run_both(torch.trace, torch.randn(4, 5))
    run_both(torch.trace, torch.randn(5, 3).t())
    run_both(torch.trace, torch.randint(-5, 5, (3, 3)))
    run_both(torch.trace, torch.randint(-5, 5, (3, 3), dtype=torch.int32))
    run_both(torch.trace, torch.empty(0, 3))
    same_error(torch.trace, torch.randn(3))
    same_error(torch.trace, torch.ones(2, 2, dtype=torch.bool))


def test_logcumsumexp():
    x = torch.randn(5, 9) * 50
    x[1, 3] = -INF
    x[2, :] = -INF
    x[3, 4] = INF
    x[4, 2] = NAN
    run_both(lambda t: torch.logcumsumexp(t, 1), x)
    run_both(lambda t: torch.logcumsumexp(t, 0), x)
    run_both(lambda t: torch.logcumsumexp(t.t(), -1), x)
    run_both(lambda t: torch.logcumsumexp(t, 0), torch.tensor(3.0))
    run_both(lambda t: torch.logcumsumexp(t, 0), torch.empty(0))
    run_both(lambda t: torch.logcumsumexp(t, 1), x.bfloat16())
    same_error(lambda t: torch.logcumsumexp(t, 0), torch.arange(3))


# ------------------------------------------------------------- cummax, cummin


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_cummin(fn):
    x = torch.randint(-3, 4, (5, 9)).float()
    x[1, 3] = NAN
    x[1, 6] = NAN
    x[2, 0] = NAN
    run_both(lambda t: fn(t, 1), x)
    run_both(lambda t: fn(t, 0), x)
    run_both(lambda t: fn(t.t(), -1), x)
    run_both(lambda t: fn(t, 1), torch.randint(-3, 4, (4, 17)))
    run_both(lambda t: fn(t, 0), torch.rand(6, 3) > 0.5)
    run_both(lambda t: fn(t, 0), torch.tensor(3.0))
    run_both(lambda t: fn(t, 0), torch.empty(0))
    run_both(lambda t: fn(t, 1), x.bfloat16())
    same_error(lambda t: fn(t, 2), x)


# ------------------------------------------------------- orthogonal polynomials

POLYNOMIALS = [
    torch.special.chebyshev_polynomial_t, torch.special.chebyshev_polynomial_u,
    torch.special.chebyshev_polynomial_v, torch.special.chebyshev_polynomial_w,
    torch.special.shifted_chebyshev_polynomial_t, torch.special.shifted_chebyshev_polynomial_u,
    torch.special.shifted_chebyshev_polynomial_v, torch.special.shifted_chebyshev_polynomial_w,
    torch.special.hermite_polynomial_h, torch.special.hermite_polynomial_he,
    torch.special.laguerre_polynomial_l, torch.special.legendre_polynomial_p,
]


@pytest.mark.parametrize("fn", POLYNOMIALS)
def test_polynomials(fn):
    # No NaN: CPU's results for a NaN x are not reproducible (they vary with the
    # tensor's length).
    x = torch.cat([torch.rand(40) * 2 - 1, torch.randn(20) * 3,
                   torch.tensor([0.0, 1.0, -1.0, 0.5])])
    n = torch.randint(-2, 13, x.shape)
    run_both(fn, x, n)
    run_both(fn, x, n.float() + 0.5)  # degrees are truncated
    run_both(lambda t: fn(t, 3), x)
    run_both(lambda d: fn(0.25, d), n)
    run_both(fn, torch.randint(-2, 3, (4, 3)), torch.randint(0, 5, (3,)))
    run_both(fn, torch.empty(0), torch.empty(0))
    same_error(fn, x.bfloat16(), n)


# ------------------------------------------------ cross, renorm, gcd/lcm, factories


def test_linalg_cross():
    run_both(torch.linalg.cross, torch.randn(4, 3), torch.randn(4, 3))
    run_both(lambda a, b: torch.linalg.cross(a, b, dim=0), torch.randn(3, 1, 5), torch.randn(3, 4, 5))
    run_both(lambda a, b: torch.cross(a, b, dim=1), torch.randint(-3, 3, (2, 3)),
             torch.randint(-3, 3, (2, 3)))
    run_both(torch.linalg.cross, torch.randn(3, 4).t(), torch.randn(4, 3))
    same_error(torch.linalg.cross, torch.randn(2, 2), torch.randn(2, 2))
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(3))
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(4, 3))
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(2, 3).double())


def test_renorm():
    x = torch.randn(3, 4, 2) * 3
    run_both(lambda t: torch.renorm(t, 2, 0, 1.0), x)
    run_both(lambda t: torch.renorm(t, 1, 1, 2.0), x)
    run_both(lambda t: torch.renorm(t, float("inf"), -1, 0.5), x)
    run_both(lambda t: torch.renorm(t, 2, 0, 1.0), x.bfloat16())
    same_error(lambda t: torch.renorm(t, 2, 0, -1), x)
    same_error(lambda t: torch.renorm(t, 0, 0, 1), x)
    same_error(lambda t: torch.renorm(t, 2, 0, 1), torch.tensor(3.0))
    same_error(lambda t: torch.renorm(t, 2, 0, 1), torch.arange(4).reshape(2, 2))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_gcd_lcm(dtype):
    lo = 0 if dtype == torch.uint8 else -60
    a = torch.randint(lo, 60, (40,)).to(dtype)
    b = torch.randint(lo, 60, (40,)).to(dtype)
    a[0], b[0] = 0, 0
    run_both(torch.gcd, a, b)
    run_both(torch.lcm, a[:10], b[:10])
    run_both(torch.gcd, a.reshape(4, 10), b[:10])
    same_error(torch.gcd, torch.tensor([1.0]), torch.tensor([2.0]))


def test_gcd_large():
    run_both(torch.gcd, torch.tensor([2**62, 2**40 * 3, 6765]), torch.tensor([2**61, 2**35 * 9, 4181]))


def factory_both(fn):
    expected = fn("cpu")
    with no_fallback():
        actual = fn("tpu")
    assert_close_cpu(actual, expected)


@pytest.mark.parametrize("kw", [
    dict(start=0, end=3, steps=5, dtype=torch.int64),
    dict(start=-1.5, end=3.2, steps=7, base=2),
    dict(start=1, end=1, steps=1),
    dict(start=0, end=1, steps=0),
    dict(start=2.7, end=-3.3, steps=5, dtype=torch.int64, base=3.5),
    dict(start=0, end=2, steps=9, dtype=torch.float64),
])
def test_logspace(kw):
    factory_both(lambda d: torch.logspace(device=d, **kw))


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
def test_tri_indices(fn):
    for args in [(3, 3), (4, 5, 1), (5, 4, -2), (3, 3, 10), (3, 3, -10), (0, 4), (4, 0, 0)]:
        factory_both(lambda d: fn(*args, device=d))
    factory_both(lambda d: fn(4, 3, dtype=torch.int32, device=d))
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        fn(-1, 3, device="tpu")
    with pytest.raises(NotImplementedError):
        fn(3, 3, dtype=torch.float32, device="tpu")


# ------------------------------------ put, masked_scatter, repeat_interleave, bincount


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    run_both(lambda s, i, v: s.clone().put_(i, v, accumulate=accumulate), torch.randn(3, 4),
             torch.tensor([[0, -1], [5, 11]]), torch.randn(2, 2))
    run_both(lambda s, i, v: torch.put(s, i, v, accumulate=accumulate), torch.randn(3, 4),
             torch.tensor([1, 1, 1]), torch.tensor([1.0, 1.0, 1.0]))
    run_both(lambda s, i, v: torch.put(s, i, v, accumulate=accumulate), torch.randint(0, 5, (5,)),
             torch.tensor([0, 4]), torch.tensor([7, 8]))
    run_both(lambda s, i, v: torch.put(s, i, v, accumulate=accumulate), torch.randn(3),
             torch.empty(0, dtype=torch.int64), torch.empty(0))


def test_put_errors():
    x = torch.randn(3, 4)
    same_error(lambda s, i, v: s.put_(i, v), x, torch.tensor([0, 12]), torch.tensor([1.0, 2.0]))
    same_error(lambda s, i, v: s.put_(i, v), x, torch.tensor([0, 1, 2]), torch.tensor([1.0, 2.0]))
    same_error(lambda s, i, v: s.put_(i, v), x, torch.tensor([0, 1]), torch.tensor([1.0, 2.0]).double())


def test_masked_scatter():
    x = torch.randn(3, 4)
    m = torch.rand(3, 4) > 0.5
    run_both(lambda s, k, v: s.masked_scatter(k, v), x, m, torch.randn(12))
    run_both(lambda s, k, v: s.clone().masked_scatter_(k, v), x, m, torch.randn(20))
    run_both(lambda s, k, v: s.masked_scatter(k, v), x, torch.rand(4) > 0.5, torch.randn(4, 3))
    run_both(lambda s, k, v: s.masked_scatter(k, v), x[0], torch.rand(2, 4) > 0.5, torch.randn(8))
    run_both(lambda s, k, v: s.masked_scatter(k, v), x, torch.zeros(3, 4, dtype=torch.bool),
             torch.empty(0))
    run_both(lambda s, k, v: s.masked_scatter(k, v), torch.randint(0, 5, (6,)),
             torch.rand(6) > 0.5, torch.arange(6))
    same_error(lambda s, k, v: s.masked_scatter_(k, v), x, torch.ones(3, 4, dtype=torch.bool),
               torch.randn(5))
    same_error(lambda s, k, v: s.masked_scatter_(k, v), x, torch.ones(3, 4, dtype=torch.bool),
               torch.randn(12).double())


def test_repeat_interleave():
    run_both(torch.repeat_interleave, torch.tensor([2, 0, 3, 1]))
    run_both(torch.repeat_interleave, torch.tensor([2, 0, 3, 1], dtype=torch.int32))
    run_both(lambda r: torch.repeat_interleave(r, output_size=6), torch.tensor([2, 0, 3, 1]))
    run_both(lambda x, r: torch.repeat_interleave(x, r, dim=0), torch.randn(4, 2),
             torch.tensor([2, 0, 3, 1]))
    run_both(torch.repeat_interleave, torch.tensor([0, 0]))
    run_both(torch.repeat_interleave, torch.empty(0, dtype=torch.int64))
    same_error(torch.repeat_interleave, torch.tensor([2, -1]))
    same_error(torch.repeat_interleave, torch.tensor([2.0, 1.0]))
    same_error(torch.repeat_interleave, torch.tensor([[2, 1]]))


def test_bincount():
    x = torch.randint(0, 6, (20,))
    run_both(torch.bincount, x)
    run_both(lambda t: torch.bincount(t, minlength=10), x)
    run_both(lambda t, w: torch.bincount(t, w), x, torch.randn(20))
    run_both(lambda t, w: torch.bincount(t, w), x, torch.randn(20).double())
    run_both(lambda t, w: torch.bincount(t, w), x, torch.randint(0, 3, (20,)))
    run_both(lambda t: torch.bincount(t, minlength=3), torch.empty(0, dtype=torch.int64))
    run_both(torch.bincount, x.to(torch.uint8))
    same_error(torch.bincount, torch.tensor([0, -3, 3]))
    same_error(torch.bincount, torch.tensor([[0, 3]]))
    same_error(torch.bincount, torch.tensor([0.0, 3.0]))
    same_error(lambda t: torch.bincount(t, minlength=-1), torch.tensor([0, 3]))
    same_error(lambda t, w: torch.bincount(t, w), torch.tensor([0, 3]), torch.tensor([1.0]))


# ----------------------------------------------------------- prelu, channel_shuffle


def test_prelu():
    x = torch.randn(2, 3, 4)
    run_both(F.prelu, x, torch.tensor([0.25]))
    run_both(F.prelu, x, torch.rand(3))
    run_both(F.prelu, x.bfloat16(), torch.rand(3).bfloat16())
    xc = x.clone().requires_grad_()
    wc = torch.rand(3).requires_grad_()
    xt = x.to("tpu").requires_grad_()
    wt = wc.detach().to("tpu").requires_grad_()
    g = torch.randn(2, 3, 4)
    F.prelu(xc, wc).backward(g)
    with no_fallback():
        F.prelu(xt, wt).backward(g.to("tpu"))
    assert_close_cpu(xt.grad, xc.grad)
    assert_close_cpu(wt.grad, wc.grad)


def test_channel_shuffle():
    x = torch.randn(2, 6, 3, 2)
    run_both(lambda t: F.channel_shuffle(t, 3), x)
    run_both(lambda t: F.channel_shuffle(t, 2), x[:, :, 0])
    run_both(lambda t: F.channel_shuffle(t, 1), x)
    same_error(lambda t: F.channel_shuffle(t, 4), x)
    same_error(lambda t: F.channel_shuffle(t, 0), x)
    same_error(lambda t: F.channel_shuffle(t, 2), torch.randn(2, 4))


@pytest.mark.parametrize("a,b", [
    (torch.tensor([1, 2]), torch.tensor([1.0, 2.0])),  # promoted, as on CPU
    (torch.ones(2, 3), torch.ones(3, 2)),
    (torch.tensor([float("nan")]), torch.tensor([float("nan")])),
    (torch.ones(0), torch.ones(0)),
    (torch.arange(6.0).reshape(2, 3).t(), torch.arange(6.0).reshape(2, 3).t().contiguous()),
    (torch.tensor([True, False]), torch.tensor([True, True])),
])
def test_equal_matches_cpu(a, b):
    with no_fallback():
        assert torch.equal(a.to("tpu"), b.to("tpu")) == torch.equal(a, b)


def test_efficientzerotensor_and_sgn_backward():
    # Autograd's zero gradients (sgn of a real tensor) come from
    # _efficientzerotensor, a dense zero tensor on tpu.
    for dtype in (None, torch.int32):
        with no_fallback():
            zeros = torch._efficientzerotensor([2, 3], dtype=dtype, device="tpu")
        assert_close_cpu(zeros, torch._efficientzerotensor([2, 3], dtype=dtype))
    x = torch.randn(5)
    for dev in ("cpu", "tpu"):
        leaf = x.to(dev).detach().requires_grad_()
        with no_fallback():
            (torch.sgn(leaf) * leaf).sum().backward()
        if dev == "cpu":
            expected = leaf.grad
    assert_close_cpu(leaf.grad, expected)
