// Lowerings of the samplers torch.distributions draws from: _standard_gamma
// (Gamma, Chi2, StudentT), _sample_dirichlet (Dirichlet, Beta), poisson and
// binomial.
//
// The algorithms are ATen's CPU ones (aten/src/ATen/native/Distributions.h),
// whose statistics PyTorch's distributions promise, not their bits:
//   gamma:   Marsaglia & Tsang, "A Simple Method for Generating Gamma
//            Variables", ACM TOMS 26(3), 2000; alpha < 1 boosted as
//            Gamma(alpha + 1) * U^(1/alpha)
//   poisson: rate >= 10: Hoermann's transformed rejection with squeeze (PTRS,
//            "The transformed rejection method for generating Poisson random
//            variables", Insurance: Math. and Econ. 12, 1993); below 10:
//            Knuth's product of uniforms (TAOCP vol. 2, 3.4.1).
//   binomial: with q = min(p, 1 - p) (p > 1/2 counts failures): n q >= 10:
//            Hoermann's BTRS ("The generation of binomial random variates",
//            J. Stat. Comput. Simul. 46, 1993), its Stirling tails computed
//            from lgamma; below: the count of geometric waiting times
//            ceil(log U / log(1 - q)) that fit in n (ATen's
//            binomial_inversion), kKnuthSteps of them.
// Rejection needs a loop; XLA programs here have none, so every element draws
// kTrials candidates at once and keeps the first accepted. Each trial accepts
// with probability over 0.95 (gamma, alpha >= 1) or about 0.9 (PTRS), so all
// kTrials rejecting has probability under 1e-16; the last candidate is kept
// then. The product method takes kKnuthSteps uniforms: for rate < 10 the count
// exceeds 63 with probability under 1e-30.
#include <limits>

#include "aten/rules/random/random_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

constexpr int64_t kTrials = 16;
constexpr int64_t kKnuthSteps = 64;

double smallest_normal(DType dt) {
  switch (dt) {
    case DType::kF64: return std::numeric_limits<double>::min();
    case DType::kF16: return 6.103515625e-05;           // 2^-14
    default: return std::numeric_limits<float>::min();  // f32, bf16
  }
}

// Helpers over flat [n] values in one dtype.
struct Flat {
  LoweringContext& ctx;
  int64_t n;
  DType dt;
  ir::Value c(double v) { return ctx.g().constant(v, {dt, {n}}); }
  ir::Value bin(Op op, ir::Value a, ir::Value b) { return ctx.g().binary(op, a, b); }
  ir::Value un(Op op, ir::Value a) { return ctx.g().unary(op, a); }
  ir::Value cmp(ir::Cmp k, ir::Value a, ir::Value b) { return ctx.g().compare(k, a, b); }
  // Row k of a [rows, n] draw.
  ir::Value row(ir::Value draws, int64_t k) {
    auto& g = ctx.g();
    return g.reshape(g.slice(draws, {k, 0}, {k + 1, n}, {1, 1}), {n});
  }
  ir::Value uniform(int64_t rows, const std::optional<at::Generator>& gen) {
    return uniform01(ctx, three_fry_state(ctx, gen), {rows, n}, dt);
  }
  ir::Value normal(int64_t rows, const std::optional<at::Generator>& gen) {
    return standard_normal(ctx, three_fry_state(ctx, gen), {rows, n}, dt);
  }
};

// The first accepted of kTrials candidates (the last one when none is).
ir::Value first_accepted(Flat& f, const std::vector<ir::Value>& values,
                         const std::vector<ir::Value>& ok) {
  ir::Value r = values.back();
  for (int64_t k = kTrials - 2; k >= 0; --k) r = f.ctx.g().select(ok[k], values[k], r);
  return r;
}

