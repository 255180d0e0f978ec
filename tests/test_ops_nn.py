"""Matrix products, convolution and pooling on tpu compared with CPU PyTorch:
values, dtype and shape with no CPU fallback, gradients for F.linear, conv,
max/avg/adaptive pooling, and the CPU kernels' error messages."""

import pytest
import torch
import torch.nn.functional as F

from _nn_util import TOL, close, grads_close
from _util import assert_close_cpu, no_fallback, same_error


def make(shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    return torch.randint(-5, 6, shape, dtype=dtype)


# ------------------------------------------------------------------ matrix products

MM_SHAPES = [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((0, 4), (4, 5)), ((3, 0), (0, 5)),
             ((3, 4), (4, 0))]


@pytest.mark.parametrize("shapes", MM_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_mm(shapes, dtype):
    a, b = make(shapes[0], dtype), make(shapes[1], dtype)
    close(torch.mm, a, b)
    close(lambda x, y: x @ y, a, b)


def test_mm_non_contiguous_and_dtypes():
    a, b = torch.randn(4, 3), torch.randn(5, 4)
    close(lambda x, y: torch.mm(x.t(), y.t()), a, b)
    close(lambda x, y: torch.mm(x[::2], y[:, 1:].t()), torch.randn(6, 3), torch.randn(5, 4))
    close(torch.mm, a.t().double(), b.t().double())
    close(torch.mm, a.t().int(), b.t().int())
    close(torch.mm, a.t().bfloat16(), b.t().bfloat16(), rtol=1e-2, atol=1e-2)
    close(torch.mm, torch.full((2, 3), 2**40), torch.full((3, 2), 3))  # exact in int64


def test_mm_out_and_in_place():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    out = torch.empty(0, device="tpu")
    with no_fallback():
        torch.mm(a.to("tpu"), b.to("tpu"), out=out)
    assert_close_cpu(out, a @ b, **TOL)
    s = torch.randn(3, 7)
    s_t = s.to("tpu")
    s[:, 2:].addmm_(a, b, beta=0.5, alpha=2)
    with no_fallback():
        s_t[:, 2:].addmm_(a.to("tpu"), b.to("tpu"), beta=0.5, alpha=2)
    assert_close_cpu(s_t, s, **TOL)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (False, 3)])
def test_addmm(beta, alpha):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    for self in [torch.randn(5), torch.randn(3, 5), torch.randn(1, 1), torch.tensor(2.0)]:
        close(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha), self, a, b)
    close(lambda s, x, y: torch.addmm(s, x.t(), y, beta=beta, alpha=alpha),
          torch.randn(5), torch.randn(4, 3), b)
    close(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha),
          torch.randint(-5, 5, (5,)), a.long(), b.long())


