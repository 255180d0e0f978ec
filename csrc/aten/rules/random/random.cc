// Lowerings of the random ATen ops: uniform_, normal_, bernoulli_, random_
// (what torch.rand / randn / bernoulli / randint / dropout and nn.init call on a
// PrivateUse1 device) and native_dropout. Bits come from StableHLO's
// rng_bit_generator (THREE_FRY) keyed by the device generator, whose seed and
// offset are program parameters: torch.manual_seed(s) makes draws repeat, each
// draw advances the offset, and neither recompiles.
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "aten/rules/random/random_util.h"

namespace ttpu::aten {

using ir::DType;
using ir::Op;

std::optional<at::Generator> generator(const Args& a, size_t i) {
  if (a.is_none(i)) return std::nullopt;
  return a[i].toGenerator();
}

// The generator's {seed, offset} as a THREE_FRY state {key, counter} whose
// counter starts at offset * 2^32. XLA's THREE_FRY expansion numbers the
// counters of a draw state[1] + i, one per output element
// (GetThreeFryInputsAndUpdatedState in xla/hlo/builder/lib/prng.cc), while the
// generator advances the offset by one per draw: unspaced, the next draw would
// reuse almost all of this draw's counters, i.e. repeat its values shifted.
// Spaced 2^32 apart, draws of fewer than 2^32 elements never share a counter.
ir::Value three_fry_state(LoweringContext& ctx, const std::optional<at::Generator>& gen) {
  auto& g = ctx.g();
  ir::Value state = ctx.rng_state(gen);
  ir::Value key = g.slice(state, {0}, {1}, {1});
  ir::Value counter = g.slice(state, {1}, {2}, {1});
  counter = g.binary(Op::kShiftLeft, counter, g.constant(32, {DType::kU64, {1}}));
  return g.concatenate({key, counter}, 0);
}

// Significand bits of a float dtype (std::numeric_limits<T>::digits).
int digits_of(DType dt) {
  switch (dt) {
    case DType::kF64: return 53;
    case DType::kF16: return 11;
    case DType::kBF16: return 8;
    default: return 24;
  }
}

// Uniform values in [0, 1) of float dtype `dt`: the top `digits` bits of each
// random word times 2^-digits (`digits` defaults to dt's own). With no more
// digits than the result dtype holds, every value is exactly representable and
// 1 is never drawn (no rounding up); ATen's uniform_real_distribution
// (aten/src/ATen/core/DistributionsHelper.h) builds its values the same way.
ir::Value uniform01(LoweringContext& ctx, ir::Value state, const std::vector<int64_t>& shape,
                    DType dt, int digits) {
  auto& g = ctx.g();
  if (digits == 0) digits = digits_of(dt);
  const DType word = dt == DType::kF64 ? DType::kU64 : DType::kU32;
  const int width = dt == DType::kF64 ? 64 : 32;
  ir::Value bits = g.rng_bit_generator(state, {word, shape}).second;
  ir::Value top = g.binary(Op::kShiftRightLogical, bits, g.constant(width - digits, {word, shape}));
  return g.binary(Op::kMul, g.convert(top, dt), g.constant(std::ldexp(1.0, -digits), {dt, shape}));
}

// Standard normal values by the Box-Muller transform (G. E. P. Box and
// M. E. Muller, "A Note on the Generation of Random Normal Deviates", Ann. Math.
// Statist. 29(2), 1958): z = sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1].
ir::Value standard_normal(LoweringContext& ctx, ir::Value state, const std::vector<int64_t>& shape,
                          DType dt) {
  auto& g = ctx.g();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const ir::TensorType t{dt, {n}};
  ir::Value u = uniform01(ctx, state, {2, n}, dt);
  ir::Value u1 = g.reshape(g.slice(u, {0, 0}, {1, n}, {1, 1}), {n});
  u1 = g.binary(Op::kSub, g.constant(1, t), u1);
  ir::Value u2 = g.reshape(g.slice(u, {1, 0}, {2, n}, {1, 1}), {n});
  ir::Value r = g.unary(Op::kSqrt, g.binary(Op::kMul, g.constant(-2, t), g.unary(Op::kLog, u1)));
  ir::Value theta = g.binary(Op::kMul, g.constant(2 * M_PI, t), u2);
  return g.reshape(g.binary(Op::kMul, r, g.unary(Op::kCos, theta)), shape);
}

namespace {

int64_t random_numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

void check_random_float(const at::Tensor& self, const char* kernel) {
  // CPU's random kernels take no float8 (its uniform_, normal_ raise).
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::isFloatingType(self.scalar_type()) && !c10::isFloat8Type(self.scalar_type()), "\"",
      kernel, "\" not implemented for '", self.scalar_type(), "'");
}

// The lowest and largest values of self's dtype, and its significand digits
// (0 for integers).
struct Bounds {
  double lo, hi;
  int digits;
};

Bounds bounds_of(const at::Tensor& self) {
  Bounds b{0, 0, 0};
  if (c10::isFloatingType(self.scalar_type())) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "bounds", [&] {
      b = {static_cast<double>(std::numeric_limits<scalar_t>::lowest()),
           static_cast<double>(std::numeric_limits<scalar_t>::max()),
           std::numeric_limits<scalar_t>::digits};
    });
  } else {
    AT_DISPATCH_V2(self.scalar_type(), "bounds", AT_WRAP([&] {
                     b = {static_cast<double>(std::numeric_limits<scalar_t>::lowest()),
                          static_cast<double>(std::numeric_limits<scalar_t>::max()), 0};
                   }),
                   AT_EXPAND(AT_INTEGRAL_TYPES), at::kBool, at::kUInt16, at::kUInt32, at::kUInt64);
  }
  return b;
}