// Gamma(alpha, 1) samples for alpha [n] (>= 0), in f's dtype.
ir::Value gamma_samples(Flat& f, ir::Value alpha, const std::optional<at::Generator>& gen) {
  auto& g = f.ctx.g();
  ir::Value boost = f.cmp(ir::Cmp::kLT, alpha, f.c(1));
  ir::Value a = g.select(boost, f.bin(Op::kAdd, alpha, f.c(1)), alpha);
  ir::Value d = f.bin(Op::kSub, a, f.c(1.0 / 3.0));
  ir::Value c = f.un(Op::kRsqrt, f.bin(Op::kMul, f.c(9), d));
  ir::Value xs = f.normal(kTrials, gen);
  ir::Value us = f.uniform(kTrials, gen);
  std::vector<ir::Value> values, ok;
  for (int64_t k = 0; k < kTrials; ++k) {
    ir::Value x = f.row(xs, k);
    ir::Value u = f.bin(Op::kSub, f.c(1), f.row(us, k));  // (0, 1]
    ir::Value t = f.bin(Op::kAdd, f.c(1), f.bin(Op::kMul, c, x));
    ir::Value v = f.bin(Op::kMul, f.bin(Op::kMul, t, t), t);
    // log u < x^2 / 2 + d - d v + d log v
    ir::Value bound =
        f.bin(Op::kAdd, f.bin(Op::kMul, f.c(0.5), f.bin(Op::kMul, x, x)),
              f.bin(Op::kMul, d, f.bin(Op::kAdd, f.bin(Op::kSub, f.c(1), v), f.un(Op::kLog, v))));
    ir::Value accept = f.bin(Op::kAnd, f.cmp(ir::Cmp::kGT, v, f.c(0)),
                             f.cmp(ir::Cmp::kLT, f.un(Op::kLog, u), bound));
    values.push_back(f.bin(Op::kMul, d, v));
    ok.push_back(accept);
  }
  ir::Value sample = first_accepted(f, values, ok);
  // alpha < 1: times U^(1/alpha) (0 for alpha 0).
  ir::Value ub = f.bin(Op::kSub, f.c(1), f.row(f.uniform(1, gen), 0));
  ir::Value scale = g.select(boost, f.bin(Op::kPow, ub, f.bin(Op::kDiv, f.c(1), alpha)), f.c(1));
  return f.bin(Op::kMul, sample, scale);
}

// _standard_gamma(alpha, generator?) -> Gamma(alpha, 1), alpha's shape and dtype;
// at least the dtype's smallest normal number, as ATen's CPU kernel clamps.
ValueList standard_gamma(LoweringContext& ctx, const Args& a) {
  const at::Tensor& alpha = a.tensor(0);
  auto& g = ctx.g();
  const DType out = to_ir(alpha.scalar_type());
  if (alpha.numel() == 0) return {g.constant(0, {out, alpha.sizes().vec()})};
  Flat f{ctx, alpha.numel(), random_compute_dtype(out)};
  ir::Value al = g.reshape(g.convert(ctx.tensor(alpha), f.dt), {f.n});
  ir::Value s = f.bin(Op::kMax, gamma_samples(f, al, generator(a, 1)), f.c(smallest_normal(out)));
  return {g.convert(g.reshape(s, alpha.sizes().vec()), out)};
}

// _sample_dirichlet(alpha [..., K], generator?) -> Gamma(alpha) samples over
// their sum along the last dim, each at least the smallest normal number.
ValueList sample_dirichlet(LoweringContext& ctx, const Args& a) {
  const at::Tensor& alpha = a.tensor(0);
  auto& g = ctx.g();
  const DType out = to_ir(alpha.scalar_type());
  const std::vector<int64_t> shape = alpha.sizes().vec();
  if (alpha.numel() == 0) return {g.constant(0, {out, shape})};
  Flat f{ctx, alpha.numel(), random_compute_dtype(out)};
  ir::Value al = g.reshape(g.convert(ctx.tensor(alpha), f.dt), {f.n});
  ir::Value tiny = f.c(smallest_normal(out));
  ir::Value gam = g.reshape(f.bin(Op::kMax, gamma_samples(f, al, generator(a, 1)), tiny), shape);
  const int64_t last = alpha.dim() - 1;
  ir::Value sum = reduce(ctx, gam, {last}, /*keepdim=*/true, ir::Reducer::kAdd);
  ir::Value ratio = g.binary(Op::kDiv, gam, broadcast_to(ctx, sum, shape));
  ir::Value r = g.binary(Op::kMax, ratio, g.constant(smallest_normal(out), {f.dt, shape}));
  return {g.convert(r, out)};
}

