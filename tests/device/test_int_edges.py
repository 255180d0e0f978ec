"""Integer arithmetic at the edges, and the checks CPU PyTorch makes there.

CPU PyTorch is the spec (CUDA skips some of these checks): integer pow over the
whole exponent (3**64 wraps, it is not 3**0), negative integer exponents,
integer division / remainder / fmod by zero (RuntimeError "ZeroDivisionError",
deferred to the next read when the divisor lives on tpu), subtraction with a
bool operand. Also writes through CPU index tensors and CPU bool masks.
"""

import pytest
import torch

from _util import assert_close_cpu, no_fallback, run_both

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def cpu_or_error(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001
        return None, e


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_pow_visits_every_exponent_bit(dtype):
    hi = torch.iinfo(dtype).max
    base = torch.tensor([0, 3, 2, 1, 5, 7, -1, -3, 3], dtype=torch.int64).to(dtype)
    exp = torch.tensor([64, 64, 100, 65, 7, 127, 65, 63, 0], dtype=torch.int64).clamp(max=hi)
    exp = exp.to(dtype)
    expected = base ** exp
    with no_fallback():
        got = base.to("tpu") ** exp.to("tpu")
        assert_close_cpu(got, expected)
        for e in [0, 1, 2, 7, 63, 64, 65, 100]:
            assert_close_cpu(base.to("tpu") ** e, base ** e)        # pow.Tensor_Scalar
        for b in [0, 1, 2, 3, -1]:
            e_small = exp.clamp(min=0)
            assert_close_cpu(b ** e_small.to("tpu"), b ** e_small)   # pow.Scalar
        out = base.to("tpu").clone()
        out.pow_(exp.to("tpu"))
        assert_close_cpu(out, expected)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_integer_pow_negative_exponents(dtype):
    # Tensor exponents: 1 for base 1, +-1 for base -1, else 0 (CPU's powi).
    base = torch.tensor([5, 1, -1, -1, 0, 2], dtype=dtype)
    exp = torch.tensor([-1, -3, -3, -4, -2, -64], dtype=dtype)
    with no_fallback():
        assert_close_cpu(base.to("tpu") ** exp.to("tpu"), base ** exp)
    # A negative scalar exponent with an integral (or bool) base raises, as on CPU.
    for b in [base, torch.tensor([True, False])]:
        with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
            b.to("tpu") ** -1
        with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
            b.to("tpu").clone().pow_(-2)


def test_pow_bool_and_mixed_promotion_match_cpu():
    t = torch.tensor([True, False])
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        t.to("tpu") ** t.to("tpu")
    with no_fallback():
        assert_close_cpu(t.to("tpu") ** 2, t ** 2)
        assert_close_cpu(torch.tensor([3, -2]).to("tpu") ** True, torch.tensor([3, -2]) ** True)
        assert_close_cpu(torch.tensor([3, 4]).to("tpu") ** 0.5, torch.tensor([3, 4]) ** 0.5)
        assert_close_cpu(torch.tensor([2.0, 3.0]).to("tpu") ** torch.tensor([3, 64]).to("tpu"),
                         torch.tensor([2.0, 3.0]) ** torch.tensor([3, 64]))


DIV_OPS = {
    "floor_divide": lambda a, b: a // b,
    "trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": lambda a, b: a % b,
    "fmod": torch.fmod,
}


@pytest.mark.parametrize("op", sorted(DIV_OPS))
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_division_by_zero_raises_as_on_cpu(op, dtype):
    f = DIV_OPS[op]
    a = torch.tensor([7, 9, 100], dtype=dtype)
    zero_in = torch.tensor([2, 0, 3], dtype=dtype)
    _, err = cpu_or_error(lambda: f(a, zero_in))
    assert err is not None and "ZeroDivisionError" in str(err)
    # A tpu divisor: a device value, so the error comes at the next read.
    y = f(a.to("tpu"), zero_in.to("tpu"))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        y.cpu()
    # Python scalar and CPU 0-d divisors are checked at once.
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a.to("tpu"), 0)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a.to("tpu"), torch.tensor(0))
    # In place, the same.
    x = a.to("tpu").clone()
    if op in ("floor_divide", "remainder", "fmod"):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(x, {"floor_divide": "floor_divide_", "remainder": "remainder_",
                        "fmod": "fmod_"}[op])(zero_in.to("tpu"))
            x.cpu()
    # Non-zero divisors (negative ones too) give CPU's values; an empty
    # dividend divides by zero without error, as on CPU.
    ok = torch.tensor([2, 5, 3], dtype=dtype)
    if dtype != torch.uint8:
        ok = torch.tensor([2, -5, 3], dtype=dtype)
    with no_fallback():
        assert_close_cpu(f(a.to("tpu"), ok.to("tpu")), f(a, ok))
        empty = torch.tensor([], dtype=dtype)
        assert_close_cpu(f(empty.to("tpu"), torch.tensor(0, dtype=dtype).to("tpu")),
                         f(empty, torch.tensor(0, dtype=dtype)))
    if dtype == torch.uint8:
        # 256 is 0 once cast to uint8: CPU raises.
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f(a.to("tpu"), 256)


