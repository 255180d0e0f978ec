"""Cases from PyTorch's test_linalg.py (device-generic TestLinalg) that failed
on tpu and passed on CPU, reduced to a few lines and compared with CPU PyTorch
(docs/pytorch-suites.md)."""

import pytest
import torch

from _util import no_fallback, same_error

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md


# test_linalg_lstsq_input_checks: a vector right-hand side whose length does not
# match names other.size(-1), as on CPU; other with two dims fewer than input is
# refused, not taken as a vector.
@pytest.mark.parametrize("a_shape,b_shape", [
    ((2, 3), (3,)),          # vector: "should match other.size(-1)"
    ((2, 4, 3), (2, 5)),     # batched vector shape mismatch: a matrix, "other.size(-2)"
    ((2, 4, 3), (1, 4)),     # not input.shape[:-1]: a matrix, "other.size(-2)"
    ((2, 4, 3), (4,)),       # two dims fewer: refused
    ((4, 3), (2, 4, 2)),     # more dims than input: refused
])
def test_lstsq_shape_checks_as_cpu(a_shape, b_shape):
    a, b = torch.rand(*a_shape), torch.rand(*b_shape)
    with no_fallback():
        same_error(torch.linalg.lstsq, a, b)


@pytest.mark.parametrize("a_shape,b_shape", [((4, 3), (4,)), ((2, 4, 3), (2, 4)),
                                             ((2, 4, 3), (2, 4, 2)), ((1, 4, 3), (2, 4, 2))])
def test_lstsq_accepted_shapes_as_cpu(a_shape, b_shape):
    a = torch.randn(*a_shape) + torch.eye(a_shape[-2], a_shape[-1])
    b = torch.randn(*b_shape)
    expected = torch.linalg.lstsq(a, b).solution
    with no_fallback():
        actual = torch.linalg.lstsq(a.to("tpu"), b.to("tpu")).solution
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-4)


# test_householder_product_errors_and_warnings: a tau of another dtype is refused
# with CPU's message (householder_product's and ormqr's differ on CPU).
@pytest.mark.parametrize("fn", [
    lambda r, tau: torch.linalg.householder_product(r, tau.to(torch.int)),
    lambda r, tau: torch.linalg.householder_product(r, tau.to(torch.int), out=torch.empty_like(r)),
    lambda r, tau: torch.orgqr(r, tau.double()),
    lambda r, tau: torch.ormqr(r, tau.double(), r),
    lambda r, tau: torch.ormqr(r, tau, r.double()),
])
def test_householder_dtype_checks_as_cpu(fn):
    with no_fallback():
        same_error(fn, torch.randn(3, 3), torch.randn(3))


# test_ormqr_errors_and_warnings: ormqr's shape checks in CPU's order and
# words. A tau whose batch dims differ from input's raised nothing at the
# call: its program failed to compile in the background and the error
# surfaced at the next test's sync.
@pytest.mark.parametrize("shapes,left", [
    (((10, 6), (20,), (10, 6)), True),         # tau.shape[-1] != min(...)
    (((6, 6), (2,), (5, 5)), True),            # other.shape[-2] checked first
    (((6, 6), (2,), (6, 5)), False),           # other.shape[-1] when left=False
    (((2, 6, 6), (7,), (2, 6, 6)), True),      # tau's length before its ndim
    (((2, 6, 6), (2, 6), (6, 6)), True),       # other's ndim
    (((1, 2, 2), (2, 2), (1, 2, 2)), True),    # tau's batch dims
    (((1, 2, 2), (1, 2), (2, 2, 2)), True),    # other's batch dims
    (((3, 1, 2, 2), (3, 2, 2), (3, 1, 2, 2)), True),
])
def test_ormqr_shape_checks_as_cpu(shapes, left):
    a, tau, c = (torch.randn(*s) for s in shapes)
    with no_fallback():
        same_error(lambda x, t, y: torch.ormqr(x, t, y, left=left), a, tau, c)
