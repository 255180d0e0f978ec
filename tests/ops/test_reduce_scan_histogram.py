"""The legacy norm/trace/renorm reductions, scans (logcumsumexp, cummax, cummin),
bincount, histograms (histc, histogram) and segment_reduce on tpu compared with
CPU PyTorch: values, dtype and shape with no CPU fallback, and CPU's errors."""

import pytest
import torch

from _nn_util import TOL, grads_close
from _util import INF, NAN, assert_close_cpu, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


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


def test_histc():
    x = torch.randn(50)
    run_both(lambda t: torch.histc(t), x, **TOL)
    run_both(lambda t: torch.histc(t, bins=7, min=-1, max=1), x, **TOL)
    run_both(
        lambda t: torch.histc(t, bins=4, min=-1, max=1),
        torch.tensor([-1.0, 1.0, 0.0, 2.0, float("nan"), 0.5]),
        **TOL,
    )
    run_both(lambda t: torch.histc(t, bins=5), torch.ones(4), **TOL)
    run_both(lambda t: torch.histc(t, bins=5), torch.randn(3, 4)[:, ::2], **TOL)
    run_both(lambda t: torch.histc(t, bins=3), torch.randn(0), **TOL)
    same_error(lambda t: torch.histc(t, bins=0), torch.ones(3))
    same_error(lambda t: torch.histc(t, min=2, max=1), torch.ones(3))
    same_error(lambda t: torch.histc(t), torch.tensor([1.0, float("inf")]))
    # Integers: CPU refuses them; tpu counts them as CUDA does (int64
    # arithmetic, counts in the input's dtype), here equal to the float counts.
    with pytest.raises(NotImplementedError):  # CPU and CUDA refuse bool (messages differ)
        torch.histc(torch.ones(3, dtype=torch.bool, device="tpu"))
    for dtype in (torch.int32, torch.int64, torch.uint8):
        x = torch.randint(0, 100, (500,), dtype=dtype)
        for bins, lo, hi in ((7, 0, 99), (16, 10, 60), (4, 0, 0)):
            with no_fallback():
                got = torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi)
            assert got.dtype == dtype
            assert (
                got.cpu().tolist()
                == torch.histc(x.float(), bins=bins, min=lo, max=hi).long().tolist()
            )


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    x = torch.randn(6)
    x[2] = x[3]  # a tie in a segment
    for initial in [None, 2.0]:
        kw = {} if initial is None else dict(initial=initial)
        lengths = torch.tensor([2, 0, 3, 1])
        grads_close(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, **kw), x, lengths)
        offsets = torch.tensor([0, 2, 2, 5, 6])
        grads_close(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, **kw), x, offsets)
        x2 = torch.randn(3, 5, 2)
        l2 = torch.tensor([[2, 0, 3], [1, 1, 3], [0, 5, 0]])
        grads_close(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, axis=1, **kw), x2, l2)
    z = torch.tensor([1.0, 0.0, 2.0, 0.0, 3.0, 4.0])  # zeros in prod's gradient
    grads_close(lambda d, n: torch.segment_reduce(d, reduce, lengths=n), z, torch.tensor([2, 2, 2]))


def test_segment_reduce_errors():
    x = torch.randn(5)
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n), x, torch.tensor([2, 0, 2]))
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n), x, torch.tensor([2, -1, 4]))
    same_error(lambda d, n: torch.segment_reduce(d, "foo", lengths=n), x, torch.tensor([2, 0, 3]))
    same_error(lambda d: torch.segment_reduce(d, "max"), x)
    same_error(
        lambda d, n: torch.segment_reduce(d, "max", lengths=n), x.long(), torch.tensor([2, 0, 3])
    )
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n, axis=1), torch.randn(2, 5),
               torch.tensor([2, 0, 3]))


def test_histogram():
    x = torch.randn(40)
    w = torch.rand(40)
    for kw in [
        dict(bins=5),
        dict(bins=7, range=(-1.0, 1.5)),
        dict(bins=4, weight=w),
        dict(bins=6, density=True),
        dict(bins=3, range=(-2.0, 2.0), weight=w, density=True),
    ]:
        expected = torch.histogram(x, **kw)
        kw_tpu = {k: (v.to("tpu") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        with no_fallback():
            actual = torch.histogram(x.to("tpu"), **kw_tpu)
        assert_close_cpu(tuple(actual), tuple(expected))
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.0, 1.0, 3.0])
    run_both(lambda t, b: torch.histogram(t, bins=b), x, edges, **TOL)
    run_both(lambda t, b: torch.histogram(t, bins=b, density=True), x, edges[:3], **TOL)
    run_both(lambda t: torch.histogram(t, bins=4), torch.ones(3), **TOL)
    run_both(lambda t: torch.histogram(t, bins=4), torch.empty(0), **TOL)
    run_both(lambda t: torch.histogram(t, bins=3), torch.randn(3, 4)[:, ::2], **TOL)
    same_error(lambda t: torch.histogram(t, bins=0), torch.ones(3))
    same_error(lambda t: torch.histogram(t, bins=4, range=(2.0, 1.0)), torch.ones(3))
    same_error(lambda t: torch.histogram(t, bins=4), torch.tensor([1.0, float("nan")]))
    same_error(lambda t: torch.histogram(t, bins=3), torch.ones(3).long())
    same_error(lambda t, b: torch.histogram(t, bins=b), torch.ones(3), torch.tensor([[0.0, 1.0]]))