def test_addmm_beta_zero_ignores_nan():
    nan = torch.full((3, 5), float("nan"))
    close(lambda s, x, y: torch.addmm(s, x, y, beta=0), nan, torch.randn(3, 4), torch.randn(4, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_bmm_family(dtype):
    b1, b2 = make((2, 3, 4), dtype), make((2, 4, 5), dtype)
    close(torch.bmm, b1, b2)
    close(lambda x, y: torch.bmm(x.transpose(1, 2), y), make((2, 4, 3), dtype), b2)
    close(torch.bmm, make((0, 3, 4), dtype), make((0, 4, 5), dtype))
    close(torch.bmm, make((2, 3, 0), dtype), make((2, 0, 5), dtype))
    close(lambda s, x, y: torch.baddbmm(s, x, y, beta=2, alpha=3), make((3, 5), dtype), b1, b2)
    close(lambda s, x, y: torch.baddbmm(s, x, y, beta=0), make((2, 3, 5), dtype), b1, b2)
    close(lambda s, x, y: torch.addbmm(s, x, y, beta=2, alpha=3), make((3, 5), dtype), b1, b2)
    close(lambda s, x, y: torch.addbmm(s, x, y, beta=2), make((5,), dtype),
          make((0, 3, 4), dtype), make((0, 4, 5), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_vector_products(dtype):
    m, v = make((3, 4), dtype), make((4,), dtype)
    close(torch.mv, m, v)
    close(lambda x, y: torch.mv(x.t(), y), make((4, 3), dtype), v)
    close(torch.mv, make((0, 4), dtype), v)
    close(torch.mv, make((3, 0), dtype), make((0,), dtype))
    close(lambda s, x, y: torch.addmv(s, x, y, beta=2, alpha=3), make((3,), dtype), m, v)
    close(lambda s, x, y: torch.addmv(s, x, y), make((1,), dtype), m, v)
    close(lambda s, x, y: torch.addmv(s, x, y), make((), dtype), m, v)
    close(torch.dot, v, make((4,), dtype))
    close(torch.dot, make((0,), dtype), make((0,), dtype))
    close(lambda x, y: torch.dot(x[::2], y), make((8,), dtype), v)
    close(torch.vdot, v, make((4,), dtype))
    close(lambda s, x, y: torch.addr(s, x, y, beta=2, alpha=3), make((3, 4), dtype),
          make((3,), dtype), v)
    close(torch.outer, make((3,), dtype), v)


def test_addr_bool_and_promotion():
    close(torch.addr, torch.rand(3, 4) > 0.5, torch.rand(3) > 0.5, torch.rand(4) > 0.5)
    close(lambda s, x, y: torch.addr(s, x, y, beta=False), torch.rand(3, 4) > 0.5,
          torch.rand(3) > 0.5, torch.rand(4) > 0.5)
    close(torch.addr, torch.randint(0, 5, (3, 4)), torch.randn(3), torch.randn(4))


def test_matmul_and_linear_decompositions():
    close(torch.matmul, torch.randn(4), torch.randn(4, 5))
    close(torch.matmul, torch.randn(3, 4), torch.randn(4))
    close(torch.matmul, torch.randn(2, 1, 3, 4), torch.randn(5, 4, 2))
    close(lambda a, b: torch.einsum("bij,bjk->bik", a, b), torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    close(F.linear, torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(5))
    close(F.linear, torch.randn(3, 4), torch.randn(5, 4))


def test_matrix_product_errors():
    a = torch.randn(2, 3)
    tpu_a, tpu_b = a.to("tpu"), torch.randn(4, 5, device="tpu")
    message = r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)$"
    with pytest.raises(RuntimeError, match=message):
        torch.mm(tpu_a, tpu_b)
    same_error(torch.mm, a, torch.randn(4, 5))
    same_error(torch.mm, a, torch.randn(3))
    same_error(torch.mm, torch.randn(3), a)
    same_error(torch.mm, a, torch.randn(3, 4).long())
    same_error(torch.mm, a.bool(), torch.ones(3, 4).bool())
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(2, 4, 5))
    same_error(torch.bmm, torch.randn(2, 3), torch.randn(3, 3, 5))
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(2, 3, 5).long())
    same_error(torch.addmm, torch.randn(3), a, torch.randn(3, 4))
    same_error(torch.addmm, torch.randn(4), a, torch.randn(4, 4))
    same_error(torch.addmm, torch.randn(4), a, torch.randn(3))
    same_error(torch.addmm, torch.randn(4).long(), a, torch.randn(3, 4))
    same_error(torch.addmm, torch.randn(4), a.double(), torch.randn(3, 4))
    same_error(torch.baddbmm, torch.randn(3), torch.randn(2, 2, 3), torch.randn(2, 3, 4))
    same_error(torch.baddbmm, torch.randn(2, 2, 4).long(), torch.randn(2, 2, 3), torch.randn(2, 3, 4))
    same_error(torch.baddbmm, torch.randn(2, 2, 4), torch.randn(2, 2, 3), torch.randn(2, 3, 4).long())
    same_error(torch.addbmm, torch.randn(2, 4), torch.randn(2, 2, 3), torch.randn(2, 4, 4))
    same_error(torch.addbmm, torch.randn(2, 4), torch.randn(2, 2, 3), torch.randn(3, 3, 4))
    same_error(torch.addmv, torch.randn(2), a, torch.randn(4))
    same_error(torch.addmv, torch.randn(2), a, torch.randn(3, 1))
    same_error(torch.addmv, torch.randn(2).long(), a, torch.randn(3))
    same_error(torch.mv, a, torch.randn(3).long())
    same_error(torch.mv, torch.randn(3), torch.randn(3))
    same_error(torch.dot, torch.randn(3), torch.randn(4))
    same_error(torch.dot, torch.randn(3, 1), torch.randn(4))
    same_error(torch.dot, torch.randn(3), torch.randn(3).long())
    same_error(torch.dot, torch.ones(3).bool(), torch.ones(3).bool())
    same_error(torch.addr, torch.randn(3, 4), torch.randn(3, 1), torch.randn(4))
    same_error(lambda s, x, y: torch.addr(s, x, y, beta=0.5), torch.ones(3, 4).long(),
               torch.ones(3).long(), torch.ones(4).long())


@pytest.mark.parametrize("bias", [True, False])
def test_linear_grad(bias):
    b = torch.randn(5) if bias else None
    grads_close(F.linear, torch.randn(3, 4), torch.randn(5, 4), *([b] if bias else []))
    grads_close(F.linear, torch.randn(2, 3, 4), torch.randn(5, 4), *([b] if bias else []))


def test_matrix_product_grads():
    grads_close(torch.mm, torch.randn(3, 4), torch.randn(4, 5))
    grads_close(torch.bmm, torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    grads_close(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2), torch.randn(5),
                torch.randn(3, 4), torch.randn(4, 5))
    grads_close(lambda s, x, y: torch.baddbmm(s, x, y, beta=0.5, alpha=2), torch.randn(3, 5),
                torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    grads_close(torch.mv, torch.randn(3, 4), torch.randn(4))
    grads_close(torch.dot, torch.randn(4), torch.randn(4))


# ---------------------------------------------------------------------- convolution

# (input shape, weight shape, kwargs); weight [O, C/groups, k...].
CONVS = [
    ((2, 4, 9, 9), (6, 4, 3, 3), {}),
    ((2, 4, 9, 9), (6, 4, 3, 3), dict(stride=2, padding=1)),
    ((2, 4, 9, 8), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(2, 1), groups=2)),
    ((1, 4, 7, 7), (4, 1, 3, 3), dict(padding=1, groups=4)),  # depthwise
    ((2, 3, 10, 10), (5, 3, 2, 2), dict(stride=3)),  # stride leaves a remainder
    ((2, 3, 6, 6), (5, 3, 3, 3), dict(stride=2, padding=4)),  # padding beyond the kernel
    ((1, 2, 5, 5), (3, 2, 1, 1), {}),
]


@pytest.mark.parametrize("in_shape,w_shape,kw", CONVS)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(in_shape, w_shape, kw, bias):
    b = [torch.randn(w_shape[0])] if bias else []
    close(lambda x, w, *b: F.conv2d(x, w, *b, **kw), make(in_shape), make(w_shape), *b)


@pytest.mark.parametrize("in_shape,w_shape,kw", CONVS)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_grad(in_shape, w_shape, kw, bias):
    b = [torch.randn(w_shape[0])] if bias else []
    grads_close(lambda x, w, *b: F.conv2d(x, w, *b, **kw), make(in_shape), make(w_shape), *b)


def test_conv_1d_3d_and_non_contiguous():
    close(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), make((2, 4, 9)), make((6, 4, 3)),
          make((6,)))
    close(lambda x, w: F.conv3d(x, w, stride=2, padding=1, groups=2), make((2, 4, 5, 6, 5)),
          make((6, 2, 3, 3, 3)))
    close(lambda x, w: F.conv2d(x.transpose(2, 3), w[:, ::2], padding=1), make((2, 4, 8, 9)),
          make((6, 8, 3, 3)))
    close(lambda x, w: F.conv2d(x, w, padding=1),
          make((2, 4, 9, 9)).to(memory_format=torch.channels_last), make((3, 4, 3, 3)))
    close(lambda x, w: F.conv2d(x, w, padding="same", dilation=2), make((1, 2, 8, 8)),
          make((3, 2, 3, 3)))
    close(lambda x, w: F.conv2d(x, w), make((0, 4, 8, 8)), make((3, 4, 3, 3)))
    close(lambda x, w: F.conv2d(x, w), make((2, 4, 8, 8), torch.int64), make((3, 4, 3, 3), torch.int64))
    grads_close(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), make((2, 4, 9)),
                make((6, 4, 3)), make((6,)))
    grads_close(lambda x, w: F.conv3d(x, w, stride=2, padding=1, groups=2), make((2, 4, 5, 6, 5)),
                make((6, 2, 3, 3, 3)))


