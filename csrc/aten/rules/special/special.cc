// Lowerings of special functions without a StableHLO/CHLO op: the Hurwitz zeta
// function, polygamma, and the small ones (sinc, erfc, entr, angle of a real).
//
// zeta and polygamma follow ATen's scalar code (aten/src/ATen/native/Math.h,
// itself Cephes' zeta.c): a direct sum of (q + i)^-x until the terms are
// negligible, then the Euler-Maclaurin tail with Bernoulli numbers. Its loops
// stop per element, so here they run to a count with a per-element "done"
// mask that freezes an element exactly where Cephes would return: the result
// is the same sum (the tail's 12 steps are unrolled). The direct sum is a loop
// (stablehlo::zeta_direct_sum_loop) that runs as long as the element that
// needs the most steps: Cephes sums until q + i > 9, so a negative,
// non-integral q takes about 9 - q steps. Past kMaxDirectSteps (q below
// about -1.7e7, where CPU sums that many terms per element) the result is NaN.
// ATen evaluates zeta in double for float inputs (acc_type<float, false>);
// so does this lowering (f64 inside, rounded once).
#include <cmath>
#include <limits>

#include "aten/rules/elementwise/unary_util.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using pointwise::float_result;
using pointwise::opmath;
using ValueList = std::vector<ir::Value>;

constexpr int64_t kMaxDirectSteps = int64_t{1} << 24;
constexpr double kMachEp = 1.11022302462515654042E-16;  // Cephes MACHEP (2^-53)

struct Ops {
  LoweringContext& ctx;
  ir::Value like;
  ir::Value k(double v) { return full_like(ctx, like, v); }
  ir::Value add(ir::Value a, ir::Value b) { return ctx.g().binary(Op::kAdd, a, b); }
  ir::Value sub(ir::Value a, ir::Value b) { return ctx.g().binary(Op::kSub, a, b); }
  ir::Value mul(ir::Value a, ir::Value b) { return ctx.g().binary(Op::kMul, a, b); }
  ir::Value div(ir::Value a, ir::Value b) { return ctx.g().binary(Op::kDiv, a, b); }
  ir::Value lt(ir::Value a, ir::Value b) { return ctx.g().compare(Cmp::kLT, a, b); }
  ir::Value le(ir::Value a, ir::Value b) { return ctx.g().compare(Cmp::kLE, a, b); }
  ir::Value eq(ir::Value a, ir::Value b) { return ctx.g().compare(Cmp::kEQ, a, b); }
  ir::Value ne(ir::Value a, ir::Value b) { return ctx.g().compare(Cmp::kNE, a, b); }
  ir::Value and_(ir::Value a, ir::Value b) { return ctx.g().binary(Op::kAnd, a, b); }
  ir::Value or_(ir::Value a, ir::Value b) { return ctx.g().binary(Op::kOr, a, b); }
  ir::Value not_(ir::Value a) { return ctx.g().unary(Op::kNot, a); }
  ir::Value sel(ir::Value p, ir::Value a, ir::Value b) { return ctx.g().select(p, a, b); }
  ir::Value abs(ir::Value a) { return ctx.g().unary(Op::kAbs, a); }
};

// The direct-sum loop of Cephes' zeta, step for step (stablehlo::
// zeta_direct_sum_loop): the loop runs to the largest step count any element
// needs (9, or until q + i > 9 for negative q), at most kMaxDirectSteps.
struct DirectSum {
  ir::Value a, b, s, done;
};

DirectSum direct_sum(LoweringContext& ctx, ir::Value x, ir::Value q) {
  auto& g = ctx.g();
  const std::vector<int64_t> shape = dims(ctx, x);
  Ops o{ctx, q};
  // Steps until a = q + i passes 9, with a margin for the rounding of the
  // repeated a += 1 (extra steps change nothing: a finished element is frozen).
  ir::Value finite_q = o.sel(g.unary(Op::kIsFinite, q), q, o.k(0));
  ir::Value need =
      g.convert(o.add(g.unary(Op::kFloor, o.sub(o.k(9), finite_q)), o.k(2)), DType::kI64);
  ir::Value count = loop_count(ctx, need, 9, kMaxDirectSteps);
  auto r = g.call(stablehlo::zeta_direct_sum_loop({DType::kF64, shape}), {x, q, count});
  return {r[0], r[1], r[2], r[3]};
}

