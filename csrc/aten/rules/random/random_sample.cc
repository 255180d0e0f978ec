// Lowerings of the sampling ATen ops: randperm (torch.randperm) and multinomial
// (torch.multinomial). Their randomness comes from the device generator as in
// random.cc, so manual_seed makes them repeat and nothing recompiles.
#include <c10/util/Exception.h>
#include <c10/util/overflows.h>

#include <cmath>
#include <limits>

#include "aten/deferred_check.h"
#include "aten/rules/random/random_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;

// randperm.generator_out(n, generator, out): sorting n random 64-bit keys
// carries an iota along, which yields a uniformly random permutation (two equal
// keys, the only bias, have probability below n^2 / 2^65).
std::vector<ir::Value> randperm_out(LoweringContext& ctx, const Args& a) {
  const int64_t n = a.integer(0);
  const at::Tensor& out = a.tensor(2);
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  // ATen's check_supported_max_int_with_precision: n - 1 fits out's dtype, and
  // a float dtype holds every integer below n.
  const int64_t top = n > 0 ? n - 1 : n;
  // The type names of c10::Scalar's checked conversion, which CPU's check runs.
  auto fits = [&](auto type_tag, const char* name) {
    using T = decltype(type_tag);
    TORCH_CHECK(!c10::overflows<T>(top), "value cannot be converted to type ", name,
                " without overflow");
  };
  switch (out.scalar_type()) {
    case at::kByte: fits(uint8_t{}, "uint8_t"); break;
    case at::kChar: fits(int8_t{}, "int8_t"); break;
    case at::kShort: fits(int16_t{}, "int16_t"); break;
    case at::kInt: fits(int32_t{}, "int"); break;
    case at::kUInt16: fits(uint16_t{}, "uint16_t"); break;
    case at::kUInt32: fits(uint32_t{}, "uint32_t"); break;
    default: break;
  }
  switch (out.scalar_type()) {
    case at::kHalf:
      TORCH_CHECK(n <= (int64_t{1} << 11) + 1, "n cannot be greater than 2049 for Half type.");
      break;
    case at::kFloat:
      TORCH_CHECK(n <= (int64_t{1} << 24) + 1, "n cannot be greater than 2^24+1 for Float type.");
      break;
    case at::kDouble:
      TORCH_CHECK(n <= (int64_t{1} << 53) + 1, "n cannot be greater than 2^53+1 for Double type.");
      break;
    default: break;
  }
  resize_out(out, {n});
  if (n == 0) return {};
  auto& g = ctx.g();
  ir::Value keys =
      g.rng_bit_generator(three_fry_state(ctx, generator(a, 1)), {DType::kU64, {n}}).second;
  ir::Value perm = g.sort({keys, g.iota({DType::kI64, {n}}, 0)}, 0, ir::Cmp::kLT)[1];
  ctx.write(out, perm);
  return {};
}

// CPU's checks of the probabilities' values (aten/src/ATen/native/
// Distributions.cpp, multinomial): they need the values, so they run on the
// device and are reported at the next host read (deferred_check.h).
void check_distribution(LoweringContext& ctx, const at::Tensor& self, int64_t rows, int64_t n) {
  LoweringContext probe(ctx.op() + " (distribution check)", ctx.device());
  auto& g = probe.g();
  ir::Value p = g.reshape(probe.tensor(self), {rows, n});
  const ir::TensorType t = probe.g().type(p);
  ir::Value finite = g.compare(ir::Cmp::kLE, g.unary(Op::kAbs, p),
                               g.constant(std::numeric_limits<double>::infinity(), t));
  ir::Value ok = g.binary(Op::kAnd, finite, g.compare(ir::Cmp::kGE, p, g.constant(0, t)));
  ir::Value bad = reduce(probe, g.convert(g.unary(Op::kNot, ok), DType::kI64), {0, 1}, false,
                         ir::Reducer::kAdd);
  ir::Value sums = reduce(probe, p, {1}, false, ir::Reducer::kAdd);
  ir::Value empty = reduce(
      probe,
      g.convert(g.compare(ir::Cmp::kLE, sums, g.constant(0, {t.dtype, {rows}})), DType::kI64), {0},
      false, ir::Reducer::kAdd);
  ir::Value flags = g.concatenate({g.reshape(bad, {1}), g.reshape(empty, {1})}, 0);
  ir::Value passed = g.compare(ir::Cmp::kEQ, g.binary(Op::kAdd, bad, empty),
                               g.constant_int(0, {ir::DType::kI64, {}}));
  auto out = probe.run({flags, passed});
  check_device_values(out[0], out[1], [](const at::Tensor& host) {
    TORCH_CHECK(host[0].item<int64_t>() == 0,
                "probability tensor contains either `inf`, `nan` or element < 0");
    TORCH_CHECK(host[1].item<int64_t>() == 0,
                "invalid multinomial distribution (sum of probabilities <= 0)");
  });
}

