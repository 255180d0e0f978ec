// Lowerings of the ATen ops that read elements at index positions: index_select,
// gather, advanced indexing (index.Tensor). Each becomes one StableHLO gather;
// index values are checked on the host first (see check_index_range for the cost).
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/ScatterGatherChecks.h>

#include "aten/rules/index/index_util.h"

namespace ttpu::aten {
namespace {

// index_select(self, dim, index): self's slices at `index` along `dim`; the
// result has self's shape with dim replaced by index.numel().
std::vector<ir::Value> index_select(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const int64_t dim = wrap_dim(a.integer(1), self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.dim() > 0 || index.numel() == 1,
              "index_select(): Index to scalar can have "
              "only 1 value, got ",
              index.numel(), " value(s)");
  if (self.dim() > 1 && (self.numel() == 0 || dim == 1) && index.numel() > 0) {
    // CPU's paths for an empty self of rank > 1 and for dim 1 of a rank > 1
    // self (a dedicated kernel) raise RuntimeError, not IndexError: first for
    // a size-0 indexed dim, then for a value out of [0, size) (negative values
    // included).
    TORCH_CHECK(self.size(dim) > 0, "index_select(): self indexing axis dim should be positive");
    check_index_range(ctx, index, dim, self.size(dim), false, RangeError::kBoundsRuntime,
                      "index_select(): ");
  } else {
    check_index_range(ctx, index, dim, self.dim() == 0 ? 1 : self.size(dim), false,
                      RangeError::kInSelf);
  }
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (self.dim() == 0) return {x};
  const int64_t n = index.numel();
  std::vector<int64_t> out = self.sizes().vec();
  out[dim] = n;
  if (self.numel() == 0 || n == 0) return {g.constant(0, {dtype(ctx, x), out})};
  ir::GatherDims d;
  for (int64_t k = 0; k < self.dim(); ++k) {
    if (k != dim) d.offset_dims.push_back(k);
  }
  d.collapsed_slice_dims = {dim};
  d.start_index_map = {dim};
  d.slice_sizes = self.sizes().vec();
  d.slice_sizes[dim] = 1;
  d.index_vector_dim = 1;
  return {g.gather(x, g.reshape(read_index(ctx, index), {n, 1}), d, out)};
}

// gather(self, dim, index): out[i][j] = self[index[i][j]][j] (for dim 0), the
// result shaped like index.
std::vector<ir::Value> gather(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const int64_t dim = wrap_dim(a.integer(1), self.dim());
  at::native::scatter_gather_dtype_check("gather", self, index, std::nullopt);
  // As in ATen's gather meta function: an empty index skips the shape check.
  if (index.numel() != 0) at::native::gather_shape_check(self, dim, index);
  check_index_range(ctx, index, dim, at::native::ensure_nonempty_size(self, dim), false,
                    RangeError::kBoundsRuntime);
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  std::vector<int64_t> out = index.sizes().vec();
  if (index.numel() == 0) return {g.constant(0, {dtype(ctx, x), out})};
  if (self.dim() == 0) return {broadcast_to(ctx, x, out)};
  // A 0-d index of a 1-d self reads as a 1-element index.
  const int64_t r = self.dim();
  const std::vector<int64_t> ishape = index.dim() == 0 ? std::vector<int64_t>{1} : out;
  ir::Value idx = g.reshape(read_index(ctx, index), ishape);
  ir::GatherDims d;
  for (int64_t k = 0; k < r; ++k) {
    d.collapsed_slice_dims.push_back(k);
    d.start_index_map.push_back(k);
  }
  d.slice_sizes.assign(static_cast<size_t>(r), 1);
  d.index_vector_dim = r;
  ir::Value v = g.gather(x, along_dim_coords(ctx, idx, dim), d, dims(ctx, idx));
  return {g.reshape(v, out)};
}

// self[indices] for a list of optional index tensors (NumPy advanced indexing).
std::vector<ir::Value> index_tensor(LoweringContext& ctx, const Args& a, bool check_bounds) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK_INDEX(!a[1].toListRef().empty(), "at least one index must be provided");
  // ATen's index meta function: a tpu index of a CPU tensor reaches this kernel.
  for (const c10::IValue& i : a[1].toListRef()) {
    if (!i.isTensor() || !i.toTensor().defined()) continue;
    const at::Tensor& index = i.toTensor();
    TORCH_CHECK(index.device() == self.device() || index.is_cpu(), "indices should be either on ",
                c10::kCPU, " or on the same device as the indexed tensor (", self.device(), ")");
  }
  AdvancedIndex ai = advanced_index(ctx, self, a[1], check_bounds);
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (ai.dims.empty()) return {x};
  if (ai.result_numel() == 0) return {g.constant(0, {dtype(ctx, x), ai.result_sizes})};
  return {g.gather(x, ai.coords, ai.gather_dims(), ai.result_sizes)};
}

RegisterLowering r_index_select("index_select", index_select);
RegisterLowering r_gather("gather", gather);
RegisterLowering r_index("index.Tensor", [](LoweringContext& c, const Args& a) {
  return index_tensor(c, a, /*check_bounds=*/true);
});
// The "unsafe" variant promises in-range indices (decompositions emit it), so it
// skips the host-side check.
RegisterLowering r_unsafe_index("_unsafe_index.Tensor", [](LoweringContext& c, const Args& a) {
  return index_tensor(c, a, /*check_bounds=*/false);
});

}  // namespace
}  // namespace ttpu::aten