# (input shape, weight shape [C_in, O/groups, k...], kwargs)
TRANSPOSED = [
    ((2, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 6), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), groups=2, dilation=(1, 2))),
    ((1, 2, 4, 4), (2, 3, 3, 3), dict(stride=2, output_padding=2, dilation=3)),
]


@pytest.mark.parametrize("in_shape,w_shape,kw", TRANSPOSED)
def test_conv_transpose(in_shape, w_shape, kw):
    b = make((w_shape[1] * kw.get("groups", 1),))
    close(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), make(in_shape), make(w_shape), b)
    grads_close(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), make(in_shape), make(w_shape), b)


def test_conv_transpose_1d():
    close(lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1), make((2, 4, 7)), make((4, 3, 3)))
    grads_close(lambda x, w: F.conv_transpose1d(x, w, stride=2), make((2, 4, 7)), make((4, 3, 3)))


def test_conv_errors():
    x = make((1, 4, 8, 8))
    same_error(F.conv2d, x, make((3, 3, 3, 3)))
    same_error(F.conv2d, x, make((3, 4, 3, 3)).double())
    same_error(F.conv2d, x, make((3, 4, 3, 3)), make((3,)).double())
    same_error(F.conv2d, x, make((3, 4, 9, 9)))
    same_error(lambda x, w: F.conv2d(x, w, groups=2), x, make((3, 2, 3, 3)))
    same_error(lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2), x, make((4, 3, 3, 3)))
    same_error(lambda x, w: F.conv_transpose1d(x, w, stride=2, output_padding=2), make((1, 4, 4)),
               make((4, 3, 3)))
    same_error(F.conv2d, x.bool(), make((3, 4, 3, 3)).bool())