def test_float_division_by_zero_stays_ieee():
    a = torch.tensor([1.0, -1.0, 0.0])
    with no_fallback():
        for f in DIV_OPS.values():
            assert_close_cpu(f(a.to("tpu"), 0), f(a, 0))
        assert_close_cpu(torch.tensor([1, 2]).to("tpu") // torch.tensor([0.0, 1.0]).to("tpu"),
                         torch.tensor([1, 2]) // torch.tensor([0.0, 1.0]))


@pytest.mark.parametrize("expr", [
    lambda i: i - True, lambda i: True - i, lambda i: i.bool() - 1, lambda i: 1 - i.bool(),
    lambda i: i.bool() - i, lambda i: torch.sub(i, i.bool(), alpha=2),
    lambda i: i.bool() - i.bool(), lambda i: torch.rsub(i.bool(), 1),
])
def test_subtraction_with_a_bool_operand_raises_as_on_cpu(expr):
    i = torch.tensor([1, 2, 3])
    _, cpu_err = cpu_or_error(lambda: expr(i))
    assert cpu_err is not None
    with pytest.raises(type(cpu_err)) as info:
        expr(i.to("tpu"))
    assert str(info.value).split(".")[0] == str(cpu_err).split(".")[0]


# --- writes through CPU index tensors and masks (index_put_) ----------------

def test_setitem_through_cpu_bool_mask_and_cpu_index():
    # The handed case 05.
    x = torch.arange(6., device="tpu")
    m = torch.tensor([True, False] * 3)
    with no_fallback():
        x[m] = 0
        assert x.cpu().tolist() == [0.0, 1.0, 0.0, 3.0, 0.0, 5.0]
        x[torch.tensor([1, 3])] = -1.0
        assert x.cpu().tolist() == [0.0, -1.0, 0.0, -1.0, 0.0, 5.0]
        assert x[m].cpu().tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_cpu_masks_and_indices_matches_cpu(accumulate):
    torch.manual_seed(0)
    base = torch.randn(4, 5, 3)
    mask2 = torch.rand(4, 5) > 0.5
    mask1 = torch.tensor([True, False, True, True])
    cases = [
        ((mask2,), torch.tensor(2.5)),
        ((mask2,), torch.randn(3)),
        ((mask1,), torch.randn(5, 3)),
        ((torch.tensor([3, 0, 2]),), torch.randn(3, 5, 3)),
        ((torch.tensor([0, 2]), torch.tensor([1, 4])), torch.randn(3)),
        ((torch.tensor([-1, 1]), torch.tensor([0, 0]), torch.tensor([2, 2])), torch.tensor(1.5)),
        ((mask1, torch.tensor([1, 1, 0])), torch.tensor(-2.0)),
    ]
    for indices, values in cases:
        expected = base.clone().index_put_(indices, values, accumulate=accumulate)
        with no_fallback():
            x = base.to("tpu")
            v = values.to("tpu") if values.dim() > 0 else values   # 0-d values may stay on CPU
            x.index_put_(indices, v, accumulate=accumulate)
            assert_close_cpu(x, expected)
    # Python indexing with a CPU mask on a permuted view writes through to the base.
    y = base.to("tpu")
    view = y.permute(1, 0, 2)
    mask = torch.rand(5, 4) > 0.3
    view[mask] = 7.0
    ref = base.clone()
    ref.permute(1, 0, 2)[mask] = 7.0
    assert_close_cpu(y, ref)


def test_cpu_index_out_of_range_raises_index_error():
    x = torch.zeros(4, device="tpu")
    with pytest.raises(IndexError):
        x[torch.tensor([0, 9])] = 1.0
    with pytest.raises(IndexError):
        x[torch.tensor([True, False])] = 1.0


# --- other checks CPU makes -------------------------------------------------

@pytest.mark.parametrize(
    "expr",
    [
        lambda t: t.t().mul_(t),
        lambda t: t[1:].add_(t[:-1]),
        lambda t: t.t().sin_() + t.sin_(),
        lambda t: torch.add(t, 1, out=t.t()),
        lambda t: torch.add(t.view(-1)[:8], 1, out=t.view(-1)[1:]),
        lambda t: torch.add(t[0], 1, out=t[0]),
    ],
)
def test_partially_overlapping_inplace_and_out_raise_as_on_cpu(expr):
    t = torch.arange(9.0).reshape(3, 3)
    _, cpu_err = cpu_or_error(lambda: expr(t.clone()))
    dev = t.to("tpu")
    if cpu_err is None:
        with no_fallback():
            assert_close_cpu(expr(dev), expr(t.clone()))
        return
    with pytest.raises(type(cpu_err), match="refer to a single memory location"):
        expr(dev)
    assert_close_cpu(dev, t)   # nothing was written


def _index():
    return torch.tensor([0, 1, 2])


@pytest.mark.parametrize("expr", [
    # index/scatter ops: self overlapping its index or source, or itself (ATen's meta checks)
    lambda t: t.view(-1)[:3].index_add_(0, _index(), t.view(-1)[1:4]),
    lambda t: t.view(-1)[:3].index_copy_(0, _index(), t.view(-1)[1:4]),
    lambda t: t.view(-1)[:3].put_(_index(), t.view(-1)[2:5]),
    lambda t: t[0].scatter_(0, _index(), t[0]),
    lambda t: t[0].expand(3, 3).scatter_add_(0, _index().expand(3, 3), t),
    # copy_: a source sharing some of dst's elements (TensorIterator)
    lambda t: t.view(-1)[0:8].copy_(t.view(-1)[1:9]), lambda t: t.t().copy_(t),
    # shifts: Python's in-place operators (float: the overlap is reported first)
    lambda t: t[:-1].__ilshift__(t[1:]), lambda t: t[:-1].__irshift__(t[1:]),
])
def test_index_copy_and_shift_overlaps_raise_as_on_cpu(expr):
    t = torch.arange(9.0).reshape(3, 3)
    _, cpu_err = cpu_or_error(lambda: expr(t.clone()))
    assert cpu_err is not None
    dev = t.to("tpu")
    with pytest.raises(type(cpu_err), match="single memory location|unsupported operation"):
        expr(dev)
    assert_close_cpu(dev, t)   # nothing was written


@pytest.mark.parametrize("expr,start", [
    (lambda i: i.index_fill_(0, i, 0), [0, 1, 2]),
    (lambda m: m[1:].masked_fill_(m[:-1], False), [True, False, True, True]),
    (lambda i: i.index_put_((i,), torch.tensor(0)), [0, 1, 2]),
])
def test_fills_overlapping_their_index_or_mask_raise_as_on_cpu(expr, start):
    t = torch.tensor(start)
    _, cpu_err = cpu_or_error(lambda: expr(t.clone()))
    with pytest.raises(type(cpu_err), match="unsupported operation"):
        expr(t.to("tpu"))


def test_put_without_accumulate_alerts_under_deterministic_algorithms():
    t = torch.zeros(4, device="tpu")
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="put_ does not have a deterministic implementation"):
            t.put_(torch.tensor([0, 0], device="tpu"), torch.tensor([1.0, 2.0], device="tpu"))
        t.put_(torch.tensor([0, 0], device="tpu"), torch.tensor([1.0, 2.0], device="tpu"),
               accumulate=True)
    finally:
        torch.use_deterministic_algorithms(False)
    assert t.cpu().tolist() == [3.0, 0.0, 0.0, 0.0]


