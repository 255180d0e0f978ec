"""Convolutions (1-3 dimensions, transposed, non-contiguous inputs) on tpu
compared with CPU PyTorch: values, dtype and shape with no CPU fallback,
gradients, and the CPU kernels' errors (depthwise: test_conv_depthwise.py)."""

import pytest
import torch
import torch.nn.functional as F

from _nn_util import TOL, grads_close, make
from _util import run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


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


# (input shape, weight shape [C_in, O/groups, k...], kwargs)
TRANSPOSED = [
    ((2, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 6), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), groups=2, dilation=(1, 2))),
    ((1, 2, 4, 4), (2, 3, 3, 3), dict(stride=2, output_padding=2, dilation=3)),
]


@pytest.mark.parametrize("in_shape,w_shape,kw", CONVS)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(in_shape, w_shape, kw, bias):
    b = [torch.randn(w_shape[0])] if bias else []
    run_both(lambda x, w, *b: F.conv2d(x, w, *b, **kw), make(in_shape), make(w_shape), *b, **TOL)


@pytest.mark.parametrize("in_shape,w_shape,kw", CONVS)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_grad(in_shape, w_shape, kw, bias):
    b = [torch.randn(w_shape[0])] if bias else []
    grads_close(lambda x, w, *b: F.conv2d(x, w, *b, **kw), make(in_shape), make(w_shape), *b)


def test_conv_1d_3d_and_non_contiguous():
    run_both(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), make((2, 4, 9)),
             make((6, 4, 3)), make((6,)), **TOL)
    run_both(lambda x, w: F.conv3d(x, w, stride=2, padding=1, groups=2), make((2, 4, 5, 6, 5)),
             make((6, 2, 3, 3, 3)), **TOL)
    run_both(lambda x, w: F.conv2d(x.transpose(2, 3), w[:, ::2], padding=1), make((2, 4, 8, 9)),
             make((6, 8, 3, 3)), **TOL)
    run_both(lambda x, w: F.conv2d(x, w, padding=1),
             make((2, 4, 9, 9)).to(memory_format=torch.channels_last), make((3, 4, 3, 3)), **TOL)
    run_both(lambda x, w: F.conv2d(x, w, padding="same", dilation=2), make((1, 2, 8, 8)),
             make((3, 2, 3, 3)), **TOL)
    run_both(lambda x, w: F.conv2d(x, w), make((0, 4, 8, 8)), make((3, 4, 3, 3)), **TOL)
    run_both(
        lambda x, w: F.conv2d(x, w),
        make((2, 4, 8, 8), torch.int64),
        make((3, 4, 3, 3), torch.int64),
        **TOL,
    )
    grads_close(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), make((2, 4, 9)),
                make((6, 4, 3)), make((6,)))
    grads_close(lambda x, w: F.conv3d(x, w, stride=2, padding=1, groups=2), make((2, 4, 5, 6, 5)),
                make((6, 2, 3, 3, 3)))


@pytest.mark.parametrize("in_shape,w_shape,kw", TRANSPOSED)
def test_conv_transpose(in_shape, w_shape, kw):
    b = make((w_shape[1] * kw.get("groups", 1),))
    run_both(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), make(in_shape), make(w_shape), b,
             **TOL)
    grads_close(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), make(in_shape), make(w_shape), b)


def test_conv_transpose_1d():
    run_both(
        lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1),
        make((2, 4, 7)),
        make((4, 3, 3)),
        **TOL,
    )
    grads_close(lambda x, w: F.conv_transpose1d(x, w, stride=2), make((2, 4, 7)), make((4, 3, 3)))


def test_conv_errors():
    x = make((1, 4, 8, 8))
    same_error(F.conv2d, x, make((3, 3, 3, 3)))
    same_error(F.conv2d, x, make((3, 4, 3, 3)).double())
    same_error(F.conv2d, x, make((3, 4, 3, 3)), make((3,)).double())
    same_error(F.conv2d, x, make((3, 4, 9, 9)))
    same_error(lambda x, w: F.conv2d(x, w, groups=2), x, make((3, 2, 3, 3)))
    same_error(
        lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2), x, make((4, 3, 3, 3))
    )
    same_error(lambda x, w: F.conv_transpose1d(x, w, stride=2, output_padding=2), make((1, 4, 4)),
               make((4, 3, 3)))
    same_error(F.conv2d, x.bool(), make((3, 4, 3, 3)).bool())