# -------------------------------------------------------------------------- pooling

# (input shape, kernel, stride, padding, dilation, ceil_mode)
MAX_POOLS = [
    ((2, 3, 8, 8), 2, None, 0, 1, False),
    ((2, 3, 9, 9), 3, 2, 1, 1, False),
    ((2, 3, 9, 9), 3, 2, 1, 1, True),
    ((1, 2, 10, 9), (3, 2), (2, 1), (1, 0), (2, 1), True),
    ((3, 7, 7), 2, 2, 1, 1, True),  # unbatched
    ((0, 3, 8, 8), 2, 2, 0, 1, False),  # empty batch
]


@pytest.mark.parametrize("shape,k,s,p,d,ceil", MAX_POOLS)
def test_max_pool2d(shape, k, s, p, d, ceil):
    def fn(x):
        return F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)

    close(fn, make(shape))
    close(fn, make(shape, torch.int64))
    close(lambda x: F.max_pool2d(x.transpose(-1, -2), k, s, p, d, ceil_mode=ceil), make(shape))
    grads_close(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil), make(shape))


def test_max_pool2d_picks_like_cpu():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[[[nan, 1.0, nan, 0.0], [2.0, -inf, 3.0, 3.0], [-inf, -inf, 5.0, 5.0],
                        [-inf, -inf, 5.0, 1.0]]]])
    close(lambda t: F.max_pool2d(t, 2, 1, return_indices=True), x)
    close(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), torch.full((1, 1, 4, 4), -inf))
    close(lambda t: F.max_pool2d(t, 2, return_indices=True), torch.ones(1, 2, 4, 4))  # ties: first
    close(lambda t: F.max_pool1d(t, 3, 2, 1, return_indices=True), make((2, 3, 8)))
    close(lambda t: F.max_pool2d(t, 3, 2, 1), make((2, 4, 9, 9)).to(memory_format=torch.channels_last))
    close(lambda t: F.max_pool2d(t, 2), make((1, 2, 6, 6)).bfloat16())


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


@pytest.mark.parametrize("shape,k,s,p,ceil,incl,div", AVG_POOLS)
def test_avg_pool2d(shape, k, s, p, ceil, incl, div):
    def fn(x):
        return F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=incl, divisor_override=div)

    close(fn, make(shape))
    close(fn, torch.randint(0, 100, shape))
    close(lambda x: fn(x.transpose(-1, -2)), make(shape))
    grads_close(fn, make(shape))


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 8), (4, 4)), ((2, 3, 8, 8), (3, 5)),
                                       ((1, 2, 7, 9), (7, 2)), ((3, 5, 5), (2, 3)),
                                       ((2, 3, 6, 6), (1, 1)), ((2, 3, 4, 4), (6, 6)),
                                       ((0, 3, 6, 6), (2, 2))])
def test_adaptive_avg_pool2d(shape, out):
    close(lambda x: F.adaptive_avg_pool2d(x, out), make(shape))
    close(lambda x: F.adaptive_avg_pool2d(x.transpose(-1, -2), out), make(shape))
    grads_close(lambda x: F.adaptive_avg_pool2d(x, out), make(shape))


