"""uint16, uint32 and uint64 on tpu, compared with CPU PyTorch.

PyTorch supports these three as "barebones" dtypes: creation, copies, views,
indexing reads, sort/unique, sum/prod/cumsum, mul, true division, ==, !=,
&, |, ^ and every op that computes in a floating type. The other ops raise
NotImplementedError on CPU, and promotion with any other integer dtype raises
RuntimeError; tpu raises the same.
"""

import pytest
import torch

from _util import assert_close_cpu, no_fallback, same_error

UINTS = [torch.uint16, torch.uint32, torch.uint64]


def sample(dtype, shape=(4, 6)):
    """Values across the whole range of `dtype`: 0, 1, the maximum, the top bit
    set (which a signed view reads as negative), and small random ones."""
    hi = torch.iinfo(dtype).max
    edge = [0, 1, hi, hi - 1, hi // 2 + 1, 7]
    n = 1
    for s in shape:
        n *= s
    vals = torch.randint(0, 1000, (n,), dtype=torch.int64).tolist()
    vals[: len(edge)] = edge
    return torch.tensor(vals, dtype=dtype).reshape(shape)


@pytest.mark.parametrize("dtype", UINTS)
def test_creation_and_copies_round_trip(dtype):
    x = sample(dtype)
    hi = torch.iinfo(dtype).max
    with no_fallback():
        t = x.to("tpu")
        assert t.dtype == dtype
        assert torch.equal(t.cpu(), x)
        assert_close_cpu(torch.zeros(3, dtype=dtype, device="tpu"), torch.zeros(3, dtype=dtype))
        assert_close_cpu(torch.ones(2, 3, dtype=dtype, device="tpu"), torch.ones(2, 3, dtype=dtype))
        assert_close_cpu(torch.full((5,), hi, dtype=dtype, device="tpu"),
                         torch.full((5,), hi, dtype=dtype))
        assert_close_cpu(torch.empty(4, dtype=dtype, device="tpu").fill_(9),
                         torch.full((4,), 9, dtype=dtype))
        assert_close_cpu(torch.tensor([hi, 0, 3], dtype=dtype, device="tpu"),
                         torch.tensor([hi, 0, 3], dtype=dtype))
        assert t[0, 2].item() == hi
        assert t.tolist() == x.tolist()
        # Conversions to and from other dtypes, both directions.
        assert_close_cpu(t.to(torch.float64), x.to(torch.float64))
        assert_close_cpu(t.to(torch.int64), x.to(torch.int64))
        f = torch.tensor([0.0, 1.5, 300.7, 65535.0], dtype=torch.float32)
        assert_close_cpu(f.to("tpu").to(dtype), f.to(dtype))
        r = torch.randint(0, 50, (100,), dtype=dtype, device="tpu")
        assert r.dtype == dtype and 0 <= int(r.cpu().to(torch.int64).min())
        assert int(r.cpu().to(torch.int64).max()) < 50


@pytest.mark.parametrize("dtype", UINTS)
def test_views_keep_bits(dtype):
    x = sample(dtype, (4, 8))
    signed = {torch.uint16: torch.int16, torch.uint32: torch.int32,
              torch.uint64: torch.int64}[dtype]
    with no_fallback():
        t = x.to("tpu")
        assert_close_cpu(t.view(signed), x.view(signed))
        assert_close_cpu(t.view(torch.uint8), x.view(torch.uint8))
        assert_close_cpu(t.view(signed).view(dtype), x)
        assert_close_cpu(t.t().contiguous(), x.t().contiguous())
        assert_close_cpu(t[1:3, ::2], x[1:3, ::2])
        assert_close_cpu(t.reshape(8, 4)[2], x.reshape(8, 4)[2])
        assert_close_cpu(t.unsqueeze(0).expand(2, 4, 8).contiguous(),
                         x.unsqueeze(0).expand(2, 4, 8).contiguous())
        # A write through a view lands in the base, as on CPU.
        y = x.clone()
        u = t.clone()
        y[1, 2:5] = 5
        u[1, 2:5] = 5
        assert_close_cpu(u, y)


@pytest.mark.parametrize("dtype", UINTS)
def test_indexing_reads_and_selection(dtype):
    x = sample(dtype, (5, 4))
    idx = torch.tensor([4, 0, 2, 2])
    mask = torch.tensor([True, False, True, True, False])
    with no_fallback():
        t = x.to("tpu")
        assert_close_cpu(t[idx.to("tpu")], x[idx])
        assert_close_cpu(t[:, [3, 1]], x[:, [3, 1]])
        assert_close_cpu(t[mask.to("tpu")], x[mask])
        cond = torch.tensor([[True, False, True, False]] * 5)
        assert_close_cpu(torch.where(cond.to("tpu"), t, t * 2),
                         torch.where(cond, x, x * 2))
        assert_close_cpu(torch.cat([t, t[:2]]), torch.cat([x, x[:2]]))
        assert_close_cpu(torch.stack([t, t]), torch.stack([x, x]))
        assert_close_cpu(t.repeat(2, 1), x.repeat(2, 1))


@pytest.mark.parametrize("dtype", UINTS)
def test_ops_cpu_implements(dtype):
    x = sample(dtype, (3, 5))
    y = x[:, [4, 3, 2, 1, 0]]
    y = torch.where(y == 0, torch.ones_like(y), y)
    with no_fallback():
        a, b = x.to("tpu"), y.to("tpu")
        assert_close_cpu(a * b, x * y)               # wraps modulo 2**bits
        assert_close_cpu(a * 3, x * 3)
        assert_close_cpu(a / b, x / y)               # true division: float result
        assert_close_cpu(a / 2, x / 2)
        assert_close_cpu(a == b, x == y)
        assert_close_cpu(a != 7, x != 7)
        assert_close_cpu(a & b, x & y)
        assert_close_cpu(a | b, x | y)
        assert_close_cpu(a ^ b, x ^ y)
        assert_close_cpu(a.sum(), x.sum())
        assert_close_cpu(a.sum(0), x.sum(0))
        assert_close_cpu(a.prod(1), x.prod(1))
        assert_close_cpu(a.cumsum(1), x.cumsum(1))
        assert_close_cpu(a.sort(1), x.sort(1))
        assert_close_cpu(torch.unique(a), torch.unique(x))
        assert_close_cpu(a.any(), x.any())
        assert_close_cpu(a.all(1), x.all(1))
        assert_close_cpu(a.isnan(), x.isnan())
        assert torch.equal(a, a.clone())
        # Ops computing in a float type run natively too.
        assert_close_cpu(torch.sqrt(a), torch.sqrt(x))
        assert_close_cpu(a * 1.5, x * 1.5)


@pytest.mark.parametrize("dtype", UINTS)
@pytest.mark.parametrize("op", [
    lambda x: x + x, lambda x: x - 1, lambda x: x < x, lambda x: x.max(), lambda x: -x,
    lambda x: x.abs(), lambda x: ~x, lambda x: x << 1, lambda x: x // x, lambda x: x % 3,
    lambda x: x.flip(0), lambda x: x.clamp(0, 3), lambda x: x.nonzero(),
    lambda x: torch.maximum(x, x), lambda x: x.argmax(),
    lambda x: x.index_put((torch.tensor([0]),), torch.tensor(5, dtype=x.dtype)),
    lambda x: x.masked_fill(x == 1, 3), lambda x: x.gather(0, torch.tensor([0], device=x.device)),
    lambda x: torch.arange(5, dtype=x.dtype, device=x.device),
], ids=["add", "sub", "lt", "max", "neg", "abs", "not", "shift", "floordiv", "rem", "flip",
        "clamp", "nonzero", "maximum", "argmax", "index_put", "masked_fill", "gather",
        "arange"])
def test_ops_cpu_lacks_raise_not_implemented(dtype, op):
    # index_put's index is a CPU tensor, which tpu accepts as CUDA does
    # (device_check: NoCheck); gather's index is on x's device, as CUDA
    # requires, so both calls take the same path.
    x = torch.tensor([1, 2, 3], dtype=dtype)
    cpu_error = None
    try:
        op(x)
    except NotImplementedError as e:
        cpu_error = e
    assert cpu_error is not None, "CPU PyTorch implements this op now: move it to the list above"
    same_error(op, x)


@pytest.mark.parametrize("dtype", UINTS)
def test_promotion_with_other_integers_raises(dtype):
    x = torch.tensor([1, 2, 3], dtype=dtype)
    for other in (torch.int32, torch.uint8, torch.bool):
        y = torch.ones(3, dtype=other)
        same_error(lambda a, b: a * b, x, y)
        same_error(lambda a, b: torch.cat([a, b]), x, y)

