// The layout (strides) of an op's new results, as CPU's kernels allocate them.
//
// A strided result is observable: view() succeeds or raises by it, and a
// later in-place write through an alias lands by it. CPU's rules, which tpu
// follows (the per-op table in result_layout.cc says which op follows which):
// - kIterator: TensorIterator's output over the op's tensor arguments (every
//   op tagged `pointwise`, and the TensorIterator kernels ATen leaves untagged:
//   floor_divide, hardswish, _prelu_kernel, native_dropout, rsub, huber_loss,
//   complex, polar).
// - kPreserveSelf: empty_like(self) / clone with MemoryFormat::Preserve:
//   self's strides when it is dense, else dense in the order of self's strides
//   (flip, sort, out-of-place index_put and put).
// - kRowMajor: contiguous (every other op, and masked_fill, tagged pointwise
//   but computed on a contiguous clone).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

namespace ttpu::aten {

enum class ResultLayout { kRowMajor, kIterator, kPreserveSelf };

ResultLayout result_layout(const c10::OperatorHandle& op);

// The strides of a new result of `shape` under `layout`, given the op's
// arguments; empty for row-major.
std::vector<int64_t> result_strides(ResultLayout layout, c10::ArrayRef<c10::IValue> args,
                                    c10::IntArrayRef shape);

}  // namespace ttpu::aten
