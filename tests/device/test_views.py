"""View aliasing and in-place semantics, compared with CPU PyTorch: writes through
a view reach the base and sibling views; in-place ops keep data_ptr."""

import pytest
import torch

from _util import assert_close_cpu, no_fallback, run_both

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


def writes_match_cpu(fn):
    """fn(x) writes a [4, 6] float tensor in place; its base after the write on
    tpu equals CPU's (run_both, no fallback)."""

    def write(x):
        fn(x)
        return x

    run_both(write, torch.arange(24, dtype=torch.float32).reshape(4, 6))


def test_transpose_contiguous():
    x = torch.arange(12.0).reshape(3, 4)
    with no_fallback():
        y = x.to("tpu").t().contiguous()
    assert y.is_contiguous()
    assert_close_cpu(y, x.t().contiguous())


def test_strided_slice_in_place():
    writes_match_cpu(lambda x: x[::2].add_(1))
    writes_match_cpu(lambda x: x[:, 1::3].mul_(-2))


def test_view_flat_index_assignment():
    def fn(x):
        x.view(-1)[3] = 7

    writes_match_cpu(fn)


def test_write_through_view_reaches_base_and_siblings():
    x = torch.zeros(4, 6, device="tpu")
    a = x[1]
    b = x[:, 2]
    with no_fallback():
        a.fill_(5)
    assert x[1, 0].item() == 5
    assert b[1].item() == 5
    assert b[0].item() == 0


def test_in_place_keeps_data_ptr():
    x = torch.ones(10, device="tpu")
    p = x.data_ptr()
    with no_fallback():
        x.add_(1)
        x.mul_(3)
    assert x.data_ptr() == p
    assert_close_cpu(x, torch.full((10,), 6.0))


def test_split_chunk_unbind_alias_base():
    x = torch.zeros(6, 2, device="tpu")
    parts = x.split(2)
    with no_fallback():
        parts[1].add_(1)
    chunks = x.chunk(3, dim=0)
    rows = x.unbind(0)
    assert_close_cpu(chunks[1], torch.ones(2, 2))
    assert_close_cpu(rows[2], torch.ones(2))
    assert_close_cpu(x[:2], torch.zeros(2, 2))


def test_permute_expand_and_broadcast_reads():
    base = torch.arange(6.0).reshape(2, 3, 1)
    x = base.to("tpu")
    with no_fallback():
        y = x.permute(2, 0, 1) * 2
        z = x.expand(2, 3, 4) + 1
    assert_close_cpu(y, base.permute(2, 0, 1) * 2)
    assert_close_cpu(z, base.expand(2, 3, 4) + 1)


def test_copy_into_non_contiguous_view():
    def fn(x):
        x.t()[1:3].copy_(torch.full((2, 4), -1.0, device=x.device))

    writes_match_cpu(fn)


def test_out_variant_writes_into_view_and_keeps_ptr():
    a = torch.arange(4.0)
    out_cpu = torch.zeros(2, 4)
    torch.add(a, 1, out=out_cpu[1])
    out = torch.zeros(2, 4, device="tpu")
    p = out.data_ptr()
    with no_fallback():
        torch.add(a.to("tpu"), 1, out=out[1])
    assert out.data_ptr() == p
    assert_close_cpu(out, out_cpu)


def test_expanded_in_place_write_is_an_error():
    x = torch.zeros(1, 3, device="tpu").expand(2, 3)
    try:
        x.add_(1)
    except RuntimeError as e:
        assert "single memory location" in str(e)
    else:
        raise AssertionError("writing into an expanded tensor must raise")


def test_literal_issue_examples():
    def strided_iadd(x):
        x[::2] += 1

    writes_match_cpu(strided_iadd)


@pytest.mark.parametrize("dim,size,step", [(0, 2, 1), (1, 3, 2), (-1, 1, 3), (1, 4, 4)])
def test_unfold_is_a_view_with_cpu_values(dim, size, step):
    x = torch.arange(24.0).reshape(3, 8)
    with no_fallback():
        t = x.to("tpu")
        u = t.unfold(dim, size, step)
        assert u.data_ptr() == t.data_ptr()
        torch.testing.assert_close(u.cpu(), x.unfold(dim, size, step))
        t.add_(1)  # the view sees writes to its base
        torch.testing.assert_close(u.cpu(), (x + 1).unfold(dim, size, step))


# ------------------------------------------------- copy-on-write (_lazy_clone)

COW_DTYPES = [torch.float32, torch.int64, torch.bool, torch.bfloat16]


def _one(dtype):
    return torch.ones(1, device="tpu", dtype=dtype)


def _bump(t, dtype):
    # `t += 1`, as a bool tensor takes it (logical or).
    if dtype == torch.bool:
        t |= _one(dtype)
    else:
        t += _one(dtype)