// Poisson(rate) counts for rate [n] (>= 0), as floats of f's dtype.
ir::Value poisson_samples(Flat& f, ir::Value rate, const std::optional<at::Generator>& gen) {
  auto& g = f.ctx.g();
  // Knuth: the number of leading partial products of uniforms above e^-rate.
  ir::Value limit = f.un(Op::kExp, f.un(Op::kNeg, rate));
  ir::Value steps = f.uniform(kKnuthSteps, gen);
  ir::Value product = f.c(1), small = f.c(0);
  for (int64_t j = 0; j < kKnuthSteps; ++j) {
    product = f.bin(Op::kMul, product, f.row(steps, j));
    small = f.bin(Op::kAdd, small, g.convert(f.cmp(ir::Cmp::kGT, product, limit), f.dt));
  }
  // PTRS; its constants are Hoermann's (and ATen's).
  ir::Value big_rate = f.bin(Op::kMax, rate, f.c(10));  // the branch is taken for rate >= 10
  ir::Value slam = f.un(Op::kSqrt, big_rate);
  ir::Value loglam = f.un(Op::kLog, big_rate);
  ir::Value b = f.bin(Op::kAdd, f.c(0.931), f.bin(Op::kMul, f.c(2.53), slam));
  ir::Value aa = f.bin(Op::kAdd, f.c(-0.059), f.bin(Op::kMul, f.c(0.02483), b));
  ir::Value invalpha =
      f.bin(Op::kAdd, f.c(1.1239), f.bin(Op::kDiv, f.c(1.1328), f.bin(Op::kSub, b, f.c(3.4))));
  ir::Value vr =
      f.bin(Op::kSub, f.c(0.9277), f.bin(Op::kDiv, f.c(3.6224), f.bin(Op::kSub, b, f.c(2))));
  ir::Value log_invalpha = f.un(Op::kLog, invalpha);
  ir::Value u1 = f.uniform(kTrials, gen), u2 = f.uniform(kTrials, gen);
  std::vector<ir::Value> values, ok;
  for (int64_t k = 0; k < kTrials; ++k) {
    ir::Value u = f.bin(Op::kSub, f.row(u1, k), f.c(0.5));
    ir::Value v = f.bin(Op::kSub, f.c(1), f.row(u2, k));  // (0, 1]
    ir::Value us = f.bin(Op::kSub, f.c(0.5), f.un(Op::kAbs, u));
    ir::Value slope = f.bin(Op::kAdd, f.bin(Op::kDiv, f.bin(Op::kMul, f.c(2), aa), us), b);
    ir::Value cand = f.un(Op::kFloor, f.bin(Op::kAdd, f.bin(Op::kMul, slope, u),
                                            f.bin(Op::kAdd, big_rate, f.c(0.43))));
    ir::Value quick =
        f.bin(Op::kAnd, f.cmp(ir::Cmp::kGE, us, f.c(0.07)), f.cmp(ir::Cmp::kLE, v, vr));
    ir::Value reject =
        f.bin(Op::kOr, f.cmp(ir::Cmp::kLT, cand, f.c(0)),
              f.bin(Op::kAnd, f.cmp(ir::Cmp::kLT, us, f.c(0.013)), f.cmp(ir::Cmp::kGT, v, us)));
    ir::Value hat = f.bin(Op::kAdd, f.bin(Op::kDiv, aa, f.bin(Op::kMul, us, us)), b);
    ir::Value lhs =
        f.bin(Op::kSub, f.bin(Op::kAdd, f.un(Op::kLog, v), log_invalpha), f.un(Op::kLog, hat));
    ir::Value rhs = f.bin(Op::kSub, f.bin(Op::kSub, f.bin(Op::kMul, cand, loglam), big_rate),
                          f.un(Op::kLgamma, f.bin(Op::kAdd, cand, f.c(1))));
    ir::Value slow = f.bin(Op::kAnd, f.un(Op::kNot, reject), f.cmp(ir::Cmp::kLE, lhs, rhs));
    values.push_back(cand);
    ok.push_back(f.bin(Op::kOr, quick, slow));
  }
  ir::Value large = first_accepted(f, values, ok);
  return g.select(f.cmp(ir::Cmp::kGE, rate, f.c(10)), large, small);
}

// poisson(rates, generator?) -> counts, rates' shape and dtype.
ValueList poisson(LoweringContext& ctx, const Args& a) {
  const at::Tensor& rates = a.tensor(0);
  auto& g = ctx.g();
  const DType out = to_ir(rates.scalar_type());
  if (rates.numel() == 0) return {g.constant(0, {out, rates.sizes().vec()})};
  Flat f{ctx, rates.numel(), random_compute_dtype(out)};
  ir::Value r = g.reshape(g.convert(ctx.tensor(rates), f.dt), {f.n});
  return {g.convert(g.reshape(poisson_samples(f, r, generator(a, 1)), rates.sizes().vec()), out)};
}

