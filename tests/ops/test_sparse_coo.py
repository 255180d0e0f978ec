"""Sparse COO tensors on tpu, compared with CPU PyTorch.

A tpu sparse tensor is PyTorch's SparseTensorImpl over tpu indices and values
(csrc/aten/sparse.cc): construction, the accessors, copies and clone run
without the CPU fallback; sparse math (coalesce, add, mul, to_dense, ...) runs
through the counted CPU fallback and comes back as tpu tensors.
"""

import pytest
import torch

import torchtpu
from _util import no_fallback

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

DTYPES = [torch.float32, torch.int64, torch.float16, torch.bool]


def sample(dtype, seed=0):
    """A 4x5 dense tensor with about half its entries zero, and its COO form."""
    g = torch.Generator().manual_seed(seed)
    d = (torch.randn(4, 5, generator=g) * 4).to(dtype)
    d = d * (torch.rand(4, 5, generator=g) > 0.5).to(dtype)
    return d, d.to_sparse()


def assert_sparse_equal(actual, expected):
    assert actual.device.type == "tpu" and actual.layout == torch.sparse_coo
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    a, e = actual.cpu().coalesce(), expected.coalesce()
    assert torch.equal(a.indices(), e.indices())
    assert torch.equal(a.values(), e.values())


def test_construction_accessors_and_copies_run_without_fallback():
    i = torch.tensor([[0, 1, 1, 3], [2, 0, 4, 1]])
    v = torch.tensor([1.5, -2.0, 3.0, 0.25])
    cpu = torch.sparse_coo_tensor(i, v, (4, 5))
    with no_fallback():
        s = torch.sparse_coo_tensor(i.to("tpu"), v.to("tpu"), (4, 5))
        assert s.device.type == "tpu" and s.is_sparse and s.layout == torch.sparse_coo
        assert s.sparse_dim() == 2 and s.dense_dim() == 0 and s._nnz() == 4
        assert s._indices().device.type == "tpu" and s._values().device.type == "tpu"
        assert torch.equal(s._indices().cpu(), i) and torch.equal(s._values().cpu(), v)
        back = s.cpu()
        assert back.layout == torch.sparse_coo
        assert torch.equal(back.to_dense(), cpu.to_dense())
        t = cpu.to("tpu")
        assert torch.equal(t._values().cpu(), v)
        c = t.clone()
        assert torch.equal(c._indices().cpu(), i)
        e = torch.empty(0, layout=torch.sparse_coo, device="tpu")
        assert e.is_sparse and e._nnz() == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_sparse_round_trip_and_coalesce(dtype):
    d, s = sample(dtype)
    td = d.to("tpu")
    ts = td.to_sparse()
    assert_sparse_equal(ts, s)
    assert ts.is_coalesced() == s.is_coalesced()
    dense = ts.to_dense()
    assert dense.device.type == "tpu" and torch.equal(dense.cpu(), d)
    # An uncoalesced tensor (duplicate indices) sums them when coalesced.
    i = torch.tensor([[0, 0, 2], [1, 1, 3]])
    v = torch.tensor([1, 2, 5]).to(dtype)
    u = torch.sparse_coo_tensor(i, v, (3, 4))
    tu = torch.sparse_coo_tensor(i.to("tpu"), v.to("tpu"), (3, 4))
    assert not tu.is_coalesced()
    assert_sparse_equal(tu.coalesce(), u.coalesce())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_arithmetic_and_promotion_as_cpu(dtype):
    d1, s1 = sample(dtype, 1)
    d2, s2 = sample(torch.float64, 2)
    t1, t2 = s1.to("tpu"), s2.to("tpu")
    torchtpu.metrics.reset()
    assert_sparse_equal(t1 + t2, s1 + s2)  # promotes to float64, as on CPU
    assert_sparse_equal(t1 - t2, s1 - s2)
    assert_sparse_equal(t1 * t2, s1 * s2)
    assert_sparse_equal(t1 * 3, s1 * 3)
    assert_sparse_equal(t1 / 2, s1 / 2)
    r = d2.to("tpu") + t1  # dense + sparse is dense
    assert r.device.type == "tpu" and not r.is_sparse
    torch.testing.assert_close(r.cpu(), d2 + s1)
    inplace = t2.clone()
    assert inplace.add_(t1) is inplace  # written back into the tpu tensor
    assert_sparse_equal(inplace, s2 + s1)
    scaled = t1.clone()
    scaled.mul_(2)
    assert_sparse_equal(scaled, s1 * 2)
    assert torchtpu.metrics.total_fallbacks() > 0  # sparse math is host work
    # What CPU refuses raises the same type: sparse / sparse.
    with pytest.raises(RuntimeError) as cpu:
        s1 / s2
    with pytest.raises(type(cpu.value)):
        t1 / t2
