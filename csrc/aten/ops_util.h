// Helpers shared by the lowering rules: PyTorch broadcasting and type promotion
// expressed on IR values. The rules are the specification's translation, so these
// follow ATen's own functions (at::infer_size, at::native::result_type).
#pragma once

#include <ATen/core/Tensor.h>

#include "aten/lowering.h"

namespace ttpu::aten {

// Broadcasts `v` to `sizes` by PyTorch's right-aligned rule.
ir::Value broadcast_to(LoweringContext& ctx, ir::Value v, c10::IntArrayRef sizes);
// The broadcast shape of two IR values (at::infer_size's error on mismatch).
std::vector<int64_t> broadcast_shape(LoweringContext& ctx, ir::Value a, ir::Value b);
// Operand i of a binary op as an IR value in `dtype`: a tensor or a Python scalar.
ir::Value operand(LoweringContext& ctx, const c10::IValue& v, ir::DType dtype);
// Whether a Python scalar (an alpha, a beta) equals the real `v`: a complex
// one when its imaginary part is 0, a bool as 0/1. Never Scalar::toDouble on a
// complex value, which raises "cannot be converted to type double".
bool scalar_equals(const c10::Scalar& s, double v);
// PyTorch's result type of two operands (tensors or scalars).
c10::ScalarType result_type(const c10::IValue& a, const c10::IValue& b);
// Broadcast both to a common shape; returns the pair.
std::pair<ir::Value, ir::Value> broadcast_pair(LoweringContext& ctx, ir::Value a, ir::Value b);
// Elementwise binary op with broadcasting (operands already of one dtype).
ir::Value binary(LoweringContext& ctx, ir::Op op, ir::Value a, ir::Value b);
ir::Value compare(LoweringContext& ctx, ir::Cmp cmp, ir::Value a, ir::Value b);
// Dimension `d` wrapped into [0, rank) with PyTorch's IndexError on range.
int64_t wrap_dim(int64_t d, int64_t rank);
// A splat constant shaped like `like`, in `like`'s dtype.
ir::Value full_like(LoweringContext& ctx, ir::Value like, double value);
// A copy: a reference into the graph would dangle once another node is added.
std::vector<int64_t> dims(LoweringContext& ctx, ir::Value v);
ir::DType dtype(LoweringContext& ctx, ir::Value v);
// x's slices at positions `index` (i64 [m]) along `dim`: x's shape with dim
// replaced by m (a gather; the positions must be in range).
ir::Value take_along_dim(LoweringContext& ctx, ir::Value x, int64_t dim, ir::Value index);
// x's dim `d` (size m) contracted with `matrix`'s dim `matrix_dim` (size m;
// the matrix is [m, n] for 0, [n, m] for 1): x's shape with dim d replaced by
// n (a dot_general, then the n dim moved back to d).
ir::Value contract_dim(LoweringContext& ctx, ir::Value x, int64_t d, ir::Value matrix,
                       int64_t matrix_dim = 0);
// The out= of a 1-D range factory (arange, linspace, logspace): resized to [n]
// only when its element count differs, as ATen's CPU kernels do, so a
// same-count out of another shape (a [2, 2] narrow view of 4 elements) keeps
// it; write_range then stores the [n] values in its row-major order.
void resize_range_out(const at::Tensor& out, int64_t n);
void write_range(LoweringContext& ctx, const at::Tensor& out, ir::Value values);
// Sum / max / ... over `dims` (keepdim reshapes back to rank).
ir::Value reduce(LoweringContext& ctx, ir::Value v, std::vector<int64_t> dims, bool keepdim,
                 ir::Reducer reducer);
// The trip count of a loop lowering (stablehlo/loop_kernels.h), computed on
// the device: the largest element of `need` (i64, any shape) clamped to
// [lo, hi], an i64 scalar.
ir::Value loop_count(LoweringContext& ctx, ir::Value need, int64_t lo, int64_t hi);

}  // namespace ttpu::aten