// from + (to - from) * u, the values of self.uniform_(from, to).
ir::Value uniform_values(LoweringContext& ctx, const at::Tensor& self, double from, double to,
                         const std::optional<at::Generator>& gen) {
  check_random_float(self, "check_uniform_bounds");
  const Bounds b = bounds_of(self);  // ATen's check_uniform_bounds, with its messages
  TORCH_CHECK(from >= b.lo && from <= b.hi, "from is out of bounds for ", self.dtype());
  TORCH_CHECK(to >= b.lo && to <= b.hi, "to is out of bounds for ", self.dtype());
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  TORCH_CHECK(to - from <= b.hi, "uniform_ expects to-from <= std::numeric_limits<",
              c10::toString(self.scalar_type()), ">::max(), but found to=", to, " and from=", from,
              " which result in to-from to exceed the limit");
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  const std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) return g.constant(0, {dt, shape});
  const DType ct = random_compute_dtype(dt);
  // dt's digits, so that u stays below 1 once converted to a 16-bit float.
  ir::Value u = uniform01(ctx, three_fry_state(ctx, gen), shape, ct, digits_of(dt));
  ir::Value scaled = g.binary(Op::kMul, u, broadcast_to(ctx, ctx.scalar(to - from, ct), shape));
  return g.convert(g.binary(Op::kAdd, scaled, broadcast_to(ctx, ctx.scalar(from, ct), shape)), dt);
}

// mean + std * z shaped `shape`, in `dt`; mean / std are IR values broadcastable to it.
ir::Value normal_values(LoweringContext& ctx, const std::vector<int64_t>& shape, DType dt,
                        ir::Value mean, ir::Value std, const std::optional<at::Generator>& gen) {
  auto& g = ctx.g();
  if (random_numel(shape) == 0) return g.constant(0, {dt, shape});
  const DType ct = random_compute_dtype(dt);
  ir::Value z = standard_normal(ctx, three_fry_state(ctx, gen), shape, ct);
  ir::Value v = g.binary(Op::kMul, z, broadcast_to(ctx, g.convert(std, ct), shape));
  return g.convert(g.binary(Op::kAdd, v, broadcast_to(ctx, g.convert(mean, ct), shape)), dt);
}

void check_std(double std) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
}

// 1 where u < p, else 0, in self's dtype; p is an IR value broadcastable to self.
ir::Value bernoulli_values(LoweringContext& ctx, const at::Tensor& self, ir::Value p,
                           const std::optional<at::Generator>& gen) {
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  const std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) return g.constant(0, {dt, shape});
  const DType ct = dtype(ctx, p) == DType::kF64 ? DType::kF64 : DType::kF32;
  ir::Value u = uniform01(ctx, three_fry_state(ctx, gen), shape, ct);
  return g.convert(g.compare(ir::Cmp::kLT, u, broadcast_to(ctx, g.convert(p, ct), shape)), dt);
}

// The dtype a Python-float probability is compared in: f64 only for f64 tensors.
DType p_dtype(const at::Tensor& self) {
  return self.scalar_type() == at::kDouble ? DType::kF64 : DType::kF32;
}

void check_p(double p) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
}

