// Complex-number and spectral builders: real, imag, complex, fft.
#include "ir/graph.h"
#include "ir/graph_check.h"

namespace ttpu::ir {

using detail::fail;
using detail::ints_str;

Value Graph::real(Value x) {
  const TensorType t = operand_type("real", x);
  if (!is_complex(t.dtype)) fail("real", "operand " + t.mlir() + " must be complex");
  return add_node(Node{Op::kReal, {x}, {TensorType{complex_part(t.dtype), t.dims}}, {}});
}

Value Graph::imag(Value x) {
  const TensorType t = operand_type("imag", x);
  if (!is_complex(t.dtype)) fail("imag", "operand " + t.mlir() + " must be complex");
  return add_node(Node{Op::kImag, {x}, {TensorType{complex_part(t.dtype), t.dims}}, {}});
}

Value Graph::complex(Value re, Value im) {
  const TensorType tr = operand_type("complex", re);
  const TensorType ti = operand_type("complex", im);
  if (!(tr == ti) || (tr.dtype != DType::kF32 && tr.dtype != DType::kF64)) {
    fail("complex", "operands " + tr.mlir() + ", " + ti.mlir() +
                        " must be the same f32 or f64 type (convert and broadcast first)");
  }
  return add_node(Node{Op::kComplex, {re, im}, {TensorType{complex_of(tr.dtype), tr.dims}}, {}});
}

Value Graph::fft(Value x, FftType type, const std::vector<int64_t>& fft_length) {
  const TensorType t = operand_type("fft", x);
  const int64_t k = static_cast<int64_t>(fft_length.size());
  if (k < 1 || k > 3 || k > t.rank()) {
    fail("fft",
         "fft_length " + ints_str(fft_length) + " must name 1 to 3 trailing dims of " + t.mlir());
  }
  for (int64_t n : fft_length) {
    if (n < 1) fail("fft", "fft_length " + ints_str(fft_length) + " must be positive");
  }
  TensorType r = t;
  const int64_t last = t.rank() - 1;
  // Every transformed dim but the last must equal fft_length; the last one
  // depends on the direction (RFFT keeps n/2+1 outputs, IRFFT reads n/2+1).
  for (int64_t i = 0; i + 1 < k; ++i) {
    if (t.dims[t.rank() - k + i] != fft_length[i]) {
      fail("fft", "operand " + t.mlir() + " does not match fft_length " + ints_str(fft_length));
    }
  }
  const int64_t n = fft_length.back();
  switch (type) {
    case FftType::kFft:
    case FftType::kIfft:
      if (!is_complex(t.dtype) || t.dims[last] != n) {
        fail("fft", "FFT/IFFT operand " + t.mlir() + " must be complex with last dim " +
                        std::to_string(n));
      }
      break;
    case FftType::kRfft:
      if (t.dtype != DType::kF32 && t.dtype != DType::kF64) {
        fail("fft", "RFFT operand " + t.mlir() + " must be f32 or f64");
      }
      if (t.dims[last] != n) {
        fail("fft", "RFFT operand " + t.mlir() + " must have last dim " + std::to_string(n));
      }
      r.dtype = complex_of(t.dtype);
      r.dims[last] = n / 2 + 1;
      break;
    case FftType::kIrfft:
      if (!is_complex(t.dtype) || t.dims[last] != n / 2 + 1) {
        fail("fft", "IRFFT operand " + t.mlir() + " must be complex with last dim " +
                        std::to_string(n / 2 + 1));
      }
      r.dtype = complex_part(t.dtype);
      r.dims[last] = n;
      break;
    default: fail("fft", "unknown fft type");
  }
  Attrs a;
  a.dim = static_cast<int64_t>(type);
  a.ints = {fft_length};
  return add_node(Node{Op::kFft, {x}, {r}, std::move(a)});
}

}  // namespace ttpu::ir