// Hurwitz zeta(x, q) = sum_{i >= 0} (q + i)^-x, x and q of one float shape.
// Math.h's zeta, step for step (see the file comment).
ir::Value zeta(LoweringContext& ctx, ir::Value x, ir::Value q) {
  auto& g = ctx.g();
  Ops o{ctx, x};
  // Bernoulli-number denominators of the tail (Cephes' A[]).
  static const double kA[] = {12.0,
                              -720.0,
                              30240.0,
                              -1209600.0,
                              47900160.0,
                              -1.8924375803183791606e9,
                              7.47242496e10,
                              -2.950130727918164224e12,
                              1.1646782814350067249e14,
                              -4.5979787224074726105e15,
                              1.8152105401943546773e17,
                              -7.1661652561756670113e18};
  ir::Value one = o.k(1), zero = o.k(0);
  DirectSum d = direct_sum(ctx, x, q);
  ir::Value a = d.a, b = d.b, s = d.s, done = d.done;
  // Cut off by kMaxDirectSteps (Cephes would still be summing): NaN.
  ir::Value cut = o.and_(o.not_(done), o.le(a, o.k(9.0)));
  // Euler-Maclaurin tail at w = a for the elements that did not converge.
  ir::Value w = a;
  ir::Value tail = o.sub(o.div(o.mul(b, w), o.sub(x, one)), o.mul(o.k(0.5), b));
  s = o.sel(done, s, o.add(s, tail));
  a = one;
  ir::Value kk = zero;
  for (double denom : kA) {
    a = o.mul(a, o.add(x, kk));
    b = o.div(b, w);
    ir::Value t = o.div(o.mul(a, b), o.k(denom));
    ir::Value s_next = o.add(s, t);
    s = o.sel(done, s, s_next);
    done = o.or_(done, o.lt(o.abs(o.div(t, s_next)), o.k(kMachEp)));
    kk = o.add(kk, one);
    a = o.mul(a, o.add(x, kk));
    b = o.div(b, w);
    kk = o.add(kk, one);
  }
  // The special cases Cephes returns before the sums.
  ir::Value inf = o.k(INFINITY), nan = o.k(NAN);
  ir::Value q_floor = g.unary(Op::kFloor, q);
  ir::Value q_pole = o.and_(o.le(q, zero), o.eq(q, q_floor));
  ir::Value q_nan = o.and_(o.le(q, zero), o.ne(x, g.unary(Op::kFloor, x)));
  s = o.sel(cut, nan, s);
  s = o.sel(q_nan, nan, s);
  s = o.sel(q_pole, inf, s);
  s = o.sel(o.lt(x, one), nan, s);
  return o.sel(o.eq(x, one), inf, s);
}

// special_zeta(Tensor self, Tensor other): float result, f64 inside.
ValueList zeta_rule(LoweringContext& ctx, const Args& a) {
  DType dt = float_result(to_ir(result_type(a[0], a[1])));
  if (dt != DType::kF32 && dt != DType::kF64) pointwise::not_implemented("zeta_cpu", dt);
  auto [x, q] =
      broadcast_pair(ctx, operand(ctx, a[0], DType::kF64), operand(ctx, a[1], DType::kF64));
  return {ctx.g().convert(zeta(ctx, x, q), dt)};
}

