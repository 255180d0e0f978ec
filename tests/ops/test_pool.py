"""Pooling on tpu compared with CPU PyTorch: max/avg pooling in 1-3 dimensions,
adaptive and fractional max pooling, max_unpool; values, dtype, shape and the
picked indices with no CPU fallback, gradients, and the CPU kernels' errors.

max_unpool reads an index range on the host (a sync, as on CUDA)."""



import pytest
import torch
import torch.nn.functional as F

from _nn_util import TOL, grads_close, make
from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


# (input shape, kernel, stride, padding, dilation, ceil_mode)
MAX_POOLS = [
    ((2, 3, 8, 8), 2, None, 0, 1, False),
    ((2, 3, 9, 9), 3, 2, 1, 1, False),
    ((2, 3, 9, 9), 3, 2, 1, 1, True),
    ((1, 2, 10, 9), (3, 2), (2, 1), (1, 0), (2, 1), True),
    ((3, 7, 7), 2, 2, 1, 1, True),  # unbatched
    ((0, 3, 8, 8), 2, 2, 0, 1, False),  # empty batch
]


# (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_POOLS = [
    ((2, 3, 8, 8), 2, None, 0, False, True, None),
    ((2, 3, 9, 9), 3, 2, 1, False, True, None),
    ((2, 3, 9, 9), 3, 2, 1, True, False, None),
    ((2, 3, 5, 5), 2, 2, 1, True, True, None),  # last window starts in the padding
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 1), True, False, 3),
    ((3, 7, 7), 2, 2, 1, False, True, None),  # unbatched
    ((0, 3, 8, 8), 2, 2, 0, False, True, None),  # empty batch
]


A = torch.ops.aten


@pytest.mark.parametrize("shape,k,s,p,d,ceil", MAX_POOLS)
def test_max_pool2d(shape, k, s, p, d, ceil):
    def fn(x):
        return F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)

    run_both(fn, make(shape), **TOL)
    run_both(fn, make(shape, torch.int64), **TOL)
    run_both(lambda x: F.max_pool2d(x.transpose(-1, -2), k, s, p, d, ceil_mode=ceil), make(shape),
             **TOL)
    grads_close(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil), make(shape))


def test_max_pool2d_picks_like_cpu():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[[[nan, 1.0, nan, 0.0], [2.0, -inf, 3.0, 3.0], [-inf, -inf, 5.0, 5.0],
                        [-inf, -inf, 5.0, 1.0]]]])
    run_both(lambda t: F.max_pool2d(t, 2, 1, return_indices=True), x, **TOL)
    run_both(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True),
             torch.full((1, 1, 4, 4), -inf), **TOL)
    run_both(lambda t: F.max_pool2d(t, 2, return_indices=True), torch.ones(1, 2, 4, 4),
             **TOL)  # ties: first
    run_both(lambda t: F.max_pool1d(t, 3, 2, 1, return_indices=True), make((2, 3, 8)), **TOL)
    run_both(
        lambda t: F.max_pool2d(t, 3, 2, 1),
        make((2, 4, 9, 9)).to(memory_format=torch.channels_last),
        **TOL,
    )
    run_both(lambda t: F.max_pool2d(t, 2), make((1, 2, 6, 6)).bfloat16(), **TOL)


@pytest.mark.parametrize("shape,k,s,p,ceil,incl,div", AVG_POOLS)
def test_avg_pool2d(shape, k, s, p, ceil, incl, div):
    def fn(x):
        return F.avg_pool2d(
            x, k, s, p, ceil_mode=ceil, count_include_pad=incl, divisor_override=div
        )

    run_both(fn, make(shape), **TOL)
    run_both(fn, torch.randint(0, 100, shape), **TOL)
    run_both(lambda x: fn(x.transpose(-1, -2)), make(shape), **TOL)
    grads_close(fn, make(shape))


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 8), (4, 4)), ((2, 3, 8, 8), (3, 5)),
                                       ((1, 2, 7, 9), (7, 2)), ((3, 5, 5), (2, 3)),
                                       ((2, 3, 6, 6), (1, 1)), ((2, 3, 4, 4), (6, 6)),
                                       ((0, 3, 6, 6), (2, 2))])
def test_adaptive_avg_pool2d(shape, out):
    run_both(lambda x: F.adaptive_avg_pool2d(x, out), make(shape), **TOL)
    run_both(lambda x: F.adaptive_avg_pool2d(x.transpose(-1, -2), out), make(shape), **TOL)
    grads_close(lambda x: F.adaptive_avg_pool2d(x, out), make(shape))


def test_pool_16_bit_floats():
    x = make((2, 3, 9, 9)).bfloat16()
    tol = dict(rtol=1e-2, atol=1e-2)
    run_both(lambda t: F.avg_pool2d(t, 3, 2, 1), x, **tol)
    run_both(lambda t: F.adaptive_avg_pool2d(t, (4, 5)), x.half(), **tol)