// Uniform integers in [from, from + range) in self's dtype: a random word modulo
// range, as ATen's random_from_to (aten/src/ATen/native/cpu/DistributionTemplates.h);
// 32-bit words when the range fits, 64-bit otherwise. range == 0 means the whole
// 64-bit range. from and range are parameters, so randint(0, n) never
// recompiles for a new n.
ir::Value random_values(LoweringContext& ctx, const at::Tensor& self, int64_t from, uint64_t range,
                        const std::optional<at::Generator>& gen) {
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  const std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) return g.constant(0, {dt, shape});
  const bool wide = range == 0 || range > std::numeric_limits<uint32_t>::max();
  const DType word = wide ? DType::kU64 : DType::kU32;
  ir::Value bits = g.rng_bit_generator(three_fry_state(ctx, gen), {word, shape}).second;
  if (range != 0) {
    bits = g.binary(Op::kRem, bits, broadcast_to(ctx, ctx.scalar(c10::Scalar(range), word), shape));
  }
  ir::Value v = g.binary(Op::kAdd, g.convert(bits, DType::kI64),
                         broadcast_to(ctx, ctx.scalar(c10::Scalar(from), DType::kI64), shape));
  return g.convert(v, dt);
}

// The largest value random_() draws for self's dtype: 2^digits for floats
// (every integer up to it is exact), the dtype's maximum for integers.
uint64_t random_max(const at::Tensor& self) {
  switch (self.scalar_type()) {
    case at::kBool: return 1;
    case at::kByte: return std::numeric_limits<uint8_t>::max();
    case at::kChar: return std::numeric_limits<int8_t>::max();
    case at::kShort: return std::numeric_limits<int16_t>::max();
    case at::kInt: return std::numeric_limits<int32_t>::max();
    case at::kLong: return std::numeric_limits<int64_t>::max();
    case at::kUInt16: return std::numeric_limits<uint16_t>::max();
    case at::kUInt32: return std::numeric_limits<uint32_t>::max();
    case at::kUInt64: return std::numeric_limits<uint64_t>::max();
    default: return uint64_t{1} << digits_of(to_ir(self.scalar_type()));
  }
}

// ATen's check_from_to_in_range (DistributionTemplates.h), with its messages:
// from and to - 1 inside the dtype, and for floats a warning past 2^digits.
void check_from_to_in_range(const at::Tensor& self, int64_t from, int64_t to_inc) {
  const Bounds b = bounds_of(self);
  // Both bounds are checked before either warns, in ATen's order.
  const std::pair<int64_t, const char*> bounds[] = {{from, "from"}, {to_inc, "to - 1"}};
  for (const auto& [v, name] : bounds) {
    TORCH_CHECK(static_cast<double>(v) >= b.lo && static_cast<double>(v) <= b.hi, name,
                " is out of bounds for ", self.dtype());
  }
  if (b.digits == 0) return;
  for (const auto& [v, name] : bounds) {
    if (v < -(int64_t{1} << b.digits) || v > (int64_t{1} << b.digits)) {
      TORCH_WARN(name, " is out of bounds [-(2^", b.digits, "), 2^", b.digits, "]. ",
                 "Due to precision limitations ", self.dtype(),
                 " can support discrete uniform distribution only within this range. ",
                 "This warning will become an error in version 1.7 release, please fix the "
                 "code in advance");
    }
  }
}

std::vector<ir::Value> random_from_to(LoweringContext& ctx, const at::Tensor& self, int64_t from,
                                      std::optional<int64_t> to,
                                      const std::optional<at::Generator>& gen) {
  if (to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from,
                " >= to=", *to);
    check_from_to_in_range(self, from, *to - 1);
    return {random_values(ctx, self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from),
                          gen)};
  }
  // to=None: up to and including the dtype's largest drawable value.
  const uint64_t top = random_max(self);
  TORCH_CHECK(from <= 0 || static_cast<uint64_t>(from) <= top,
              "random_ expects 'from' casted to "
              "dtype to be less than or equal to 'to_inc' casted to dtype, but got from=",
              from, " > to_inc=", top);
  // As ATen, the top as int64: uint64's wraps to -1, which its check refuses.
  check_from_to_in_range(self, from, static_cast<int64_t>(top));
  return {random_values(ctx, self, from, top - static_cast<uint64_t>(from) + 1, gen)};
}

