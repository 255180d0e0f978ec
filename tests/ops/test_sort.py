"""Sorting-based ops on tpu compared with CPU PyTorch (values, dtype, shape) with no
CPU fallback: sort / argsort / msort, topk, kthvalue, median / nanmedian, mode,
and the sorted-search ops searchsorted, bucketize and isin.

Indices are compared exactly where CPU's order is specified (sort is stable on
CPU; values are distinct for topk/kthvalue/median, whose CPU kernels leave the
index among equal values unspecified)."""

import pytest
import torch

from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

SHAPES = [(), (0,), (3, 0), (7,), (4, 5), (2, 3, 4)]
NAN = float("nan")


def distinct(shape, dtype=torch.float32):
    """Values without ties (a permutation), so every index is specified."""
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n) - n // 2).reshape(shape).to(dtype)


def with_ties(shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(-3, 4, shape).to(dtype)


# ------------------------------------------------------------------------- sort


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_ties(shape, dtype, descending):
    x = with_ties(shape, dtype)
    dims = [-1, 0] if len(shape) >= 1 else [0]
    for d in dims:
        run_both(lambda t: torch.sort(t, dim=d, descending=descending), x)
        run_both(lambda t: torch.sort(t, dim=d, descending=descending, stable=True), x)
        if dtype != torch.bool:
            run_both(lambda t: torch.argsort(t, dim=d, descending=descending), x)


def test_sort_nan_views_and_msort():
    x = torch.randn(5, 6)
    x[1, 2] = NAN
    x[3, 0] = NAN
    x[2, 2] = float("-inf")
    run_both(lambda t: torch.sort(t, 1), x)
    run_both(lambda t: torch.sort(t, 0, descending=True), x)
    run_both(lambda t: torch.sort(t.t(), 1), x)
    run_both(lambda t: torch.sort(t[::2, 1::2], -1), x)
    run_both(torch.msort, x)


def test_sort_out_and_errors():
    x = torch.randn(4, 5)
    values = torch.empty(0, device="tpu")
    indices = torch.empty(0, dtype=torch.int64, device="tpu")
    with no_fallback():
        torch.sort(x.to("tpu"), 1, out=(values, indices))
    assert_close_cpu((values, indices), tuple(torch.sort(x, 1)))
    same_error(lambda t: torch.sort(t, 2), x)
    same_error(lambda t: torch.sort(t, 1), torch.tensor(1.0))


def test_sort_backward():
    x = torch.randn(4, 5)
    xc = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    g = torch.randn(4, 5)
    torch.sort(xc, 1)[0].backward(g)
    torch.sort(xt, 1)[0].backward(g.to("tpu"))
    assert_close_cpu(xt.grad, xc.grad)


# ---------------------------------------------------------------- topk, kthvalue


@pytest.mark.parametrize("shape", [(7,), (4, 6), (2, 5, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(shape, dtype, largest):
    x = distinct(shape, dtype)
    for k in [0, 1, shape[-1]]:
        run_both(lambda t: torch.topk(t, k, largest=largest), x)
    run_both(lambda t: torch.topk(t, 1, dim=0, largest=largest), x)


def test_topk_nan_0d_and_errors():
    x = distinct((3, 6))
    x[1, 1] = NAN
    run_both(lambda t: torch.topk(t, 2, 1), x)
    run_both(lambda t: torch.topk(t, 1), torch.tensor(2.0))
    run_both(lambda t: torch.topk(t, 0), torch.tensor(2.0))
    same_error(lambda t: torch.topk(t, 7, 1), x)
    same_error(lambda t: torch.topk(t, -1, 1), x)
    same_error(lambda t: torch.topk(t, 2, 2), x)
    same_error(lambda t: torch.topk(t, 1), torch.tensor([True, False]))


@pytest.mark.parametrize("shape", [(), (7,), (4, 6), (2, 5, 3)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(shape, keepdim):
    x = distinct(shape)
    n = shape[-1] if shape else 1
    for k in {1, (n + 1) // 2, n}:
        run_both(lambda t: torch.kthvalue(t, k, keepdim=keepdim), x)
    n0 = shape[0] if shape else 1
    for k in {1, n0}:
        run_both(lambda t: torch.kthvalue(t.to(torch.int64), k, 0, keepdim=keepdim), x)


def test_kthvalue_errors():
    x = distinct((3, 4))
    same_error(lambda t: torch.kthvalue(t, 5, 1), x)
    same_error(lambda t: torch.kthvalue(t, 0, 1), x)
    same_error(lambda t: torch.kthvalue(t, 1), torch.empty(0))


# -------------------------------------------------------------- median, nanmedian


@pytest.mark.parametrize("shape", [(), (7,), (4, 6), (2, 5, 3)])
@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
def test_median(shape, op):
    x = distinct(shape)
    run_both(op, x)
    run_both(op, x.to(torch.int64))
    if shape:
        run_both(lambda t: op(t, 0), x)
        run_both(lambda t: op(t, -1, keepdim=True), x)


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
def test_median_nan(op):
    x = distinct((4, 6))
    x[0, 3] = NAN
    x[2, 1:] = NAN  # CPU's index for an all-NaN row of nanmedian is unspecified
    x[3, 1] = NAN
    x[3, 4] = NAN
    run_both(lambda t: op(t, 1), x)
    run_both(lambda t: op(t, 0), x)
    run_both(op, x)
    run_both(op, x[1])


def test_median_empty_and_errors():
    run_both(torch.median, torch.empty(0))
    run_both(torch.nanmedian, torch.empty(0))
    run_both(lambda t: torch.median(t, 0), torch.empty(3, 0))
    same_error(lambda t: torch.median(t, 1), torch.empty(3, 0))
    same_error(torch.median, torch.tensor([True, False]))


# ------------------------------------------------------------------------- mode


@pytest.mark.parametrize("shape", [(), (9,), (5, 9), (3, 4, 5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_mode(shape, dtype):
    x = with_ties(shape, dtype)
    run_both(torch.mode, x)
    if shape:
        run_both(lambda t: torch.mode(t, 0, keepdim=True), x)


def test_mode_errors():
    same_error(lambda t: torch.mode(t, 1), torch.empty(3, 0))
    same_error(lambda t: torch.mode(t, 2), torch.randn(3, 2))


# ------------------------------------------------------ searchsorted, bucketize, isin


def test_searchsorted_and_bucketize():
    b = torch.tensor([-1.0, 0.0, 0.5, 0.5, 2.0])
    v = torch.randn(3, 4)
    v[0, 0] = NAN
    v[1, 1] = 0.5
    for right in [False, True]:
        run_both(lambda s, x: torch.searchsorted(s, x, right=right), b, v)
        run_both(lambda x, s: torch.bucketize(x, s, right=right), v, b)
        run_both(lambda x, s: torch.bucketize(x, s, right=right, out_int32=True), v, b)
    run_both(lambda s, x: torch.searchsorted(s, x, side="right"), b, v.to(torch.int64))
    run_both(lambda s: torch.searchsorted(s, 0.5), b)
    seq = torch.sort(torch.randn(3, 6))[0]
    run_both(lambda s, x: torch.searchsorted(s, x), seq, v)
    perm = torch.randperm(5)
    run_both(lambda s, x, o: torch.searchsorted(s, x, sorter=o), b[perm], v, torch.argsort(b[perm]))
    run_both(lambda s, x: torch.searchsorted(s, x), torch.empty(0), v)


def test_searchsorted_errors():
    b = torch.tensor([1.0, 2.0])
    v = torch.tensor([1.5])
    same_error(lambda s, x: torch.searchsorted(s, x, side="mid"), b, v)
    same_error(lambda s, x: torch.searchsorted(s, x, side="left", right=True), b, v)
    same_error(lambda s, x: torch.searchsorted(s, x), torch.tensor([[1.0, 2.0]]), v)
    same_error(lambda x, s: torch.bucketize(x, s), v, torch.tensor([[1.0, 2.0]]))


@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert):
    e = torch.randint(0, 8, (4, 5))
    run_both(lambda a, b: torch.isin(a, b, invert=invert), e, torch.tensor([1, 3, 5]))
    run_both(lambda a, b: torch.isin(a, b, invert=invert), e.float(), torch.tensor([1, 3]))
    run_both(lambda a: torch.isin(a, 3, invert=invert), e)
    run_both(lambda b: torch.isin(3, b, invert=invert), e)
    run_both(lambda a, b: torch.isin(a, b, invert=invert), e, torch.empty(0, dtype=torch.int64))
    x = torch.tensor([NAN, 1.0])
    run_both(lambda a, b: torch.isin(a, b, invert=invert), x, x)


# ---------------------------------------------------- unique, unique_consecutive


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique(inverse, counts):
    kw = dict(return_inverse=inverse, return_counts=counts)
    run_both(lambda t: torch.unique(t, **kw), torch.randint(0, 5, (4, 6)))
    run_both(lambda t: torch.unique(t, sorted=False, **kw), torch.randint(0, 5, (7,)))
    run_both(lambda t: torch.unique(t, **kw), torch.tensor([NAN, 1.0, NAN, 1.0, 0.0, -0.0]))
    run_both(lambda t: torch.unique(t, **kw), torch.rand(10) > 0.5)
    run_both(lambda t: torch.unique(t, **kw), torch.randint(0, 5, (9,)).bfloat16())
    run_both(lambda t: torch.unique(t, **kw), torch.tensor(3.0))
    run_both(lambda t: torch.unique(t, **kw), torch.empty(0, 3))


@pytest.mark.parametrize("inverse", [False, True])
def test_unique_legacy_overload(inverse):
    # torch._unique (no counts): index_fill's backward calls it.
    run_both(lambda t: torch._unique(t, True, inverse), torch.randint(0, 5, (3, 5)))
    run_both(lambda t: torch._unique(t, True, inverse), torch.empty(0))


def test_index_fill_backward():
    x = torch.randn(4, 5)
    idx = torch.tensor([3, 1, 3])
    for dev in ("cpu", "tpu"):
        leaf = x.to(dev).detach().requires_grad_()
        with no_fallback():
            leaf.index_fill(1, idx.to(dev), 2.0).mul(leaf).sum().backward()
        if dev == "cpu":
            expected = leaf.grad
    assert_close_cpu(leaf.grad, expected)


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique_consecutive(inverse, counts):
    kw = dict(return_inverse=inverse, return_counts=counts)
    run_both(lambda t: torch.unique_consecutive(t, **kw), torch.tensor([1, 1, 2, 2, 3, 1, 1, 2]))
    run_both(lambda t: torch.unique_consecutive(t, **kw), torch.tensor([[1, 1], [2, 2]]))
    run_both(lambda t: torch.unique_consecutive(t, dim=0, **kw),
             torch.tensor([[1, 1], [1, 1], [2, 2], [1, 1]]))
    run_both(lambda t: torch.unique_consecutive(t, dim=1, **kw),
             torch.tensor([[1, 1, 2], [1, 1, 3]]).float())
    run_both(lambda t: torch.unique_consecutive(t, **kw), torch.tensor([NAN, NAN, 1.0]))
    run_both(lambda t: torch.unique_consecutive(t, **kw), torch.empty(0))
