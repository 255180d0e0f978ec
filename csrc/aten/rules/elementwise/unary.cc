// Lowerings of elementwise unary ATen ops: the math functions (exp, log, sin,
// erf, ...), rounding, sign, and the bitwise/logical negations and tests.
//
// PyTorch's dtype rules are kept: float functions give integer and bool inputs
// the default float dtype, rounding is the identity on integers, and a dtype a
// CPU kernel rejects is rejected here with the CPU kernel's message.
#include <cmath>

#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using pointwise::float_result;
using pointwise::not_implemented;
using pointwise::opmath;

using Fn = ir::Value (*)(LoweringContext&, ir::Value);

// fn(x) for a float function: the result dtype is float_result(x), the
// arithmetic runs in its opmath dtype.
std::vector<ir::Value> float_fn(LoweringContext& ctx, const at::Tensor& self, Fn fn) {
  ir::Value x = ctx.tensor(self);
  DType out = float_result(dtype(ctx, x));
  ir::Value y = fn(ctx, ctx.g().convert(x, opmath(out)));
  return {ctx.g().convert(y, out)};
}

template <Op op>
std::vector<ir::Value> float_op(LoweringContext& ctx, const Args& a) {
  return float_fn(ctx, a.tensor(0),
                  [](LoweringContext& c, ir::Value x) { return c.g().unary(op, x); });
}

// x * k or x / k for a structural constant k.
ir::Value scaled(LoweringContext& ctx, ir::Value x, Op op, double k) {
  return ctx.g().binary(op, x, full_like(ctx, x, k));
}

template <Fn fn>
std::vector<ir::Value> float_rule(LoweringContext& ctx, const Args& a) {
  return float_fn(ctx, a.tensor(0), fn);
}

ir::Value exp2_fn(LoweringContext& c, ir::Value x) {
  return c.g().binary(Op::kPow, full_like(c, x, 2.0), x);
}
// log2/log10 by the change of base, as JAX's jnp.log2/jnp.log10 do.
ir::Value log2_fn(LoweringContext& c, ir::Value x) {
  return scaled(c, c.g().unary(Op::kLog, x), Op::kDiv, M_LN2);
}
ir::Value log10_fn(LoweringContext& c, ir::Value x) {
  return scaled(c, c.g().unary(Op::kLog, x), Op::kDiv, M_LN10);
}
ir::Value reciprocal_fn(LoweringContext& c, ir::Value x) {
  return c.g().binary(Op::kDiv, full_like(c, x, 1.0), x);
}
// StableHLO has atan2 but no atan; atan(x) = atan2(x, 1) exactly.
ir::Value atan_fn(LoweringContext& c, ir::Value x) {
  return c.g().binary(Op::kAtan2, x, full_like(c, x, 1.0));
}
// Degrees and radians, with PyTorch's constant (M_PI / 180, UnaryOps.cpp).
ir::Value deg2rad_fn(LoweringContext& c, ir::Value x) {
  return scaled(c, x, Op::kMul, M_PI / 180.0);
}
ir::Value rad2deg_fn(LoweringContext& c, ir::Value x) {
  return scaled(c, x, Op::kMul, 180.0 / M_PI);
}
// digamma at a pole: PyTorch returns copysign(inf, -x) at 0 (calc_digamma in
// Math.h, following SciPy) and NaN at the negative integers.
ir::Value digamma_fn(LoweringContext& c, ir::Value x) {
  auto& g = c.g();
  ir::Value zero = full_like(c, x, 0);
  // The sign of a zero shows in 1/x (-0.0 < 0 is false).
  ir::Value pole = g.select(g.compare(Cmp::kLT, reciprocal_fn(c, x), zero),
                            full_like(c, x, INFINITY), full_like(c, x, -INFINITY));
  return g.select(g.compare(Cmp::kEQ, x, zero), pole, g.unary(Op::kDigamma, x));
}

// lgamma is exactly 0 at 1 and 2, as on CPU; chlo.lgamma's approximation
// leaves about 5e-7 at 1 in f32, which digamma/exp of the result magnify.
ir::Value lgamma_fn(LoweringContext& c, ir::Value x) {
  auto& g = c.g();
  ir::Value exact = g.binary(Op::kOr, g.compare(Cmp::kEQ, x, full_like(c, x, 1.0)),
                             g.compare(Cmp::kEQ, x, full_like(c, x, 2.0)));
  return g.select(exact, full_like(c, x, 0.0), g.unary(Op::kLgamma, x));
}

// trunc(x) for floats: toward zero (exact, so no opmath).
ir::Value trunc_float(LoweringContext& ctx, ir::Value x) {
  auto& g = ctx.g();
  return g.select(g.compare(Cmp::kLT, x, full_like(ctx, x, 0)), g.unary(Op::kCeil, x),
                  g.unary(Op::kFloor, x));
}