// multinomial(self, num_samples, replacement, generator): i64 [rows, k] (or
// [k] for a 1-d self) category indices.
// Without replacement: the k smallest keys E_j / p_j, E_j ~ Exp(1), which draws
// categories in the order sequential sampling without replacement would
// (P. S. Efraimidis and P. G. Spirakis, "Weighted random sampling with a
// reservoir", Inf. Process. Lett. 97(5), 2006: keys u^(1/p), same order).
// With replacement: inverse CDF, each u ~ U[0, 1) picks the number of
// categories whose normalized cumulative probability is <= u.
std::vector<ir::Value> multinomial(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const int64_t k = a.integer(1);
  const bool replacement = a.boolean(2);
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(
      at::isFloatingType(self.scalar_type()),
      "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(k > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n = self.size(-1);
  TORCH_CHECK(replacement || k <= n,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  const int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  const std::vector<int64_t> result =
      self.dim() == 1 ? std::vector<int64_t>{k} : std::vector<int64_t>{rows, k};
  auto& g = ctx.g();
  if (rows == 0 || n == 0) return {g.constant(0, {DType::kI64, result})};
  check_distribution(ctx, self, rows, n);
  const DType ct = self.scalar_type() == at::kDouble ? DType::kF64 : DType::kF32;
  ir::Value p = g.convert(g.reshape(ctx.tensor(self), {rows, n}), ct);
  ir::Value state = three_fry_state(ctx, generator(a, 3));
  ir::Value picked;
  if (!replacement) {
    const ir::TensorType t{ct, {rows, n}};
    ir::Value u = uniform01(ctx, state, {rows, n}, ct);
    ir::Value e = g.unary(Op::kNeg, g.unary(Op::kLog1p, g.unary(Op::kNeg, u)));  // -log(1 - u)
    ir::Value key = g.select(g.compare(ir::Cmp::kGT, p, g.constant(0, t)), g.binary(Op::kDiv, e, p),
                             g.constant(std::numeric_limits<double>::infinity(), t));
    ir::Value order = g.sort({key, g.iota({DType::kI64, {rows, n}}, 1)}, 1, ir::Cmp::kLT)[1];
    picked = g.slice(order, {0, 0}, {rows, k}, {1, 1});
  } else {
    ir::Value cdf = g.reduce_window(p, g.constant(0, {ct, {}}), {1, n}, {1, 1}, {1, 1}, {1, 1},
                                    {0, n - 1}, {0, 0}, ir::Reducer::kAdd);
    ir::Value total = g.slice(cdf, {0, n - 1}, {rows, n}, {1, 1});
    cdf = g.binary(Op::kDiv, cdf, g.broadcast_in_dim(total, {rows, n}, {0, 1}));
    ir::Value u = uniform01(ctx, state, {rows, k}, ct);
    ir::Value below = g.compare(ir::Cmp::kLE, g.broadcast_in_dim(cdf, {rows, k, n}, {0, 2}),
                                g.broadcast_in_dim(u, {rows, k, n}, {0, 1}));
    picked = reduce(ctx, g.convert(below, DType::kI64), {2}, false, ir::Reducer::kAdd);
    // A u at or above the last cumulative value (only by rounding) stays in range.
    picked = g.clamp(g.constant_int(0, {DType::kI64, {rows, k}}), picked,
                     g.constant_int(n - 1, {DType::kI64, {rows, k}}));
  }
  return {g.reshape(picked, result)};
}

// u ~ U[0, 1) shaped like self, computed in f32 (f64 for double tensors).
ir::Value uniform_like(LoweringContext& ctx, const at::Tensor& self, const Args& a, size_t gen) {
  const DType ct = self.scalar_type() == at::kDouble ? DType::kF64 : DType::kF32;
  return uniform01(ctx, three_fry_state(ctx, generator(a, gen)), self.sizes().vec(), ct);
}

// ATen's check. `dtype` is how the sampler names self's dtype in it:
// exponential_ by its ScalarType ("Long"), cauchy_ by its TypeMeta ("long int").
void check_continuous(const at::Tensor& self, const char* name, const std::string& dtype) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), name,
              " distribution is a continuous "
              "probability distribution. dtype must be a floating point but you specified ",
              dtype);
}

