"""Depthwise convolutions (groups == input channels) on tpu against CPU PyTorch.

On the CPU plugin they are lowered as sums over the kernel taps
(csrc/aten/rules/nn/conv_depthwise.cc) instead of XLA's feature-grouped
convolution; TORCHTPU_CPU_DEPTHWISE_TAPS=0 keeps XLA's form. Both forms must
give CPU's values, layouts and gradients (input, weight, bias) with no CPU
fallback, in strict and fused mode, for 1-D, 2-D and 3-D, stride, padding,
dilation and channel multipliers above 1.
"""

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torchtpu
from _nn_util import TOL, grads_close
from _util import assert_close_cpu, no_fallback, run_both

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

# (input shape, channel multiplier, kernel, kwargs)
CASES = [
    ((2, 3, 11), 1, (3,), dict(padding=1)),
    ((2, 4, 13), 2, (5,), dict(stride=2, padding=2, dilation=2)),
    ((2, 4, 9, 9), 1, (3, 3), dict(padding=1)),
    ((2, 4, 9, 8), 1, (3, 3), dict(stride=2, padding=1)),
    ((1, 3, 10, 9), 3, (3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(2, 1))),
    ((2, 4, 7, 7), 1, (5, 5), dict(stride=2, padding=2)),  # efficientnet's k5/s2 block
    ((2, 3, 10, 10), 1, (2, 2), dict(stride=3)),  # stride leaves a remainder
    ((1, 2, 6, 6), 2, (3, 3), dict(stride=2, padding=4)),  # padding beyond the kernel
    ((1, 2, 8, 8), 1, (3, 3), dict(padding="same", dilation=2)),
    ((1, 2, 36, 36), 1, (3, 3), dict(padding=1)),  # a larger image
    ((1, 2, 5, 6, 5), 1, (3, 3, 3), dict(stride=2, padding=1)),
    ((1, 2, 4, 5, 4), 2, (2, 3, 2), dict(padding=(1, 0, 1), dilation=(1, 2, 1))),
]


def _args(in_shape, mult, kernel, bias):
    c = in_shape[1]
    x = torch.randn(in_shape)
    w = torch.randn((c * mult, 1) + kernel)
    return [x, w] + ([torch.randn(c * mult)] if bias else [])


def _fn(in_shape, kw):
    conv = CONV[len(in_shape) - 2]
    groups = in_shape[1]
    return lambda x, w, *b: conv(x, w, *b, groups=groups, **kw)


@pytest.fixture(params=["default", "xla"])
def form(request, monkeypatch):
    """Runs a test with the taps form (the CPU plugin's default) and with XLA's."""
    if request.param == "xla":
        monkeypatch.setenv("TORCHTPU_CPU_DEPTHWISE_TAPS", "0")
    return request.param


@pytest.mark.parametrize("in_shape,mult,kernel,kw", CASES)
def test_depthwise_forward_and_grads(in_shape, mult, kernel, kw, form):
    fn = _fn(in_shape, kw)
    run_both(fn, *_args(in_shape, mult, kernel, bias=False), **TOL)
    grads_close(fn, *_args(in_shape, mult, kernel, bias=True), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_depthwise_modes_equal(mode):
    """Strict and fused programs give the same values (fused: one program for
    forward, another for backward, with the taps inside)."""
    torchtpu.set_eager_mode(mode)
    try:
        fn = _fn((2, 6, 14, 14), dict(stride=2, padding=2))
        grads_close(fn, *_args((2, 6, 14, 14), 1, (5, 5), bias=True), rtol=1e-4, atol=1e-4)
    finally:
        torchtpu.set_eager_mode("strict")


def test_depthwise_channels_last():
    """A channels-last input gives a channels-last result, as on CPU, and the
    gradients keep CPU's layouts."""
    x = torch.randn(2, 8, 9, 9).to(memory_format=torch.channels_last)
    w = torch.randn(8, 1, 3, 3)
    b = torch.randn(8)
    expected = F.conv2d(x, w, b, padding=1, groups=8)
    with no_fallback():
        actual = F.conv2d(x.to("tpu"), w.to("tpu"), b.to("tpu"), padding=1, groups=8)
    assert_close_cpu(actual, expected, rtol=1e-5, atol=1e-5)
    assert actual.stride() == expected.stride()
    grads_close(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=8), x, w, b,
                rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_depthwise_dtypes(dtype):
    """Half types accumulate in float32 as CPU's kernels; float64 stays exact."""
    tol = dict(rtol=1e-7, atol=1e-7) if dtype == torch.float64 else dict(rtol=2e-2, atol=2e-2)
    x, w, b = (t.to(dtype) for t in _args((2, 4, 8, 8), 2, (3, 3), bias=True))
    fn = _fn((2, 4, 8, 8), dict(padding=1, stride=2))
    run_both(fn, x, w, b, **tol)
    grads_close(fn, x, w, b, **tol)


def test_depthwise_module_and_no_input_grad():
    """nn.Conv2d with groups == channels (weights only need gradients, as in
    a frozen-input fine-tune) matches CPU."""
    torch.manual_seed(1)
    m = torch.nn.Conv2d(6, 12, 3, padding=1, groups=6)
    x = torch.randn(2, 6, 10, 10)
    m(x).sum().backward()
    mt = torch.nn.Conv2d(6, 12, 3, padding=1, groups=6).to("tpu")
    mt.load_state_dict(m.state_dict())
    with no_fallback():
        mt(x.to("tpu")).sum().backward()
    assert_close_cpu(mt.weight.grad, m.weight.grad, rtol=1e-4, atol=1e-4)
    assert_close_cpu(mt.bias.grad, m.bias.grad, rtol=1e-4, atol=1e-4)


def test_depthwise_under_torch_compile():
    """A compiled graph (torch.compile(backend="tpu")) lowers the same rule:
    forward and gradients match CPU's eager results."""
    conv = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4)
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    conv(x).square().sum().backward()
    ct = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4).to("tpu")
    ct.load_state_dict(conv.state_dict())
    xt = x.detach().to("tpu").requires_grad_()
    torch._dynamo.reset()  # this test's graph compiles here
    try:
        with no_fallback():
            torch.compile(lambda m, v: m(v).square().sum(), backend="tpu")(ct, xt).backward()
    finally:
        torch._dynamo.reset()
    assert_close_cpu(xt.grad, x.grad, rtol=1e-4, atol=1e-4)
    assert_close_cpu(ct.weight.grad, conv.weight.grad, rtol=1e-4, atol=1e-4)
    assert_close_cpu(ct.bias.grad, conv.bias.grad, rtol=1e-4, atol=1e-4)
