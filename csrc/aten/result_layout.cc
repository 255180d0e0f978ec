// Result layouts: the per-op table and TensorIterator's stride rule. See
// result_layout.h.
#include "aten/result_layout.h"

#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>

#include <string>
#include <unordered_map>

namespace ttpu::aten {
namespace {

// The strides TensorIterator gives a pointwise op's new output of `shape`
// (TensorIteratorBase::compute_fast_setup_type, then reorder_dimensions and
// allocate_or_resize_outputs), or empty for row-major. Inputs of the output's
// shape that are all contiguous give row-major, all channels-last give
// channels-last, all dense with equal strides give those strides; otherwise
// the dims are ordered by the inputs' strides (broadcast dims skipped, ties to
// the smaller dim) and the output is dense in that order.
std::vector<int64_t> pointwise_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  std::vector<at::Tensor> ins;
  for (const auto& a : args) {
    if (a.isTensor() && a.toTensor().defined()) ins.push_back(a.toTensor());
  }
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd < 2 || ins.empty()) return {};
  bool same_shape = true;
  for (const auto& t : ins) same_shape = same_shape && t.sizes() == shape;
  if (same_shape) {
    bool contiguous = true, channels_last = true, channels_last_3d = true, dense = true;
    for (const auto& t : ins) {
      contiguous = contiguous && t.is_contiguous();
      channels_last = channels_last && t.is_contiguous(at::MemoryFormat::ChannelsLast);
      channels_last_3d = channels_last_3d && t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
      dense = dense && t.is_non_overlapping_and_dense();
    }
    if (contiguous) return {};
    if (channels_last) return c10::get_channels_last_strides_2d(shape);
    if (channels_last_3d) return c10::get_channels_last_strides_3d(shape);
    if (dense) {
      bool equal = true;
      for (const auto& t : ins) equal = equal && t.strides() == ins.back().strides();
      if (equal) return ins.back().strides().vec();
    }
  }
  // Each input's strides over the output's dims; 0 where it is broadcast.
  std::vector<std::vector<int64_t>> st;
  for (const auto& t : ins) {
    std::vector<int64_t> s(nd, 0);
    const int64_t off = nd - t.dim();
    if (off < 0) return {};  // not an input of this result's shape
    for (int64_t d = off; d < nd; ++d) {
      const int64_t k = d - off;
      if (t.size(k) != 1 && t.size(k) != shape[d]) return {};
      s[d] = (t.size(k) == 1 && shape[d] != 1) ? 0 : t.stride(k);
    }
    st.push_back(std::move(s));
  }
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (const auto& s : st) {
      if (s[d0] == 0 || s[d1] == 0) continue;
      if (s[d0] < s[d1]) return -1;
      if (s[d0] > s[d1]) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(nd);  // innermost first
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (int64_t i = 1; i < nd; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool row_major = true;
  for (int64_t i = 0; i < nd; ++i) row_major = row_major && perm[i] == nd - 1 - i;
  if (row_major) return {};
  std::vector<int64_t> strides(nd);
  int64_t next = 1;
  for (int64_t i = 0; i < nd; ++i) {
    strides[perm[i]] = next;
    next *= std::max<int64_t>(shape[perm[i]], 1);
  }
  return strides;
}

// Ops whose layout is not what their `pointwise` tag says (found by comparing
// result strides with CPU over permuted, transposed and sliced inputs).
const std::unordered_map<std::string, ResultLayout>& layout_table() {
  static const auto* table = new std::unordered_map<std::string, ResultLayout>{
      {"aten::floor_divide", ResultLayout::kIterator},
      {"aten::floor_divide.Scalar", ResultLayout::kIterator},
      {"aten::hardswish", ResultLayout::kIterator},
      {"aten::_prelu_kernel", ResultLayout::kIterator},
      {"aten::native_dropout", ResultLayout::kIterator},
      {"aten::rsub.Tensor", ResultLayout::kIterator},
      {"aten::huber_loss", ResultLayout::kIterator},
      {"aten::complex", ResultLayout::kIterator},
      {"aten::polar", ResultLayout::kIterator},
      {"aten::index_put", ResultLayout::kPreserveSelf},
      {"aten::put", ResultLayout::kPreserveSelf},
      {"aten::flip", ResultLayout::kPreserveSelf},
      {"aten::sort.stable", ResultLayout::kPreserveSelf},
      {"aten::masked_fill.Scalar", ResultLayout::kRowMajor},
  };
  return *table;
}

}  // namespace

ResultLayout result_layout(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  std::string key = name.name;
  if (!name.overload_name.empty()) key += "." + name.overload_name;
  auto it = layout_table().find(key);
  if (it != layout_table().end()) return it->second;
  return op.hasTag(at::Tag::pointwise) ? ResultLayout::kIterator : ResultLayout::kRowMajor;
}

std::vector<int64_t> result_strides(ResultLayout layout, c10::ArrayRef<c10::IValue> args,
                                    c10::IntArrayRef shape) {
  switch (layout) {
    case ResultLayout::kRowMajor:
      return {};
    case ResultLayout::kIterator:
      return pointwise_strides(args, shape);
    case ResultLayout::kPreserveSelf:
      // empty_like(self, Preserve) is TensorIterator's rule over self alone.
      if (args.empty() || !args[0].isTensor() || args[0].toTensor().sizes() != shape) return {};
      return pointwise_strides(args.slice(0, 1), shape);
  }
  return {};
}

}  // namespace ttpu::aten