// The continuous and geometric samplers of ATen's TransformationHelper.h, from
// one uniform u ~ U[0, 1) per element:
//   exponential(lambda) = -log1p(-u) / lambda
//   cauchy(median, sigma) = median + sigma * tan(pi * (u - 1/2))
//   log_normal(mean, std) = exp(mean + std * z), z from Box-Muller as randn
//   geometric(p) = ceil(log(1 - u) / log1p(-p)), at least 1
std::vector<ir::Value> exponential(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const double lambda = a.real(1);
  TORCH_CHECK(lambda > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambda);
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  // ATen returns an empty self before the dtype check (cauchy_ checks first).
  if (self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  check_continuous(self, "Exponential", c10::toString(self.scalar_type()));
  ir::Value u = uniform_like(ctx, self, a, 2);
  ir::Value e = g.unary(Op::kNeg, g.unary(Op::kLog1p, g.unary(Op::kNeg, u)));
  const DType ct = dtype(ctx, u);
  return {g.convert(g.binary(Op::kDiv, e, broadcast_to(ctx, ctx.scalar(lambda, ct), self.sizes())),
                    dt)};
}

std::vector<ir::Value> cauchy(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const double median = a.real(1), sigma = a.real(2);
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  check_continuous(self, "Cauchy", std::string(self.dtype().name()));
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  if (self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  ir::Value u = uniform_like(ctx, self, a, 3);
  const DType ct = dtype(ctx, u);
  const auto shape = self.sizes();
  ir::Value angle =
      g.binary(Op::kMul, g.binary(Op::kSub, u, broadcast_to(ctx, g.constant(0.5, {ct, {}}), shape)),
               broadcast_to(ctx, g.constant(M_PI, {ct, {}}), shape));
  ir::Value v =
      g.binary(Op::kMul, broadcast_to(ctx, ctx.scalar(sigma, ct), shape), g.unary(Op::kTan, angle));
  return {g.convert(g.binary(Op::kAdd, broadcast_to(ctx, ctx.scalar(median, ct), shape), v), dt)};
}

std::vector<ir::Value> log_normal(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const double mean = a.real(1), std = a.real(2);
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  if (self.numel() == 0)
    return {ctx.g().constant(0, {to_ir(self.scalar_type()), self.sizes().vec()})};
  // CPU's log_normal kernel takes floating dtypes only (no float8).
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::isFloatingType(self.scalar_type()) && !c10::isFloat8Type(self.scalar_type()),
      "\"log_normal_cpu\" not implemented for '", self.scalar_type(), "'");
  // normal_functional(self, mean, std, generator), then exp.
  std::vector<c10::IValue> args{self, mean, std, a[3]};
  ir::Value z = lowering_table().at("normal_functional")(ctx, Args(args))[0];
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  const DType ct = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  return {g.convert(g.unary(Op::kExp, g.convert(z, ct)), dt)};
}

std::vector<ir::Value> geometric(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const double p = a.real(1);
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  if (self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  ir::Value u = uniform_like(ctx, self, a, 2);
  const DType ct = dtype(ctx, u);
  const auto shape = self.sizes();
  ir::Value one = broadcast_to(ctx, g.constant(1, {ct, {}}), shape);
  ir::Value k =
      g.unary(Op::kCeil, g.binary(Op::kDiv, g.unary(Op::kLog1p, g.unary(Op::kNeg, u)),
                                  broadcast_to(ctx, ctx.scalar(std::log1p(-p), ct), shape)));
  return {g.convert(g.binary(Op::kMax, k, one), dt)};
}

RegisterLowering r_exponential("exponential", exponential);
RegisterLowering r_cauchy("cauchy", cauchy);
RegisterLowering r_log_normal("log_normal", log_normal);
RegisterLowering r_geometric("geometric", geometric);
RegisterOutOnly r_randperm_out("randperm.generator_out", randperm_out);
RegisterLowering r_multinomial("multinomial", multinomial);

}  // namespace
}  // namespace ttpu::aten
