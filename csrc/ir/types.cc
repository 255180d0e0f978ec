#include "ir/types.h"

#include "ir/float8.h"

#include <bit>
#include <cmath>
#include <limits>

namespace ttpu::ir {

std::string_view mlir_name(DType t) {
  switch (t) {
    case DType::kBool: return "i1";
    case DType::kU8: return "ui8";
    case DType::kI8: return "i8";
    case DType::kI16: return "i16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU32: return "ui32";
    case DType::kU64: return "ui64";
    case DType::kU16: return "ui16";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kC64: return "complex<f32>";
    case DType::kC128: return "complex<f64>";
    case DType::kF8E4M3FN: return "f8E4M3FN";
    case DType::kF8E5M2: return "f8E5M2";
    case DType::kF8E4M3FNUZ: return "f8E4M3FNUZ";
    case DType::kF8E5M2FNUZ: return "f8E5M2FNUZ";
    case DType::kF8E8M0FNU: return "f8E8M0FNU";
  }
  throw IrError("mlir_name: unknown DType " + std::to_string(static_cast<int>(t)));
}

int64_t byte_size(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kU8:
    case DType::kI8:
    case DType::kF8E4M3FN:
    case DType::kF8E5M2:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0FNU: return 1;
    case DType::kI16:
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kI32:
    case DType::kU32:
    case DType::kF32: return 4;
    case DType::kI64:
    case DType::kU64:
    case DType::kF64:
    case DType::kC64: return 8;
    case DType::kC128: return 16;
  }
  throw IrError("byte_size: unknown DType " + std::to_string(static_cast<int>(t)));
}

bool is_float(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || t == DType::kF64 ||
         is_float8(t);
}

DType complex_part(DType t) {
  if (t == DType::kC64) return DType::kF32;
  if (t == DType::kC128) return DType::kF64;
  throw IrError("complex_part: " + std::string(mlir_name(t)) + " is not complex");
}

DType complex_of(DType t) {
  if (t == DType::kF32) return DType::kC64;
  if (t == DType::kF64) return DType::kC128;
  throw IrError("complex_of: no complex type with " + std::string(mlir_name(t)) + " parts");
}

bool is_unsigned(DType t) {
  return t == DType::kBool || t == DType::kU8 || t == DType::kU16 || t == DType::kU32 ||
         t == DType::kU64;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorType::mlir() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  s += mlir_name(dtype);
  s += ">";
  return s;
}

namespace {

// An IEEE-style binary format with `exp_bits` exponent and `man_bits` stored
// mantissa bits (f16: 5/10, bf16: 8/7).
struct FloatFormat {
  int exp_bits;
  int man_bits;
};
constexpr FloatFormat kHalf{5, 10};
constexpr FloatFormat kBFloat{8, 7};

// Rounds the exact value (-1)^neg * mant * 2^exp to `f`, nearest even, and
// returns its bit pattern. Overflow gives infinity; underflow gives subnormals,
// then a signed zero.
uint64_t round_to_format(bool neg, uint64_t mant, int exp, FloatFormat f) {
  const uint64_t sign = neg ? uint64_t{1} << (f.exp_bits + f.man_bits) : 0;
  if (mant == 0) return sign;
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const int emin = 1 - bias;
  const int emax = bias;
  const uint64_t inf = sign | (((uint64_t{1} << f.exp_bits) - 1) << f.man_bits);
  const int msb = 63 - std::countl_zero(mant);
  int e = msb + exp;  // unbiased exponent of the leading bit
  const bool subnormal = e < emin;
  // The value of one unit in the last place of the result, as a power of two.
  const int quantum = (subnormal ? emin : e) - f.man_bits;
  const int shift = quantum - exp;  // bits of `mant` below the last place
  unsigned __int128 q;
  if (shift <= 0) {
    q = static_cast<unsigned __int128>(mant) << -shift;
  } else if (shift > 100) {
    q = 0;  // far below half a unit: rounds to zero
  } else {
    const unsigned __int128 m = mant;
    const unsigned __int128 one = 1;
    q = m >> shift;
    const unsigned __int128 rem = m & ((one << shift) - 1);
    const unsigned __int128 half = one << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
  }
  if (subnormal) {
    // q <= 2^man_bits; q == 2^man_bits is the smallest normal, whose encoding
    // (exponent field 1, mantissa 0) equals q itself.
    return sign | static_cast<uint64_t>(q);
  }
  if (q >> (f.man_bits + 1)) {  // rounding carried into a new leading bit
    q >>= 1;
    ++e;
  }
  if (e > emax) return inf;
  const uint64_t man = static_cast<uint64_t>(q) & ((uint64_t{1} << f.man_bits) - 1);
  return sign | (static_cast<uint64_t>(e + bias) << f.man_bits) | man;
}

uint64_t double_to_format(double v, FloatFormat f) {
  const bool neg = std::signbit(v);
  const uint64_t sign = neg ? uint64_t{1} << (f.exp_bits + f.man_bits) : 0;
  const uint64_t exp_ones = ((uint64_t{1} << f.exp_bits) - 1) << f.man_bits;
  if (std::isnan(v)) return sign | exp_ones | (uint64_t{1} << (f.man_bits - 1));
  if (std::isinf(v)) return sign | exp_ones;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);               // |v| = m * 2^e, m in [0.5, 1)
  const auto mant = static_cast<uint64_t>(std::ldexp(m, 53));  // exact
  return round_to_format(neg, mant, e - 53, f);
}

