// Helpers shared by the indexing lowerings (index_gather.cc,
// index_scatter.cc): reading index tensors, checking their values, and
// turning PyTorch's indexing forms into StableHLO gather/scatter dimension
// numbers (https://github.com/openxla/stablehlo/blob/main/docs/spec.md#gather).
#pragma once

#include <utility>
#include <vector>

#include "aten/ops_util.h"

namespace ttpu::aten {

// An index tensor as an i64 value of its own shape. A CPU index tensor (Python
// indexing with a list makes one) is uploaded first, as CUDA's index kernels do.
ir::Value read_index(LoweringContext& ctx, const at::Tensor& index);

// How an out-of-range index is reported: each op keeps CPU PyTorch's text and
// exception type.
enum class RangeError {
  kInSelf,         // IndexError "index out of range in self" (index_select, embedding)
  kBoundsIndex,    // IndexError "index 5 is out of bounds for dimension 0 with size 3"
  kBoundsRuntime,  // the same text as RuntimeError (gather, scatter, index_add)
};

// Raises `err` unless every value of `index` lies in [lo, size), where lo is
// -size when `allow_negative` (Python-style wrap) and 0 otherwise. `prefix`
// starts the message where the op's CPU text has one ("index_copy_(): ").
//
// The values live on the device: a small min/max program computes them. In
// debug mode they are read at once (a sync per checked op: the pending work
// the index depends on must finish first) and the error is raised here. In
// strict and fused mode (and compiled graphs) the check is deferred to the
// next host read (aten/deferred_check.h), as CUDA reports a device-side
// assert, except with `at_op_in_strict`: Python indexing (x[idx], x[idx] = v)
// reads at once in strict mode too, since Python code relies on its
// IndexError at the call (the sequence protocol, try/except IndexError); fused
// mode still defers it. A silent clamp (XLA's gather semantics) would return
// wrong values, so one of the two always happens. A CPU index is checked on
// the host for free.
void check_index_range(LoweringContext& ctx, const at::Tensor& index, int64_t dim, int64_t size,
                       bool allow_negative, RangeError err, const char* prefix = "",
                       bool at_op_in_strict = false);

// Coordinates of every element of `index` (i64, shape S of rank r >= 1) for an
// element-wise gather/scatter along `dim`: i64 [S..., r] whose entry k is the
// element's own position in dim k, except along `dim` where it is the index value.
ir::Value along_dim_coords(LoweringContext& ctx, ir::Value index, int64_t dim);

// PyTorch advanced indexing (self[indices] with a list of optional index
// tensors), resolved into one gather/scatter over the indexed dims.
struct AdvancedIndex {
  std::vector<int64_t> dims;          // indexed dims of self, ascending
  std::vector<int64_t> batch;         // broadcast shape B of the index tensors
  ir::Value coords;                   // i64 [B..., dims.size()], wrapped to >= 0
  std::vector<int64_t> offset_dims;   // positions of self's other dims in the result
  std::vector<int64_t> slice_sizes;   // 1 on `dims`, self's size elsewhere
  std::vector<int64_t> result_sizes;  // sizes of self[indices]
  int64_t result_numel() const;
  ir::GatherDims gather_dims() const;
  ir::ScatterDims scatter_dims() const;
};

// Expands bool/uint8 masks into coordinates (their count fixes the result shape,
// so it is read on the host: a sync, as CUDA's nonzero does), checks index
// dtypes, mask shapes, broadcasting and (when `check_bounds`) index values with
// ATen's messages, and places the broadcast dims as NumPy does: where the
// indexed dims were when they are adjacent, first otherwise.
AdvancedIndex advanced_index(LoweringContext& ctx, const at::Tensor& self,
                             const c10::IValue& indices, bool check_bounds);

// The entries of a `Tensor?[]` argument (undefined tensors for None).
std::vector<at::Tensor> optional_tensors(const c10::IValue& list);

}  // namespace ttpu::aten