// floor/ceil/round/trunc: exact on floats, the identity on integers; bool is
// rejected by the CPU kernel's dispatch list (named `kernel`).
std::vector<ir::Value> rounding(LoweringContext& ctx, const Args& a, const char* kernel,
                                ir::Value (*fn)(LoweringContext&, ir::Value)) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType dt = dtype(ctx, x);
  if (dt == DType::kBool) not_implemented(kernel, dt);
  if (!ir::is_float(dt)) return {x};
  return {fn(ctx, x)};
}

// round(x, decimals): PyTorch's round_decimals_kernel (UnaryOpsKernel.cpp):
// nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for d < 0.
std::vector<ir::Value> round_decimals(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  int64_t decimals = a.integer(1);
  DType dt = dtype(ctx, x);
  if (!ir::is_float(dt)) not_implemented(decimals == 0 ? "round_vml_cpu" : "round_cpu", dt);
  auto& g = ctx.g();
  if (decimals == 0) return {g.unary(Op::kRoundNearestEven, x)};
  bool negative = decimals < 0;
  x = g.convert(x, opmath(dt));
  ir::Value ten_pow = full_like(ctx, x, std::pow(10.0, negative ? -decimals : decimals));
  ir::Value y = g.binary(negative ? Op::kDiv : Op::kMul, x, ten_pow);
  y = g.unary(Op::kRoundNearestEven, y);
  y = g.binary(negative ? Op::kMul : Op::kDiv, y, ten_pow);
  return {g.convert(y, dt)};
}

std::vector<ir::Value> abs_rule(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType dt = dtype(ctx, x);
  if (dt == DType::kBool) not_implemented("abs_cpu", dt);
  if (ir::is_unsigned(dt)) return {x};
  return {ctx.g().unary(Op::kAbs, x)};
}