def test_pool_16_bit_floats():
    x = make((2, 3, 9, 9)).bfloat16()
    tol = dict(rtol=1e-2, atol=1e-2)
    close(lambda t: F.avg_pool2d(t, 3, 2, 1), x, **tol)
    close(lambda t: F.adaptive_avg_pool2d(t, (4, 5)), x.half(), **tol)


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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_products_round_once(dtype):
    # Found by the OpInfo sweep: CPU accumulates half-precision products (and the
    # bias of addmm) in float32 and rounds once; so must we.
    torch.manual_seed(0)
    a, w, b = torch.randn(8, 3), torch.randn(4, 3), torch.randn(4)
    a, w, b = a.to(dtype), w.to(dtype), b.to(dtype)
    expected = torch.nn.functional.linear(a, w, b)
    with no_fallback():
        out = torch.nn.functional.linear(a.to("tpu"), w.to("tpu"), b.to("tpu"))
    assert_close_cpu(out, expected, rtol=0, atol=0)
    x, y = torch.randn(2, 5, 7).to(dtype), torch.randn(2, 7, 3).to(dtype)
    assert_close_cpu(torch.bmm(x.to("tpu"), y.to("tpu")), torch.bmm(x, y), rtol=0, atol=0)


@pytest.mark.parametrize("shape,padding,mode", [
    ((1, 2, 5), (2, 1), "reflect"), ((1, 2, 5), (2, -1), "reflect"), ((2, 5), (0, 3), "replicate"),
    ((2, 3, 4, 5), (1, 2, 3, 1), "replicate"), ((2, 3, 4, 5), (1, 2, 3, 1), "reflect"),
    ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2), "reflect"), ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2), "replicate"),
    ((0, 2, 5), (1, 1), "reflect"), ((1, 2, 5), (-4, 1), "replicate"),
])
def test_reflection_and_replication_pad(shape, padding, mode):
    x = torch.randn(shape)
    with no_fallback():
        got = F.pad(x.to("tpu"), padding, mode=mode).cpu()
    torch.testing.assert_close(got, F.pad(x, padding, mode=mode))


def test_pad_errors_match_cpu():
    same_error(lambda x: F.pad(x, (3, 3), mode="reflect"), torch.randn(1, 2, 3))
    same_error(lambda x: F.pad(x, (-4, 1), mode="replicate"), torch.randn(1, 2, 3))
    same_error(lambda x: F.pad(x, (1, 1), mode="reflect"), torch.randn(2, 0, 3))
    same_error(lambda x: F.pad(x, (1, 1), mode="replicate"), torch.randn(2, 3, 0))


@pytest.mark.parametrize("shape,kwargs", [
    ((1, 2, 5), dict(size=7)), ((1, 2, 5), dict(size=10)), ((1, 2, 5), dict(scale_factor=1.7)),
    ((2, 3, 4, 5), dict(size=(9, 3))), ((2, 3, 4, 5), dict(scale_factor=(2.0, 0.5))),
    ((1, 2, 3, 4, 5), dict(size=(5, 5, 2))), ((1, 1, 7), dict(size=3)), ((0, 2, 4, 4), dict(size=(8, 8))),
])
def test_upsample_nearest(shape, kwargs):
    x = torch.randn(shape)
    with no_fallback():
        got = F.interpolate(x.to("tpu"), mode="nearest", **kwargs).cpu()
    torch.testing.assert_close(got, F.interpolate(x, mode="nearest", **kwargs), rtol=0, atol=0)


def test_upsample_nearest_errors_match_cpu():
    same_error(lambda x: torch.ops.aten.upsample_nearest1d(x, [0]), torch.randn(1, 2, 3))
    same_error(lambda x: torch.ops.aten.upsample_nearest1d(x, [2, 2]), torch.randn(1, 2, 3))
    same_error(lambda x: torch.ops.aten.upsample_nearest1d(x, [4]), torch.randn(2, 3))
    same_error(lambda x: torch.ops.aten.upsample_nearest2d(x, [4, 4]), torch.randn(1, 2, 0, 3))


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_backward(affine):
    w, b = (torch.randn(6), torch.randn(6)) if affine else (None, None)
    for shape in ((2, 6, 5, 3), (3, 6), (1, 6, 7)):
        if affine:
            grads_close(lambda x, w, b: F.group_norm(x, 3, w, b), torch.randn(shape), w, b)
        else:
            grads_close(lambda x: F.group_norm(x, 2), torch.randn(shape))


