// Lowerings of elementwise binary ATen ops: PyTorch type promotion
// (at::native::result_type), broadcasting, and the alpha/rounding arguments.
#include "aten/deferred_check.h"
#include "aten/ops_util.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::aten {
namespace {

using ir::Op;

// An operand in dtype `dt`; a Python scalar converted as TensorIterator casts
// a wrapped number into the common dtype: unchecked (70000. in float16 is
// inf, 300 in int8 is 44), where c10's checked Scalar::to<T>, which the
// lowering's scalar parameters use, raises "value cannot be converted to type
// c10::Half without overflow" (remainder(half, 70000.): CPU gives x).
ir::Value cast_operand(LoweringContext& ctx, const c10::IValue& v, ir::DType dt) {
  if (v.isTensor() || ir::is_complex(dt) || v.toScalar().isComplex()) return operand(ctx, v, dt);
  try {
    return operand(ctx, v, dt);
  } catch (const std::runtime_error& e) {  // c10::report_overflow's type
    if (std::string(e.what()).find("without overflow") == std::string::npos) throw;
    const c10::Scalar s = v.toScalar();
    const at::ScalarType from = s.isFloatingPoint() ? at::kDouble
                                : s.isBoolean()     ? at::kBool
                                                    : at::kLong;
    return ctx.scalar(at::scalar_tensor(s, from).to(to_aten(dt)).item(), dt);
  }
}

// Both operands promoted to PyTorch's result type and broadcast.
std::pair<ir::Value, ir::Value> promoted(LoweringContext& ctx, const Args& a, ir::DType* out) {
  *out = to_ir(result_type(a[0], a[1]));
  return broadcast_pair(ctx, cast_operand(ctx, a[0], *out), cast_operand(ctx, a[1], *out));
}

bool is_bool_operand(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor().scalar_type() == at::kBool : v.isBool();
}

// add/sub: self op other * alpha. Bool add is logical or (PyTorch's behaviour).
std::vector<ir::Value> add_sub(LoweringContext& ctx, const Args& a, Op op) {
  // ATen's sub_check: one bool operand (a tensor or a Python bool) is enough.
  if (op == Op::kSub) {
    TORCH_CHECK(!is_bool_operand(a[0]) || !is_bool_operand(a[1]),
                "Subtraction, the `-` operator, with two bool tensors is not supported. "
                "Use the `^` or `logical_xor()` operator instead.");
    TORCH_CHECK(!is_bool_operand(a[0]) && !is_bool_operand(a[1]),
                "Subtraction, the `-` operator, with a bool tensor is not supported. "
                "If you are trying to invert a mask, use the `~` or `logical_not()` "
                "operator instead.");
  }
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  if (a.size() > 2 && !a.is_none(2)) {
    c10::Scalar alpha = a.scalar(2);
    TORCH_CHECK(!alpha.isBoolean() || dt == ir::DType::kBool,
                "Boolean alpha only supported for Boolean results.");
    TORCH_CHECK(ir::is_float(dt) || alpha.isIntegral(/*includeBool=*/true),
                "For integral input tensors, argument alpha must not be a floating point number.");
    TORCH_CHECK(!alpha.isComplex(),
                "For non-complex input tensors, argument alpha must not be a complex number.");
    TORCH_CHECK(
        dt != ir::DType::kBool || !alpha.isIntegral(false) || alpha.toLong() == 1 || op != Op::kSub,
        "Subtraction, the `-` operator, with two bool tensors is not supported.");
    const bool is_one = scalar_equals(alpha, 1);
    if (!is_one)
      y = ctx.g().binary(Op::kMul, y, broadcast_to(ctx, ctx.scalar(alpha, dt), dims(ctx, y)));
  }
  if (dt == ir::DType::kBool) {
    TORCH_CHECK(op != Op::kSub,
                "Subtraction, the `-` operator, with two bool tensors is not "
                "supported. Use the `^` or `logical_xor()` operator instead.");
    return {ctx.g().binary(Op::kOr, x, y)};
  }
  return {ctx.g().binary(op, x, y)};
}

// CPU's mul and true-division kernels keep a scalar operand of a
// float16/bfloat16 result in float (TensorIterator's original_scalar_value,
// in opmath): x * 1e-5 and x / 1e5 compute in float and round once, where the
// scalar rounded to half first is lost (1e5 is inf in half). A scalar: a
// Python number or a 0-d CPU tensor (is_cpu_scalar). Its value when `other`
// is one and `dt` is such a dtype.
std::optional<double> reduced_float_scalar(const c10::IValue& other, ir::DType dt) {
  if (dt != ir::DType::kF16 && dt != ir::DType::kBF16) return std::nullopt;
  if (other.isScalar()) return other.toScalar().toDouble();
  if (other.isTensor()) {
    const at::Tensor& t = other.toTensor();
    if (t.dim() == 0 && t.device().is_cpu() && !t.is_complex()) return t.item<double>();
  }
  return std::nullopt;
}

// self op scalar in float32, rounded once to `dt`.
ir::Value in_float(LoweringContext& ctx, const c10::IValue& self, double scalar, Op op,
                   ir::DType dt) {
  auto [x, y] = broadcast_pair(ctx, operand(ctx, self, ir::DType::kF32),
                               ctx.scalar(c10::Scalar(scalar), ir::DType::kF32));
  return ctx.g().convert(ctx.g().binary(op, x, y), dt);
}

std::vector<ir::Value> mul_rule(LoweringContext& ctx, const Args& a) {
  const ir::DType common = to_ir(result_type(a[0], a[1]));
  if (auto s = reduced_float_scalar(a[1], common)) {
    return {in_float(ctx, a[0], *s, Op::kMul, common)};
  }
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  return {ctx.g().binary(dt == ir::DType::kBool ? Op::kAnd : Op::kMul, x, y)};
}

// Python-style floor division / modulo on a truncating machine op.
ir::Value floor_divide(LoweringContext& ctx, ir::Value x, ir::Value y) {
  auto& g = ctx.g();
  ir::DType dt = dtype(ctx, x);
  if (ir::is_float(dt)) {
    // floor(x / y) computed as PyTorch does: (x - fmod(x, y)) / y, then floored,
    // which keeps exact quotients exact.
    ir::Value mod = g.binary(Op::kRem, x, y);
    ir::Value div = g.binary(Op::kDiv, g.binary(Op::kSub, x, mod), y);
    ir::Value zero = full_like(ctx, x, 0);
    ir::Value sign_differs = g.compare(ir::Cmp::kNE, g.compare(ir::Cmp::kLT, mod, zero),
                                       g.compare(ir::Cmp::kLT, y, zero));
    ir::Value adjust =
        g.select(g.binary(Op::kAnd, g.compare(ir::Cmp::kNE, mod, zero), sign_differs),
                 g.binary(Op::kSub, div, full_like(ctx, x, 1)), div);
    ir::Value floored = g.unary(Op::kFloor, adjust);
    // Round-off can leave floor one below the true quotient.
    ir::Value fixed = g.select(
        g.compare(ir::Cmp::kGT, g.binary(Op::kSub, adjust, floored), full_like(ctx, x, 0.5)),
        g.binary(Op::kAdd, floored, full_like(ctx, x, 1)), floored);
    ir::Value q = g.binary(Op::kDiv, x, y);
    // A zero quotient takes the sign of x / y, as CPU's div_floor does
    // (copysign(0, x / y)): -0. // -3. is 0., not (-0. - -0.) / -3. = -0.
    // q * 0 is that zero: q is finite there.
    fixed = g.select(g.compare(ir::Cmp::kEQ, adjust, zero), g.binary(Op::kMul, q, zero), fixed);
    // Division by zero follows true division (inf/nan).
    return g.select(g.compare(ir::Cmp::kEQ, y, zero), q, fixed);
  }
  ir::Value q = g.binary(Op::kDiv, x, y);
  if (ir::is_unsigned(dt)) return q;
  ir::Value zero = full_like(ctx, x, 0);
  ir::Value r = g.binary(Op::kRem, x, y);
  ir::Value needs = g.binary(
      Op::kAnd, g.compare(ir::Cmp::kNE, r, zero),
      g.compare(ir::Cmp::kNE, g.compare(ir::Cmp::kLT, r, zero), g.compare(ir::Cmp::kLT, y, zero)));
  return g.select(needs, g.binary(Op::kSub, q, full_like(ctx, x, 1)), q);
}

// CPU raises "ZeroDivisionError" for an integer division, remainder or fmod
// by zero (CUDA returns garbage; CPU is the spec). A Python scalar or CPU
// divisor is checked now; a tpu divisor's zeros are a device value, so a probe
// computes "no zero" on the device and the check is deferred to the next read
// (deferred_check.h), as index range checks are.
void check_no_zero_divisor(LoweringContext& ctx, const Args& a, ir::DType common) {
  const c10::IValue& divisor = a[1];
  if (!ir::is_integral(common)) return;
  // No element computed, nothing checked (CPU's kernel loop does not run).
  if (a[0].isTensor() && a[0].toTensor().numel() == 0) return;
  if (!divisor.isTensor()) {
    // The scalar as the common dtype holds it: 256 is 0 in uint8.
    const int width = 8 * static_cast<int>(ir::byte_size(common));
    const uint64_t v = static_cast<uint64_t>(divisor.toScalar().toLong());
    TORCH_CHECK((width >= 64 ? v : (v & ((uint64_t{1} << width) - 1))) != 0, "ZeroDivisionError");
    return;
  }
  const at::Tensor& t = divisor.toTensor();
  if (t.numel() == 0) return;
  if (t.device().is_cpu()) {
    TORCH_CHECK(!t.to(to_aten(common)).eq(0).any().item<bool>(), "ZeroDivisionError");
    return;
  }
  LoweringContext probe(ctx.op() + " (zero divisor check)", ctx.device());
  auto& g = probe.g();
  ir::Value v = operand(probe, divisor, common);
  std::vector<int64_t> all(dims(probe, v).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  ir::Value zero = g.compare(ir::Cmp::kEQ, v, full_like(probe, v, 0));
  ir::Value ok = g.unary(Op::kNot, reduce(probe, zero, all, false, ir::Reducer::kOr));
  auto checked = probe.run({ok});
  check_device_values(checked[0], checked[0], [](const at::Tensor& host) {
    TORCH_CHECK(host.item<bool>(), "ZeroDivisionError");
  });
}

std::vector<ir::Value> div(LoweringContext& ctx, const Args& a, std::optional<std::string> mode) {
  auto& g = ctx.g();
  ir::DType common = to_ir(result_type(a[0], a[1]));
  if (!mode.has_value()) {
    // True division: integers promote to the default float dtype.
    ir::DType dt = ir::is_float(common) ? common : to_ir(c10::get_default_dtype_as_scalartype());
    if (auto s = reduced_float_scalar(a[1], dt)) return {in_float(ctx, a[0], *s, Op::kDiv, dt)};
    auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
    return {g.binary(Op::kDiv, x, y)};
  }
  check_no_zero_divisor(ctx, a, common);
  auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], common), operand(ctx, a[1], common));
  if (*mode == "trunc") {
    if (ir::is_float(common)) {
      ir::Value q = g.binary(Op::kDiv, x, y);
      ir::Value zero = full_like(ctx, q, 0);
      return {g.select(g.compare(ir::Cmp::kLT, q, zero), g.unary(Op::kCeil, q),
                       g.unary(Op::kFloor, q))};
    }
    return {g.binary(Op::kDiv, x, y)};
  }
  TORCH_CHECK(*mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or "
              "'floor' but found '",
              *mode, "'");
  return {floor_divide(ctx, x, y)};
}