def test_a_tpu_index_of_a_cpu_tensor_names_both_devices():
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same "
                                           r"device as the indexed tensor \(cpu\)"):
        torch.arange(4.0)[torch.tensor([1], device="tpu")]


def test_full_overlap_inplace_is_allowed():
    t = torch.arange(9.0).reshape(3, 3)
    dev = t.to("tpu")
    with no_fallback():
        dev.mul_(dev)
        dev.t().add_(dev.t())
    assert_close_cpu(dev, (t * t) * 2)


def test_kthvalue_on_bool_is_not_implemented_as_on_cpu():
    b = torch.tensor([True, False, True])
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        b.kthvalue(1)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        b.to("tpu").kthvalue(1)


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_float_to_int_conversion_of_nan_inf_and_out_of_range_matches_cpu(src):
    # x86 CPU semantics: NaN / inf / out of int32 (int64) range give the minimum;
    # 8- and 16-bit targets keep int32's low bits. XLA saturates.
    v = torch.tensor([float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, 300.0,
                      -1.0, -129.0, 2.7, -2.7, 65543.0]).to(src)
    with no_fallback():
        for dt in INT_DTYPES + [torch.bool]:
            assert_close_cpu(v.to("tpu").to(dt), v.to(dt))
            out = torch.empty(v.shape, dtype=dt, device="tpu")
            out.copy_(v.to("tpu"))
            assert_close_cpu(out, v.to(dt))


