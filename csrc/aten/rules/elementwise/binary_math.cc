// Lowerings of the elementwise binary math ops beyond arithmetic: logaddexp,
// logaddexp2, hypot, copysign, fmax/fmin, heaviside, xlogy and xlog1py, the
// bit shifts, and glu (a product of the two halves of one tensor).
//
// Each keeps its CPU kernel's dtype rule (BinaryOps.cpp): logaddexp/hypot
// dispatch on floats only and reject integral common dtypes with the kernel's
// NotImplementedError; copysign/xlogy/xlog1py promote integral inputs to the
// default float dtype; fmax/fmin/heaviside also run on integers and bool. The
// formulas are the scalar ones of ATen's CPU kernels (BinaryOpsKernel.cpp).
// The Scalar overloads of xlogy/copysign/xlog1py are CompositeExplicit and
// arrive here with the scalar wrapped as a 0-d CPU tensor.
#include <cmath>
#include <limits>

#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using pointwise::float_result;
using pointwise::not_implemented;
using pointwise::opmath;
using ValueList = std::vector<ir::Value>;

// Both operands in `dt`, broadcast to their common shape.
std::pair<ir::Value, ir::Value> both(LoweringContext& ctx, const Args& a, DType dt) {
  return broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
}

ir::Value is_nan(LoweringContext& ctx, ir::Value x) { return ctx.g().compare(Cmp::kNE, x, x); }

// logaddexp / logaddexp2: max + log1p(exp(-|a - b|)) (in base 2 for
// logaddexp2), and a itself when a == b is infinite (inf - inf would be NaN).
ValueList logaddexp(LoweringContext& ctx, const Args& a, bool base2) {
  DType dt = to_ir(result_type(a[0], a[1]));
  if (!ir::is_float(dt)) not_implemented(base2 ? "logaddexp2_cpu" : "logaddexp_cpu", dt);
  auto& g = ctx.g();
  auto [x, y] = both(ctx, a, opmath(dt));
  ir::Value m = g.binary(Op::kMax, x, y);
  ir::Value neg_gap = g.unary(Op::kNeg, g.unary(Op::kAbs, g.binary(Op::kSub, x, y)));
  ir::Value r;
  if (base2) {
    ir::Value p = g.binary(Op::kPow, full_like(ctx, x, 2.0), neg_gap);
    r = g.binary(Op::kAdd, m, g.binary(Op::kDiv, g.unary(Op::kLog1p, p), full_like(ctx, x, M_LN2)));
  } else {
    r = g.binary(Op::kAdd, m, g.unary(Op::kLog1p, g.unary(Op::kExp, neg_gap)));
  }
  ir::Value same_inf =
      g.binary(Op::kAnd, g.compare(Cmp::kEQ, x, y),
               g.compare(Cmp::kEQ, g.unary(Op::kAbs, x), full_like(ctx, x, INFINITY)));
  return {g.convert(g.select(same_inf, x, r), dt)};
}

// hypot: std::hypot's scaling, max * sqrt(1 + (min / max)^2), so squares of
// large values do not overflow; inf wins over NaN as in C's hypot.
ValueList hypot(LoweringContext& ctx, const Args& a) {
  DType dt = to_ir(result_type(a[0], a[1]));
  if (!ir::is_float(dt)) not_implemented("hypot_cpu", dt);
  auto& g = ctx.g();
  auto [x, y] = both(ctx, a, opmath(dt));
  ir::Value ax = g.unary(Op::kAbs, x);
  ir::Value ay = g.unary(Op::kAbs, y);
  ir::Value hi = g.binary(Op::kMax, ax, ay);
  ir::Value lo = g.binary(Op::kMin, ax, ay);
  ir::Value zero = full_like(ctx, x, 0);
  ir::Value one = full_like(ctx, x, 1);
  ir::Value ratio = g.select(g.compare(Cmp::kEQ, hi, zero), zero, g.binary(Op::kDiv, lo, hi));
  ir::Value r = g.binary(
      Op::kMul, hi, g.unary(Op::kSqrt, g.binary(Op::kAdd, one, g.binary(Op::kMul, ratio, ratio))));
  ir::Value inf = full_like(ctx, x, INFINITY);
  ir::Value any_inf = g.binary(Op::kOr, g.compare(Cmp::kEQ, ax, inf), g.compare(Cmp::kEQ, ay, inf));
  return {g.convert(g.select(any_inf, inf, r), dt)};
}

// copysign: |a| carrying b's sign bit (so -0.0 and negative NaN count as negative).
ValueList copysign(LoweringContext& ctx, const Args& a) {
  DType dt = float_result(to_ir(result_type(a[0], a[1])));
  auto& g = ctx.g();
  auto [x, y] = both(ctx, a, dt);
  DType as_int = ir::byte_size(dt) == 2   ? DType::kI16
                 : ir::byte_size(dt) == 4 ? DType::kI32
                                          : DType::kI64;
  ir::Value yi = g.bitcast_convert(y, as_int);
  ir::Value negative = g.compare(Cmp::kLT, yi, full_like(ctx, yi, 0));
  ir::Value mag = g.unary(Op::kAbs, x);
  return {g.select(negative, g.unary(Op::kNeg, mag), mag)};
}