std::vector<ir::Value> remainder(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  check_no_zero_divisor(ctx, a, to_ir(result_type(a[0], a[1])));
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  ir::Value r = g.binary(Op::kRem, x, y);
  if (ir::is_unsigned(dt)) return {r};
  ir::Value zero = full_like(ctx, r, 0);
  ir::Value fix = g.binary(
      Op::kAnd, g.compare(ir::Cmp::kNE, r, zero),
      g.compare(ir::Cmp::kNE, g.compare(ir::Cmp::kLT, r, zero), g.compare(ir::Cmp::kLT, y, zero)));
  return {g.select(fix, g.binary(Op::kAdd, r, y), r)};
}

std::vector<ir::Value> simple(LoweringContext& ctx, const Args& a, Op op) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  return {ctx.g().binary(op, x, y)};
}

std::vector<ir::Value> bitwise(LoweringContext& ctx, const Args& a, Op op) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  TORCH_CHECK_NOT_IMPLEMENTED(!ir::is_float(dt), "\"bitwise_",
                              op == Op::kAnd  ? "and"
                              : op == Op::kOr ? "or"
                                              : "xor",
                              "_cpu\" not implemented for '", to_aten(dt), "'");
  return {ctx.g().binary(op, x, y)};
}

std::vector<ir::Value> logical(LoweringContext& ctx, const Args& a, Op op) {
  auto& g = ctx.g();
  auto as_bool = [&](const c10::IValue& v) {
    ir::Value t = ctx.tensor(v.toTensor());
    if (dtype(ctx, t) == ir::DType::kBool) return t;
    return g.compare(ir::Cmp::kNE, t, full_like(ctx, t, 0));
  };
  auto [x, y] = broadcast_pair(ctx, as_bool(a[0]), as_bool(a[1]));
  return {g.binary(op, x, y)};
}