@pytest.mark.parametrize("layout", ["channels_last", "permuted", "strided"])
def test_group_norm_any_layout(layout):
    # ATen's composite forward starts with input.view(...), which raised for
    # these; CPU's kernel takes any layout and keeps a channels_last input's.
    x = torch.randn(2, 8, 6, 5)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    elif layout == "permuted":
        x = x.permute(0, 1, 3, 2)
    else:
        x = torch.randn(2, 8, 6, 10)[..., ::2]
    w, b = torch.randn(8), torch.randn(8)
    grads_close(lambda x, w, b: F.group_norm(x, 4, w, b), x, w, b)
    out = F.group_norm(x.to("tpu"), 4, w.to("tpu"), b.to("tpu"))
    assert out.stride() == F.group_norm(x, 4, w, b).stride()
    assert_close_cpu(out.view(2, -1) if out.is_contiguous() else out.reshape(2, -1),
                     F.group_norm(x, 4, w, b).reshape(2, -1))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_weight_norm(dim):
    v = torch.randn(5, 3, 4)
    g_shape = [1, 1, 1]
    if dim != -1:
        g_shape[dim] = v.shape[dim]
    g = torch.rand(g_shape) + 0.5
    grads_close(lambda v, g: torch._weight_norm(v, g, dim), v, g)
    # The fused op itself (dims 0 and last): its norms equal CPU's.
    if dim in (0, -1):
        d = 0 if dim == 0 else v.dim() - 1
        gd = torch.rand([v.shape[0], 1, 1] if d == 0 else [1, 1, v.shape[2]])
        with no_fallback():
            got = torch._weight_norm_interface(v.to("tpu"), gd.to("tpu"), d)
        assert_close_cpu(got, torch._weight_norm_interface(v, gd, d))


def test_unfold_backward():
    # Overlapping (step < size), disjoint, gapped (step > size) windows, and a
    # window as long as the dim.
    for dim, size, step in ((1, 3, 2), (1, 3, 3), (0, 2, 3), (1, 9, 1), (-1, 1, 4)):
        grads_close(lambda x: x.unfold(dim, size, step), torch.randn(7, 9))
    grads_close(lambda x: x.unfold(0, 1, 1), torch.randn(()))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag(mode, padding_idx, last):
    # An empty bag (offsets 4, 4), repeated indices, padding; output and the
    # weight's (and per-sample weights') gradients equal CPU's, no fallback.
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offsets = torch.tensor([0, 4, 4, 7, 9] if last else [0, 4, 4, 7])
    weight = torch.randn(10, 3)
    psw = torch.rand(9) if mode == "sum" else None

    def bag(w, p=None):
        return F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode=mode,
                               padding_idx=padding_idx, include_last_offset=last,
                               per_sample_weights=p)
    grads_close(bag, weight)
    if psw is not None:
        grads_close(bag, weight, psw)


def test_embedding_bag_scale_grad_by_freq():
    # Each row's gradient divided by its index's count, as CUDA's kernel does.
    # (CPU's kernel divides row 2's by 3 here, the count of another index.)
    w = torch.ones(5, 1, device="tpu", requires_grad=True)
    idx, offsets = torch.tensor([1, 1, 1, 2], device="tpu"), torch.tensor([0, 2], device="tpu")
    with no_fallback():
        F.embedding_bag(idx, w, offsets, mode="sum", scale_grad_by_freq=True).sum().backward()
    assert w.grad.cpu().flatten().tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    module = torch.nn.EmbeddingBag(10, 3, mode="mean").to("tpu")
    with no_fallback():
        assert module(torch.tensor([[1, 2], [3, 4]], device="tpu")).shape == (2, 3)


@pytest.mark.parametrize("targets_2d", [True, False])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss(targets_2d, zero_infinity, reduction):
    # Sample 1 has no target, sample 2 an impossible alignment (5 labels in 4
    # steps: an infinite loss, zeroed with zero_infinity, and its gradient).
    T, N, C = 12, 4, 6
    log_probs = torch.randn(T, N, C).log_softmax(2)
    target_lengths = torch.tensor([3, 0, 5, 2])
    input_lengths = torch.tensor([12, 7, 4, 3])
    padded = torch.randint(1, C, (N, 5))
    targets = padded if targets_2d else torch.cat([padded[i, :target_lengths[i]]
                                                   for i in range(N)])

    def loss(lp):
        d = lp.device
        return F.ctc_loss(lp, targets.to(d), input_lengths.to(d), target_lengths.to(d),
                          reduction=reduction, zero_infinity=zero_infinity)
    grads_close(loss, log_probs)