// log k! less Stirling's approximation of it at k (the "tail" BTRS uses).
ir::Value stirling_tail(Flat& f, ir::Value k) {
  ir::Value k1 = f.bin(Op::kAdd, k, f.c(1));
  ir::Value approx =
      f.bin(Op::kAdd,
            f.bin(Op::kSub, f.bin(Op::kMul, f.bin(Op::kAdd, k, f.c(0.5)), f.un(Op::kLog, k1)), k1),
            f.c(0.5 * std::log(2 * M_PI)));
  return f.bin(Op::kSub, f.un(Op::kLgamma, k1), approx);
}

// Binomial(n, q) successes for q in (0, 1/2], n >= 0 (floats of f's dtype).
ir::Value binomial_samples(Flat& f, ir::Value n, ir::Value q,
                           const std::optional<at::Generator>& gen) {
  auto& g = f.ctx.g();
  // Inversion: geometric waiting times until their sum passes n.
  ir::Value logq = f.un(Op::kLog1p, f.un(Op::kNeg, q));
  ir::Value steps = f.uniform(kKnuthSteps, gen);
  ir::Value waited = f.c(0), small = f.c(0);
  for (int64_t j = 0; j < kKnuthSteps; ++j) {
    ir::Value u = f.bin(Op::kSub, f.c(1), f.row(steps, j));  // (0, 1]
    waited = f.bin(Op::kAdd, waited, f.un(Op::kCeil, f.bin(Op::kDiv, f.un(Op::kLog, u), logq)));
    small = f.bin(Op::kAdd, small, g.convert(f.cmp(ir::Cmp::kLE, waited, n), f.dt));
  }
  // BTRS, its constants Hoermann's (and ATen's).
  ir::Value one_q = f.bin(Op::kSub, f.c(1), q);
  ir::Value stddev = f.un(Op::kSqrt, f.bin(Op::kMul, f.bin(Op::kMul, n, q), one_q));
  ir::Value b = f.bin(Op::kAdd, f.c(1.15), f.bin(Op::kMul, f.c(2.53), stddev));
  ir::Value a = f.bin(Op::kAdd, f.bin(Op::kAdd, f.c(-0.0873), f.bin(Op::kMul, f.c(0.0248), b)),
                      f.bin(Op::kMul, f.c(0.01), q));
  ir::Value c = f.bin(Op::kAdd, f.bin(Op::kMul, n, q), f.c(0.5));
  ir::Value v_r = f.bin(Op::kSub, f.c(0.92), f.bin(Op::kDiv, f.c(4.2), b));
  ir::Value r = f.bin(Op::kDiv, q, one_q);
  ir::Value alpha =
      f.bin(Op::kMul, f.bin(Op::kAdd, f.c(2.83), f.bin(Op::kDiv, f.c(5.1), b)), stddev);
  ir::Value m = f.un(Op::kFloor, f.bin(Op::kMul, f.bin(Op::kAdd, n, f.c(1)), q));
  ir::Value n1 = f.bin(Op::kAdd, n, f.c(1));
  ir::Value nm1 = f.bin(Op::kAdd, f.bin(Op::kSub, n, m), f.c(1));
  ir::Value fixed = f.bin(
      Op::kAdd,
      f.bin(Op::kMul, f.bin(Op::kAdd, m, f.c(0.5)),
            f.un(Op::kLog, f.bin(Op::kDiv, f.bin(Op::kAdd, m, f.c(1)), f.bin(Op::kMul, r, nm1)))),
      f.bin(Op::kAdd, stirling_tail(f, m), stirling_tail(f, f.bin(Op::kSub, n, m))));
  ir::Value u1 = f.uniform(kTrials, gen), u2 = f.uniform(kTrials, gen);
  std::vector<ir::Value> values, ok;
  for (int64_t t = 0; t < kTrials; ++t) {
    ir::Value u = f.bin(Op::kSub, f.row(u1, t), f.c(0.5));
    ir::Value v = f.bin(Op::kSub, f.c(1), f.row(u2, t));  // (0, 1]
    ir::Value us = f.bin(Op::kSub, f.c(0.5), f.un(Op::kAbs, u));
    ir::Value k = f.un(
        Op::kFloor,
        f.bin(
            Op::kAdd,
            f.bin(Op::kMul, f.bin(Op::kAdd, f.bin(Op::kDiv, f.bin(Op::kMul, f.c(2), a), us), b), u),
            c));
    ir::Value in_range = f.bin(Op::kAnd, f.cmp(ir::Cmp::kGE, k, f.c(0)), f.cmp(ir::Cmp::kLE, k, n));
    ir::Value quick =
        f.bin(Op::kAnd, f.cmp(ir::Cmp::kGE, us, f.c(0.07)), f.cmp(ir::Cmp::kLE, v, v_r));
    ir::Value hat = f.bin(Op::kAdd, f.bin(Op::kDiv, a, f.bin(Op::kMul, us, us)), b);
    ir::Value lhs = f.un(Op::kLog, f.bin(Op::kDiv, f.bin(Op::kMul, v, alpha), hat));
    ir::Value nk1 = f.bin(Op::kAdd, f.bin(Op::kSub, n, k), f.c(1));
    ir::Value bound = f.bin(
        Op::kAdd, fixed,
        f.bin(
            Op::kAdd, f.bin(Op::kMul, n1, f.un(Op::kLog, f.bin(Op::kDiv, nm1, nk1))),
            f.bin(Op::kSub,
                  f.bin(Op::kMul, f.bin(Op::kAdd, k, f.c(0.5)),
                        f.un(Op::kLog,
                             f.bin(Op::kDiv, f.bin(Op::kMul, r, nk1), f.bin(Op::kAdd, k, f.c(1))))),
                  f.bin(Op::kAdd, stirling_tail(f, k), stirling_tail(f, f.bin(Op::kSub, n, k))))));
    values.push_back(k);
    ok.push_back(f.bin(Op::kAnd, in_range, f.bin(Op::kOr, quick, f.cmp(ir::Cmp::kLE, lhs, bound))));
  }
  ir::Value large = first_accepted(f, values, ok);
  return g.select(f.cmp(ir::Cmp::kGE, f.bin(Op::kMul, n, q), f.c(10)), large, small);
}