std::vector<ir::Value> comparison(LoweringContext& ctx, const Args& a, ir::Cmp cmp) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  return {ctx.g().compare(cmp, x, y)};
}

std::vector<ir::Value> fmod(LoweringContext& ctx, const Args& a) {
  check_no_zero_divisor(ctx, a, to_ir(result_type(a[0], a[1])));
  return simple(ctx, a, Op::kRem);
}

// Up to this many exponent bits integer pow is unrolled; above it (int64:
// CPU has no uint32/uint64 pow), a tensor of at most kLoopedPowMaxElements elements loops
// (stablehlo/loop_kernels.h). Measured (issue 35, CPU plugin, 2 shared
// cores): int64 pow unrolled over 63 bits compiled in ~0.3 s a program,
// looped in ~0.12-0.14 s (a plain mul: ~0.03 s), and PyTorch's test_foreach
// int64 _foreach_pow parity tests went from 133 s to 57-70 s. For int16 and
// int32 the loop did not pay: those tests took 107-143 s unrolled, 189 s looped.
// Looped int64 also runs faster at 2^16 elements (0.75 vs 1.4-2.7 ms for
// exponents < 2^20). Large tensors stay unrolled: XLA:CPU does not fuse
// across a while's iterations, and on 4M int64 elements the loop ran 0.18-0.30
// s against 0.048 s unrolled.
constexpr int kMaxUnrolledPowBits = 32;
constexpr int64_t kLoopedPowMaxElements = int64_t{1} << 16;

