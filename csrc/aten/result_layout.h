// The layout (strides) of an op's new results, as CPU's kernels allocate them.
//
// A strided result is observable: view() succeeds or raises by it, and a
// later in-place write through an alias lands by it. CPU's rules, which tpu
// follows (the per-op table in result_layout.cc says which op follows which):
// - kIterator: TensorIterator's output over the op's tensor arguments, each
//   input of another dtype than the common one taken as its cast copy (every
//   op tagged `pointwise`, and the TensorIterator kernels ATen leaves untagged:
//   floor_divide, hardswish, _prelu_kernel, native_dropout, rsub, huber_loss,
//   complex, polar).
// - kPreserveSelf: empty_like(self) / clone with MemoryFormat::Preserve:
//   self's strides when it is dense, else dense in the order of self's strides
//   (flip, sort, out-of-place index_put and put).
// - kColumnMajor: batched column-major (Fortran order per matrix, batches
//   row-major) for the matrix results LAPACK writes in place: cholesky, qr,
//   lu_factor, inv, solve, eigh's vectors, lstsq, svd's U and Vh,
//   triangular_solve (BatchLinearAlgebra's batched_matrix_contiguous_strides).
//   Which results, and for solves the `left` flag that turns it off, are
//   per op in the table.
// - kLstsqSolution: linalg_lstsq's solution, column-major as kColumnMajor but
//   over max(m, n) rows: LAPACK's gels solves in B's buffer, and a tall A's
//   solution is that buffer's first n rows (strides (1, m), not (1, n)).
// - kFftC2C, kFftR2C, kFftC2R: MKL's FFT (SpectralOps.cpp's _exec_fft): the
//   batch dims first, ordered by the input's strides, then the transformed
//   dims (sorted by the input's strides, the last one kept last for the
//   one-sided transforms), row-major in that order.
// - kInputChannelsLast: the 2d pools (and interpolate's area mode, an
//   adaptive pool), max_pool3d, upsampling, padding, batch norm:
//   channels-last (3d) when the input suggests it.
// - kConvolution: channels-last when the input or the weight suggests it
//   (ConvUtils' backend memory format); a 1d conv reads only the weight
//   (its input is made contiguous first), a 3d conv in double is contiguous.
// - kAddr, kGlu, kIndex: TensorIterator's rule over the operands the CPU
//   kernel builds: addr's self, vec1[:, None], vec2[None]; glu's two halves;
//   index's source with the indexed dims restrided to the index shape
//   (stride 0) and the broadcast index tensors (AdvancedIndex).
// - kCat: cat's (TensorShape.cpp's cat_compute_output_memory_format): the
//   memory format every input suggests when they agree and it is channels-last
//   (3d), else contiguous (cat_memory_format).
// - kRowMajor: contiguous (every other op, and masked_fill, tagged pointwise
//   but computed on a contiguous clone).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/MemoryFormat.h>

#include <cstdint>
#include <vector>

namespace ttpu::aten {

enum class ResultLayout {
  kRowMajor,
  kIterator,
  kIteratorSwapped,  // TensorIterator's rule over (other, self): rsub is sub(other, self) on CPU
  kPreserveSelf,
  kColumnMajor,
  kFftC2C,
  kFftR2C,
  kFftC2R,
  kInputChannelsLast,
  kConvolution,
  kAddr,
  kGlu,
  kIndex,
  kLstsqSolution,
  kCat
};

// The memory format of cat's result over its inputs `ts` (kCat).
c10::MemoryFormat cat_memory_format(c10::ArrayRef<at::Tensor> ts);

struct LayoutRule {
  LayoutRule(ResultLayout k = ResultLayout::kRowMajor, uint32_t r = ~0u, int left = -1,
             int unpromoted = -1)
      : kind(k), results(r), left_arg(left), unpromoted_arg(unpromoted) {}
  ResultLayout kind;
  uint32_t results;    // bit i: result i takes `kind`; the others are row-major
  int left_arg;        // kColumnMajor: result 0 is row-major when this bool argument is false
  int unpromoted_arg;  // kIterator: an input not cast to the common dtype (where's condition)
};

LayoutRule result_layout(const c10::OperatorHandle& op);

// The strides of new result `index` of `shape` and dtype `dtype` under
// `rule`, given the op's arguments; empty for row-major.
std::vector<int64_t> result_strides(const LayoutRule& rule, c10::ArrayRef<c10::IValue> args,
                                    c10::IntArrayRef shape, size_t index, c10::ScalarType dtype);

}  // namespace ttpu::aten