std::vector<ir::Value> neg_rule(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  TORCH_CHECK(dtype(ctx, x) != DType::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are "
              "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return {ctx.g().unary(Op::kNeg, x)};
}

// sign as PyTorch computes it, (0 < x) - (x < 0): NaN gives 0 (StableHLO's
// sign would give NaN), bool is the identity.
std::vector<ir::Value> sign_rule(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(a.tensor(0));
  DType dt = dtype(ctx, x);
  if (dt == DType::kBool) return {x};
  ir::Value zero = full_like(ctx, x, 0);
  ir::Value pos = g.convert(g.compare(Cmp::kGT, x, zero), dt);
  if (ir::is_unsigned(dt)) return {pos};
  return {g.binary(Op::kSub, pos, g.convert(g.compare(Cmp::kLT, x, zero), dt))};
}

std::vector<ir::Value> bitwise_not(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  if (ir::is_float(dtype(ctx, x))) not_implemented("bitwise_not_cpu", dtype(ctx, x));
  return {ctx.g().unary(Op::kNot, x)};
}

std::vector<ir::Value> logical_not(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  if (dtype(ctx, x) == DType::kBool) return {ctx.g().unary(Op::kNot, x)};
  return {ctx.g().compare(Cmp::kEQ, x, full_like(ctx, x, 0))};
}

ir::Value all_false(LoweringContext& ctx, ir::Value like) {
  return ctx.g().constant(0, {DType::kBool, dims(ctx, like)});
}

std::vector<ir::Value> isnan_rule(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  if (!ir::is_float(dtype(ctx, x))) return {all_false(ctx, x)};
  return {ctx.g().compare(Cmp::kNE, x, x)};
}

// isinf / isposinf / isneginf: integers and bool are never infinite.
std::vector<ir::Value> isinf_rule(LoweringContext& ctx, const Args& a, int sign) {
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(a.tensor(0));
  if (!ir::is_float(dtype(ctx, x))) return {all_false(ctx, x)};
  if (sign == 0) x = g.unary(Op::kAbs, x);
  return {g.compare(Cmp::kEQ, x, full_like(ctx, x, sign < 0 ? -INFINITY : INFINITY))};
}

// signbit reads the sign bit itself, so -0.0 and negative NaNs count.
std::vector<ir::Value> signbit_rule(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(a.tensor(0));
  DType dt = dtype(ctx, x);
  if (ir::is_unsigned(dt)) return {all_false(ctx, x)};
  if (ir::is_float(dt)) {
    DType as_int = ir::byte_size(dt) == 2   ? DType::kI16
                   : ir::byte_size(dt) == 4 ? DType::kI32
                                            : DType::kI64;
    x = g.bitcast_convert(x, as_int);
  }
  return {g.compare(Cmp::kLT, x, full_like(ctx, x, 0))};
}

std::vector<ir::Value> frac_rule(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  if (!ir::is_float(dtype(ctx, x))) not_implemented("frac_cpu", dtype(ctx, x));
  return {ctx.g().binary(Op::kSub, x, trunc_float(ctx, x))};
}

// erfinv refined by Newton steps on erf(x) = y, as CPU's calc_erfinv
// (aten/src/ATen/native/Math.h) refines its first guess: chlo.erf_inv alone is
// up to ~5e-6 relative off near |y| -> 1, which the gradient
// sqrt(pi)/2 * exp(erfinv(y)^2) amplifies. The steps run in float64: in
// float32, erf(x) rounds to 1 in the tail and the steps diverge. y = +-1 keeps
// erf_inv's infinities.
ir::Value erfinv_fn(LoweringContext& c, ir::Value y) {
  auto& g = c.g();
  const ir::DType dt = dtype(c, y);
  ir::Value y64 = g.convert(y, ir::DType::kF64);
  ir::Value x = g.convert(g.unary(Op::kErfInv, y), ir::DType::kF64);
  ir::Value finite = g.unary(Op::kIsFinite, x);
  for (int step = 0; step < 2; ++step) {
    ir::Value slope = g.binary(Op::kMul, full_like(c, x, M_2_SQRTPI),
                               g.unary(Op::kExp, g.unary(Op::kNeg, g.binary(Op::kMul, x, x))));
    ir::Value delta = g.binary(Op::kDiv, g.binary(Op::kSub, g.unary(Op::kErf, x), y64), slope);
    x = g.select(finite, g.binary(Op::kSub, x, delta), x);
  }
  return g.convert(x, dt);
}

ir::Value floor_fn(LoweringContext& c, ir::Value x) { return c.g().unary(Op::kFloor, x); }
ir::Value ceil_fn(LoweringContext& c, ir::Value x) { return c.g().unary(Op::kCeil, x); }
// PyTorch's round is nearbyint: halves go to the even neighbour.
ir::Value round_fn(LoweringContext& c, ir::Value x) {
  return c.g().unary(Op::kRoundNearestEven, x);
}

std::vector<ir::Value> floor_rule(LoweringContext& c, const Args& a) {
  return rounding(c, a, "floor_vml_cpu", floor_fn);
}
std::vector<ir::Value> ceil_rule(LoweringContext& c, const Args& a) {
  return rounding(c, a, "ceil_vml_cpu", ceil_fn);
}
std::vector<ir::Value> round_rule(LoweringContext& c, const Args& a) {
  return rounding(c, a, "round_vml_cpu", round_fn);
}
std::vector<ir::Value> trunc_rule(LoweringContext& c, const Args& a) {
  return rounding(c, a, "trunc_vml_cpu", trunc_float);
}

RegisterLowering kUnaryRules[] = {
    // float functions of one argument
    {"exp", float_op<Op::kExp>},
    {"expm1", float_op<Op::kExpm1>},
    {"exp2", float_rule<exp2_fn>},
    {"log", float_op<Op::kLog>},
    {"log1p", float_op<Op::kLog1p>},
    {"log2", float_rule<log2_fn>},
    {"log10", float_rule<log10_fn>},
    {"sqrt", float_op<Op::kSqrt>},
    {"rsqrt", float_op<Op::kRsqrt>},
    {"reciprocal", float_rule<reciprocal_fn>},
    {"sin", float_op<Op::kSin>},
    {"cos", float_op<Op::kCos>},
    {"tan", float_op<Op::kTan>},
    {"asin", float_op<Op::kAsin>},
    {"acos", float_op<Op::kAcos>},
    {"atan", float_rule<atan_fn>},
    {"sinh", float_op<Op::kSinh>},
    {"cosh", float_op<Op::kCosh>},
    {"tanh", float_op<Op::kTanh>},
    {"asinh", float_op<Op::kAsinh>},
    {"acosh", float_op<Op::kAcosh>},
    {"atanh", float_op<Op::kAtanh>},
    {"sigmoid", float_op<Op::kLogistic>},
    {"erf", float_op<Op::kErf>},
    {"erfinv", float_rule<erfinv_fn>},
    {"lgamma", float_rule<lgamma_fn>},
    {"digamma", float_rule<digamma_fn>},
    {"deg2rad", float_rule<deg2rad_fn>},
    {"rad2deg", float_rule<rad2deg_fn>},
    // rounding
    {"floor", floor_rule},
    {"ceil", ceil_rule},
    {"round", round_rule},
    {"trunc", trunc_rule},
    {"round.decimals", round_decimals},
    {"frac", frac_rule},
    // sign and magnitude
    {"abs", abs_rule},
    {"neg", neg_rule},
    {"sign", sign_rule},
    {"sgn", sign_rule},  // sgn differs from sign only on complex inputs
    {"signbit", signbit_rule},
    // bits and tests
    {"bitwise_not", bitwise_not},
    {"logical_not", logical_not},
    {"isnan", isnan_rule},
    {"isinf", [](LoweringContext& c, const Args& a) { return isinf_rule(c, a, 0); }},
    {"isposinf", [](LoweringContext& c, const Args& a) { return isinf_rule(c, a, 1); }},
    {"isneginf", [](LoweringContext& c, const Args& a) { return isinf_rule(c, a, -1); }},
};

}  // namespace
}  // namespace ttpu::aten
