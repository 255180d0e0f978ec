// Lowerings of special functions without a StableHLO/CHLO op: the Hurwitz zeta
// function, polygamma, and the small ones (sinc, erfc, entr, angle of a real).
//
// zeta and polygamma follow ATen's scalar code (aten/src/ATen/native/Math.h,
// itself Cephes' zeta.c): a direct sum of (q + i)^-x until the terms are
// negligible, then the Euler-Maclaurin tail with Bernoulli numbers. Its loops
// stop per element, so here they are unrolled to a fixed count with a
// per-element "done" mask that freezes an element exactly where Cephes would
// return: the result is the same sum. The direct-sum loop runs at most
// kMaxDirectTerms times; Cephes runs it until q + i > 9, so q below
// 9 - kMaxDirectTerms (only reachable for negative non-integral q) gets the
// tail at a smaller abscissa, with lower accuracy.
// ATen evaluates zeta in double for float inputs (acc_type<float, false>);
// so does this lowering (f64 inside, rounded once).
#include <cmath>
#include <limits>

#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using pointwise::float_result;
using pointwise::opmath;
using ValueList = std::vector<ir::Value>;

constexpr int kMaxDirectTerms = 40;
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

// The direct-sum loop of Cephes' zeta: a = q, s = q^-x, then while the loop
// runs, a += 1, b = a^-x, s += b, stopping when b is below MACHEP * s
// (converged, `done`) or when a passes 9 after the first 9 terms. Unrolled,
// its kMaxDirectTerms pow calls make one fused loop that XLA:CPU took 3 s to
// compile; here every term is computed at once along a new trailing axis of
// kMaxDirectTerms + 1 positions and the loop's state is read at the position
// where it stops. The running sums are sequential (a reduce_window over the
// whole prefix adds left to right, as the loop does), so a and s are the
// loop's values bit for bit.
struct DirectSum {
  ir::Value a, b, s, done;
};

DirectSum direct_sum(LoweringContext& ctx, ir::Value x, ir::Value q) {
  auto& g = ctx.g();
  constexpr int64_t n = kMaxDirectTerms + 1;
  std::vector<int64_t> shape = dims(ctx, x), keep(shape.size());
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<int64_t>(i);
  const int64_t axis = static_cast<int64_t>(shape.size());
  std::vector<int64_t> wide = shape;
  wide.push_back(n);
  auto spread = [&](ir::Value v) { return g.broadcast_in_dim(v, wide, keep); };
  auto prefix_sum = [&](ir::Value v) {  // sequential inclusive sums along `axis`
    std::vector<int64_t> window(wide.size(), 1), pad_low(wide.size(), 0);
    window[axis] = n;
    pad_low[axis] = n - 1;
    return g.reduce_window(v, ctx.constant(0, DType::kF64), window, {}, {}, {}, pad_low, {},
                           ir::Reducer::kAdd);
  };
  auto part = [&](ir::Value v, int64_t from, int64_t to) {
    std::vector<int64_t> start(wide.size(), 0), limit = wide;
    start[axis] = from;
    limit[axis] = to;
    return g.slice(v, start, limit, std::vector<int64_t>(wide.size(), 1));
  };
  ir::Value pos = g.iota({DType::kI64, wide}, axis);
  ir::Value first = g.compare(Cmp::kEQ, pos, g.constant_int(0, {DType::kI64, wide}));
  ir::Value xs = spread(x);
  Ops o{ctx, xs};
  ir::Value a = prefix_sum(o.sel(first, spread(q), o.k(1)));   // q, q + 1, (q + 1) + 1, ...
  ir::Value p = g.binary(Op::kPow, a, g.unary(Op::kNeg, xs));  // s's first term, then each b
  ir::Value s = prefix_sum(p);
  ir::Value b = o.sel(first, o.k(0), p);
  // Step i (0 <= i < kMaxDirectTerms) reads a_i and makes a_{i+1}, b_{i+1}, s_{i+1}.
  constexpr int64_t steps = kMaxDirectTerms;
  ir::Value step = part(pos, 0, steps);
  ir::Value a_i = part(a, 0, steps), b_next = part(b, 1, n), s_next = part(s, 1, n);
  Ops os{ctx, a_i};
  ir::Value past_nine =
      os.and_(g.compare(Cmp::kGE, step, g.constant_int(9, {DType::kI64, dims(ctx, step)})),
              os.not_(os.le(a_i, os.k(9.0))));
  ir::Value eps_s = os.mul(os.k(kMachEp), s_next);
  ir::Value converged = os.and_(os.lt(g.unary(Op::kNeg, eps_s), b_next), os.lt(b_next, eps_s));
  ir::Value never = g.constant_int(steps, {DType::kI64, dims(ctx, step)});
  auto first_step = [&](ir::Value when) {  // the first step where `when` holds, else steps
    return reduce(ctx, g.select(when, step, never), {axis}, false, ir::Reducer::kMin);
  };
  ir::Value stop_nine = first_step(past_nine), stop_converged = first_step(converged);
  // A step checks a against 9 before it adds its term, so a tie stops unconverged.
  ir::Value done = g.compare(Cmp::kLT, stop_converged, stop_nine);
  ir::Value one = g.constant_int(1, {DType::kI64, shape});
  ir::Value end = g.select(done, g.binary(Op::kAdd, stop_converged, one), stop_nine);
  ir::Value at_end = g.compare(Cmp::kEQ, pos, g.broadcast_in_dim(end, wide, keep));
  auto read = [&](ir::Value v) {  // v at position `end` (the others add exact zeros)
    return reduce(ctx, o.sel(at_end, v, o.k(0)), {axis}, false, ir::Reducer::kAdd);
  };
  return {read(a), read(b), read(s), done};
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
