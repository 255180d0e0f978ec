// Lowerings of the integer gcd / lcm (Euclid's algorithm, a loop).
#include <cmath>

#include "aten/rules/elementwise/unary_util.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// gcd(|a|, |b|) by Euclid's algorithm (ATen's calc_gcd) as a loop
// (stablehlo::gcd_loop) for as many steps as the largest operand can need:
// by Lame's theorem the steps for b >= a are at most the n with
// F(n + 2) > a, under log_phi(max) + 2; the loop takes log_phi(max + 1) + 3,
// at most the static bound for the type (93 steps cover int64). Finished
// lanes keep their values.
ir::Value gcd_values(LoweringContext& ctx, ir::Value a, ir::Value b) {
  auto& g = ctx.g();
  DType dt = dtype(ctx, a);
  int64_t bits = 8 * ir::byte_size(dt);
  int64_t steps = bits >= 64 ? 93 : bits >= 32 ? 47 : bits >= 16 ? 24 : 13;
  if (!ir::is_unsigned(dt)) {
    a = g.unary(Op::kAbs, a);
    b = g.unary(Op::kAbs, b);
  }
  // abs(INT_MIN) stays negative: the magnitude is taken again in float.
  ir::Value big = g.convert(g.binary(Op::kMax, a, b), DType::kF64);
  if (!ir::is_unsigned(dt)) big = g.unary(Op::kAbs, big);
  const double log_phi = std::log((1 + std::sqrt(5.0)) / 2);
  ir::Value need = g.convert(
      g.binary(Op::kAdd,
               g.unary(Op::kFloor,
                       g.binary(Op::kDiv, g.unary(Op::kLog1p, big), full_like(ctx, big, log_phi))),
               full_like(ctx, big, 3)),
      DType::kI64);
  ir::Value count = loop_count(ctx, need, 0, steps);
  return g.call(stablehlo::gcd_loop({dt, dims(ctx, a)}), {a, b, count})[0];
}

ValueList gcd_lcm(LoweringContext& ctx, const Args& a, bool is_lcm) {
  DType dt = to_ir(result_type(a[0], a[1]));
  if (!ir::is_integral(dt)) pointwise::not_implemented(is_lcm ? "lcm_cpu" : "gcd_cpu", dt);
  auto& g = ctx.g();
  auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
  ir::Value d = gcd_values(ctx, x, y);
  if (!is_lcm) return {d};
  // lcm = |a / g * b|, 0 when g == 0 (ATen's calc_lcm).
  ir::Value zero = full_like(ctx, d, 0);
  ir::Value is_zero = g.compare(Cmp::kEQ, d, zero);
  ir::Value q = g.binary(Op::kDiv, x, g.select(is_zero, full_like(ctx, d, 1), d));
  // int8/int16: C++ multiplies and takes abs in int, then narrows, so an
  // overflowing lcm keeps the sign its wrap gives (lcm(50, 3) in int8 is -106).
  const bool narrow = dt == DType::kI8 || dt == DType::kI16;
  ir::Value l = narrow ? g.binary(Op::kMul, g.convert(q, DType::kI32), g.convert(y, DType::kI32))
                       : g.binary(Op::kMul, q, y);
  if (!ir::is_unsigned(dt)) l = g.unary(Op::kAbs, l);
  if (narrow) l = g.convert(l, dt);
  return {g.select(is_zero, zero, l)};
}

RegisterLowering kGcdLcmRules[] = {
    {"gcd", [](LoweringContext& c, const Args& a) { return gcd_lcm(c, a, false); }},
    {"lcm", [](LoweringContext& c, const Args& a) { return gcd_lcm(c, a, true); }},
};

}  // namespace
}  // namespace ttpu::aten
