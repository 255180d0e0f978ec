// Graph::convert to and from float8 with PyTorch's rules (float8.h), built
// from XLA's convert plus the fix-ups where XLA:CPU's result differs
// (measured over all 256 codes and every float between neighbouring codes):
// e4m3fn overflow saturates, e5m2's NaN code, the NaN payloads of widened
// codes; e8m0 is converted with integer ops altogether. Everything else goes
// through float32, as PyTorch's conversions do (a double rounds to float
// first, so both roundings are PyTorch's).
#include "ir/float8.h"
#include "ir/graph.h"

namespace ttpu::ir {

Value Graph::convert_float8(Value x, DType to) {
  const TensorType t = operand_type("convert", x);
  const DType from = t.dtype;
  auto u32 = [&](uint32_t v) { return constant_int(v, TensorType{DType::kU32, t.dims}); };

  if (is_float8(from)) {
    const Value code = convert_node(bitcast_convert(x, DType::kU8), DType::kU32);
    Value f;
    if (from == DType::kF8E8M0FNU) {
      // 2^(code - 127): the code is the float's exponent field; code 0 is
      // 2^-127, a float subnormal; 0xFF is NaN.
      Value bits = select(compare(Cmp::kEQ, code, u32(0)), u32(0x00400000u),
                          binary(Op::kShiftLeft, code, u32(23)));
      bits = select(compare(Cmp::kEQ, code, u32(0xFF)), u32(0x7F800001u), bits);
      f = bitcast_convert(bits, DType::kF32);
    } else {
      const Value y = convert_node(x, DType::kF32);
      Value nan_bits;
      if (from == DType::kF8E4M3FNUZ || from == DType::kF8E5M2FNUZ) {
        nan_bits = u32(0x7F800001u);
      } else {
        const bool e5m2 = from == DType::kF8E5M2;
        const Value sign = binary(Op::kShiftLeft, binary(Op::kAnd, code, u32(0x80)), u32(24));
        const Value man =
            binary(Op::kShiftLeft, binary(Op::kAnd, code, u32(e5m2 ? 3 : 7)), u32(e5m2 ? 21 : 20));
        nan_bits =
            binary(Op::kOr, binary(Op::kOr, sign, man), u32(e5m2 ? 0x7FC00000u : 0x7F800000u));
      }
      f = select(compare(Cmp::kNE, y, y), bitcast_convert(nan_bits, DType::kF32), y);
    }
    if (to == DType::kF32) return f;
    if (to == DType::kBF16) {
      // PyTorch's float -> bfloat16 gives every NaN as 0x7FC0 (sign dropped).
      // Selected on the bit patterns, which a bf16 select might not keep.
      const TensorType u16{DType::kU16, t.dims};
      return bitcast_convert(select(compare(Cmp::kNE, f, f), constant_int(0x7FC0, u16),
                                    bitcast_convert(convert(f, to), DType::kU16)),
                             DType::kBF16);
    }
    return convert(f, to);
  }

  const Value f = convert(x, DType::kF32);
  if (to == DType::kF8E8M0FNU) {
    // The float's biased exponent, plus one when the mantissa is above half
    // (or exactly half for a normal float); the sign is dropped; past 254 or
    // from inf/NaN it is NaN (0xFF).
    const Value b = binary(Op::kAnd, bitcast_convert(f, DType::kU32), u32(0x7FFFFFFFu));
    const Value e = binary(Op::kShiftRightLogical, b, u32(23));
    const Value m = binary(Op::kAnd, b, u32(0x7FFFFFu));
    const Value up = binary(
        Op::kOr, compare(Cmp::kGT, m, u32(0x400000u)),
        binary(Op::kAnd, compare(Cmp::kEQ, m, u32(0x400000u)), compare(Cmp::kGT, e, u32(0))));
    Value c = binary(Op::kAdd, e, convert(up, DType::kU32));
    c = select(compare(Cmp::kGT, c, u32(254)), u32(0xFF), c);
    if (from == DType::kF64) {
      // XLA:CPU's f64 -> f32 flushes float subnormals to zero (measured);
      // PyTorch rounds to them, and those below 2^-126 give code 1 when the
      // rounded float is above 2^-127 (a tie goes down), else code 0.
      const TensorType f64{DType::kF64, t.dims};
      const Value a = unary(Op::kAbs, x);
      const Value small = compare(Cmp::kLT, a, constant(0x1p-126, f64));
      const Value one = compare(Cmp::kGT, a, constant(0x1p-127 + 0x1p-150, f64));
      c = select(small, convert(one, DType::kU32), c);
    }
    return bitcast_convert(convert_node(c, DType::kU8), to);
  }
  if (to == DType::kF8E4M3FN) {
    // PyTorch saturates (infinities too); XLA gives NaN past 464.
    const Value lim = constant(448.0, TensorType{DType::kF32, {}});
    return convert_node(clamp(constant(-448.0, TensorType{DType::kF32, {}}), f, lim), to);
  }
  const Value y = convert_node(f, to);
  if (to != DType::kF8E5M2) return y;
  // NaN is 0x7F (0xFF when negative) in PyTorch, 0x7E in XLA. The sign is
  // taken with integer ops: a signed compare of the bitcast NaN came out
  // false for -NaN on XLA:CPU (measured).
  const Value sign =
      binary(Op::kAnd, binary(Op::kShiftRightLogical, bitcast_convert(f, DType::kU32), u32(24)),
             u32(0x80));
  const Value nan_code = convert_node(binary(Op::kOr, sign, u32(0x7F)), DType::kU8);
  return select(compare(Cmp::kNE, f, f), bitcast_convert(nan_code, to), y);
}

}  // namespace ttpu::ir