// Integer pow as CPU computes it (powi): square-and-multiply over every bit of
// the exponent, wrapping on overflow. XLA's integer power looks at only 6
// exponent bits, so 3**64 came out 1. A negative exponent gives 1 for base 1,
// +-1 for base -1 and 0 otherwise. `exp_bits`: bits of the exponent to visit.
ir::Value integer_pow(LoweringContext& ctx, ir::Value base, ir::Value exp, int exp_bits) {
  auto& g = ctx.g();
  const ir::DType dt = dtype(ctx, base);
  ir::Value one = full_like(ctx, base, 1);
  ir::Value zero = full_like(ctx, base, 0);
  ir::Value result = one;
  ir::Value a = base;
  ir::Value e = exp;
  const ir::TensorType type = g.type(base);
  if (exp_bits > kMaxUnrolledPowBits && type.numel() <= kLoopedPowMaxElements) {
    result = g.call(stablehlo::integer_pow_loop(type), {base, exp})[0];
    exp_bits = 0;
  }
  for (int k = 0; k < exp_bits; ++k) {
    ir::Value bit = g.compare(ir::Cmp::kNE, g.binary(Op::kAnd, e, one), zero);
    result = g.select(bit, g.binary(Op::kMul, result, a), result);
    if (k + 1 == exp_bits) break;
    a = g.binary(Op::kMul, a, a);
    e = g.binary(Op::kShiftRightLogical, e, one);
  }
  if (ir::is_unsigned(dt)) return result;
  ir::Value minus_one = full_like(ctx, base, -1);
  ir::Value odd = g.compare(ir::Cmp::kNE, g.binary(Op::kAnd, exp, one), zero);
  ir::Value negative_exp = g.select(
      g.compare(ir::Cmp::kEQ, base, one), one,
      g.select(g.compare(ir::Cmp::kEQ, base, minus_one), g.select(odd, minus_one, one), zero));
  return g.select(g.compare(ir::Cmp::kLT, exp, zero), negative_exp, result);
}