double format_to_double(uint64_t bits, FloatFormat f) {
  const bool neg = (bits >> (f.exp_bits + f.man_bits)) & 1;
  const uint64_t exp_field = (bits >> f.man_bits) & ((uint64_t{1} << f.exp_bits) - 1);
  const uint64_t man = bits & ((uint64_t{1} << f.man_bits) - 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  double v;
  if (exp_field == (uint64_t{1} << f.exp_bits) - 1) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(man | (uint64_t{1} << f.man_bits)),
                   static_cast<int>(exp_field) - bias - f.man_bits);
  }
  return neg ? -v : v;
}

uint64_t width_mask(DType t) {
  const int64_t bytes = byte_size(t);
  return bytes == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bytes)) - 1;
}

}  // namespace

uint16_t f16_bits(double value) { return static_cast<uint16_t>(double_to_format(value, kHalf)); }
uint16_t bf16_bits(double value) { return static_cast<uint16_t>(double_to_format(value, kBFloat)); }
double f16_value(uint16_t bits) { return format_to_double(bits, kHalf); }
double bf16_value(uint16_t bits) { return format_to_double(bits, kBFloat); }

uint64_t literal_bits(double value, DType dtype) {
  switch (dtype) {
    case DType::kBool: return value != 0 ? 1 : 0;
    case DType::kF16: return f16_bits(value);
    case DType::kBF16: return bf16_bits(value);
    case DType::kF32: return std::bit_cast<uint32_t>(static_cast<float>(value));
    case DType::kF64: return std::bit_cast<uint64_t>(value);
    case DType::kC64:
    case DType::kC128: return literal_bits(value, complex_part(dtype));
    default: break;
  }
  // Through float first, as PyTorch converts a double to float8.
  if (is_float8(dtype)) return float8_bits(static_cast<float>(value), dtype);
  if (!std::isfinite(value)) {
    throw IrError("constant: " + std::to_string(value) + " has no value in integer dtype " +
                  std::string(mlir_name(dtype)));
  }
  const double t = std::trunc(value);
  constexpr double kTwo63 = 9223372036854775808.0;
  if (t >= 2 * kTwo63 || t < -kTwo63) {
    throw IrError("constant: " + std::to_string(value) + " is outside the 64-bit range of " +
                  std::string(mlir_name(dtype)));
  }
  const uint64_t u =
      t >= kTwo63 ? static_cast<uint64_t>(t) : static_cast<uint64_t>(static_cast<int64_t>(t));
  return u & width_mask(dtype);
}

uint64_t literal_bits_int(int64_t value, DType dtype) {
  switch (dtype) {
    case DType::kBool: return value != 0 ? 1 : 0;
    case DType::kF32: return std::bit_cast<uint32_t>(static_cast<float>(value));
    case DType::kF64: return std::bit_cast<uint64_t>(static_cast<double>(value));
    case DType::kF16:
    case DType::kBF16: {
      const bool neg = value < 0;
      // |INT64_MIN| computed in unsigned arithmetic, where it is representable.
      const uint64_t mag = neg ? ~static_cast<uint64_t>(value) + 1 : static_cast<uint64_t>(value);
      return round_to_format(neg, mag, 0, dtype == DType::kF16 ? kHalf : kBFloat);
    }
    case DType::kC64:
    case DType::kC128: return literal_bits_int(value, complex_part(dtype));
    case DType::kF8E4M3FN:
    case DType::kF8E5M2:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0FNU: return float8_bits(static_cast<float>(value), dtype);
    default: return static_cast<uint64_t>(value) & width_mask(dtype);
  }
}

double literal_to_double(uint64_t bits, DType dtype) {
  switch (dtype) {
    case DType::kF16: return f16_value(static_cast<uint16_t>(bits));
    case DType::kBF16: return bf16_value(static_cast<uint16_t>(bits));
    case DType::kF32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DType::kF64: return std::bit_cast<double>(bits);
    case DType::kC64:
    case DType::kC128: return literal_to_double(bits, complex_part(dtype));
    default: break;
  }
  if (is_float8(dtype)) {
    return std::bit_cast<float>(float8_to_f32_bits(static_cast<uint8_t>(bits), dtype));
  }
  if (is_unsigned(dtype)) return static_cast<double>(bits & width_mask(dtype));
  return static_cast<double>(literal_to_int(bits, dtype));
}

int64_t literal_to_int(uint64_t bits, DType dtype) {
  if (is_float(dtype) || is_complex(dtype)) {
    const double v = std::trunc(literal_to_double(bits, dtype));
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
      throw IrError("literal_to_int: " + std::to_string(v) + " does not fit in int64");
    }
    return static_cast<int64_t>(v);
  }
  const uint64_t masked = bits & width_mask(dtype);
  if (is_unsigned(dtype)) return static_cast<int64_t>(masked);
  const int width = static_cast<int>(8 * byte_size(dtype));
  if (width == 64) return static_cast<int64_t>(masked);
  const uint64_t sign_bit = uint64_t{1} << (width - 1);
  // Sign-extend from `width` bits.
  return static_cast<int64_t>((masked ^ sign_bit) - sign_bit);
}

}  // namespace ttpu::ir