@pytest.mark.parametrize("dtype", COW_DTYPES)
def test_lazy_clone_reads_without_materializing(dtype):
    # PyTorch's test_lazy_clone*: the clone shares the data until a write; this
    # ended the process with SIGSEGV (the COW context read as a storage slot).
    ref = torch.tensor([[0, 1], [2, 3]], dtype=dtype)
    t = ref.to("tpu")
    data = torch._C._data_address(t)
    clone = t._lazy_clone()
    with no_fallback():
        total = t + clone if dtype != torch.bool else t | clone
    assert torch._C._is_cow_tensor(t) and torch._C._is_cow_tensor(clone)
    assert torch._C._data_address(clone) == data
    assert torch._C._storage_address(clone) != torch._C._storage_address(t)
    assert_close_cpu(total, ref + ref if dtype != torch.bool else ref | ref)


@pytest.mark.parametrize("dtype", COW_DTYPES)
def test_lazy_clone_write_through_view_materializes(dtype):
    ref = torch.tensor([[0, 1], [2, 3]], dtype=dtype)
    t = ref.to("tpu")
    storage, data = torch._C._storage_address(t), torch._C._data_address(t)
    clone = t._lazy_clone()
    view = t.view([4])
    _bump(view, dtype)
    assert not torch._C._is_cow_tensor(t) and not torch._C._is_cow_tensor(view)
    assert torch._C._is_cow_tensor(clone)
    assert torch._C._storage_address(t) == storage
    assert torch._C._data_address(t) != data == torch._C._data_address(clone)
    assert torch._C._data_address(view) == torch._C._data_address(t)
    bumped = ref | True if dtype == torch.bool else ref + 1
    assert_close_cpu(t, bumped)
    assert_close_cpu(clone, ref)
    # The last holder of the shared data takes it back without a copy.
    _bump(clone, dtype)
    assert not torch._C._is_cow_tensor(clone) and torch._C._data_address(clone) == data
    assert_close_cpu(clone, bumped)


def test_lazy_clone_every_kind_of_write_leaves_the_source():
    src = torch.arange(4.0)
    writes = [lambda b: b.mul_(2), lambda b: b.copy_(torch.zeros(4)), lambda b: b.zero_(),
              lambda b: b.__setitem__(1, 9.0), lambda b: torch.add(b, 1, out=b),
              lambda b: b.resize_(8), lambda b: b.index_fill_(0, torch.tensor([0]), 5.0)]
    for write in writes:
        a = src.to("tpu")
        b = a._lazy_clone()
        expected = src._lazy_clone()
        write(expected)
        write(b)
        assert_close_cpu(a, src)
        assert_close_cpu(b[:4], expected[:4])  # resize_'s new elements are unspecified
        c = a._lazy_clone()  # the source written while a clone holds the data
        write(a)
        assert_close_cpu(c, src)


def test_bool_storage_viewed_as_bytes_and_back():
    """x.view(uint8/int8) of a bool tensor and back (XLA cannot bitcast i1):
    values as CPU's, writes through the byte view reach the bool tensor, and
    a deterministic resize_ of a bool tensor fills as CPU's (it raised)."""
    a = torch.tensor([True, False, True])
    b = torch.tensor([0, 1, 2], dtype=torch.uint8)
    with no_fallback():
        ta, tb = a.to("tpu"), b.to("tpu")
        assert torch.equal(ta.view(torch.uint8).cpu(), a.view(torch.uint8))
        assert torch.equal(ta.view(torch.int8).cpu(), a.view(torch.int8))
        assert torch.equal(tb.view(torch.bool).cpu(), b.view(torch.bool))
        c = torch.zeros(3, dtype=torch.bool, device="tpu")
        c.view(torch.uint8).fill_(1)
        assert c.cpu().tolist() == [True, True, True]
    torch.use_deterministic_algorithms(True)
    try:
        d, e = (
            torch.zeros(2, 3, dtype=torch.bool, device="tpu"),
            torch.zeros(2, 3, dtype=torch.bool),
        )
        d.resize_(3, 4)
        e.resize_(3, 4)
        assert torch.equal(d.cpu(), e)
    finally:
        torch.use_deterministic_algorithms(False)


def test_is_set_to_compares_storage_and_geometry():
    """is_set_to is metadata (ATen's kernel is CPU/CUDA/MPS-only; tpu took
    the CPU fallback's copies and always answered False)."""
    with no_fallback():
        t1, t2 = torch.empty(3, 4, 9, device="tpu"), torch.empty(3, 4, 9, device="tpu")
        t3 = torch.tensor([], device="tpu").set_(t1)
        t4 = t3.clone().resize_(12, 9)
        assert not t1.is_set_to(t2) and t1.is_set_to(t3) and t3.is_set_to(t1)
        assert not t1.is_set_to(t4) and not t1.is_set_to(t1.transpose(0, 1))
