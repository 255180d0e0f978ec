// Lowerings of the ops that read a float's bit pattern: frexp (mantissa and
// exponent) and nextafter (the adjacent representable value).
//
// Both work on the IEEE-754 fields through bitcast_convert to the integer of
// the same width, so they are exact, and never compare subnormal floats
// (which an XLA CPU program may flush to zero in arithmetic).
#include "aten/rules/special/special_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// The integer of a float dtype's width and its field layout.
struct Layout {
  DType bits;       // integer dtype of the same width
  int mantissa;     // number of stored mantissa bits
  int64_t bias;     // exponent bias
  int64_t exp_max;  // all-ones exponent field (inf/NaN)
};
Layout layout(DType t) {
  switch (t) {
    case DType::kF16: return {DType::kI16, 10, 15, 0x1f};
    case DType::kBF16: return {DType::kI16, 7, 127, 0xff};
    case DType::kF32: return {DType::kI32, 23, 127, 0xff};
    default: return {DType::kI64, 52, 1023, 0x7ff};
  }
}

// Integer arithmetic on values of one integer type.
struct IntMath {
  ir::Graph& g;
  ir::TensorType type;
  ir::Value k(int64_t v) { return g.constant_int(v, type); }
  ir::Value and_(ir::Value a, ir::Value b) { return g.binary(Op::kAnd, a, b); }
  ir::Value or_(ir::Value a, ir::Value b) { return g.binary(Op::kOr, a, b); }
  ir::Value add(ir::Value a, ir::Value b) { return g.binary(Op::kAdd, a, b); }
  ir::Value sub(ir::Value a, ir::Value b) { return g.binary(Op::kSub, a, b); }
  ir::Value shr(ir::Value a, int64_t n) { return g.binary(Op::kShiftRightLogical, a, k(n)); }
  ir::Value cmp(ir::Cmp c, ir::Value a, ir::Value b) { return g.compare(c, a, b); }
};

// The sign bit of an integer type of `width` bytes, as a signed value.
int64_t sign_bit(DType bits) {
  return bits == DType::kI16 ? INT16_MIN : bits == DType::kI32 ? INT32_MIN : INT64_MIN;
}

// frexp of f32 or f64 values: x = mantissa * 2^exponent, |mantissa| in
// [0.5, 1) (C's frexp). Zero, inf and NaN give (x, 0), as glibc's frexp
// (which CPU's kernel calls) returns them. Subnormals are normalised through
// an exact integer-to-float conversion of their fraction bits.
std::pair<ir::Value, ir::Value> frexp_bits(LoweringContext& ctx, ir::Value x) {
  auto& g = ctx.g();
  DType ft = dtype(ctx, x);
  Layout l = layout(ft);
  IntMath im{g, {l.bits, dims(ctx, x)}};
  const int64_t frac_mask = (int64_t{1} << l.mantissa) - 1;
  ir::Value b = g.bitcast_convert(x, l.bits);
  ir::Value sign = im.and_(b, im.k(sign_bit(l.bits)));
  ir::Value field = im.and_(im.shr(b, l.mantissa), im.k(l.exp_max));
  ir::Value frac = im.and_(b, im.k(frac_mask));
  // Normal numbers: the exponent field replaced by bias - 1 (2^-1).
  ir::Value half_field = im.k((l.bias - 1) << l.mantissa);
  ir::Value mant = im.or_(im.or_(sign, half_field), frac);
  ir::Value expo = im.sub(field, im.k(l.bias - 1));
  // Subnormals: value = frac * 2^(1 - bias - mantissa); frac as a float is
  // exact, and its own fields give the normalised fraction and
  // floor(log2(frac)) = its field - bias.
  ir::Value ff = g.bitcast_convert(g.convert(frac, ft), l.bits);
  ir::Value ff_field = im.and_(im.shr(ff, l.mantissa), im.k(l.exp_max));
  ir::Value sub_mant = im.or_(im.or_(sign, half_field), im.and_(ff, im.k(frac_mask)));
  ir::Value sub_expo = im.add(ff_field, im.k(2 - 2 * l.bias - l.mantissa));
  ir::Value is_sub = im.cmp(ir::Cmp::kEQ, field, im.k(0));
  mant = g.select(is_sub, sub_mant, mant);
  expo = g.select(is_sub, sub_expo, expo);
  // Zero, inf, NaN: (x, 0).
  ir::Value keep =
      g.binary(Op::kOr, im.cmp(ir::Cmp::kEQ, im.and_(b, im.k(~sign_bit(l.bits))), im.k(0)),
               im.cmp(ir::Cmp::kEQ, field, im.k(l.exp_max)));
  mant = g.select(keep, b, mant);
  expo = g.select(keep, im.k(0), expo);
  return {g.bitcast_convert(mant, ft), g.convert(expo, DType::kI32)};
}

