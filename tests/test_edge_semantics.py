"""PyTorch's semantics at the edges (issue 10): exact special-function values,
size-0 products and softmax on dtypes CPU only accepts when empty, complex
randn, and NotImplementedError for dtypes an op has no kernel for.

CPU PyTorch is the spec: each test compares with it, and checks that no
CPU-fallback ran where the op is lowered.
"""

import math

import pytest
import torch

from _util import assert_close_cpu, no_fallback


def outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001
        return None, e


SPECIAL_POINTS = [1.0, 2.0, 0.0, -0.0, -1.0, -2.0, 0.5, 3.0, 1e-8, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_lgamma_exact_at_one_and_two(dtype):
    x = torch.tensor(SPECIAL_POINTS, dtype=dtype)
    with no_fallback():
        got = torch.lgamma(x.to("tpu")).cpu()
    assert got[0].item() == 0.0 and got[1].item() == 0.0
    torch.testing.assert_close(got, torch.lgamma(x), equal_nan=True, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_digamma_values_and_poles(dtype):
    x = torch.tensor(SPECIAL_POINTS, dtype=dtype)
    with no_fallback():
        got = torch.digamma(x.to("tpu")).cpu()
    want = torch.digamma(x)
    # digamma(0) = -inf, digamma(-0.0) = +inf, NaN at the negative integers and -inf.
    assert got[2].item() == -math.inf and got[3].item() == math.inf
    assert math.isnan(got[4].item()) and math.isnan(got[5].item())
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)
    # digamma of lgamma(1) is digamma(0) exactly.
    with no_fallback():
        y = torch.digamma(torch.lgamma(torch.ones(3, dtype=dtype, device="tpu"))).cpu()
    assert torch.equal(y, torch.full((3,), -math.inf, dtype=dtype))