// ATen's trigamma (Math.h): reflection below 0.5, six recurrence steps, then
// the asymptotic series; in the opmath dtype as on CPU.
ir::Value trigamma(LoweringContext& ctx, ir::Value x) {
  Ops o{ctx, x};
  auto& g = ctx.g();
  ir::Value reflect = o.lt(x, o.k(0.5));
  ir::Value sin_pi_x = g.unary(Op::kSin, o.mul(o.k(M_PI), x));
  ir::Value result = o.sel(reflect, o.div(o.k(-M_PI * M_PI), o.mul(sin_pi_x, sin_pi_x)), o.k(0));
  x = o.sel(reflect, o.sub(o.k(1), x), x);
  for (int i = 0; i < 6; ++i) {
    result = o.add(result, o.div(o.k(1), o.mul(x, x)));
    x = o.add(x, o.k(1));
  }
  ir::Value ixx = o.div(o.k(1), o.mul(x, x));
  // 1 + 1/(2x) + ixx * (1/6 - ixx * (1/30 - ixx * (1/42)))
  ir::Value series = o.sub(o.k(1.0 / 30), o.mul(ixx, o.k(1.0 / 42)));
  series = o.sub(o.k(1.0 / 6), o.mul(ixx, series));
  series = o.add(o.add(o.k(1), o.div(o.k(1), o.mul(o.k(2), x))), o.mul(ixx, series));
  result = o.add(result, o.div(series, x));
  return o.sel(reflect, g.unary(Op::kNeg, result), result);
}

// polygamma(int n, Tensor self): digamma for n = 0, trigamma for n = 1, else
// (-1)^(n+1) n! zeta(n + 1, x) (Math.h calc_polygamma).
ValueList polygamma(LoweringContext& ctx, const Args& a) {
  int64_t n = a.integer(0);
  const at::Tensor& self = a.tensor(1);
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  if (n == 0) {
    std::vector<c10::IValue> args{self};
    return lowering_table().at("digamma")(ctx, Args(args));
  }
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  DType out = float_result(dtype(ctx, x));
  if (n == 1) return {g.convert(trigamma(ctx, g.convert(x, opmath(out))), out)};
  x = g.convert(x, DType::kF64);
  double factor = (n % 2 ? 1.0 : -1.0) * std::exp(std::lgamma(n + 1.0));
  ir::Value z = zeta(ctx, full_like(ctx, x, static_cast<double>(n + 1)), x);
  return {g.convert(g.binary(Op::kMul, full_like(ctx, z, factor), z), out)};
}

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
ValueList sinc(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType out = float_result(dtype(ctx, x));
  x = ctx.g().convert(x, opmath(out));
  Ops o{ctx, x};
  ir::Value px = o.mul(o.k(M_PI), x);
  ir::Value r = o.sel(o.eq(x, o.k(0)), o.k(1), o.div(ctx.g().unary(Op::kSin, px), px));
  return {ctx.g().convert(r, out)};
}

// erfc(x) = 1 - erf(x), evaluated in f64 for f32 so the cancellation costs
// nothing visible in the f32 result down to erfc ~ 1e-9 (below that the f32
// answer is within 1e-9 absolute).
ValueList erfc(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType out = float_result(dtype(ctx, x));
  x = ctx.g().convert(x, DType::kF64);
  ir::Value r = ctx.g().binary(Op::kSub, full_like(ctx, x, 1), ctx.g().unary(Op::kErf, x));
  return {ctx.g().convert(r, out)};
}

// special_entr(x) = -x log x for x > 0, 0 at 0, -inf below 0, NaN for NaN.
ValueList entr(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType out = float_result(dtype(ctx, x));
  x = ctx.g().convert(x, opmath(out));
  Ops o{ctx, x};
  ir::Value zero = o.k(0);
  ir::Value r = ctx.g().unary(Op::kNeg, o.mul(x, ctx.g().unary(Op::kLog, x)));
  r = o.sel(o.eq(x, zero), zero, r);
  r = o.sel(o.lt(x, zero), o.k(-INFINITY), r);
  r = o.sel(o.ne(x, x), x, r);
  return {ctx.g().convert(r, out)};
}

// angle of a real number: pi below 0, else 0; NaN stays NaN.
ValueList angle(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType out = float_result(dtype(ctx, x));
  x = ctx.g().convert(x, opmath(out));
  Ops o{ctx, x};
  ir::Value r = o.sel(o.lt(x, o.k(0)), o.k(M_PI), o.k(0));
  return {ctx.g().convert(o.sel(o.ne(x, x), x, r), out)};
}

RegisterLowering kSpecialRules[] = {
    {"special_zeta", zeta_rule}, {"polygamma", polygamma}, {"sinc", sinc}, {"erfc", erfc},
    {"special_entr", entr},      {"angle", angle},
};

}  // namespace
}  // namespace ttpu::aten