// frexp.Tensor(self) -> (mantissa, exponent int32). f16 and bf16 go through
// f32, where every one of their values (subnormals too) is exact.
ValueList frexp(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "torch.frexp() only supports floating-point dtypes");
  ir::Value x = ctx.tensor(self);
  DType dt = dtype(ctx, x);
  DType wide = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  auto [mant, expo] = frexp_bits(ctx, ctx.g().convert(x, wide));
  return {ctx.g().convert(mant, dt), expo};
}

// nextafter(self, other): the representable value after self toward other,
// musl's nextafter on the bit patterns (as c10's BFloat16/Half overloads and
// glibc for f32/f64 behave): NaN if either is NaN, `other` if they are equal
// (so +0 toward -0 is -0), the smallest subnormal with other's sign from
// zero, else the pattern stepped by one toward other.
ValueList nextafter(LoweringContext& ctx, const Args& a) {
  DType dt = to_ir(result_type(a[0], a[1]));
  if (!ir::is_float(dt)) pointwise::not_implemented("nextafter_cpu", dt);
  auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
  auto& g = ctx.g();
  Layout l = layout(dt);
  IntMath im{g, {l.bits, dims(ctx, x)}};
  ir::Value bx = g.bitcast_convert(x, l.bits), by = g.bitcast_convert(y, l.bits);
  ir::Value magnitude = im.k(~sign_bit(l.bits));
  ir::Value ax = im.and_(bx, magnitude), ay = im.and_(by, magnitude);
  ir::Value inf_bits = im.k(l.exp_max << l.mantissa);
  ir::Value any_nan =
      g.binary(Op::kOr, im.cmp(ir::Cmp::kGT, ax, inf_bits), im.cmp(ir::Cmp::kGT, ay, inf_bits));
  // Away from zero unless |x| > |y| or the signs differ.
  ir::Value signs_differ = im.cmp(ir::Cmp::kLT, g.binary(Op::kXor, bx, by), im.k(0));
  ir::Value down = g.binary(Op::kOr, im.cmp(ir::Cmp::kGT, ax, ay), signs_differ);
  ir::Value step = g.select(down, im.k(-1), im.k(1));
  ir::Value r = im.add(bx, step);
  ir::Value from_zero = im.or_(im.and_(by, im.k(sign_bit(l.bits))), im.k(1));
  ir::Value x_zero = im.cmp(ir::Cmp::kEQ, ax, im.k(0));
  r = g.select(x_zero, g.select(im.cmp(ir::Cmp::kEQ, ay, im.k(0)), by, from_zero), r);
  r = g.select(im.cmp(ir::Cmp::kEQ, bx, by), bx, r);
  ir::Value result = g.bitcast_convert(r, dt);
  return {g.select(any_nan, g.binary(Op::kAdd, x, y), result)};
}

RegisterLowering kFloatBitsRules[] = {
    {"frexp.Tensor", frexp},
    {"nextafter", nextafter},
};

}  // namespace
}  // namespace ttpu::aten