def test_nan_index_raises_index_error_as_on_cpu():
    x = torch.arange(4.0)
    i = torch.tensor([float("nan")])
    with pytest.raises(IndexError, match="out of bounds"):
        x[i.long()]
    with pytest.raises(IndexError, match="out of bounds"):
        x.to("tpu")[i.to("tpu").long()].cpu()


_INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("dtype", _INT_DTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "neg", "abs", "square"])
def test_integer_overflow_wraps_as_on_cpu(dtype, op):
    # Sibling programs of case 04: arithmetic at iinfo's ends wraps modulo 2^bits.
    info = torch.iinfo(dtype)
    a = torch.tensor([info.max, info.min, 0, 1, info.max // 2 + 1], dtype=dtype)
    fns = {"add": lambda t: t + 1, "sub": lambda t: t - 1, "mul": lambda t: t * 3,
           "neg": lambda t: -t, "abs": lambda t: t.abs(), "square": lambda t: t * t}
    run_both(fns[op], a)


@pytest.mark.parametrize("dtype", _INT_DTYPES)
def test_shifts_past_the_width_and_negative_floor_division_as_on_cpu(dtype):
    bits = torch.iinfo(dtype).bits
    signed = dtype != torch.uint8
    a = torch.tensor([1, 3, 100, -5 if signed else 5], dtype=dtype)
    s = torch.tensor([0, 1, bits - 1, bits], dtype=dtype)
    run_both(lambda x, y: x << y, a, s)
    run_both(lambda x, y: x >> y, a, s)
    run_both(lambda x: x << 70, a)
    run_both(lambda x: x >> (bits + 3), a)
    b = torch.tensor([2, -3 if signed else 3, 7, 4], dtype=dtype)
    run_both(lambda x, y: x // y, a, b)
    run_both(lambda x, y: x % y, a, b)
    run_both(lambda x, y: torch.fmod(x, y), a, b)
    run_both(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)


def test_cpu_index_writes_through_views_and_autograd_match_cpu():
    # Sibling programs of case 05: a CPU index or mask writing into a view
    # lands in the base; through autograd the written elements get no grad.
    def views(base):
        y = base.clone()
        y.t()[torch.tensor([1, 2])] = -1
        y[1:][torch.tensor([True, False])] = 0
        y[:, ::2][torch.tensor([0, 2]), torch.tensor([1, 0])] = 9
        y.diagonal()[torch.tensor([True, False, True])] = 5
        return y
    run_both(views, torch.arange(12.0).reshape(3, 4))

    def grads(dev):
        x = torch.arange(6.0, device=dev, requires_grad=True)
        y = x * 2
        y[torch.tensor([1, 1, 4])] = torch.tensor([5.0, 6.0, 7.0], device=dev)
        y[torch.tensor([True, False, False, False, False, True])] = 0
        (y * y).sum().backward()
        return x.grad
    expected = grads("cpu")
    with no_fallback():
        got = grads("tpu")
    assert torch.equal(got.cpu(), expected)
