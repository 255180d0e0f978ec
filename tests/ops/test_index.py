"""Indexing, movement and factory ops on tpu compared with CPU PyTorch: values,
dtype and shape on 0-d, empty and non-contiguous inputs, the error each bad
input raises, gradients, and that none of it runs through the CPU fallback.
Then the value-dependent ones (nonzero, nonzero_static, masked_select, take,
index_reduce, put, masked_scatter, repeat_interleave), which read a count or an
index range on the host (a sync, as on CUDA); those tests check results only."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from _nn_util import TOL
from _util import CPU, NAN, assert_close_cpu, grads_match, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


X = torch.randn(4, 5)
XL = torch.arange(20).reshape(4, 5)
XB = X > 0
DATA = [X, XL, XB]


# ---------------------------------------------------------------- index_select


@pytest.mark.parametrize("x", DATA, ids=["f32", "i64", "bool"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(x, dim):
    idx = torch.tensor([0, 3, 1, 3])
    run_both(lambda t, i: t.index_select(dim, i), x, idx)
    run_both(lambda t, i: t.index_select(dim, i), x, idx.int())


def test_index_select_shapes():
    run_both(lambda t, i: t.index_select(0, i), torch.tensor(2.5), torch.tensor([0]))
    run_both(lambda t, i: t.index_select(0, i), torch.tensor(2.5), torch.tensor(0))
    run_both(lambda t, i: t.index_select(1, i), X, torch.tensor(2))
    run_both(lambda t, i: t.index_select(0, i), X, torch.tensor([], dtype=torch.long))
    run_both(lambda t, i: t.index_select(1, i), torch.zeros(0, 3), torch.tensor([2, 0]))
    run_both(lambda t, i: t.t().index_select(0, i), X, torch.tensor([4, 0]))
    run_both(lambda t, i: t[::2, 1:].index_select(1, i), X, torch.tensor([3, 0]))


def test_index_select_errors():
    same_error(lambda t, i: t.index_select(0, i), X, torch.tensor([4]))
    same_error(lambda t, i: t.index_select(0, i), X, torch.tensor([-1]))
    same_error(lambda t, i: t.index_select(0, i), X, torch.tensor([[0]]))
    same_error(lambda t, i: t.index_select(0, i), X, torch.tensor([0.0]))


# ---------------------------------------------------------------- gather


@pytest.mark.parametrize("x", DATA, ids=["f32", "i64", "bool"])
@pytest.mark.parametrize("dim", [0, 1, -2])
def test_gather(x, dim):
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, x.size(dim), (3, 4), generator=g)
    run_both(lambda t, i: t.gather(dim, i), x, idx)
    run_both(lambda t, i: t.gather(dim, i), x, idx.int())


def test_gather_shapes():
    run_both(lambda t, i: t.gather(0, i), torch.tensor(1.5), torch.tensor(0))
    run_both(lambda t, i: t.gather(0, i), torch.arange(5.0), torch.tensor(3))
    run_both(lambda t, i: t.gather(1, i), X, torch.zeros(4, 0, dtype=torch.long))
    run_both(lambda t, i: t.t().gather(0, i), X, torch.tensor([[4, 0, 1, 2]]))


def test_gather_errors():
    same_error(lambda t, i: t.gather(0, i), X, torch.tensor([[4]]))
    same_error(lambda t, i: t.gather(0, i), X, torch.tensor([[-1]]))
    same_error(lambda t, i: t.gather(0, i), X, torch.tensor([0]))
    same_error(lambda t, i: t.gather(0, i), X, torch.zeros(1, 6, dtype=torch.long))


# ---------------------------------------------------------------- scatter family

IDX = torch.tensor([[0, 1, 2, 3, 0], [3, 3, 0, 1, 0]])


@pytest.mark.parametrize("x", DATA, ids=["f32", "i64", "bool"])
def test_scatter(x):
    src = x.flip(0)
    run_both(lambda t, i, s: t.scatter(0, i, s), x, IDX, src)
    run_both(lambda t, i: t.scatter(0, i, 1), x, IDX)
    run_both(lambda t, i, s: t.scatter_add(0, i, s), x, IDX, src)
    run_both(lambda t, i, s: t.scatter(1, i[:, :3], s), x, IDX.clamp(max=2), src)


def test_scatter_legacy_reduce():
    run_both(lambda t, i, s: t.scatter(0, i, s, reduce="add"), X, IDX, X.flip(0))
    run_both(lambda t, i, s: t.scatter(0, i, s, reduce="multiply"), X, IDX, X.flip(0))
    run_both(lambda t, i: t.scatter(0, i, 2.0, reduce="multiply"), X, IDX)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin", "max"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("x", [X, XL - 7], ids=["f32", "i64"])
def test_scatter_reduce(x, reduce, include_self):
    run_both(lambda t, i, s: t.scatter_reduce(0, i, s, reduce, include_self=include_self),
             x, IDX, x.flip(1) * 3)


def test_scatter_in_place_and_shapes():
    def fn(t, i, s):
        t = t.clone()
        t.scatter_(0, i, s)
        t.scatter_add_(0, i, s)
        return t
    run_both(fn, X, IDX, X)
    run_both(lambda t, i, s: t.scatter(0, i, s), torch.tensor(1.0), torch.tensor(0),
             torch.tensor(5.0))
    run_both(lambda t, i, s: t.scatter(0, i, s), X, torch.zeros(0, 5, dtype=torch.long), X)
    run_both(lambda t, i, s: t.t().scatter(0, i[:, :4], s), X, IDX, X.t())


def test_scatter_errors():
    same_error(lambda t, i, s: t.scatter(0, i, s), X, torch.tensor([[4]]), X)
    same_error(lambda t, i, s: t.scatter_add(0, i, s), X, torch.tensor([[-1]]), X)
    same_error(lambda t, i, s: t.scatter(0, i, s), X, IDX, XL)
    same_error(lambda t, i, s: t.scatter_reduce(0, i, s, "add"), X, IDX, X)


# ---------------------------------------------------------------- index_add / copy / fill


@pytest.mark.parametrize("x", [X, XL], ids=["f32", "i64"])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_copy_fill(x, dim):
    idx = torch.tensor([3, 0, 1]) if dim == 0 else torch.tensor([4, 0, 1])
    src = torch.ones_like(x).narrow(dim, 0, 3) * 2
    run_both(lambda t, i, s: t.index_add(dim, i, s), x, idx, src)
    run_both(lambda t, i, s: t.index_add(dim, i, s, alpha=3), x, torch.tensor([0, 0, 1]), src)
    run_both(lambda t, i, s: t.index_copy(dim, i, s), x, idx, src)
    run_both(lambda t, i: t.index_fill(dim, i, -1), x, torch.tensor([-1, 0]))
    run_both(lambda t, i, v: t.index_fill(dim, i, v), x, idx, torch.tensor(5).to(x.dtype))


def test_index_add_shapes_and_errors():
    run_both(lambda t, i, s: t.index_add(0, i, s), torch.tensor(1.0), torch.tensor([0]),
             torch.tensor(2.0))
    run_both(lambda t, i, s: t.index_add(0, i, s), X, torch.tensor([], dtype=torch.long),
             torch.zeros(0, 5))
    same_error(lambda t, i, s: t.index_add(0, i, s), X, torch.tensor([4]), torch.ones(1, 5))
    same_error(lambda t, i, s: t.index_add(0, i, s), X, torch.tensor([0, 1]), torch.ones(3, 5))
    same_error(lambda t, i, s: t.index_copy(0, i, s), X, torch.tensor([4]), torch.ones(1, 5))
    same_error(lambda t, i: t.index_fill(0, i, 1.0), X, torch.tensor([4]))


# ---------------------------------------------------------------- advanced indexing

Y = torch.randn(3, 4, 5)


@pytest.mark.parametrize("key", [
    lambda i, j: (i,),
    lambda i, j: (slice(None), j),
    lambda i, j: (i, j),
    lambda i, j: (i, slice(None), j),           # non-adjacent: broadcast dims go first
    lambda i, j: (slice(None), j, j),
    lambda i, j: (i[:, None], j[None, :]),      # broadcast index tensors
    lambda i, j: (Ellipsis, j),
    lambda i, j: (i.int(),),
], ids=["first", "second", "pair", "split", "adjacent", "broadcast", "ellipsis", "int32"])
def test_index_tensor(key):
    i = torch.tensor([2, -1, 0])
    j = torch.tensor([1, 3, -4])
    run_both(lambda y, i, j: y[key(i, j)], Y, i, j)
    run_both(lambda y, i, j: y.long()[key(i, j)], Y, i, j)


def test_index_tensor_shapes():
    run_both(lambda y, i: y[i], Y, torch.tensor([], dtype=torch.long))
    run_both(lambda y, i: y[i], Y, torch.tensor(1))
    run_both(lambda y, i: y.transpose(0, 2)[i], Y, torch.tensor([4, 0]))
    # A list index becomes a CPU index tensor: uploaded, no fallback.
    run_both(lambda y: y[[0, 2]], Y)
    run_both(lambda y: y[:, [0, 2], [1, 1]], Y)


def test_index_bool_mask():
    run_both(lambda y: y[y > 0], Y)
    run_both(lambda y, m: y[m], Y, torch.tensor([True, False, True]))
    run_both(lambda y, m: y[:, m], Y, torch.tensor([False, True, True, False]))
    run_both(lambda y, m, i: y[m, i], Y, torch.tensor([True, False, True]), torch.tensor([0, 3]))
    run_both(lambda y: y[y > 100], Y)
    run_both(lambda y, m: y[m], Y, torch.tensor([True, False, True]).to(torch.uint8))


def test_index_errors():
    same_error(lambda y, i: y[i], Y, torch.tensor([3]))
    same_error(lambda y, i: y[:, i], Y, torch.tensor([-5]))
    same_error(lambda y, i, j: y[i, j], Y, torch.tensor([0, 1]), torch.tensor([0, 1, 2]))
    same_error(lambda y, i: y[i], Y, torch.tensor([0.0]))
    same_error(lambda y, m: y[m], Y, torch.tensor([True, False]))
    same_error(lambda y, i: y[i, i, i, i], Y, torch.tensor([0]))


# ---------------------------------------------------------------- index_put


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    i = torch.tensor([0, 2, 0])
    j = torch.tensor([1, -1, 1])
    v = torch.arange(3.0)
    if accumulate:  # duplicates are defined only when accumulating
        run_both(lambda y, i, j, v: y.index_put((i, j), v, accumulate=True), Y, i, j, v[:, None])
    else:
        i, j = i[:2], j[:2]
    run_both(lambda y, i, j: y.index_put((i, j), torch.tensor(7.0, device=y.device),
                                         accumulate=accumulate), Y, i, j)
    run_both(lambda y, i, v: y.transpose(0, 1).index_put((i,), v, accumulate=accumulate), Y,
             torch.tensor([3, 0]), torch.ones(5))
    run_both(lambda y, i, v: y.long().index_put((i,), v, accumulate=accumulate), Y,
             torch.tensor([1]), torch.tensor(4))


def test_setitem():
    def fn(y, i, m):
        y = y.clone()
        y[i] = 1.0
        y[:, i] += 2.0
        y[y > 0.5] = 0.0                 # mask, scalar: no sync
        y[m] = torch.arange(30.0, device=y.device).reshape(6, 5)  # mask, per-element
        y[m, 1] = -3.0
        return y
    run_both(fn, Y, torch.tensor([2, 0]), torch.tensor([[True, False, False, True]] * 3))


def test_index_put_bool_self_and_unsafe_variants():
    m = torch.tensor([True, False, True])
    i = torch.tensor([0, 2, 0])
    run_both(lambda y, i: y.bool().index_put((i,), torch.ones(5, dtype=torch.bool,
                                                                device=y.device),
                                                accumulate=True), Y, i)
    run_both(lambda y, m: y.index_put((m,), torch.tensor(2.0), accumulate=True), Y, m)
    run_both(lambda y, i: torch.ops.aten._unsafe_index(y, [None, i]), Y, i)
    run_both(lambda y, i, v: torch.ops.aten._unsafe_index_put(y, [i], v, True), Y, i,
             torch.ones(4, 5))


def test_setitem_through_view():
    def fn(y, i):
        v = y.transpose(0, 1)
        v[i] = -1.0
        return y
    run_both(fn, Y.clone(), torch.tensor([3, 1]))


def test_index_put_errors():
    same_error(lambda y, i, v: y.index_put((i,), v), Y, torch.tensor([3]), torch.ones(5))
    same_error(lambda y, i, v: y.index_put((i,), v), Y, torch.tensor([0, 1]), torch.ones(3))
    same_error(lambda y, i, v: y.index_put((i,), v), Y, torch.tensor([0]),
               torch.ones(1, dtype=torch.long))


# ---------------------------------------------------------------- embedding


@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_and_backward(padding_idx, scale):
    w = torch.randn(6, 3)
    idx = torch.tensor([[0, 2, 5], [2, 2, 1]])
    run_both(lambda w, i: F.embedding(i, w, padding_idx=padding_idx), w, idx)
    grads_match(lambda w, i: F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale),
                w, idx)


def test_embedding_errors():
    same_error(lambda w, i: F.embedding(i, w), torch.randn(6, 3), torch.tensor([6]))


# ---------------------------------------------------------------- cat / stack


def test_cat():
    a, b = torch.randn(2, 3), torch.arange(6).reshape(2, 3)
    run_both(lambda a, b: torch.cat([a, b]), a, b)
    run_both(lambda a, b: torch.cat([a, b, a], dim=-1), a, b)
    run_both(lambda a, b: torch.cat([a.t(), b.t()], dim=1), a, b)
    run_both(lambda a, b: torch.cat([a > 0, b.bool()]), a, b)
    run_both(lambda a: torch.cat([a]), a)
    run_both(lambda a, e: torch.cat([e, a, e], 1), a, torch.zeros(0, dtype=torch.float64))
    run_both(lambda e: torch.cat([e, e]), torch.zeros(0))
    run_both(lambda a, b: torch.cat([a[:, :0], b[:, :0]], 1), a, b)
    run_both(lambda a, b: torch.stack([a, b], 1), a, b.float())


def test_cat_errors():
    same_error(lambda a, b: torch.cat([a, b]), torch.randn(2, 3), torch.randn(2, 4))
    same_error(lambda a, b: torch.cat([a, b]), torch.randn(2, 3), torch.randn(3))
    same_error(lambda a: torch.cat([a]), torch.tensor(1.0))
    same_error(lambda a: torch.cat([a], 2), torch.randn(2, 3))


# ---------------------------------------------------------------- movement


@pytest.mark.parametrize("x", DATA, ids=["f32", "i64", "bool"])
def test_flip_roll_repeat(x):
    run_both(lambda t: t.flip(0), x)
    run_both(lambda t: t.flip(0, 1), x)
    run_both(lambda t: t.t().flip(-1), x)
    run_both(lambda t: t.roll(2), x)
    run_both(lambda t: t.roll(-7, 1), x)
    run_both(lambda t: t.roll((1, 3), (0, 1)), x)
    run_both(lambda t: t.repeat(2, 3), x)
    run_both(lambda t: t.repeat(2, 1, 2), x)
    run_both(lambda t: t.t().repeat(1, 0), x)


def test_movement_edge_shapes():
    s = torch.tensor(3.0)
    run_both(lambda t: t.flip(0), s)
    run_both(lambda t: t.roll(1), s)
    run_both(lambda t: t.repeat(2), s)
    run_both(lambda t: t.flip(1).roll(1, 0), torch.zeros(0, 3))


def test_movement_errors():
    same_error(lambda t: t.flip(0, 0), X)
    same_error(lambda t: t.roll([1], [0, 1]), X)
    same_error(lambda t: t.repeat(2), X)


@pytest.mark.parametrize("pad", [(1, 2), (0, 0, 2, 1), (-1, 2, 1, -2), (1, 1, 1, 1, 1, 1)])
def test_constant_pad(pad):
    run_both(lambda t: F.pad(t, pad, value=1.5), Y)
    run_both(lambda t: F.pad(t, pad, value=3), Y.long())
    run_both(lambda t: F.pad(t.transpose(1, 2), pad), Y)


def test_constant_pad_edges_and_errors():
    run_both(lambda t: F.pad(t, (0, 0, 1, 1), value=2.0), torch.zeros(0, 3))
    run_both(lambda t: torch.constant_pad_nd(t, []), torch.tensor(1.0))
    same_error(lambda t: F.pad(t, (1, 2, 3)), X)
    same_error(lambda t: torch.constant_pad_nd(t, (1,) * 6), X)


@pytest.mark.parametrize("diagonal", [0, 1, -2, 7])
def test_tril_triu(diagonal):
    for x in (X, XL, XB, Y, torch.zeros(2, 0, 3)):
        run_both(lambda t: t.tril(diagonal), x)
        run_both(lambda t: t.triu(diagonal), x)
    run_both(lambda t: t.t().triu(diagonal), X)
    same_error(lambda t: t.tril(), torch.ones(3))


# ---------------------------------------------------------------- factories


@pytest.mark.parametrize("args", [(5,), (2, 11, 3), (10, -4, -3), (0, 1, 0.1), (-1.5, 2.5, 0.5),
                                  (0, 0), (3, 3.5, 0.25)])
def test_arange(args):
    run_both(lambda d: torch.arange(*args, device=d), CPU)
    run_both(lambda d: torch.arange(*args, dtype=torch.float64, device=d), CPU)
    run_both(lambda d: torch.arange(*args, dtype=torch.bfloat16, device=d), CPU)


def test_arange_out_and_errors():
    def fn(d):
        out = torch.empty(0, dtype=torch.int32, device=d)
        return torch.arange(1, 9, 2, out=out)
    run_both(fn, CPU)
    for bad in [(0, 5, 0), (5, 0, 1)]:
        with pytest.raises(RuntimeError, match="step"):
            torch.arange(*bad, device="tpu")


@pytest.mark.parametrize("args", [(0, 1, 5), (-3, 7, 11), (2, 2, 1), (1, 0, 0), (0, 10, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_linspace(args, dtype):
    run_both(lambda d: torch.linspace(*args, dtype=dtype, device=d), CPU)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_range_factories_into_a_same_count_view(dtype):
    # CPU resizes out= only when its element count differs: a [2, 2] narrow view
    # keeps its shape and takes the values in its row-major order.
    for make in (lambda o: torch.linspace(0, 3, 4, out=o), lambda o: torch.arange(0, 4, out=o),
                 lambda o: torch.logspace(0, 3, 4, out=o)):
        def fn(d):
            x = torch.zeros(2, 3, device=d, dtype=dtype)
            make(x.narrow(1, 1, 2))
            return x
        run_both(fn, CPU)


def test_eye():
    run_both(lambda d: torch.eye(4, device=d), CPU)
    run_both(lambda d: torch.eye(2, 5, dtype=torch.long, device=d), CPU)
    run_both(lambda d: torch.eye(3, 0, dtype=torch.bool, device=d), CPU)
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        torch.eye(-1, device="tpu")


# ---------------------------------------------------------------- gradients


def test_gradients():
    idx = torch.tensor([3, 0, 3])
    grads_match(lambda x: x.index_select(0, idx.to(x.device)), X)
    grads_match(lambda x: x.gather(1, IDX.to(x.device)), X)
    grads_match(lambda x: x[idx.to(x.device), 1:], X)
    grads_match(lambda a, b: torch.cat([a, b * 2], 1), X, torch.randn(4, 2), grad_of=(0, 1))
    grads_match(lambda x: F.pad(x.flip(0).roll(1, 1), (1, 1)).tril(), X)


def test_gather_with_empty_index_of_higher_rank():
    # Found by the OpInfo sweep: ATen skips the shape check for an empty index.
    x = torch.arange(5.0)
    idx = torch.empty(2, 0, dtype=torch.long)
    with no_fallback():
        out = torch.gather(x.to("tpu"), 0, idx.to("tpu"))
    assert_close_cpu(out, torch.gather(x, 0, idx))


def test_uint8_mask_warns_once_per_call_as_cpu():
    # ATen warns on every indexing call with a uint8 mask (read and write).
    x = torch.arange(6.0)
    m = torch.tensor([1, 0, 1, 0, 0, 1], dtype=torch.uint8)
    for dev in ("cpu", "tpu"):
        t, mm = x.clone().to(dev), m.to(dev)
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8") as w:
            got = t[mm]
            t.index_put_((mm,), got * 2, accumulate=True)
        assert len([r for r in w if "uint8" in str(r.message)]) == 2
        assert got.cpu().tolist() == [0.0, 2.0, 5.0]
        assert t.cpu().tolist() == [0.0, 1.0, 6.0, 3.0, 4.0, 15.0]


@pytest.mark.parametrize("sizes", [((), (), ()), ((1,), (), ()), ((), (1,), ()), ((), (), (1,)),
                                   ((1,), (1,), ()), ((1,), (), (1,)), ((), (1,), (1,))])
def test_index_copy_scalar_shapes(sizes):
    # A 0-d target, index or source stands for one element, as on CPU.
    st, si, ss = sizes
    target, source = torch.zeros(st), torch.full(ss, 7.0)
    idx = torch.zeros(si, dtype=torch.long)
    with no_fallback():
        got = target.to("tpu").index_copy_(0, idx.to("tpu"), source.to("tpu"))
        assert_close_cpu(got, target.clone().index_copy_(0, idx, source))


def test_index_fill_complex_scalar_into_real_raises():
    idx = torch.tensor([0])
    for x in (torch.ones(2, 2), torch.ones(2, 2, dtype=torch.long)):
        same_error(lambda t, i: t.index_fill_(1, i, 1 + 1j), x, idx)


def test_index_put_checks_shape_before_dtype():
    # CPU reports a value that cannot broadcast before a dtype mismatch.
    a = torch.arange(4)
    same_error(lambda t, m, v: t.index_put_((m,), v), a, a > -1, torch.tensor([]))
    same_error(lambda t, m, v: t.index_put_((m,), v), a, a > -1, torch.tensor([1.5, 2.0, 3.0]))
    same_error(lambda t, m, v: t.index_put_((m,), v), a, a > -1, torch.ones(4))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (7,), (4, 5), (2, 3, 4)])
def test_nonzero(shape):
    x = torch.randint(0, 2, shape).float()
    run_both(torch.nonzero, x)
    run_both(lambda t: torch.nonzero(t, as_tuple=True), x)
    run_both(torch.argwhere, x > 0)
    run_both(torch.nonzero, torch.zeros(shape))


def test_nonzero_nan_and_views():
    x = torch.tensor([[0.0, NAN], [1.0, 0.0]])
    run_both(torch.nonzero, x)
    run_both(lambda t: torch.nonzero(t.t()), x)
    run_both(lambda t: torch.where(t), x)


def test_masked_select():
    x = torch.randn(4, 5)
    run_both(torch.masked_select, x, torch.rand(4, 5) > 0.5)
    run_both(torch.masked_select, x, torch.rand(5) > 0.5)
    run_both(torch.masked_select, x[0], torch.rand(3, 5) > 0.5)
    run_both(torch.masked_select, torch.tensor(2.0), torch.tensor(True))
    run_both(torch.masked_select, x, torch.zeros(4, 5, dtype=torch.bool))
    run_both(torch.masked_select, torch.randint(0, 9, (3, 4)), torch.rand(3, 4) > 0.5)
    same_error(torch.masked_select, x, torch.ones(4, 5, dtype=torch.uint8))
    same_error(torch.masked_select, x, torch.ones(3, dtype=torch.bool))


def test_take():
    x = torch.randn(3, 4)
    run_both(torch.take, x, torch.tensor([[0, -1], [5, 11]]))
    run_both(torch.take, x.t(), torch.tensor([0, -12, 7]))
    run_both(torch.take, x, torch.empty(0, dtype=torch.int64))
    run_both(torch.take, torch.tensor(5.0), torch.tensor([0, -1]))
    same_error(torch.take, x, torch.tensor([0, 12]))
    same_error(torch.take, x, torch.tensor([-13]))
    same_error(torch.take, x, torch.tensor([1.0]))
    same_error(torch.take, torch.empty(0), torch.tensor([0]))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    warnings.filterwarnings("ignore", "index_reduce")
    idx = torch.tensor([0, 2, 0, 1, 2])
    run_both(lambda s, i, src: s.index_reduce(1, i, src, reduce, include_self=include_self),
             torch.randn(3, 4), idx, torch.randn(3, 5))
    run_both(lambda s, i, src: s.index_reduce(0, i, src, reduce, include_self=include_self),
             torch.randint(-5, 5, (4, 2)), idx, torch.randint(-5, 5, (5, 2)))
    run_both(
        lambda s, i, src: s.clone().index_reduce_(0, i, src, reduce, include_self=include_self),
        torch.randn(4),
        idx.int(),
        torch.randn(5),
    )


def test_index_reduce_errors():
    warnings.filterwarnings("ignore", "index_reduce")
    x = torch.randn(2, 3)
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0, 5]),
               torch.randn(2, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "sum"), x, torch.tensor([0, 1]),
               torch.randn(2, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0, 1]),
               torch.randn(3, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0.0, 1]),
               torch.randn(2, 3))
    same_error(lambda s, i, src: s.index_reduce(0, i, src, "prod"), x, torch.tensor([0, 1]),
               torch.randn(2, 3).double())


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    run_both(lambda s, i, v: s.clone().put_(i, v, accumulate=accumulate), torch.randn(3, 4),
             torch.tensor([[0, -1], [5, 11]]), torch.randn(2, 2))
    run_both(lambda s, i, v: torch.put(s, i, v, accumulate=accumulate), torch.randn(3, 4),
             torch.tensor([1, 1, 1]), torch.tensor([1.0, 1.0, 1.0]))
    run_both(lambda s, i, v: torch.put(s, i, v, accumulate=accumulate), torch.randint(0, 5, (5,)),
             torch.tensor([0, 4]), torch.tensor([7, 8]))
    run_both(lambda s, i, v: torch.put(s, i, v, accumulate=accumulate), torch.randn(3),
             torch.empty(0, dtype=torch.int64), torch.empty(0))


def test_put_errors():
    x = torch.randn(3, 4)
    same_error(lambda s, i, v: s.put_(i, v), x, torch.tensor([0, 12]), torch.tensor([1.0, 2.0]))
    same_error(lambda s, i, v: s.put_(i, v), x, torch.tensor([0, 1, 2]), torch.tensor([1.0, 2.0]))
    same_error(
        lambda s, i, v: s.put_(i, v), x, torch.tensor([0, 1]), torch.tensor([1.0, 2.0]).double()
    )


def test_masked_scatter():
    x = torch.randn(3, 4)
    m = torch.rand(3, 4) > 0.5
    run_both(lambda s, k, v: s.masked_scatter(k, v), x, m, torch.randn(12))
    run_both(lambda s, k, v: s.clone().masked_scatter_(k, v), x, m, torch.randn(20))
    run_both(lambda s, k, v: s.masked_scatter(k, v), x, torch.rand(4) > 0.5, torch.randn(4, 3))
    run_both(lambda s, k, v: s.masked_scatter(k, v), x[0], torch.rand(2, 4) > 0.5, torch.randn(8))
    run_both(lambda s, k, v: s.masked_scatter(k, v), x, torch.zeros(3, 4, dtype=torch.bool),
             torch.empty(0))
    run_both(lambda s, k, v: s.masked_scatter(k, v), torch.randint(0, 5, (6,)),
             torch.rand(6) > 0.5, torch.arange(6))
    same_error(lambda s, k, v: s.masked_scatter_(k, v), x, torch.ones(3, 4, dtype=torch.bool),
               torch.randn(5))
    same_error(lambda s, k, v: s.masked_scatter_(k, v), x, torch.ones(3, 4, dtype=torch.bool),
               torch.randn(12).double())


def test_repeat_interleave():
    run_both(torch.repeat_interleave, torch.tensor([2, 0, 3, 1]))
    run_both(torch.repeat_interleave, torch.tensor([2, 0, 3, 1], dtype=torch.int32))
    run_both(lambda r: torch.repeat_interleave(r, output_size=6), torch.tensor([2, 0, 3, 1]))
    run_both(lambda x, r: torch.repeat_interleave(x, r, dim=0), torch.randn(4, 2),
             torch.tensor([2, 0, 3, 1]))
    run_both(torch.repeat_interleave, torch.tensor([0, 0]))
    run_both(torch.repeat_interleave, torch.empty(0, dtype=torch.int64))
    same_error(torch.repeat_interleave, torch.tensor([2, -1]))
    same_error(torch.repeat_interleave, torch.tensor([2.0, 1.0]))
    same_error(torch.repeat_interleave, torch.tensor([[2, 1]]))


def test_nonzero_static():
    x = torch.tensor([[0, 1, 3], [2, 0, 0]])
    for size in [0, 1, 3, 7]:
        run_both(lambda t: torch.nonzero_static(t, size=size), x, **TOL)
        run_both(lambda t: torch.nonzero_static(t, size=size, fill_value=9), x.t(), **TOL)
    run_both(lambda t: torch.nonzero_static(t, size=3),
             torch.tensor([float("nan"), 0.0, -0.0, 2.0]), **TOL)
    run_both(lambda t: torch.nonzero_static(t, size=3), torch.rand(2, 3, 4) > 0.5, **TOL)
    run_both(lambda t: torch.nonzero_static(t, size=2), torch.tensor(3.0), **TOL)
    run_both(lambda t: torch.nonzero_static(t, size=2), torch.zeros(0, 3), **TOL)
    same_error(lambda t: torch.nonzero_static(t, size=-1), x)