// fmax / fmin: like maximum/minimum but a NaN loses to a number (C's fmax).
ValueList fmax_fmin(LoweringContext& ctx, const Args& a, bool is_max) {
  DType dt = to_ir(result_type(a[0], a[1]));
  auto& g = ctx.g();
  auto [x, y] = both(ctx, a, dt);
  if (dt == DType::kBool) return {g.binary(is_max ? Op::kOr : Op::kAnd, x, y)};
  ir::Value m = g.binary(is_max ? Op::kMax : Op::kMin, x, y);
  if (!ir::is_float(dt)) return {m};
  return {g.select(is_nan(ctx, x), y, g.select(is_nan(ctx, y), x, m))};
}

// heaviside(x, values): values where x == 0, else x > 0 (so NaN gives 0).
ValueList heaviside(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& values = a.tensor(1);
  TORCH_CHECK(self.scalar_type() == values.scalar_type(),
              "heaviside is not yet implemented for tensors with different dtypes.");
  DType dt = to_ir(self.scalar_type());
  auto& g = ctx.g();
  auto [x, v] = broadcast_pair(ctx, ctx.tensor(self), ctx.tensor(values));
  ir::Value zero = full_like(ctx, x, 0);
  ir::Value step = g.convert(g.compare(Cmp::kGT, x, zero), dt);
  return {g.select(g.compare(Cmp::kEQ, x, zero), v, step)};
}

// xlogy(x, y) = x * log(y) and xlog1py(x, y) = x * log1p(y), with 0 where
// x == 0 (even for y == 0 or inf) and NaN where y is NaN.
ValueList xlogy(LoweringContext& ctx, const Args& a, bool plus_one) {
  DType dt = float_result(to_ir(result_type(a[0], a[1])));
  auto& g = ctx.g();
  auto [x, y] = both(ctx, a, opmath(dt));
  ir::Value zero = full_like(ctx, x, 0);
  ir::Value r = g.binary(Op::kMul, x, g.unary(plus_one ? Op::kLog1p : Op::kLog, y));
  r = g.select(g.compare(Cmp::kEQ, x, zero), zero, r);
  r = g.select(is_nan(ctx, y), y, r);
  return {g.convert(r, dt)};
}

// Bit shifts on integers of the promoted dtype. StableHLO's shifts already give
// CPU's answers for a count outside [0, bits) (0, or the sign fill for an
// arithmetic right shift), since a negative count reads as a huge unsigned one.
ValueList shift(LoweringContext& ctx, const Args& a, bool left) {
  DType dt = to_ir(result_type(a[0], a[1]));
  if (ir::is_float(dt) || dt == DType::kBool)
    not_implemented(left ? "lshift_cpu" : "rshift_cpu", dt);
  auto [x, y] = both(ctx, a, dt);
  Op op = left                  ? Op::kShiftLeft
          : ir::is_unsigned(dt) ? Op::kShiftRightLogical
                                : Op::kShiftRightArithmetic;
  return {ctx.g().binary(op, x, y)};
}

// glu(self, dim): first half * sigmoid(second half) along dim.
ValueList glu(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t dim = wrap_dim(a.integer(1), self.dim());
  DType dt = to_ir(self.scalar_type());
  if (!ir::is_float(dt)) not_implemented("glu_cpu", dt);
  int64_t n = self.size(dim);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", dim, " is size ", n);
  auto& g = ctx.g();
  ir::Value x = g.convert(ctx.tensor(self), opmath(dt));
  std::vector<int64_t> shape = dims(ctx, x);
  std::vector<int64_t> zeros(shape.size(), 0), strides(shape.size(), 1), mid = shape;
  mid[dim] = n / 2;
  std::vector<int64_t> start = zeros;
  start[dim] = n / 2;
  ir::Value first = g.slice(x, zeros, mid, strides);
  ir::Value second = g.slice(x, start, shape, strides);
  return {g.convert(g.binary(Op::kMul, first, g.unary(Op::kLogistic, second)), dt)};
}

RegisterLowering kBinaryMathRules[] = {
    {"bitwise_left_shift.Tensor",
     [](LoweringContext& c, const Args& a) { return shift(c, a, true); }},
    {"bitwise_right_shift.Tensor",
     [](LoweringContext& c, const Args& a) { return shift(c, a, false); }},
    {"__lshift__.Tensor", [](LoweringContext& c, const Args& a) { return shift(c, a, true); }},
    {"__rshift__.Tensor", [](LoweringContext& c, const Args& a) { return shift(c, a, false); }},
    {"__lshift__.Scalar", [](LoweringContext& c, const Args& a) { return shift(c, a, true); }},
    {"__rshift__.Scalar", [](LoweringContext& c, const Args& a) { return shift(c, a, false); }},
    {"glu", glu},
    {"logaddexp", [](LoweringContext& c, const Args& a) { return logaddexp(c, a, false); }},
    {"logaddexp2", [](LoweringContext& c, const Args& a) { return logaddexp(c, a, true); }},
    {"hypot", hypot},
    {"copysign.Tensor", copysign},
    {"fmax", [](LoweringContext& c, const Args& a) { return fmax_fmin(c, a, true); }},
    {"fmin", [](LoweringContext& c, const Args& a) { return fmax_fmin(c, a, false); }},
    {"heaviside", heaviside},
    {"xlogy.Tensor", [](LoweringContext& c, const Args& a) { return xlogy(c, a, false); }},
    {"special_xlog1py", [](LoweringContext& c, const Args& a) { return xlogy(c, a, true); }},
};

}  // namespace
}  // namespace ttpu::aten