def test_pool_errors():
    x = make((1, 4, 8, 8))
    same_error(lambda t: F.max_pool2d(t, 3, padding=2), x)
    same_error(lambda t: F.max_pool2d(t, 0), x)
    same_error(lambda t: F.max_pool2d(t, 20), x)
    same_error(lambda t: F.max_pool2d(t, 2), make((8, 8)))
    same_error(lambda t: F.max_pool2d(t, 2), make((2, 0, 8, 8)))
    same_error(lambda t: F.max_pool2d(t, 2), x.bool())
    same_error(lambda t: F.avg_pool2d(t, 3, padding=2), x)
    same_error(lambda t: F.avg_pool2d(t, 20), x)
    same_error(lambda t: F.avg_pool2d(t, 2, divisor_override=0), x)
    same_error(lambda t: F.avg_pool2d(t, 2), x.int())
    same_error(lambda t: F.avg_pool2d(t, 2), make((8, 8)))
    same_error(lambda t: F.adaptive_avg_pool2d(t, (2, 2, 2)), x)
    same_error(lambda t: F.adaptive_avg_pool2d(t, (2, 2)), make((1, 2, 0, 8)))
    same_error(lambda t: F.adaptive_avg_pool2d(t, (2, 2)), x.long())
    same_error(lambda t: F.adaptive_avg_pool2d(t, (-1, 2)), x)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
        dict(kernel_size=2, dilation=(2, 1, 1)),
    ],
)
def test_max_pool3d(kw):
    x = torch.randn(2, 3, 6, 5, 7)
    grads_close(lambda t: F.max_pool3d(t, **kw), x)
    run_both(lambda t: F.max_pool3d(t, return_indices=True, **kw), x, **TOL)
    run_both(lambda t: F.max_pool3d(t, return_indices=True, **kw), x[0], **TOL)  # batch-less
    # Ties and -inf: the first maximum wins, as on CPU.
    run_both(
        lambda t: F.max_pool3d(t, return_indices=True, **kw),
        torch.randint(0, 3, (1, 2, 6, 5, 7)).float(),
        **TOL,
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        dict(kernel_size=2, divisor_override=3),
    ],
)
def test_avg_pool3d(kw):
    x = torch.randn(2, 3, 6, 5, 7)
    grads_close(lambda t: F.avg_pool3d(t, **kw), x)
    grads_close(lambda t: F.avg_pool3d(t, **kw), x[1])
    run_both(lambda t: F.avg_pool3d(t, **kw), torch.randn(2, 7, 6, 5, 3).transpose(1, 4), **TOL)


def test_pool3d_dtypes_and_errors():
    run_both(lambda t: F.max_pool3d(t, 2), torch.randint(-9, 9, (1, 2, 4, 4, 4)), **TOL)
    run_both(lambda t: F.avg_pool3d(t, 2), torch.randint(-9, 9, (1, 2, 4, 4, 4)), **TOL)
    same_error(lambda t: F.max_pool3d(t, 2), torch.randn(4, 4, 4))
    same_error(lambda t: F.max_pool3d(t, 5), torch.randn(1, 2, 4, 4, 4))
    same_error(lambda t: F.max_pool3d(t, 2, padding=2), torch.randn(1, 2, 4, 4, 4))
    same_error(lambda t: F.avg_pool3d(t, 2), torch.randn(4, 4, 4))
    same_error(lambda t: F.avg_pool3d(t, 2, divisor_override=0), torch.randn(1, 4, 4, 4))
    same_error(
        lambda t: A.max_pool3d_with_indices(t, [2, 2], [], [0], [1], False), torch.randn(1, 4, 4, 4)
    )
    same_error(lambda t: A.avg_pool3d(t, [2, 2]), torch.randn(1, 4, 4, 4))


@pytest.mark.parametrize("out", [(3, 2), (1, 1), (4, 5), (7, 3), (2, None)])
def test_adaptive_max_pool2d(out):
    x = torch.randn(2, 3, 7, 5)
    grads_close(lambda t: F.adaptive_max_pool2d(t, out), x)
    run_both(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x[0], **TOL)
    run_both(
        lambda t: F.adaptive_max_pool2d(t, out, return_indices=True),
        torch.randint(0, 2, (1, 2, 7, 5)).float(),
        **TOL,
    )


def test_adaptive_max_pool1d_3d():
    grads_close(lambda t: F.adaptive_max_pool1d(t, 3), torch.randn(2, 3, 8))
    grads_close(lambda t: F.adaptive_max_pool1d(t, 5), torch.randn(3, 7))
    x = torch.randn(2, 2, 5, 6, 7)
    for out in [(2, 3, 4), (5, 1, 7), (1, 1, 1)]:
        grads_close(lambda t: F.adaptive_max_pool3d(t, out), x)
        run_both(lambda t: F.adaptive_max_pool3d(t, out, return_indices=True), x[1], **TOL)
    nan = torch.randn(1, 1, 4, 4)
    nan[0, 0, 1, 2] = float("nan")
    run_both(lambda t: F.adaptive_max_pool2d(t, 2, return_indices=True), nan, **TOL)


