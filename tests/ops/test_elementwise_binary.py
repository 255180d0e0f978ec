"""Binary pointwise ops on tpu compared with CPU PyTorch (values, dtype, shape,
type promotion) with no CPU fallback: logaddexp, hypot, copysign, xlogy, fmax,
heaviside, the shifts, gcd/lcm, torch.equal, and CPU's errors for bad input;
the computation follows the inputs' dtypes (not a complex out=), a Python
scalar of a half tensor stays in float as CPU's kernels keep it, and a complex
alpha times b is always multiplied, as CPU does."""

import pytest
import torch

from _util import assert_close_cpu, floats, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md

BINARY_FLOAT = [torch.logaddexp, torch.logaddexp2, torch.hypot]
BINARY_PROMOTING = [torch.copysign, torch.xlogy, torch.special.xlog1py]
BINARY_ANY = [torch.fmax, torch.fmin]


@pytest.mark.parametrize("fn", BINARY_FLOAT + BINARY_PROMOTING + BINARY_ANY)
def test_binary_float(fn):
    x, y = floats(), floats().flip(0)
    run_both(fn, x, y)
    run_both(fn, x, y[0])  # broadcast
    run_both(fn, x.t(), y.t())  # non-contiguous
    run_both(fn, torch.tensor(2.0), torch.tensor(-3.0))
    run_both(fn, torch.empty(0, 3), torch.empty(0, 3))
    run_both(fn, x.bfloat16(), y.bfloat16())


@pytest.mark.parametrize("fn", BINARY_PROMOTING + BINARY_ANY)
def test_binary_int_bool(fn):
    i = torch.randint(-4, 5, (3, 4))
    b = torch.rand(3, 4) > 0.5
    run_both(fn, i, i.flip(1))
    run_both(fn, b, b.flip(0))
    run_both(fn, i, b)


@pytest.mark.parametrize("fn", BINARY_FLOAT)
def test_binary_float_rejects_int(fn):
    same_error(fn, torch.tensor([1, 2]), torch.tensor([3, 4]))


def test_binary_scalar_overloads():
    x = floats().abs()
    run_both(lambda t: torch.xlogy(t, 2.0), x)
    run_both(lambda t: torch.xlogy(2, t), x)
    run_both(lambda t: torch.special.xlog1py(t, 2.0), x)
    run_both(lambda t: torch.copysign(t, -1.0), x)


