"""Elementwise unary ops, activations and selection ops on tpu, compared with CPU
PyTorch: values, dtype and shape, with no CPU fallback.

Inputs are built on CPU, copied to tpu whole, and viewed there (run_both's
`view`: 0-d, empty, transposed, strided), so each lowering reads real strided
tpu views. Error cases check that tpu raises the CPU exception type with the
CPU message.
"""

import functools

import pytest
import torch
import torch.nn.functional as F

import torchtpu

from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md

NAN, INF = float("nan"), float("inf")

VIEWS = {
    "contiguous": lambda t: t,
    "0d": lambda t: t[1, 2],
    "empty": lambda t: t[:0],
    "transposed": lambda t: t.t(),
    "strided": lambda t: t[::2, 1::2],
}


def specials(seed=0):
    """float32 [6, 5]: random values plus NaN, +-inf, +-0 and exact halves."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 5, generator=g) * 2
    x[0] = torch.tensor([NAN, INF, -INF, 0.0, -0.0])
    x[1] = torch.tensor([0.5, -0.5, 1.5, 2.5, -2.5])
    return x


def ints(dtype=torch.int64):
    return torch.tensor([[-3, 0, 5, 7, -1], [2, -8, 1, 0, 4], [9, 3, -2, 6, -5]]).to(dtype)


def bools():
    return ints() > 0


def check_raises(fn, *inputs):
    """fn raises on tpu the exception type and message it raises on CPU."""
    with pytest.raises(Exception) as cpu_err:
        fn(*inputs)
    tpu = [t.to("tpu") if isinstance(t, torch.Tensor) else t for t in inputs]
    with pytest.raises(type(cpu_err.value)) as tpu_err:
        fn(*tpu)
    assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]


# ------------------------------------------------------------------ math functions

FLOAT_FUNCS = [
    "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "sigmoid", "erf", "erfinv", "lgamma", "digamma", "deg2rad", "rad2deg",
]
ROUNDING = ["floor", "ceil", "round", "trunc"]
SIGN_AND_TESTS = ["abs", "neg", "sign", "sgn", "signbit", "logical_not", "isnan", "isinf",
                  "isposinf", "isneginf", "isfinite", "nan_to_num", "frac"]


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("name", FLOAT_FUNCS + ROUNDING + SIGN_AND_TESTS)
def test_float32(name, view):
    run_both(getattr(torch, name), specials(), view=VIEWS[view])


@pytest.mark.parametrize("name", FLOAT_FUNCS)
@pytest.mark.parametrize("make", [ints, bools], ids=["int64", "bool"])
def test_float_funcs_promote_integers(name, make):
    # Integer and bool inputs give the default float dtype.
    out, _ = run_both(getattr(torch, name), make())
    assert out.dtype == torch.float32


def test_float_funcs_follow_default_dtype():
    torch.set_default_dtype(torch.float64)
    try:
        assert run_both(torch.sqrt, ints())[0].dtype == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", ["exp", "log1p", "tanh", "sigmoid", "erf", "rsqrt", "round"])
def test_other_float_dtypes(name, dtype):
    run_both(getattr(torch, name), specials().to(dtype))


@pytest.mark.parametrize("name", ROUNDING + ["abs", "neg", "sign", "sgn", "signbit",
                                             "logical_not", "isnan", "isinf", "isposinf",
                                             "isneginf", "isfinite", "nan_to_num",
                                             "bitwise_not"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integers(name, dtype):
    run_both(getattr(torch, name), ints(dtype), view=VIEWS["transposed"])


@pytest.mark.parametrize("name", ["sign", "sgn", "signbit", "logical_not", "isnan", "isinf",
                                  "isposinf", "isneginf", "nan_to_num", "bitwise_not"])
def test_bool(name):
    run_both(getattr(torch, name), bools())


def test_special_points():
    x = torch.tensor([-2.0, -1.0, 0.0, -0.0, 1.0, -1.0 + 1e-7, 1e-30, 1e30, -1e30])
    for fn in (torch.digamma, torch.lgamma, torch.erfinv, torch.atanh, torch.acosh,
               torch.reciprocal, torch.rsqrt, torch.sign, torch.exp, torch.expm1):
        run_both(fn, x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -2])
def test_round_decimals(decimals):
    x = torch.tensor([1.2345, -2.5551, 1234.5, -0.05, 0.15, NAN, INF, 15.0, 250.0])
    run_both(lambda t: torch.round(t, decimals=decimals), x)


def test_bitwise_not_all_int_widths():
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        run_both(torch.bitwise_not, ints(dtype))


def test_abs_int64_min():
    run_both(torch.abs, torch.tensor([-(2**63), -5, 2**63 - 1]))


@pytest.mark.parametrize("fn, make", [
    (torch.neg, bools),
    (torch.abs, bools),
    (torch.floor, bools),
    (torch.round, bools),
    (torch.trunc, bools),
    (torch.bitwise_not, specials),
    (torch.frac, ints),
    (lambda t: torch.round(t, decimals=2), ints),
    (lambda t: torch.round(t, decimals=0), ints),
], ids=["neg_bool", "abs_bool", "floor_bool", "round_bool", "trunc_bool", "bitwise_not_float",
        "frac_int", "round_decimals_int", "round_decimals0_int"])
def test_unary_errors(fn, make):
    check_raises(fn, make())


# ------------------------------------------------------------------ in-place and out=

def test_in_place_on_views():
    for fn in (lambda t: t[::2].exp_(), lambda t: t.t()[1:].neg_(), lambda t: t[2].sigmoid_(),
               lambda t: t[:, 1].relu_(), lambda t: t[1:, ::2].clamp_(-1, 1),
               lambda t: t.t().floor_(), lambda t: t[0].nan_to_num_()):
        cpu, tpu = specials(), specials().to("tpu")
        fn(cpu)
        with no_fallback():
            ret = fn(tpu)
        assert_close_cpu(tpu, cpu)
        assert ret.device.type == "tpu"


def test_in_place_keeps_data_ptr():
    x = specials().to("tpu")
    ptr = x.data_ptr()
    with no_fallback():
        x.abs_().sqrt_()
    assert x.data_ptr() == ptr
    assert_close_cpu(x, specials().abs().sqrt())


def test_in_place_float_op_on_int_raises():
    check_raises(lambda t: t.sqrt_(), ints())


def test_out_variants():
    x = specials()
    for fn in (lambda t, o: torch.exp(t, out=o),
               lambda t, o: torch.clamp(t, -1, 1, out=o),
               lambda t, o: torch.sigmoid(t, out=o),
               lambda t, o: torch.round(t, decimals=1, out=o)):
        cpu_out, tpu_out = torch.empty(0), torch.empty(0).to("tpu")  # resized by the op
        fn(x, cpu_out)
        with no_fallback():
            fn(x.to("tpu"), tpu_out)
        assert_close_cpu(tpu_out, cpu_out)


def test_out_with_other_dtype():
    # logical_not writes into any dtype; isnan's bool result into a float out.
    for fn in (torch.logical_not, torch.neg):
        cpu_out, tpu_out = torch.empty(6, 5), torch.empty(6, 5).to("tpu")
        fn(specials(), out=cpu_out)
        with no_fallback():
            fn(specials().to("tpu"), out=tpu_out)
        assert_close_cpu(tpu_out, cpu_out)


def test_out_of_lower_dtype_raises():
    check_raises(lambda t, o: torch.exp(t, out=o), ints(), torch.empty(3, 5, dtype=torch.int64))


@pytest.mark.parametrize("fn", ["abs", "absolute", "nan_to_num", "signbit"])
@pytest.mark.parametrize("src, dst", [
    (torch.float32, torch.float64), (torch.float32, torch.complex64),
    (torch.int64, torch.float32), (torch.complex64, torch.complex128)], ids=str)
def test_out_dtype_cpu_refuses(fn, src, dst):
    # abs of a real input and nan_to_num take only an out of the input's dtype,
    # signbit only bool (tpu cast into any safe dtype).
    if fn == "signbit" and src.is_complex:
        pytest.skip("signbit refuses complex inputs before the out check")
    x = torch.tensor([1.5, -2.0]).to(src)
    check_raises(lambda t, o: getattr(torch, fn)(t, out=o), x, torch.empty(2, dtype=dst))


@pytest.mark.parametrize("fn", ["frac", "bitwise_not", "ceil", "floor", "trunc", "round",
                                "round_decimals", "sgn", "neg", "sign"])
@pytest.mark.parametrize("src, dst", [
    (torch.int64, torch.float32), (torch.float32, torch.int64), (torch.float32, torch.float64),
    (torch.bool, torch.float32), (torch.complex64, torch.float32), (torch.int32, torch.int32)],
    ids=str)
def test_same_dtype_out_error_order_is_cpus(fn, src, dst):
    # TensorIterator's check_all_same_dtype ("Found dtype ...") comes before
    # the kernel's own dtype check (frac of int64: "frac_cpu" not implemented),
    # and after neg's bool and sign's complex checks; where CPU computes, tpu
    # gives its values.
    x = torch.tensor([1.5, -2.0, 0.0]).to(src)
    op = getattr(torch, fn, None) or functools.partial(torch.round, decimals=1)
    try:
        want = op(x, out=torch.empty(3, dtype=dst))
    except Exception:  # noqa: BLE001  (CPU's error is the reference)
        same_error(lambda t, o: op(t, out=o), x, torch.empty(3, dtype=dst))
        return
    out = torch.empty(3, dtype=dst, device="tpu")
    with no_fallback():
        op(x.to("tpu"), out=out)
    assert_close_cpu(out, want)


@pytest.mark.parametrize("dst", [torch.float32, torch.float64, torch.complex64])
def test_abs_of_complex_into_a_real_or_same_out(dst):
    x = torch.tensor([3 + 4j, -1j, 0j], dtype=torch.complex64)
    cpu_out, tpu_out = torch.empty(3, dtype=dst), torch.empty(3, dtype=dst).to("tpu")
    torch.abs(x, out=cpu_out)
    torch.abs(x.to("tpu"), out=tpu_out)
    assert_close_cpu(tpu_out, cpu_out)


# ------------------------------------------------------------------ clamp

@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (0.5, None), (None, -0.5), (2.0, 1.0),
                                    (0.0, NAN)], ids=str)
def test_clamp_scalar(bounds, view):
    run_both(lambda t: torch.clamp(t, *bounds), specials(), view=VIEWS[view])


def test_clamp_min_max():
    run_both(lambda t: torch.clamp_min(t, 0.25), specials())
    run_both(lambda t: torch.clamp_max(t, 0.25), specials())
    lo = torch.tensor([0.0, 1.0, -1.0, 2.0, NAN])
    run_both(lambda t, lo: torch.clamp_min(t, lo), specials(), lo)
    run_both(lambda t, hi: torch.clamp_max(t, hi), specials(), torch.full((6, 1), 0.5))


def test_clamp_tensor_broadcast():
    lo = torch.tensor([-1.0, 0.0, -2.0, 1.0, -0.5])
    hi = torch.full((6, 1), 1.0)
    run_both(lambda t, a, b: torch.clamp(t, a, b), specials(), lo, hi)
    run_both(lambda t, a: torch.clamp(t, min=a), specials(), lo)
    run_both(lambda t, b: torch.clamp(t, max=b), specials(), hi)
    # Bounds broadcast the result beyond self's shape.
    run_both(lambda t, b: torch.clamp(t, max=b), torch.randn(5), hi)


def test_clamp_promotes():
    run_both(lambda t: torch.clamp(t, 1.5), ints())  # float bound -> float result
    run_both(lambda t: torch.clamp(t, -2, 3), ints())  # stays int64
    run_both(lambda t: torch.clamp(t, 0), bools())  # bool with int bound -> int64
    run_both(lambda t: torch.clamp(t, -1), ints(torch.uint8))  # -1 wraps to 255
    run_both(lambda t, lo: torch.clamp(t, lo), ints(), torch.tensor(1.5))  # 0-d CPU bound
    run_both(lambda t, lo: torch.clamp(t, lo), bools(), torch.tensor(True))


@pytest.mark.parametrize("fn", [
    lambda t: torch.clamp(t),
    lambda t: torch.clamp(t, None, None),
    lambda t: torch.clamp(t > 0, True, True),
    lambda t: torch.clamp_min(t > 0, False),
])
def test_clamp_errors(fn):
    check_raises(fn, specials())


# ------------------------------------------------------------------ where, fill, masked_fill

def test_where():
    x, y = specials(), specials(1)
    run_both(lambda c, a, b: torch.where(c, a, b), x > 0, x, y)
    run_both(lambda c, a, b: torch.where(c, a, b), x > 0, x, y, view=VIEWS["transposed"])
    run_both(lambda c, a, b: torch.where(c, a, b), x[:, :1] > 0, x[0], y[:, :1])  # broadcast
    run_both(lambda c, a: torch.where(c, a, 1.5), x > 0, ints()[:1].expand(6, 5))  # int -> float
    run_both(lambda c, a: torch.where(c, 7, a), x > 0, ints()[:1])
    run_both(lambda c, a, b: torch.where(c, a, b), x > 0, torch.tensor(1), torch.tensor(2.5))
    run_both(lambda c, a, b: torch.where(c, a, b), bools(), bools(), ints(torch.int32))


def test_where_errors():
    check_raises(lambda c, a: torch.where(c, a, a), ints(), ints())


@pytest.mark.parametrize("view", VIEWS)
def test_fill_and_zero(view):
    for fn in (lambda t: t.fill_(2.5), lambda t: t.zero_(), lambda t: t.fill_(torch.tensor(-3.0)),
               lambda t: torch.fill(t, 7), lambda t: t.fill_(True)):
        run_both(lambda t: fn(VIEWS[view](t)), specials())
    run_both(lambda t: VIEWS[view](t).fill_(2.7), ints())  # 2.7 -> 2
    run_both(lambda t: VIEWS[view](t).fill_(2), bools())


def test_fill_from_tpu_scalar_tensor():
    run_both(lambda t, v: t[::2].fill_(v), specials(), torch.tensor(4.0))


def test_fill_keeps_aliases():
    base = specials().to("tpu")
    view = base[1:3]
    with no_fallback():
        view.zero_()
    expected = specials()
    expected[1:3] = 0
    assert_close_cpu(base, expected)


def test_masked_fill():
    x = specials()
    mask = x > 0.5
    run_both(lambda t, m: t.masked_fill(m, -1.0), x, mask)
    run_both(lambda t, m: t.masked_fill(m, NAN), x, mask, view=VIEWS["transposed"])
    run_both(lambda t, m: t.masked_fill(m, torch.tensor(9.0)), x, mask)
    run_both(lambda t, m, v: t.masked_fill(m, v), x, mask, torch.tensor(3.0))  # tpu 0-d value
    run_both(lambda t, m: t.masked_fill(m, 2.7), ints(), ints() > 1)  # converted to int64
    run_both(lambda t, m: t.masked_fill(m, 5.0), torch.zeros(5), torch.tensor([[True], [False]]))
    run_both(lambda t, m: t[1:, ::2].masked_fill_(m, 0.0), x.clone(),
             torch.tensor([True, False, True]))
    run_both(lambda t, m: t.masked_fill_(m, 1.0), x[:0], mask[:0])


@pytest.mark.parametrize("fn", [
    lambda t: t.masked_fill(t, 1.0),
    lambda t: t.masked_fill(t > 0, torch.tensor([1.0])),
    lambda t: t.fill_(torch.tensor([1.0, 2.0])),
    lambda t: torch.zeros(5, device=t.device).masked_fill_(torch.ones(2, 5, dtype=torch.bool,
                                                                       device=t.device), 1.0),
])
def test_fill_errors(fn):
    check_raises(fn, specials()[0])


def test_nan_to_num():
    run_both(lambda t: torch.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-3.0), specials())
    run_both(lambda t: torch.nan_to_num(t, posinf=1e3), specials())
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        run_both(torch.nan_to_num, specials().to(dtype))


# ------------------------------------------------------------------ lerp, addcmul, addcdiv

def test_lerp():
    a, b = specials(), specials(1)
    for w in (0.0, 0.3, 0.5, 0.9, 1.0, -1.5):
        run_both(lambda x, y: torch.lerp(x, y, w), a, b)
    run_both(lambda x, y, w: torch.lerp(x, y, w), a, b, torch.rand(6, 5))
    run_both(lambda x, y, w: torch.lerp(x, y, w), a, b[0], torch.rand(6, 1))  # broadcast
    run_both(lambda x, y, w: torch.lerp(x, y, w), a, b, torch.tensor(0.7, dtype=torch.float64))
    run_both(lambda x, y, w: torch.lerp(x, y, w), ints(), ints(), torch.tensor(0.5))  # -> float
    # optimizer style, in place on a view
    run_both(lambda x, y: x.t().lerp_(y.t(), 0.1), a.clone(), b)


@pytest.mark.parametrize("fn, args", [
    (lambda x, y: torch.lerp(x, y, 0.5), (specials(), specials().double())),
    (lambda x, y, w: torch.lerp(x, y, w), (specials(), specials(), torch.rand(6, 5).double())),
    (lambda x, y: torch.lerp(x, y, 0.5), (ints(), ints())),
])
def test_lerp_errors(fn, args):
    check_raises(fn, *args)


@pytest.mark.parametrize("op", [torch.addcmul, torch.addcdiv])
def test_addcmul_addcdiv(op):
    a, b, c = specials(), specials(1), specials(2)
    run_both(lambda x, y, z: op(x, y, z), a, b, c)
    run_both(lambda x, y, z: op(x, y, z, value=-0.25), a, b, c, view=VIEWS["strided"])
    run_both(lambda x, y, z: op(x, y, z, value=3), a[:, :1], b[0], c)  # broadcast
    run_both(lambda x, y, z: op(x, y, z, value=0.5), a, ints().float()[:1], c)
    # Adam's update: param.addcdiv_(exp_avg, denom, value=-lr).
    run_both(lambda x, y, z: x.addcdiv_(y, z.abs().sqrt_().add_(1e-8), value=-1e-3),
             a.clone(), b, c)
    run_both(lambda x, y, z: x[::2].addcmul_(y[::2], z[::2], value=0.1), a.clone(), b, c)


def test_addcmul_integers():
    run_both(lambda x: torch.addcmul(x, x, x, value=2), ints())
    run_both(lambda x: torch.addcmul(x, x, x, value=0.5), ints())  # value truncates to 0
    run_both(lambda x: torch.addcmul(x, x, x, value=True), ints())
    run_both(lambda x, y: torch.addcdiv(x, y, y), ints(), ints().float() + 10)  # -> float


@pytest.mark.parametrize("fn, args", [
    (lambda x: torch.addcdiv(x, x, x), (ints(),)),
    (lambda x, y: torch.addcdiv(x, y, y), (specials()[:3], ints())),
    (lambda x: torch.addcmul(x, x, x), (bools(),)),
])
def test_addc_errors(fn, args):
    check_raises(fn, *args)


# ------------------------------------------------------------------ activations

ACTIVATIONS = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "threshold": lambda t: F.threshold(t, 0.5, -2.0),
    "hardtanh": F.hardtanh,
    "hardtanh_0_6": lambda t: F.hardtanh(t, 0.0, 6.0),
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "leaky_relu_0.2": lambda t: F.leaky_relu(t, 0.2),
    "elu": F.elu,
    "elu_params": lambda t: torch.ops.aten.elu(t, 0.7, 1.3, 0.8),
    "selu": F.selu,
    "celu": lambda t: F.celu(t, 0.5),
    "softplus": F.softplus,
    "softplus_params": lambda t: F.softplus(t, beta=2.0, threshold=1.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "logit": torch.logit,
    "logit_eps": lambda t: torch.logit(t, eps=0.1),
    "hardshrink": F.hardshrink,
    "softshrink": lambda t: F.softshrink(t, 0.7),
    "logsigmoid": F.logsigmoid,
}


def activation_input(name):
    x = specials()
    if name == "gelu":
        # CPU's vectorized erf gives NaN at +-inf, so CPU gelu(+-inf) is NaN in
        # the vectorized loop and +-inf in the scalar tail: not compared.
        x = torch.where(x.isinf(), x.sign() * 50, x)
    return x


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation(name, view):
    run_both(ACTIVATIONS[name], activation_input(name), view=VIEWS[view])


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "elu", "leaky_relu", "hardswish",
                                  "softplus", "sigmoid"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_activation_other_dtypes(name, dtype):
    run_both(ACTIVATIONS[name], activation_input(name).to(dtype))


def test_activation_integers():
    for fn in (torch.relu, F.hardtanh, lambda t: F.threshold(t, 0.5, 7.5), torch.logit,
               lambda t: F.hardtanh(t, -2.7, 3.9)):
        run_both(fn, ints())
    run_both(torch.relu, ints(torch.uint8))
    run_both(lambda t: F.hardtanh(t, 0, 2), ints(torch.uint8))


@pytest.mark.parametrize("fn, make", [
    (torch.relu, bools), (F.hardtanh, bools), (F.gelu, ints), (F.silu, ints), (F.elu, ints),
    (F.leaky_relu, ints), (F.softplus, ints), (F.hardsigmoid, ints), (F.hardswish, ints),
    (F.mish, ints), (F.hardshrink, ints), (F.softshrink, ints), (F.logsigmoid, ints),
    (lambda t: F.threshold(t, 0, 1), bools),
    (lambda t: F.hardtanh(t), lambda: ints(torch.uint8)),
    (lambda t: F.gelu(t, approximate="fast"), specials),
    (lambda t: F.softshrink(t, -1.0), specials),
])
def test_activation_errors(fn, make):
    check_raises(fn, make())


@pytest.mark.parametrize("name", ["relu", "relu_", "leaky_relu_", "elu_", "hardtanh_", "silu_",
                                  "hardswish_", "hardsigmoid_", "threshold_", "mish_"])
def test_activation_in_place_on_view(name):
    fns = {
        "relu": lambda t: torch.relu_(t[::2]),
        "relu_": lambda t: t[:, 1:3].relu_(),
        "leaky_relu_": lambda t: F.leaky_relu_(t.t()[1:], 0.1),
        "elu_": lambda t: F.elu_(t[2:], 0.5),
        "hardtanh_": lambda t: F.hardtanh_(t[::3], -0.5, 0.5),
        "silu_": lambda t: F.silu(t[1:, 1:], inplace=True),
        "hardswish_": lambda t: F.hardswish(t[0], inplace=True),
        "hardsigmoid_": lambda t: F.hardsigmoid(t.t(), inplace=True),
        "threshold_": lambda t: F.threshold_(t[:, ::2], 0.0, 9.0),
        "mish_": lambda t: F.mish(t[3], inplace=True),
    }
    cpu, tpu = specials(), specials().to("tpu")
    fns[name](cpu)
    with no_fallback():
        fns[name](tpu)
    assert_close_cpu(tpu, cpu)


# ------------------------------------------------------------------ gradients

def grads(fn, x, seed=3):
    """d(fn(x))/dx against a random upstream gradient, on CPU and on tpu."""
    g = torch.randn(fn(x).shape, generator=torch.Generator().manual_seed(seed))
    cpu_x = x.clone().requires_grad_()
    fn(cpu_x).backward(g)
    tpu_x = x.to("tpu").requires_grad_()
    with no_fallback():
        fn(tpu_x).backward(g.to("tpu"))
    assert tpu_x.grad is not None
    assert_close_cpu(tpu_x.grad, cpu_x.grad, rtol=1e-5, atol=1e-5)


GRAD_INPUT = torch.tensor([[-3.0, -1.2, -0.4, 0.3, 0.9], [1.7, 2.6, -2.2, 0.05, 4.0],
                           [0.6, -0.7, 25.0, -25.0, 0.2]])


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_grad(name):
    x = GRAD_INPUT.sigmoid() if name.startswith("logit") else GRAD_INPUT
    grads(ACTIVATIONS[name], x)


@pytest.mark.parametrize("fn", [torch.exp, torch.log, torch.sin, torch.cos, torch.sqrt, torch.abs,
                                torch.erf, torch.atan, torch.asinh, torch.reciprocal, torch.rsqrt,
                                torch.expm1, torch.log1p, torch.tan, torch.neg, torch.erfinv],
                         ids=lambda f: f.__name__)
def test_math_grad(fn):
    x = GRAD_INPUT.abs() + 0.5 if fn in (torch.log, torch.sqrt, torch.rsqrt) else GRAD_INPUT
    grads(fn, x.tanh() * 0.9 if fn is torch.erfinv else x)


def test_erfinv_is_accurate_in_the_tails():
    # Near |y| = 1 the gradient sqrt(pi)/2 exp(erfinv(y)^2) magnifies any error
    # of erfinv: tpu must match CPU to float32 rounding there, not just closely.
    y = torch.cat([torch.linspace(-0.99999994, 0.99999994, 20001),
                   torch.tensor([1.0, -1.0, 0.0, float("nan"), 1e-30, 1.5])])
    with no_fallback():
        out = torch.erfinv(y.to("tpu")).cpu()
    torch.testing.assert_close(out, torch.erfinv(y), rtol=2.5e-7, atol=0, equal_nan=True)
    yg = y[:-6].clone().requires_grad_()
    torch.erfinv(yg).sum().backward()
    yt = y[:-6].to("tpu").requires_grad_()
    torch.erfinv(yt).sum().backward()
    torch.testing.assert_close(yt.grad.cpu(), yg.grad, rtol=2e-6, atol=0)


def test_selection_grads():
    grads(lambda t: torch.clamp(t, -1.0, 1.0), GRAD_INPUT)
    grads(lambda t: torch.where(t > 0, t * 2, t), GRAD_INPUT)
    grads(lambda t: t.masked_fill(t < 0, 0.0), GRAD_INPUT)
    grads(lambda t: torch.lerp(t, t * 3, 0.25), GRAD_INPUT)
    grads(lambda t: torch.addcmul(t, t, t, value=0.5), GRAD_INPUT)


def test_in_place_activation_grad():
    # In-place forward: autograd differentiates from the result (is_result).
    def fn(t):
        y = t * 1.0
        F.elu_(y, 0.5)
        return F.leaky_relu_(y * 1.0, 0.1)
    grads(fn, GRAD_INPUT)


@pytest.mark.parametrize("op, args", [
    ("threshold_backward", (0.25,)),
    ("hardtanh_backward", (-0.5, 0.5)),
    ("leaky_relu_backward", (0.3, False)),
    ("softplus_backward", (2.0, 1.0)),
    ("hardsigmoid_backward", ()),
    ("hardswish_backward", ()),
    ("sigmoid_backward", ()),
    ("tanh_backward", ()),
    ("hardshrink_backward", (0.5,)),
    ("softshrink_backward", (0.5,)),
])
def test_backward_ops_broadcast_and_promote(op, args):
    fn = getattr(torch.ops.aten, op)
    x = specials(1)
    if op in ("hardtanh_backward", "hardshrink_backward", "softshrink_backward"):
        # CPU's vectorized loop gives 0 for a NaN input, its scalar tail loop
        # passes grad through; tpu gives 0 everywhere.
        x = x.nan_to_num(nan=0.3)
    run_both(lambda g, x: fn(g, x, *args), specials(), x[:1])
    run_both(lambda g, x: fn(g, x, *args), specials().double(), x)


def test_backward_ops_direct():
    a = torch.ops.aten
    g, x = specials(), specials(1)
    run_both(lambda g, x: a.gelu_backward(g, x), g, x)
    run_both(lambda g, x: a.gelu_backward(g, x, approximate="tanh"), g, x)
    run_both(lambda g, x: a.elu_backward(g, 0.7, 1.2, 0.9, False, x), g, x)
    run_both(lambda g, x: a.elu_backward(g, 0.7, 1.2, 0.9, True, x), g, x)
    run_both(lambda g, x: a.logit_backward(g, x.sigmoid()), g, x)
    # With eps, a NaN x: CPU's AVX2 kernel gives 0 on 16 or more elements (its
    # vectorized loop) and NaN on fewer (its scalar loop, and CUDA's kernel):
    # tpu gives NaN, so the NaN x are compared with CPU's scalar answer.
    y = x.sigmoid()
    run_both(lambda g, x: a.logit_backward(g, x, 0.2), g[1:], y[1:])
    nan_x = a.logit_backward(g.to("tpu"), y.to("tpu"), 0.2)[0].cpu()
    want = torch.stack([a.logit_backward(g[0, i:i + 1], y[0, i:i + 1], 0.2) for i in range(5)])
    torch.testing.assert_close(nan_x, want.flatten(), equal_nan=True)
    run_both(lambda g, x: a.threshold_backward(g, x, 0), ints(), ints(torch.int32))


@pytest.mark.parametrize("fn, args", [
    (lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, -0.1, True), (specials(), specials())),
    (lambda g, x: torch.ops.aten.elu_backward(g, -1.0, 1.0, 1.0, True, x),
     (specials(), specials())),
    (lambda g, x: torch.ops.aten.sigmoid_backward(g, x), (ints(), ints())),
    (lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="no"), (specials(), specials())),
    (lambda g, x: torch.ops.aten.threshold_backward(g, x, 0), (bools(), bools())),
])
def test_backward_errors(fn, args):
    check_raises(fn, *args)


def test_scalar_arguments_do_not_recompile():
    # Python scalars are program parameters: new values reuse the program.
    x = specials().to("tpu")
    torch.clamp(x, -1.0, 1.0)
    F.leaky_relu(x, 0.1)
    x.clone().lerp_(x, 0.1)
    torchtpu.metrics.reset()
    for v in (0.2, 0.3, 0.4):
        torch.clamp(x, -v, v)
        F.leaky_relu(x, v)
        x.clone().lerp_(x, v)
    torchtpu.sync()
    assert torchtpu.metrics.metrics()["compiles"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_inplace_overload_with_its_own_argument_order(dtype):
    # polygamma(n, self) but polygamma_(self, n): the in-place kernel reads the
    # functional's arguments by name (it read n as the tensor: an internal
    # assert); pow_.Scalar(self, exponent) is not pow.Scalar(self: Scalar, ...).
    x = torch.tensor([1.5, 2.0, 3.25, 7.0]).to(dtype)
    for n in (0, 1, 3):
        want = x.clone().double().polygamma_(n) if dtype == torch.int64 else x.clone().polygamma_(n)
        got = x.double().to("tpu") if dtype == torch.int64 else x.to("tpu")
        with no_fallback():
            got.polygamma_(n)
        assert_close_cpu(got, want)
    for e in (2, 0.5, -1.5):
        if dtype == torch.int64 and not isinstance(e, int):
            continue
        want, got = x.clone(), x.to("tpu")
        want.pow_(e)
        with no_fallback():
            got.pow_(e)
        assert_close_cpu(got, want)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.float32, torch.int64])
def test_conj_physical_out_and_inplace(dtype):
    # conj_physical.out fell back to CPU; conj_physical_ raised "DispatchStub:
    # missing kernel for tpu" (ATen's composite runs CPU's stub directly).
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.complex64, generator=g) * 3
    x = x.to(dtype) if dtype.is_complex else x.real.to(dtype)
    want = torch.empty(4, 3, dtype=dtype)
    torch.conj_physical(x, out=want)
    got = torch.empty(4, 3, dtype=dtype, device="tpu")
    inplace, inplace_want = x.to("tpu"), x.clone()
    with no_fallback():
        torch.conj_physical(x.to("tpu"), out=got)
        inplace.conj_physical_()
    inplace_want.conj_physical_()
    assert_close_cpu(got, want)
    assert_close_cpu(inplace, inplace_want)
    same_error(lambda t, o: torch.conj_physical(t, out=o), x, torch.empty(4, 3, dtype=torch.int8))