// native_dropout(input, p, train): mask = bernoulli(1 - p) (bool), output =
// input * mask / (1 - p); in eval (train=false) the input and an all-true mask.
// As ATen's native_dropout_cpu, p == 1 scales by 0 rather than dividing by 0.
std::vector<ir::Value> native_dropout(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const double p = a.real(1);
  const bool train = a.is_none(2) || a.boolean(2);
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(input);
  const std::vector<int64_t> shape = input.sizes().vec();
  if (!train || input.numel() == 0) {
    return {x, g.constant(1, {DType::kBool, shape})};
  }
  const double keep = 1.0 - p;
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;
  const DType dt = dtype(ctx, x);
  const DType ct = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  ir::Value u = uniform01(ctx, three_fry_state(ctx, std::nullopt), shape, ct);
  ir::Value mask = g.compare(ir::Cmp::kLT, u, broadcast_to(ctx, ctx.scalar(keep, ct), shape));
  ir::Value kept = g.binary(Op::kMul, x, g.convert(mask, dt));
  return {g.binary(Op::kMul, kept, broadcast_to(ctx, ctx.scalar(scale, dt), shape)), mask};
}

// native_dropout_backward(grad, mask, scale) = grad * (mask * scale); the
// Python-float scale promotes integral grads to the default float dtype as in
// ATen's kernel.
std::vector<ir::Value> native_dropout_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const DType dt = to_ir(result_type(a[0], a[2]));
  ir::Value grad = g.convert(ctx.tensor(a.tensor(0)), dt);
  ir::Value m = g.convert(ctx.tensor(a.tensor(1)), dt);
  m = binary(ctx, Op::kMul, m, ctx.scalar(a.real(2), dt));
  return {binary(ctx, Op::kMul, grad, m)};
}