def test_heaviside():
    x = floats()
    run_both(torch.heaviside, x, torch.full_like(x, 0.5))
    run_both(torch.heaviside, torch.randint(-2, 3, (4,)), torch.tensor([7, 8, 9, 10]))
    run_both(torch.heaviside, torch.tensor([True, False]), torch.tensor([False, True]))
    same_error(torch.heaviside, torch.tensor([1, 0]), torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_shifts(dtype):
    x = torch.randint(0 if dtype == torch.uint8 else -100, 100, (20,)).to(dtype)
    s = torch.randint(0 if dtype == torch.uint8 else -3, 70, (20,)).to(dtype)
    run_both(lambda a, b: a << b, x, s)
    run_both(lambda a, b: a >> b, x, s)
    run_both(torch.bitwise_left_shift, x, s)
    run_both(torch.bitwise_right_shift, x, s)
    run_both(lambda a: a << 2, x)
    run_both(lambda a: a >> 1, x)
    same_error(lambda a, b: a << b, x.float(), s)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_gcd_lcm(dtype):
    lo = 0 if dtype == torch.uint8 else -60
    a = torch.randint(lo, 60, (40,)).to(dtype)
    b = torch.randint(lo, 60, (40,)).to(dtype)
    a[0], b[0] = 0, 0
    run_both(torch.gcd, a, b)
    run_both(torch.lcm, a[:10], b[:10])
    run_both(torch.gcd, a.reshape(4, 10), b[:10])
    same_error(torch.gcd, torch.tensor([1.0]), torch.tensor([2.0]))


def test_gcd_large():
    run_both(
        torch.gcd, torch.tensor([2**62, 2**40 * 3, 6765]), torch.tensor([2**61, 2**35 * 9, 4181])
    )


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_gcd_takes_euclids_worst_case(dtype):
    # Consecutive Fibonacci numbers take the most steps (Lame); the loop's step
    # count comes from the largest operand. Then the extremes: abs(min) stays
    # negative, as in C++. (CPU's lcm of min and max divides min by -1: SIGFPE.)
    info = torch.iinfo(dtype)
    fib = [1, 2]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    a = torch.tensor(fib[1:] + [0, 0, info.min, info.min, info.max], dtype=dtype)
    b = torch.tensor(fib[:-1] + [0, 5, info.min, 3, info.min], dtype=dtype)
    run_both(torch.gcd, a, b)
    run_both(torch.gcd, b, a)
    run_both(torch.lcm, a[:len(fib) - 1], b[:len(fib) - 1])


@pytest.mark.parametrize("a,b", [
    (torch.tensor([1, 2]), torch.tensor([1.0, 2.0])),  # promoted, as on CPU
    (torch.ones(2, 3), torch.ones(3, 2)),
    (torch.tensor([float("nan")]), torch.tensor([float("nan")])),
    (torch.ones(0), torch.ones(0)),
    (torch.arange(6.0).reshape(2, 3).t(), torch.arange(6.0).reshape(2, 3).t().contiguous()),
    (torch.tensor([True, False]), torch.tensor([True, True])),
])
def test_equal_matches_cpu(a, b):
    with no_fallback():
        assert torch.equal(a.to("tpu"), b.to("tpu")) == torch.equal(a, b)


def test_efficientzerotensor_and_sgn_backward():
    # Autograd's zero gradients (sgn of a real tensor) come from
    # _efficientzerotensor, a dense zero tensor on tpu.
    for dtype in (None, torch.int32):
        with no_fallback():
            zeros = torch._efficientzerotensor([2, 3], dtype=dtype, device="tpu")
        assert_close_cpu(zeros, torch._efficientzerotensor([2, 3], dtype=dtype))
    x = torch.randn(5)
    for dev in ("cpu", "tpu"):
        leaf = x.to(dev).detach().requires_grad_()
        with no_fallback():
            (torch.sgn(leaf) * leaf).sum().backward()
        if dev == "cpu":
            expected = leaf.grad
    assert_close_cpu(leaf.grad, expected)


@pytest.mark.parametrize("fn", [
    lambda a, b, out: torch.true_divide(a, b, out=out),
    lambda a, b, out: torch.div(a, b, out=out),
    lambda a, b, out: torch.mul(a, b, out=out),
    lambda a, b, out: torch.reciprocal(a.long(), out=out),
    lambda a, b, out: torch.exp(a.long(), out=out),
    lambda a, b, out: torch.sin(b.float(), out=out),
])
def test_complex_out_of_real_inputs_computes_in_the_inputs_dtype(fn):
    # A complex out= once chose the complex rules, which divided int16 by int32
    # as integers (2 for 5 / 2): the inputs decide, as TensorIterator's common
    # dtype does, and the real result is written converted.
    a = torch.tensor([5, -7, 3, 0, 9], dtype=torch.int16)
    b = torch.tensor([2, 2, -4, 5, 3], dtype=torch.int32)
    run_both(lambda x, y: fn(x, y, torch.empty(5, dtype=torch.complex64, device=x.device)), a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scalar", [1e5, 1e-5, 3.3, -2.9e4, 1 / 3])
def test_half_times_or_over_a_python_scalar_rounds_once(dtype, scalar):
    # CPU keeps the scalar in float (100 / 1e5 is 0.001, not 100 / inf = 0).
    x = (torch.randn(512) * 100).to(dtype)
    for fn in (lambda t: t * scalar, lambda t: t / scalar, lambda t: t.clone().mul_(scalar),
               lambda t: torch.div(t, scalar), lambda t: t * torch.tensor(scalar)):
        want = fn(x)
        with no_fallback():
            got = fn(x.to("tpu")).cpu()
        assert got.dtype == dtype
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got[~got.isnan()], want[~want.isnan()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("alpha", [0.1 + 0.2j, 2 + 0j])
def test_complex_alpha_of_real_inputs_raises(dtype, alpha):
    # 2+0j once computed silently on tpu; CPU refuses any complex alpha.
    m = torch.tensor([3, 4]).to(dtype)
    same_error(lambda a: torch.add(a, a, alpha=alpha), m)
    same_error(lambda a: torch.sub(a, a, alpha=alpha), m)


def test_complex_add_sub_of_non_finite_values_as_cpu():
    # CPU computes a + alpha * b with alpha = 1 too: (1+0j) * (-inf-infj) is nan+nanj.
    inf = float("inf")
    a = torch.tensor([complex(inf, inf), complex(1, 2), complex(inf, 0)])
    b = torch.tensor([complex(-inf, -inf), complex(3, -1), complex(0, inf)])
    for fn in (torch.add, torch.sub, lambda x, y: torch.add(x, y, alpha=2)):
        run_both(fn, a, b)
        run_both(fn, a.to(torch.complex128), b.to(torch.complex128))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16])
def test_lcm_overflow_keeps_cpus_sign(dtype):
    # C++ multiplies and takes abs in int, then narrows: lcm(50, 3) in int8 is -106.
    a = torch.tensor([50, -1113 if dtype == torch.int16 else -60, 7, 0]).to(dtype)
    b = torch.tensor([3, -10701 if dtype == torch.int16 else 7, 9, 5]).to(dtype)
    run_both(torch.lcm, a, b)


@pytest.mark.parametrize("fn", [
    lambda t: torch.remainder(t, 70000.0), lambda t: torch.fmod(t, 70000.0),
    lambda t: t < 70000.0, lambda t: torch.remainder(t.bfloat16(), 1e39),
    lambda t: torch.remainder(t.to(torch.int8), 300),
    lambda t: torch.bitwise_and(t.to(torch.int8), 300),
])
def test_python_scalar_out_of_the_dtypes_range_casts_as_cpu(fn):
    # TensorIterator casts a Python scalar into the common dtype unchecked
    # (70000. in float16 is inf, 300 in int8 is 44); tpu raised "value cannot
    # be converted to type c10::Half without overflow".
    run_both(fn, torch.tensor([60000.0, 1.0, -3.0, 100.0], dtype=torch.half))


def test_fill_and_clamp_keep_cpus_overflow_error():
    x = torch.tensor([1.0, 2.0], dtype=torch.half)
    same_error(lambda t: t.clone().fill_(1e6), x)
    same_error(lambda t: t.clamp(max=1e6), x)


@pytest.mark.parametrize("fn", [
    lambda a, b: torch.div(a, b, rounding_mode="floor"), torch.floor_divide,
    lambda a, b: a // 3.0, lambda a, b: torch.floor_divide(a.double(), b.double()),
])
def test_floor_division_zero_quotient_takes_the_sign_of_x_over_y(fn):
    # CPU's div_floor gives copysign(0, a / b) for a zero quotient: -0. // -3.
    # is 0. (tpu gave -0., so a later atan2 returned -pi for CPU's pi).
    a = torch.tensor([-0.0, 0.0, -0.0, 0.0, 0.5, -0.5, -1e-30, 1e-30])
    b = torch.tensor([-3.0, -3.0, 3.0, 3.0, 2.0, -2.0, 5.0, -5.0])
    actual, expected = run_both(fn, a, b)
    assert torch.equal(torch.signbit(actual).cpu(), torch.signbit(expected))


@pytest.mark.parametrize("exponent", [True, False, 0, 1, 2, 2.5])
def test_pow_of_bool_tensor_by_scalar(exponent):
    # ATen fills 1 for an exponent of 0 / False and copies the base for 1 /
    # True before its kernel; tpu raised "pow" not implemented for 'Bool'.
    run_both(torch.pow, torch.tensor([[True, False], [False, True]]), exponent)


def test_pow_of_bool_tensors_raises_as_cpu():
    b = torch.tensor([True, False])
    same_error(lambda t: torch.pow(t, t), b)


def test_pow_checks_shapes_before_dtypes():
    # CPU's TensorIterator raises the size mismatch before "pow" has no bool kernel.
    same_error(lambda t: torch.pow(t[:3], t.expand(4, 5)), torch.tensor([True, False] * 3)[:5])


INT_POW_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def _int_values(dtype, n, generator):
    # Small bases (where powers stay in range), +-1, 0, the extremes and random
    # bits, so both the exact and the wrapping results are checked.
    info = torch.iinfo(dtype)
    special = torch.tensor([0, 1, -1, 2, -2, 3, -3, 5, -7, 127, -128], dtype=torch.int64)
    special = torch.cat([special, torch.tensor([info.max, info.min, info.max - 1, info.min + 1])])
    rand = torch.randint(info.min, info.max, (n,), dtype=torch.int64, generator=generator)
    small = torch.randint(-9, 10, (n,), generator=generator)
    return torch.cat([special, rand, small]).clamp(info.min, info.max).to(dtype)


@pytest.mark.parametrize("dtype", INT_POW_DTYPES, ids=str)
@pytest.mark.parametrize("numel", [1 << 10, 1 << 17], ids=["looped", "unrolled"])
def test_integer_pow_matches_cpu_over_many_values(dtype, numel):
    # int64 tensor exponents loop over the exponent bits on tensors of up to
    # 2^16 elements (stablehlo/loop_kernels.h) and are unrolled on larger ones
    # and for narrower dtypes: both must keep CPU's powi exactly (wrapping overflow,
    # 0 ** 0 == 1, negative exponents 0 except for bases 1 and -1).
    g = torch.Generator().manual_seed(0)
    values = _int_values(dtype, 64, g)
    base = values[torch.randint(0, len(values), (numel,), generator=g)]
    exp = values[torch.randint(0, len(values), (numel,), generator=g)]
    pairs = torch.cartesian_prod(values.long(), values.long()).to(dtype)  # every pair
    run_both(torch.pow, base, exp)
    run_both(torch.pow, pairs[:, 0], pairs[:, 1])
    run_both(torch.pow, base.view(-1, 8)[:, :3], exp.view(-1, 8)[:, 5:])  # non-contiguous
    run_both(torch.pow, base.view(-1, 8), exp[:8])  # broadcast
    run_both(torch.pow, base, exp[0])  # 0-d tensor exponent
    run_both(lambda b, e: b.clone().pow_(e), base, exp)
    for e in [0, 1, 2, 7, 8, 9, 15, 31, 62, 63, 64, 127, 255, 2**31 - 1, 2**62 + 1]:
        if e <= torch.iinfo(dtype).max or dtype == torch.int64:
            run_both(torch.pow, base, e)  # pow.Tensor_Scalar
    for b in [0, 1, -1, 2, -3, 7]:
        run_both(lambda t: torch.pow(b, t), exp)  # pow.Scalar
    run_both(torch.pow, base.to(torch.int8), exp.long())  # promoted to int64
    run_both(lambda b, e: torch._foreach_pow([b, b[:7], b[3:]], [e, e[:7], e[:-3]]), base, exp)


def test_integer_pow_zero_size_and_0d_match_cpu():
    for dtype in INT_POW_DTYPES:
        run_both(torch.pow, torch.empty(0, 3, dtype=dtype), torch.empty(0, 3, dtype=dtype))
        run_both(torch.pow, torch.tensor(3, dtype=dtype), torch.tensor(100, dtype=dtype))
        run_both(torch.pow, torch.tensor(-1, dtype=torch.int64), torch.tensor(-(2**63)))