// binomial(count, prob, generator?) -> successes, count's shape (broadcast
// with prob) and dtype: 0 for count <= 0 or prob <= 0, count for prob >= 1.
ValueList binomial(LoweringContext& ctx, const Args& a) {
  const at::Tensor& count = a.tensor(0);
  const at::Tensor& prob = a.tensor(1);
  auto& g = ctx.g();
  const DType out = to_ir(count.scalar_type());
  ir::Value cv = ctx.tensor(count), pv = ctx.tensor(prob);
  const std::vector<int64_t> shape = broadcast_shape(ctx, cv, pv);
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return {g.constant(0, {out, shape})};
  Flat f{ctx, total, random_compute_dtype(out)};
  ir::Value n = g.reshape(broadcast_to(ctx, g.convert(cv, f.dt), shape), {f.n});
  ir::Value p = g.reshape(broadcast_to(ctx, g.convert(pv, f.dt), shape), {f.n});
  ir::Value flip = f.cmp(ir::Cmp::kGT, p, f.c(0.5));
  // q in (0, 1/2]; clamped so the unused branches stay finite.
  ir::Value q = g.clamp(f.c(1e-30), g.select(flip, f.bin(Op::kSub, f.c(1), p), p), f.c(0.5));
  ir::Value nn = f.bin(Op::kMax, n, f.c(0));
  ir::Value k = binomial_samples(f, nn, q, generator(a, 2));
  k = g.select(flip, f.bin(Op::kSub, nn, k), k);
  k = g.select(f.cmp(ir::Cmp::kGE, p, f.c(1)), nn, k);
  k = g.select(f.cmp(ir::Cmp::kLE, p, f.c(0)), f.c(0), k);
  k = g.select(f.cmp(ir::Cmp::kLE, n, f.c(0)), f.c(0), k);
  return {g.convert(g.reshape(k, shape), out)};
}

RegisterLowering r_binomial("binomial", binomial);
RegisterLowering r_standard_gamma("_standard_gamma", standard_gamma);
RegisterLowering r_sample_dirichlet("_sample_dirichlet", sample_dirichlet);
RegisterLowering r_poisson("poisson", poisson);

}  // namespace
}  // namespace ttpu::aten