std::vector<ir::Value> pow_rule(LoweringContext& ctx, const Args& a) {
  ir::DType dt = to_ir(result_type(a[0], a[1]));
  if (ir::is_float(dt) && a[0].isTensor() && !a[1].isTensor() && !a.scalar(1).isComplex()) {
    // CPU's pow kernel computes x ** 0.5 as sqrt(x) and x ** -0.5 as
    // rsqrt(x), which differ from IEEE pow at -inf (nan, not inf) and -0.0
    // (-inf, not inf for -0.5).
    const double e = a.scalar(1).toDouble();
    if (e == 0.5 || e == -0.5) {
      ir::Value x = operand(ctx, a[0], dt);
      return {ctx.g().unary(e > 0 ? Op::kSqrt : Op::kRsqrt, x)};
    }
    // It multiplies for x ** 2 and x ** 3 (bit-identical to it, checked
    // against CPU over 1e5 values and the IEEE specials), also ~8x faster than
    // XLA:CPU's pow (LlamaRMSNorm's x.pow(2)). float16 is computed in float32
    // there; bfloat16 x ** 3 rounds after each product, so it stays pow. The
    // negative exponents stay pow: XLA:CPU's divide flushes subnormal results.
    if (e == 2.0 || (e == 3.0 && dt != ir::DType::kBF16)) {
      auto& g = ctx.g();
      const ir::DType work = dt == ir::DType::kF16 ? ir::DType::kF32 : dt;
      ir::Value x = operand(ctx, a[0], work);
      ir::Value y = g.binary(Op::kMul, x, x);
      if (e == 3.0) y = g.binary(Op::kMul, y, x);
      return {work == dt ? y : g.convert(y, dt)};
    }
  }
  if (ir::is_float(dt) || ir::is_complex(dt)) return simple(ctx, a, Op::kPow);
  if (dt == ir::DType::kBool && a[0].isTensor() && !a[1].isTensor()) {
    // ATen's pow.Tensor_Scalar_out fills 1 for an exponent of 0 / False and
    // copies the base for 1 / True before its kernel, which has no bool.
    const c10::Scalar e = a.scalar(1);
    if (scalar_equals(e, 0)) return {full_like(ctx, ctx.tensor(a.tensor(0)), 1)};
    if (scalar_equals(e, 1)) return {ctx.tensor(a.tensor(0))};
  }
  // TensorIterator checks the shapes before the kernel's dtype dispatch.
  if (a[0].isTensor() && a[1].isTensor()) at::infer_size(a.tensor(0).sizes(), a.tensor(1).sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(dt != ir::DType::kBool, "\"pow\" not implemented for 'Bool'");
  // pow.Tensor_Scalar: ATen refuses a negative integral exponent for an
  // integral (or bool) base; a scalar exponent also bounds the bits to visit.
  int bits = 8 * static_cast<int>(ir::byte_size(dt)) - (ir::is_unsigned(dt) ? 0 : 1);
  if (a[0].isTensor() && !a[1].isTensor()) {
    const c10::Scalar e = a.scalar(1);
    TORCH_CHECK(!(e.isIntegral(true) && e.toLong() < 0),
                "Integers to negative integer powers are not allowed.");
    uint64_t v = static_cast<uint64_t>(e.toLong());
    int needed = 1;
    while (needed < 64 && (v >> needed) != 0) ++needed;
    bits = std::min(bits, needed);
  }
  auto [x, y] = promoted(ctx, a, &dt);
  return {integer_pow(ctx, x, y, bits)};
}

std::vector<ir::Value> add_rule(LoweringContext& c, const Args& a) {
  return add_sub(c, a, Op::kAdd);
}
std::vector<ir::Value> sub_rule(LoweringContext& c, const Args& a) {
  return add_sub(c, a, Op::kSub);
}

RegisterLowering r_add_t("add.Tensor", add_rule);
RegisterLowering r_add_s("add.Scalar", add_rule);
RegisterLowering r_sub_t("sub.Tensor", sub_rule);
RegisterLowering r_sub_s("sub.Scalar", sub_rule);
RegisterLowering r_rsub_t("rsub.Tensor", [](LoweringContext& c, const Args& a) {
  std::vector<c10::IValue> swapped{a[1], a[0], a[2]};
  return add_sub(c, Args(swapped), Op::kSub);
});
RegisterLowering r_rsub_s("rsub.Scalar", [](LoweringContext& c, const Args& a) {
  std::vector<c10::IValue> swapped{a[1], a[0], a[2]};
  return add_sub(c, Args(swapped), Op::kSub);
});
RegisterLowering r_mul_t("mul.Tensor", mul_rule);
RegisterLowering r_mul_s("mul.Scalar", mul_rule);
RegisterLowering r_div_t("div.Tensor",
                         [](LoweringContext& c, const Args& a) { return div(c, a, std::nullopt); });
RegisterLowering r_div_s("div.Scalar",
                         [](LoweringContext& c, const Args& a) { return div(c, a, std::nullopt); });
RegisterLowering r_div_tm("div.Tensor_mode", [](LoweringContext& c, const Args& a) {
  return div(c, a, a.is_none(2) ? std::nullopt : std::optional(a[2].toStringRef()));
});
RegisterLowering r_div_sm("div.Scalar_mode", [](LoweringContext& c, const Args& a) {
  return div(c, a, a.is_none(2) ? std::nullopt : std::optional(a[2].toStringRef()));
});
RegisterLowering r_floor_divide("floor_divide", [](LoweringContext& c, const Args& a) {
  return div(c, a, std::string("floor"));
});
RegisterLowering r_rem_t("remainder.Tensor", remainder);
RegisterLowering r_rem_s("remainder.Scalar", remainder);
RegisterLowering r_fmod_t("fmod.Tensor", fmod);
RegisterLowering r_fmod_s("fmod.Scalar", fmod);
RegisterLowering r_maximum("maximum", [](LoweringContext& c, const Args& a) {
  return simple(c, a, Op::kMax);
});
RegisterLowering r_minimum("minimum", [](LoweringContext& c, const Args& a) {
  return simple(c, a, Op::kMin);
});
RegisterLowering r_atan2("atan2", [](LoweringContext& c, const Args& a) {
  ir::DType common = to_ir(result_type(a[0], a[1]));
  ir::DType dt = ir::is_float(common) ? common : to_ir(c10::get_default_dtype_as_scalartype());
  auto [x, y] = broadcast_pair(c, operand(c, a[0], dt), operand(c, a[1], dt));
  return std::vector<ir::Value>{c.g().binary(Op::kAtan2, x, y)};
});
RegisterLowering r_pow_tt("pow.Tensor_Tensor", pow_rule);
RegisterLowering r_pow_ts("pow.Tensor_Scalar", pow_rule);
RegisterLowering r_pow_st("pow.Scalar", pow_rule);
RegisterLowering r_and_t("bitwise_and.Tensor",
                         [](LoweringContext& c, const Args& a) { return bitwise(c, a, Op::kAnd); });
RegisterLowering r_or_t("bitwise_or.Tensor",
                        [](LoweringContext& c, const Args& a) { return bitwise(c, a, Op::kOr); });
RegisterLowering r_xor_t("bitwise_xor.Tensor",
                         [](LoweringContext& c, const Args& a) { return bitwise(c, a, Op::kXor); });
RegisterLowering r_land("logical_and",
                        [](LoweringContext& c, const Args& a) { return logical(c, a, Op::kAnd); });
RegisterLowering r_lor("logical_or",
                       [](LoweringContext& c, const Args& a) { return logical(c, a, Op::kOr); });
RegisterLowering r_lxor("logical_xor",
                        [](LoweringContext& c, const Args& a) { return logical(c, a, Op::kXor); });
RegisterLowering r_eq_t("eq.Tensor", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kEQ);
});
RegisterLowering r_eq_s("eq.Scalar", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kEQ);
});
RegisterLowering r_ne_t("ne.Tensor", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kNE);
});
RegisterLowering r_ne_s("ne.Scalar", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kNE);
});
RegisterLowering r_lt_t("lt.Tensor", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kLT);
});
RegisterLowering r_lt_s("lt.Scalar", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kLT);
});
RegisterLowering r_le_t("le.Tensor", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kLE);
});
RegisterLowering r_le_s("le.Scalar", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kLE);
});
RegisterLowering r_gt_t("gt.Tensor", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kGT);
});
RegisterLowering r_gt_s("gt.Scalar", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kGT);
});
RegisterLowering r_ge_t("ge.Tensor", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kGE);
});
RegisterLowering r_ge_s("ge.Scalar", [](LoweringContext& c, const Args& a) {
  return comparison(c, a, ir::Cmp::kGE);
});

}  // namespace
}  // namespace ttpu::aten