def test_adaptive_max_pool_picks_cpus_first_maximum_and_last_nan():
    # CPU scans a window in order and takes `val > max || isnan(val)`: the
    # first of equal maxima, the last of several NaNs; windows overlap when
    # the sizes do not divide (13 -> 5, 5 -> 7) and are whole for a global pool.
    ties = torch.randint(0, 3, (2, 3, 13, 5)).float()
    nans = torch.randn(2, 3, 13, 5)
    nans[torch.rand(nans.shape) < 0.3] = float("nan")
    for x in (ties, nans):
        for out in [(5, 7), (1, 1), (13, 5)]:
            run_both(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x, **TOL)
    volume = nans[:, :, :, :4].reshape(2, 3, 13, 2, 2)
    run_both(lambda t: F.adaptive_max_pool3d(t, 1, return_indices=True), volume, **TOL)


def test_adaptive_avg_pool3d():
    x = torch.randn(2, 3, 5, 6, 7)
    for out in [(2, 3, 4), (5, 6, 7), (1, 1, 1), (3, 4, 7)]:
        grads_close(lambda t: F.adaptive_avg_pool3d(t, out), x)
        grads_close(lambda t: F.adaptive_avg_pool3d(t, out), x[0])
    run_both(lambda t: F.adaptive_avg_pool3d(t, 2), torch.randn(1, 7, 5, 6, 3).transpose(1, 4),
             **TOL)


def test_adaptive_pool_errors():
    same_error(lambda t: F.adaptive_max_pool2d(t, 2), torch.randn(4, 4))
    same_error(lambda t: F.adaptive_max_pool2d(t, 2), torch.randn(3, 0, 4))
    same_error(lambda t: F.adaptive_max_pool2d(t, 2), torch.ones(1, 3, 4, 4, dtype=torch.long))
    same_error(lambda t: F.adaptive_max_pool3d(t, 2), torch.ones(1, 3, 4, 4, 4, dtype=torch.long))
    same_error(lambda t: F.adaptive_avg_pool3d(t, 2), torch.randn(4, 4))
    same_error(
        lambda t: A._adaptive_avg_pool3d(t, [2, 2, 2]), torch.ones(1, 3, 4, 4, 4, dtype=torch.long)
    )
    same_error(lambda t: A.adaptive_max_pool2d(t, [2]), torch.randn(3, 4, 4))


@pytest.mark.parametrize("k", [2, 3])
def test_fractional_max_pool(k):
    torch.manual_seed(0)
    fn = F.fractional_max_pool2d if k == 2 else F.fractional_max_pool3d
    shape = (2, 3, 9, 8) if k == 2 else (2, 2, 7, 8, 7)
    x = torch.randn(shape)
    for kernel, out in [
        (2, 4),
        (3, (5,) * k if k == 2 else (4, 5, 4)),
        ((2,) * (k - 1) + (1,), (3,) * k),
        (1, 1),
    ]:
        samples = torch.rand(2, shape[1], k)
        grads_close(
            lambda t: fn(t, kernel, output_size=out, _random_samples=samples.to(t.device)), x
        )
        run_both(
            lambda t: fn(
                t,
                kernel,
                output_size=out,
                return_indices=True,
                _random_samples=samples[:1].to(t.device),
            ),
            x[0],
            **TOL,
        )
    # Ties pick the first maximum, as on CPU.
    samples = torch.rand(1, 2, k)
    run_both(
        lambda t: fn(
            t, 2, output_size=3, return_indices=True, _random_samples=samples.to(t.device)
        ),
        torch.randint(0, 2, (1, 2) + shape[2:]).float(),
        **TOL,
    )
    # Random samples drawn on tpu: shapes and dtypes (the values follow tpu's generator).
    with no_fallback():
        y, i = fn(x.to("tpu"), 2, output_size=3, return_indices=True)
    assert y.shape == (2, shape[1]) + (3,) * k and i.dtype == torch.int64


def test_fractional_max_pool_errors():
    s = torch.rand(1, 2, 2)
    same_error(
        lambda t, r: A.fractional_max_pool2d(t, [4, 2], [3, 3], r), torch.ones(1, 2, 5, 5), s
    )
    same_error(lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r), torch.ones(5, 5), s)
    same_error(
        lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r),
        torch.ones(1, 2, 5, 5),
        s.double(),
    )
    same_error(
        lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r), torch.ones(1, 2, 5, 5), s[0]
    )
    same_error(
        lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r),
        torch.ones(1, 2, 5, 5).long(),
        s.long(),
    )
    same_error(
        lambda t, r: A.fractional_max_pool3d(t, [4, 2, 2], [3, 3, 3], r),
        torch.ones(1, 2, 5, 5, 5),
        torch.rand(1, 2, 3),
    )
    same_error(
        lambda t, r: A.fractional_max_pool3d(t, [3, 3, 3], [5, 4, 4], r),
        torch.ones(1, 2, 7, 7, 7),
        torch.rand(1, 2, 3),
    )


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