// ATen's CHECK_NORMAL_TENSOR_STD: every std >= 0 (a NaN fails too), read at
// the call as CPU does and CUDA (std.min().ge(0).item()): a host wait.
void check_std_tensor(LoweringContext& ctx, const at::Tensor& std) {
  if (std.numel() == 0) return;
  LoweringContext probe(ctx.op() + " (std check)", ctx.device());
  auto& g = probe.g();
  ir::Value s = probe.tensor(std);
  const ir::TensorType t = g.type(s);
  std::vector<int64_t> all(t.dims.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  ir::Value bad = g.unary(Op::kNot, g.compare(ir::Cmp::kGE, s, g.constant(0, t)));
  ir::Value count = reduce(probe, g.convert(bad, DType::kI64), all, false, ir::Reducer::kAdd);
  const at::Tensor host = probe.run({count})[0].cpu();
  TORCH_CHECK(host.item<int64_t>() == 0, "normal expects all elements of std >= 0.0");
}

// normal.Tensor_float / float_Tensor / Tensor_Tensor: mean and std broadcast
// together; the result takes mean's dtype when mean is a tensor, else std's
// (ATen's normal: at::empty(shape, mean.options()) / empty_like(std)).
std::vector<ir::Value> normal_tensors(LoweringContext& ctx, const Args& a) {
  if (a[1].isTensor()) check_std_tensor(ctx, a.tensor(1));
  auto& g = ctx.g();
  const DType dt = to_ir(a.tensor(a[0].isTensor() ? 0 : 1).scalar_type());
  auto read = [&](size_t i) {
    if (a[i].isTensor()) return g.convert(ctx.tensor(a.tensor(i)), dt);
    if (i == 1) check_std(a.real(i));
    return ctx.scalar(a.scalar(i), dt);
  };
  ir::Value mean = read(0), std = read(1);
  std::vector<int64_t> shape = broadcast_shape(ctx, mean, std);
  return {normal_values(ctx, shape, dt, mean, std, generator(a, 2))};
}

RegisterLowering r_uniform("uniform", [](LoweringContext& c, const Args& a) {
  return std::vector<ir::Value>{
      uniform_values(c, a.tensor(0), a.real(1), a.real(2), generator(a, 3))};
});
RegisterLowering r_normal_functional("normal_functional", [](LoweringContext& c, const Args& a) {
  // ATen's normal_impl_: the std check, then an empty self is returned (any
  // dtype: randn(0, dtype=torch.int64) is fine), then the kernel's dtypes.
  check_std(a.real(2));
  if (a.tensor(0).numel() > 0) check_random_float(a.tensor(0), "normal_kernel_cpu");
  const DType dt = to_ir(a.tensor(0).scalar_type());
  const DType ct = random_compute_dtype(dt);
  return std::vector<ir::Value>{normal_values(c, a.tensor(0).sizes().vec(), dt,
                                              c.scalar(a.scalar(1), ct), c.scalar(a.scalar(2), ct),
                                              generator(a, 3))};
});
RegisterLowering r_normal_tf("normal.Tensor_float", normal_tensors);
RegisterLowering r_normal_ft("normal.float_Tensor", normal_tensors);
RegisterLowering r_normal_tt("normal.Tensor_Tensor", normal_tensors);
RegisterLowering r_bernoulli("bernoulli", [](LoweringContext& c, const Args& a) {
  return std::vector<ir::Value>{
      bernoulli_values(c, a.tensor(0), c.tensor(a.tensor(0)), generator(a, 1))};
});
RegisterLowering r_bernoulli_tensor("bernoulli.Tensor", [](LoweringContext& c, const Args& a) {
  return std::vector<ir::Value>{
      bernoulli_values(c, a.tensor(0), c.tensor(a.tensor(1)), generator(a, 2))};
});
RegisterLowering r_bernoulli_p("bernoulli.p", [](LoweringContext& c, const Args& a) {
  check_p(a.real(1));
  ir::Value p = c.scalar(a.scalar(1), p_dtype(a.tensor(0)));
  return std::vector<ir::Value>{bernoulli_values(c, a.tensor(0), p, generator(a, 2))};
});
RegisterLowering r_random("random", [](LoweringContext& c, const Args& a) {
  return random_from_to(c, a.tensor(0), 0, std::nullopt, generator(a, 1));
});
RegisterLowering r_random_to("random.to", [](LoweringContext& c, const Args& a) {
  return random_from_to(c, a.tensor(0), 0, a.integer(1), generator(a, 2));
});
RegisterLowering r_random_from("random.from", [](LoweringContext& c, const Args& a) {
  return random_from_to(c, a.tensor(0), a.integer(1), a.opt_integer(2), generator(a, 3));
});
RegisterLowering r_native_dropout("native_dropout", native_dropout);
RegisterLowering r_native_dropout_bw("native_dropout_backward", native_dropout_backward);

// normal_ and bernoulli_.float are in-place ops whose functional forms
// (normal_functional, bernoulli.p) carry other names, so the generic kernel
// cannot derive them; torch.randn and dropout's composite reach them directly.
// They run the same value builders and write self.
// Complex normal values as ATen draws them (normal_impl_): the real and
// imaginary parts are independent N(mean, std^2 / 2), so |z - mean| has
// variance std^2. One draw of [2, shape...] gives both parts.
ir::Value complex_normal(LoweringContext& ctx, const std::vector<int64_t>& shape, DType dt,
                         double mean, double std, const std::optional<at::Generator>& gen) {
  auto& g = ctx.g();
  const DType pt = ir::complex_part(dt);
  const DType ct = random_compute_dtype(pt);
  std::vector<int64_t> both = shape;
  both.insert(both.begin(), 2);
  ir::Value v =
      normal_values(ctx, both, pt, ctx.scalar(mean, ct), ctx.scalar(std / std::sqrt(2.0), ct), gen);
  auto part = [&](int64_t i) {
    std::vector<int64_t> start(both.size(), 0), limit = both, step(both.size(), 1);
    start[0] = i;
    limit[0] = i + 1;
    return g.reshape(g.slice(v, start, limit, step), shape);
  };
  return g.complex(part(0), part(1));
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  check_std(std);
  if (self.numel() == 0) return self;  // before the dtype check, as normal_impl_
  if (!self.is_complex()) check_random_float(self, "normal_kernel_cpu");
  LoweringContext ctx("aten::normal_", self.device().index());
  const DType dt = to_ir(self.scalar_type());
  if (self.is_complex()) {
    ctx.write(self, complex_normal(ctx, self.sizes().vec(), dt, mean, std, gen));
    ctx.run({});
    return self;
  }
  const DType ct = random_compute_dtype(dt);
  ctx.write(self, normal_values(ctx, self.sizes().vec(), dt, ctx.scalar(mean, ct),
                                ctx.scalar(std, ct), gen));
  ctx.run({});
  return self;
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  check_p(p);
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isFloat8Type(self.scalar_type()),
                              "\"bernoulli_scalar_cpu_\" not implemented for '", self.scalar_type(),
                              "'");
  if (self.numel() == 0) return self;
  LoweringContext ctx("aten::bernoulli_.float", self.device().index());
  ctx.write(self, bernoulli_values(ctx, self, ctx.scalar(p, p_dtype(self)), gen));
  ctx.run({});
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", &normal_);
  m.impl("bernoulli_.float", &bernoulli_float_);
}

}  // namespace ttpu::aten
