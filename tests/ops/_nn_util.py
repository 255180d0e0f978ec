"""Helpers shared by the op tests of tests/ops/ (conv, pool, resize, nn, ...): their
float32 tolerance TOL (for run_both) and an op's gradients on tpu against CPU
PyTorch with no CPU fallback."""

import torch

from _util import grads_match

# float32 results within 1e-5, relative for large values: run_both(fn, *inputs, **TOL).
TOL = dict(rtol=1e-5, atol=1e-5)


def grads_close(fn, *inputs, **tol):
    """:func:`_util.grads_match` over every floating input, at :data:`TOL`
    unless tolerances are given."""
    tol = tol or TOL
    floats = tuple(i for i, x in enumerate(inputs) if x.is_floating_point())
    grads_match(fn, *inputs, grad_of=floats, **tol)


def make(shape, dtype=torch.float32):
    """A tensor of `shape`: randn for floating dtypes, integers in [-5, 5] otherwise."""
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    return torch.randint(-5, 6, shape, dtype=dtype)
