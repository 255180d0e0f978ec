// Element types and tensor types of the IR. No torch include: the aten layer maps
// at::ScalarType onto DType.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ttpu::ir {

enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kI16,
  kI32,
  kI64,
  kU32,
  kU64,
  kU16,  // after kU64 so the older dtypes keep their numbers
  kF16,
  kBF16,
  kF32,
  kF64,
  kC64,   // complex<f32>: (real, imag) f32 pairs, 8 bytes
  kC128,  // complex<f64>
  // float8 (1 byte each); their conversions follow PyTorch's, not XLA's
  // (float8.h). After kC128 so the older dtypes keep their numbers.
  kF8E4M3FN,
  kF8E5M2,
  kF8E4M3FNUZ,
  kF8E5M2FNUZ,
  kF8E8M0FNU,
};

std::string_view mlir_name(DType t);  // "i1", "ui8", "i32", "bf16", "f32", ...
int64_t byte_size(DType t);
bool is_float(DType t);  // float8 included
inline bool is_float8(DType t) { return t >= DType::kF8E4M3FN && t <= DType::kF8E8M0FNU; }
bool is_unsigned(DType t);  // kBool counts as unsigned
inline bool is_complex(DType t) { return t == DType::kC64 || t == DType::kC128; }
inline bool is_integral(DType t) { return !is_float(t) && !is_complex(t) && t != DType::kBool; }
// The float type of a complex type's parts (kC64 -> kF32), and back (kF32 ->
// kC64, kF64 -> kC128; other dtypes throw IrError).
DType complex_part(DType t);
DType complex_of(DType t);

// A ranked tensor type with static dimensions; rank 0 is a scalar.
struct TensorType {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  std::string mlir() const;  // "tensor<2x3xf32>", "tensor<i64>"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
};

// Literal helpers: the bit pattern of a scalar in `dtype`, as stored in
// Attrs::literal (zero-extended to 64 bits; a signed value keeps only its
// two's-complement low byte_size(dtype) bytes).
//   literal_bits: floats round to nearest even directly from the double (as a C
//   cast would, no double rounding through f32); integers truncate toward zero
//   then wrap to the width; bool is value != 0. Throws IrError for NaN or
//   infinity into an integer dtype, or a value outside the 64-bit range.
//   literal_bits_int: integers exactly (wrapped to the width); floats round to
//   nearest even from the exact integer; bool is value != 0.
//   A complex literal is real-valued: the bits of its real part in the part
//   type (f32 for kC64), imaginary part zero. Build other complex constants
//   with Graph::complex.
uint64_t literal_bits(double value, DType dtype);
uint64_t literal_bits_int(int64_t value, DType dtype);
// The inverse: the value of a literal. Integers sign-extend when signed.
double literal_to_double(uint64_t bits, DType dtype);
int64_t literal_to_int(uint64_t bits, DType dtype);  // floats truncate toward zero

// IEEE binary16 / bfloat16 bit patterns, rounding to nearest even (overflow
// gives infinity, NaN stays a quiet NaN with its sign).
uint16_t f16_bits(double value);
uint16_t bf16_bits(double value);
double f16_value(uint16_t bits);
double bf16_value(uint16_t bits);

// Raised for a graph that cannot be built (mismatched operand types and the
// like). The aten layer validates user input first, so reaching this means a
// lowering rule is wrong; it still must not abort the process.
class IrError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An elementwise op given an element type StableHLO does not define it for
// (remainder of i1, xor of f32): the aten layer reports it as the dtype error
// CPU PyTorch's dispatch raises (NotImplementedError), not as a lowering bug.
class IrDtypeError : public IrError {
 public:
  IrDtypeError(const std::string& what, DType dtype) : IrError(what), dtype(dtype) {}
  DType dtype;
};

}  // namespace ttpu::ir
