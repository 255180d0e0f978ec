"""Helpers shared by the op tests of tests/ops/ (conv, pool, resize, nn, ...): their
float32 tolerance TOL (for run_both) and an op's gradients on tpu against CPU
PyTorch with no CPU fallback."""

import torch

from _util import assert_close_cpu, no_fallback

# float32 results within 1e-5, relative for large values: run_both(fn, *inputs, **TOL).
TOL = dict(rtol=1e-5, atol=1e-5)


def grads_close(fn, *inputs, **tol):
    """fn's output and the gradients of every float input match CPU's, for the
    same random output gradient; forward and backward run with no fallback."""
    tol = tol or TOL
    cpu = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*cpu)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    tpu = [x.to("tpu").requires_grad_(x.is_floating_point()) for x in inputs]
    with no_fallback():
        out_t = fn(*tpu)
        out_t.backward(grad_out.to("tpu"))
    assert_close_cpu(out_t.detach(), out.detach(), **tol)
    for c, t in zip(cpu, tpu):
        if c.requires_grad:
            assert_close_cpu(t.grad, c.grad, **tol)


def make(shape, dtype=torch.float32):
    """A tensor of `shape`: randn for floating dtypes, integers in [-5, 5] otherwise."""
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    return torch.randint(-5, 6, shape, dtype=dtype)
