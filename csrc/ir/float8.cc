#include "ir/float8.h"

#include <bit>
#include <cmath>
#include <string>

namespace ttpu::ir {
namespace {

// Layout of the sign/exponent/mantissa float8 types (not e8m0).
struct Format {
  int man_bits;
  int bias;
  bool fnuz;  // no negative zero or infinity; 0x80 is the one NaN
  bool inf;   // has infinities (e5m2): exponent all ones is inf/NaN
};

Format format_of(DType t) {
  switch (t) {
    case DType::kF8E4M3FN: return {3, 7, false, false};
    case DType::kF8E5M2: return {2, 15, false, true};
    case DType::kF8E4M3FNUZ: return {3, 8, true, false};
    case DType::kF8E5M2FNUZ: return {2, 16, true, false};
    default: break;
  }
  throw IrError("float8: " + std::string(mlir_name(t)) + " is not a sign/exponent/mantissa type");
}

bool is_nan_code(uint8_t code, DType t) {
  if (t == DType::kF8E8M0FNU) return code == 0xFF;
  const Format f = format_of(t);
  if (f.fnuz) return code == 0x80;
  const uint8_t mag = code & 0x7F;
  if (f.inf) return mag > 0x7C;  // exponent all ones, mantissa nonzero
  return mag == 0x7F;            // e4m3fn: S.1111.111
}

// The magnitude of a non-NaN code's low 7 bits (infinity for e5m2's 0x7C).
double magnitude(uint8_t mag, const Format& f) {
  const int exp_field = mag >> f.man_bits;
  const int man = mag & ((1 << f.man_bits) - 1);
  if (f.inf && exp_field == (0x7F >> f.man_bits)) return INFINITY;
  if (exp_field == 0) return std::ldexp(man, 1 - f.bias - f.man_bits);
  return std::ldexp(man + (1 << f.man_bits), exp_field - f.bias - f.man_bits);
}

uint8_t e8m0_bits(float value) {
  // A bare biased exponent: the float's own, plus one when the mantissa is
  // above half (or exactly half, for a normal float). Sign ignored.
  const uint32_t b = std::bit_cast<uint32_t>(value) & 0x7FFFFFFFu;
  const uint32_t e = b >> 23;
  const uint32_t m = b & 0x7FFFFFu;
  if (e == 0xFF) return 0xFF;
  const uint32_t up = (m > 0x400000u || (m == 0x400000u && e > 0)) ? 1 : 0;
  return e + up > 254 ? 0xFF : static_cast<uint8_t>(e + up);
}

}  // namespace

uint8_t float8_bits(float value, DType t) {
  if (t == DType::kF8E8M0FNU) return e8m0_bits(value);
  const Format f = format_of(t);
  const bool neg = std::signbit(value);
  const uint8_t sign = neg ? 0x80 : 0;
  if (std::isnan(value)) return f.fnuz ? 0x80 : (sign | 0x7F);
  const uint8_t max_code = f.inf ? 0x7B : (f.fnuz ? 0x7F : 0x7E);  // largest finite
  const double a = std::fabs(static_cast<double>(value));
  uint8_t code;
  bool overflow = false;
  if (std::isinf(a)) {
    overflow = true;
    code = max_code;
  } else {
    // Largest code not above a (codes are ordered by magnitude), then round.
    int lo = 0;
    while (lo < max_code && magnitude(static_cast<uint8_t>(lo + 1), f) <= a) ++lo;
    const double vlo = magnitude(static_cast<uint8_t>(lo), f);
    code = static_cast<uint8_t>(lo);
    if (vlo != a) {
      // The next value up; past the largest finite one, where the next code
      // would be if the exponent range went on.
      const double vhi = lo < max_code ? magnitude(static_cast<uint8_t>(lo + 1), f)
                                       : 2 * vlo - magnitude(static_cast<uint8_t>(lo - 1), f);
      const double dlo = a - vlo;
      const double dhi = vhi - a;
      if (dhi < dlo || (dhi == dlo && (lo & 1))) {
        if (lo == max_code) {
          overflow = true;
        } else {
          code = static_cast<uint8_t>(lo + 1);
        }
      }
    }
  }
  if (overflow) {
    if (t == DType::kF8E4M3FN) return sign | max_code;  // saturates
    if (f.inf) return sign | 0x7C;                      // e5m2: infinity
    return 0x80;                                        // FNUZ: NaN
  }
  if (f.fnuz && code == 0) return 0;  // no negative zero
  return sign | code;
}

uint32_t float8_to_f32_bits(uint8_t code, DType t) {
  if (t == DType::kF8E8M0FNU) {
    if (code == 0xFF) return 0x7F800001u;
    return code == 0 ? 0x00400000u : static_cast<uint32_t>(code) << 23;  // 2^-127 is subnormal
  }
  const Format f = format_of(t);
  const uint32_t sign = (code & 0x80) ? 0x80000000u : 0;
  if (is_nan_code(code, t)) {
    if (f.fnuz) return 0x7F800001u;
    const uint32_t man = code & ((1u << f.man_bits) - 1);
    // e4m3fn's mantissa lands below the quiet bit; e5m2 goes through half
    // precision, whose widening sets the quiet bit.
    return f.inf ? (sign | 0x7FC00000u | (man << 21)) : (sign | 0x7F800000u | (man << 20));
  }
  const double m = magnitude(code & 0x7F, f);
  return sign | std::bit_cast<uint32_t>(static_cast<float>(m));
}

}  // namespace ttpu::ir
