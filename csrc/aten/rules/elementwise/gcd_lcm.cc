// Lowerings of the integer gcd / lcm (Euclid's algorithm, unrolled).
#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// gcd(|a|, |b|) by Euclid's algorithm (ATen's calc_gcd), unrolled: the
// number of steps is bounded by the Fibonacci numbers (the worst case of
// Euclid, Lame's theorem), so 93 steps cover int64. Finished lanes keep
// their values.
ir::Value gcd_values(LoweringContext& ctx, ir::Value a, ir::Value b) {
  auto& g = ctx.g();
  DType dt = dtype(ctx, a);
  int64_t bits = 8 * ir::byte_size(dt);
  int64_t steps = bits >= 64 ? 93 : bits >= 32 ? 47 : bits >= 16 ? 24 : 13;
  if (!ir::is_unsigned(dt)) {
    a = g.unary(Op::kAbs, a);
    b = g.unary(Op::kAbs, b);
  }
  ir::Value zero = full_like(ctx, a, 0);
  ir::Value one = full_like(ctx, a, 1);
  for (int64_t i = 0; i < steps; ++i) {
    ir::Value live = g.compare(Cmp::kNE, a, zero);
    ir::Value r = g.binary(Op::kRem, b, g.select(live, a, one));
    b = g.select(live, a, b);
    a = g.select(live, r, a);
  }
  return b;
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
