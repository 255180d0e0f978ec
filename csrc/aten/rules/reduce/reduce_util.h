// Helpers shared by the reduction, normalisation and loss lowerings
// (reduce/, nn/norm*.cc, nn/loss*.cc): which dims a reduction covers, the
// dtype it accumulates in, and sums/means over IR values.
#pragma once

#include <ATen/WrapDimUtilsMulti.h>

#include <optional>
#include <vector>

#include "aten/ops_util.h"

namespace ttpu::aten {

// The dims a reduction runs over, wrapped and in increasing order. None or an
// empty list means every dim (ATen's convention for sum/mean/amax/var). Raises
// ATen's IndexError for a dim out of range and its error for a repeated dim.
// A 0-d tensor accepts dim 0 / -1 and reduces nothing.
inline std::vector<int64_t> reduction_dims(const std::optional<std::vector<int64_t>>& dim,
                                           int64_t rank) {
  std::vector<int64_t> out;
  if (!dim.has_value() || dim->empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  auto bits = at::dim_list_to_bitset(*dim, rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (bits[d]) out.push_back(d);
  }
  return out;
}

// The dtype a reduction accumulates in: f32 for bf16/f16, as ATen's CPU kernels
// do (XLA would otherwise add in the narrow type and lose most of the bits of
// a long sum), else the dtype itself.
inline ir::DType acc_dtype(ir::DType dt) {
  return dt == ir::DType::kBF16 || dt == ir::DType::kF16 ? ir::DType::kF32 : dt;
}

// How many elements of `sizes` each output element of a reduction over `rdims` covers.
inline int64_t reduced_numel(const std::vector<int64_t>& sizes, const std::vector<int64_t>& rdims) {
  int64_t n = 1;
  for (int64_t d : rdims) n *= sizes[d];
  return n;
}

// `sizes` with the reduced dims set to 1 (the keepdim shape).
inline std::vector<int64_t> keepdim_shape(std::vector<int64_t> sizes,
                                          const std::vector<int64_t>& rdims) {
  for (int64_t d : rdims) sizes[d] = 1;
  return sizes;
}

// Sum over `rdims` with the reduced dims kept as size 1, broadcast back to the
// operand's shape: the "x - mean(x)" building block of var and the norms.
inline ir::Value sum_broadcast(LoweringContext& ctx, ir::Value v,
                               const std::vector<int64_t>& rdims) {
  std::vector<int64_t> shape = dims(ctx, v);
  return broadcast_to(ctx, reduce(ctx, v, rdims, /*keepdim=*/true, ir::Reducer::kAdd), shape);
}

// Mean over `rdims` (keepdim), broadcast back to the operand's shape. An empty
// reduction gives NaN (0 / 0), as ATen's mean does.
inline ir::Value mean_broadcast(LoweringContext& ctx, ir::Value v,
                                const std::vector<int64_t>& rdims) {
  ir::Value s = sum_broadcast(ctx, v, rdims);
  double n = static_cast<double>(reduced_numel(dims(ctx, v), rdims));
  return ctx.g().binary(ir::Op::kDiv, s, full_like(ctx, s, n));
}

// An empty 1-d tensor: what ATen returns for batch norm's save_mean/invstd in
// eval mode, and this backend's stand-in for an output ATen leaves undefined
// (a backward output whose output_mask entry is false), since the generic
// kernel returns one tensor per value. The autograd engine ignores gradients
// for inputs that need none.
inline ir::Value empty_output(LoweringContext& ctx, ir::DType dt) {
  return ctx.g().constant(0, {dt, {0}});
}

}  // namespace ttpu::aten
