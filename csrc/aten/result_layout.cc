// Result layouts: the per-op table and TensorIterator's stride rule. See
// result_layout.h.
#include "aten/result_layout.h"

#include <ATen/core/Tensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/WrapDimMinimal.h>

#include <algorithm>
#include <optional>
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
  if (shape.size() < 2) return {};  // one layout only (checked again below)
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

// The inputs as CPU's TensorIterator orders the dims over them: its
// compute_types replaces (on CPU, before reorder_dimensions) each input whose
// dtype is not the common one by its .to(common) copy, which keeps a dense
// input's strides and makes any other (an expanded one) dense in its strides'
// order (infer_dense_strides). So atan2(int expanded, int transposed) is
// row-major on CPU, where the transposed input alone would decide. The common
// dtype is the inputs' result type, or `result`'s for an op that computes
// integers in floating point (atan2, true division). Cast inputs become meta
// tensors with the copy's strides.
std::vector<c10::IValue> as_cast_by_iterator(c10::ArrayRef<c10::IValue> args,
                                             c10::ScalarType result, int unpromoted) {
  at::native::ResultTypeState state{};
  bool any_tensor = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) == unpromoted) continue;
    if (args[i].isTensor() && args[i].toTensor().defined()) {
      state = at::native::update_result_type_state(args[i].toTensor(), state);
      any_tensor = true;
    }
  }
  std::vector<c10::IValue> out(args.begin(), args.end());
  if (!any_tensor || result == c10::ScalarType::Undefined) return out;
  c10::ScalarType common = at::native::result_type(state);
  if ((c10::isFloatingType(result) || c10::isComplexType(result)) &&
      c10::isIntegralType(common, /*includeBool=*/true)) {
    common = result;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int>(i) == unpromoted || !out[i].isTensor()) continue;
    const at::Tensor& t = out[i].toTensor();
    if (!t.defined() || t.dim() == 0 || t.scalar_type() == common ||
        t.is_non_overlapping_and_dense()) {
      continue;
    }
    out[i] = at::empty_strided(t.sizes(), at::infer_dense_strides(t.sizes(), t.strides()),
                               at::TensorOptions().device(at::kMeta).dtype(common));
  }
  return out;
}

// Ops whose layout is not what their `pointwise` tag says (found by comparing
// result strides with CPU over permuted, transposed and sliced inputs).
const std::unordered_map<std::string, LayoutRule>& layout_table() {
  constexpr auto kF = ResultLayout::kColumnMajor;
  static const auto* table = new std::unordered_map<std::string, LayoutRule>{
      {"aten::floor_divide", ResultLayout::kIterator},
      {"aten::floor_divide.Scalar", ResultLayout::kIterator},
      {"aten::hardswish", ResultLayout::kIterator},
      {"aten::_prelu_kernel", ResultLayout::kIterator},
      {"aten::native_dropout", ResultLayout::kIterator},
      {"aten::rsub.Tensor", ResultLayout::kIteratorSwapped},
      {"aten::huber_loss", ResultLayout::kIterator},
      {"aten::complex", ResultLayout::kIterator},
      {"aten::polar", ResultLayout::kIterator},
      {"aten::index_put", ResultLayout::kPreserveSelf},
      {"aten::put", ResultLayout::kPreserveSelf},
      {"aten::flip", ResultLayout::kPreserveSelf},
      {"aten::cat", ResultLayout::kCat},
      {"aten::sort.stable", ResultLayout::kPreserveSelf},
      {"aten::masked_fill.Scalar", ResultLayout::kRowMajor},
      {"aten::where.self", {ResultLayout::kIterator, ~0u, -1, /*unpromoted=*/0}},
      // LAPACK's in-place results (checked against CPU with row- and
      // column-major inputs; the pivots, info, tau and eigenvalues are
      // row-major, and so are linalg_lu's P, L, U, lu_unpack's and
      // linalg_matrix_exp's results).
      {"aten::cholesky", {kF, 0b1}},
      {"aten::linalg_cholesky_ex", {kF, 0b1}},
      {"aten::cholesky_inverse", {kF, 0b1}},
      {"aten::_cholesky_solve_helper", {kF, 0b1}},
      {"aten::triangular_solve", {kF, 0b11}},
      {"aten::linalg_solve_triangular", {kF, 0b1}},
      {"aten::geqrf", {kF, 0b1}},
      {"aten::linalg_qr", {kF, 0b11}},
      {"aten::linalg_householder_product", {kF, 0b1}},
      {"aten::ormqr", {kF, 0b1}},
      {"aten::linalg_lstsq", {ResultLayout::kLstsqSolution, 0b1}},
      {"aten::linalg_lu_factor_ex", {kF, 0b1}},
      {"aten::linalg_lu_solve", {kF, 0b1, 3}},
      {"aten::_linalg_det", {kF, 0b10}},
      {"aten::_linalg_slogdet", {kF, 0b100}},
      {"aten::linalg_inv_ex", {kF, 0b1}},
      {"aten::_linalg_solve_ex", {kF, 0b11, 2}},
      {"aten::_linalg_eigh", {kF, 0b10}},
      {"aten::_linalg_svd", {kF, 0b101}},
      {"aten::avg_pool2d", ResultLayout::kInputChannelsLast},
      {"aten::_adaptive_avg_pool2d", ResultLayout::kInputChannelsLast},
      {"aten::adaptive_max_pool2d", ResultLayout::kInputChannelsLast},
      {"aten::max_pool2d_with_indices", ResultLayout::kInputChannelsLast},
      {"aten::max_pool3d_with_indices", ResultLayout::kInputChannelsLast},
      // Likewise upsampling, padding, batch and group norm's output (their stats
      // are 1d / 2d).
      {"aten::upsample_nearest2d", ResultLayout::kInputChannelsLast},
      {"aten::upsample_bilinear2d", ResultLayout::kInputChannelsLast},
      {"aten::upsample_bicubic2d", ResultLayout::kInputChannelsLast},
      {"aten::_upsample_nearest_exact2d", ResultLayout::kInputChannelsLast},
      {"aten::_upsample_bilinear2d_aa", ResultLayout::kInputChannelsLast},
      {"aten::_upsample_bicubic2d_aa", ResultLayout::kInputChannelsLast},
      {"aten::upsample_nearest3d", ResultLayout::kInputChannelsLast},
      {"aten::upsample_trilinear3d", ResultLayout::kInputChannelsLast},
      {"aten::_upsample_nearest_exact3d", ResultLayout::kInputChannelsLast},
      {"aten::constant_pad_nd", ResultLayout::kInputChannelsLast},
      {"aten::reflection_pad2d", ResultLayout::kInputChannelsLast},
      {"aten::replication_pad2d", ResultLayout::kInputChannelsLast},
      {"aten::native_batch_norm", ResultLayout::kInputChannelsLast},
      {"aten::_native_batch_norm_legit", ResultLayout::kInputChannelsLast},
      {"aten::_native_batch_norm_legit.no_stats", ResultLayout::kInputChannelsLast},
      {"aten::_native_batch_norm_legit_functional", ResultLayout::kInputChannelsLast},
      {"aten::_native_batch_norm_legit_no_training", ResultLayout::kInputChannelsLast},
      {"aten::native_group_norm", ResultLayout::kInputChannelsLast},
      {"aten::_batch_norm_with_update", ResultLayout::kInputChannelsLast},
      {"aten::max_pool2d_with_indices_backward", ResultLayout::kInputChannelsLast},
      {"aten::max_unpool2d", ResultLayout::kInputChannelsLast},
      {"aten::batch_norm_elemt", ResultLayout::kInputChannelsLast},
      {"aten::batch_norm_backward_elemt", ResultLayout::kInputChannelsLast},
      {"aten::convolution_overrideable", ResultLayout::kConvolution},
      {"aten::addr", ResultLayout::kAddr},
      {"aten::glu", ResultLayout::kGlu},
      {"aten::index.Tensor", ResultLayout::kIndex},
      {"aten::_fft_c2c", ResultLayout::kFftC2C},
      {"aten::_fft_r2c", ResultLayout::kFftR2C},
      {"aten::_fft_c2r", ResultLayout::kFftC2R},
  };
  return *table;
}

// Batched column-major: each matrix in Fortran order, the batches row-major.
std::vector<int64_t> column_major_strides(c10::IntArrayRef shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd < 2) return {};
  std::vector<int64_t> strides(nd);
  strides[nd - 2] = 1;
  strides[nd - 1] = std::max<int64_t>(shape[nd - 2], 1);
  int64_t next = strides[nd - 1] * std::max<int64_t>(shape[nd - 1], 1);
  for (int64_t d = nd - 3; d >= 0; --d) {
    strides[d] = next;
    next *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

// linalg_lstsq(A [.., m, n], B [.., m, k]): the solution [.., n, k] is the
// first n rows of a column-major [.., max(m, n), k] buffer (a vector B: the
// vector's own layout).
std::vector<int64_t> lstsq_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isTensor()) return {};
  const at::Tensor& a = args[0].toTensor();
  if (nd < 2 || a.dim() < 2 || args[1].toTensor().dim() != a.dim()) return {};
  std::vector<int64_t> padded(shape.begin(), shape.end());
  padded[nd - 2] = std::max(shape[nd - 2], a.size(-2));
  std::vector<int64_t> strides = column_major_strides(padded);
  return strides;
}

// Dims sorted by decreasing input stride; the sort is stable as libstdc++'s
// std::sort is on the few dims a tensor has (an insertion sort below 16).
void sort_by_stride(std::vector<int64_t>::iterator b, std::vector<int64_t>::iterator e,
                    c10::IntArrayRef in_strides) {
  std::stable_sort(b, e, [&](int64_t x, int64_t y) { return in_strides[x] > in_strides[y]; });
}

// The strides _exec_fft gives its result of `out_sizes` for an input with
// `in_strides`, transforming `dims` in that order.
std::vector<int64_t> exec_fft_strides(c10::IntArrayRef in_strides, c10::IntArrayRef out_sizes,
                                      const std::vector<int64_t>& dims) {
  const int64_t nd = static_cast<int64_t>(out_sizes.size());
  std::vector<bool> transformed(nd, false);
  for (int64_t d : dims) transformed[d] = true;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < nd; ++d) {
    if (!transformed[d]) perm.push_back(d);
  }
  const size_t batch_dims = perm.size();
  sort_by_stride(perm.begin(), perm.end(), in_strides);
  perm.insert(perm.end(), dims.begin(), dims.end());
  // A contiguous [batch, signal...] buffer, then the batch dims unflattened.
  std::vector<int64_t> signal_strides(dims.size());
  int64_t next = 1;
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    signal_strides[i] = next;
    next *= std::max<int64_t>(out_sizes[dims[i]], 1);
  }
  std::vector<int64_t> strides(nd);
  int64_t batch_numel = 1;
  for (int64_t i = static_cast<int64_t>(batch_dims) - 1; i >= 0; --i) {
    strides[perm[i]] = batch_numel * next;
    batch_numel *= out_sizes[perm[i]];
  }
  for (size_t i = 0; i < dims.size(); ++i) strides[dims[i]] = signal_strides[i];
  return strides;
}

std::vector<int64_t> fft_strides(ResultLayout kind, c10::ArrayRef<c10::IValue> args,
                                 c10::IntArrayRef shape) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isIntList()) return {};
  const at::Tensor& self = args[0].toTensor();
  const int64_t nd = self.dim();
  if (nd != static_cast<int64_t>(shape.size()) || nd == 0) return {};
  std::vector<int64_t> dims = args[1].toIntVector();
  if (dims.empty()) return {};
  for (auto& d : dims) {
    if (d < 0) d += nd;
    if (d < 0 || d >= nd) return {};
  }
  switch (kind) {
    case ResultLayout::kFftC2C:
      sort_by_stride(dims.begin(), dims.end(), self.strides());
      return exec_fft_strides(self.strides(), shape, dims);
    case ResultLayout::kFftR2C:
      sort_by_stride(dims.begin(), dims.end() - 1, self.strides());
      return exec_fft_strides(self.strides(), shape, dims);
    case ResultLayout::kFftC2R: {
      // All but the last dim go through a c2c transform first; the c2r
      // step then reads that result's layout.
      std::vector<int64_t> in_strides = self.strides().vec();
      if (dims.size() > 1) {
        std::vector<int64_t> c2c(dims.begin(), dims.end() - 1);
        sort_by_stride(c2c.begin(), c2c.end(), self.strides());
        in_strides = exec_fft_strides(self.strides(), self.sizes(), c2c);
      }
      return exec_fft_strides(in_strides, shape, {dims.back()});
    }
    default: return {};
  }
}

bool suggests_channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
}

bool suggests_channels_last_3d(const at::Tensor& t) {
  return t.dim() == 5 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d;
}

std::vector<int64_t> pool_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  if (args.empty() || !args[0].isTensor()) return {};
  const at::Tensor& in = args[0].toTensor();
  if (shape.size() == 4 && suggests_channels_last(in)) {
    return c10::get_channels_last_strides_2d(shape);
  }
  if (shape.size() == 5 && suggests_channels_last_3d(in)) {
    return c10::get_channels_last_strides_3d(shape);
  }
  return {};
}

std::vector<int64_t> cat_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  if (args.empty() || !args[0].isTensorList()) return {};
  const c10::MemoryFormat format = cat_memory_format(args[0].toTensorVector());
  if (format == c10::MemoryFormat::ChannelsLast && shape.size() == 4) {
    return c10::get_channels_last_strides_2d(shape);
  }
  if (format == c10::MemoryFormat::ChannelsLast3d && shape.size() == 5) {
    return c10::get_channels_last_strides_3d(shape);
  }
  return {};
}

std::vector<int64_t> conv_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isTensor()) return {};
  const at::Tensor& in = args[0].toTensor();
  const at::Tensor& w = args[1].toTensor();
  if (shape.size() == 3 && w.dim() == 3) {
    // Run as a 2d conv over [N, C, 1, L] with the weight unsqueezed likewise.
    const std::vector<int64_t> ws{w.size(0), w.size(1), 1, w.size(2)};
    const std::vector<int64_t> wst{w.stride(0), w.stride(1), w.size(2) * w.stride(2), w.stride(2)};
    if (!c10::is_channels_last_strides_2d(c10::IntArrayRef(ws), c10::IntArrayRef(wst))) {
      return {};
    }
    const int64_t c = shape[1], l = shape[2];
    return {c * l, 1, std::max<int64_t>(c, 1)};
  }
  if (shape.size() == 4 && (suggests_channels_last(in) || suggests_channels_last(w))) {
    return c10::get_channels_last_strides_2d(shape);
  }
  if (shape.size() == 5 && in.scalar_type() != at::kDouble &&
      (suggests_channels_last_3d(in) || suggests_channels_last_3d(w))) {
    return c10::get_channels_last_strides_3d(shape);
  }
  return {};
}

// Views only (no device work): the operands' strides are what matters.
std::vector<int64_t> iterator_over(std::vector<at::Tensor> ins, c10::IntArrayRef shape) {
  std::vector<c10::IValue> vals(ins.begin(), ins.end());
  return pointwise_strides(vals, shape);
}

std::vector<int64_t> addr_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  if (args.size() < 3 || shape.size() != 2) return {};
  for (int i = 0; i < 3; ++i) {
    if (!args[i].isTensor()) return {};
  }
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& v1 = args[1].toTensor();
  const at::Tensor& v2 = args[2].toTensor();
  if (v1.dim() != 1 || v2.dim() != 1 || self.dim() > 2) return {};
  return iterator_over({self.expand(shape), v1.unsqueeze(1), v2.unsqueeze(0)}, shape);
}

std::vector<int64_t> glu_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isInt()) return {};
  const at::Tensor& self = args[0].toTensor();
  if (self.dim() == 0) return {};
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self.dim());
  const int64_t half = self.size(dim) / 2;
  return iterator_over({self.narrow(dim, 0, half), self.narrow(dim, half, half)}, shape);
}

std::vector<int64_t> index_strides(c10::ArrayRef<c10::IValue> args, c10::IntArrayRef shape) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isList()) return {};
  at::Tensor src = args[0].toTensor();
  std::vector<at::Tensor> idx;  // undefined where the dim is not indexed
  for (const auto& v : args[1].toListRef()) {
    if (v.isNone()) {
      idx.emplace_back();
      continue;
    }
    if (!v.isTensor()) return {};
    const at::Tensor& t = v.toTensor();
    // Masks become long indices first (nonzero): leave those row-major.
    if (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte) return {};
    idx.push_back(t);
  }
  if (idx.size() > static_cast<size_t>(src.dim())) return {};
  idx.resize(src.dim());
  std::vector<int64_t> index_shape;
  bool first = true;
  for (const auto& t : idx) {
    if (!t.defined()) continue;
    index_shape = first ? t.sizes().vec() : at::infer_size(index_shape, t.sizes());
    first = false;
  }
  if (first) return {};
  // Non-adjacent indexed dims go to the front, as AdvancedIndex does.
  int64_t lo = -1, hi = -1;
  bool adjacent = true;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (!idx[d].defined()) continue;
    if (lo < 0) lo = d;
    if (hi >= 0 && d != hi + 1) adjacent = false;
    hi = d;
  }
  if (!adjacent) {
    std::vector<int64_t> perm;
    std::vector<at::Tensor> moved;
    for (int64_t d = 0; d < src.dim(); ++d) {
      if (idx[d].defined()) perm.push_back(d), moved.push_back(idx[d]);
    }
    for (int64_t d = 0; d < src.dim(); ++d) {
      if (!idx[d].defined()) perm.push_back(d), moved.emplace_back();
    }
    src = src.permute(perm);
    idx = moved;
    lo = 0;
    hi = 0;
    while (hi + 1 < src.dim() && idx[hi + 1].defined()) ++hi;
  }
  const int64_t before = lo, after = src.dim() - hi - 1;
  const int64_t ni = static_cast<int64_t>(index_shape.size());
  if (static_cast<int64_t>(shape.size()) != before + ni + after) return {};
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < before; ++d)
    sizes.push_back(src.size(d)), strides.push_back(src.stride(d));
  for (int64_t d = 0; d < ni; ++d) sizes.push_back(index_shape[d]), strides.push_back(0);
  for (int64_t d = hi + 1; d < src.dim(); ++d) {
    sizes.push_back(src.size(d));
    strides.push_back(src.stride(d));
  }
  if (c10::IntArrayRef(sizes) != shape) return {};
  std::vector<at::Tensor> ins{src.as_strided(sizes, strides)};
  for (const auto& t : idx) {
    if (!t.defined()) continue;
    at::Tensor e = t.expand(index_shape);
    std::vector<int64_t> isz(before, 1), ist(before, 0);
    for (int64_t d = 0; d < ni; ++d) isz.push_back(index_shape[d]), ist.push_back(e.stride(d));
    for (int64_t d = 0; d < after; ++d) isz.push_back(1), ist.push_back(0);
    ins.push_back(e.as_strided(isz, ist));
  }
  return iterator_over(ins, shape);
}

}  // namespace

LayoutRule result_layout(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  std::string key = name.name;
  if (!name.overload_name.empty()) key += "." + name.overload_name;
  auto it = layout_table().find(key);
  if (it != layout_table().end()) return it->second;
  // An out= overload (addr.out, sort.values_stable) has its functional's
  // rule: the overload name without its "out" / "values" words.
  std::string functional;
  size_t start = 0;
  const std::string& overload = name.overload_name;
  while (start <= overload.size()) {
    size_t end = overload.find('_', start);
    if (end == std::string::npos) end = overload.size();
    const std::string word = overload.substr(start, end - start);
    if (word != "out" && word != "values" && !word.empty()) {
      functional += (functional.empty() ? "" : "_") + word;
    }
    start = end + 1;
  }
  if (functional != overload) {
    it = layout_table().find(functional.empty() ? name.name : name.name + "." + functional);
    if (it != layout_table().end()) return it->second;
  }
  return {op.hasTag(at::Tag::pointwise) ? ResultLayout::kIterator : ResultLayout::kRowMajor};
}

c10::MemoryFormat cat_memory_format(c10::ArrayRef<at::Tensor> ts) {
  std::optional<c10::MemoryFormat> format;
  for (const at::Tensor& t : ts) {
    const c10::MemoryFormat f = t.suggest_memory_format();
    if (f == c10::MemoryFormat::Contiguous || (format && *format != f)) {
      return c10::MemoryFormat::Contiguous;
    }
    format = f;
  }
  return format.value_or(c10::MemoryFormat::Contiguous);
}

std::vector<int64_t> result_strides(const LayoutRule& rule, c10::ArrayRef<c10::IValue> args,
                                    c10::IntArrayRef shape, size_t index, c10::ScalarType dtype) {
  if (index >= 32 || !((rule.results >> index) & 1u)) return {};
  switch (rule.kind) {
    case ResultLayout::kRowMajor: return {};
    case ResultLayout::kIterator:
      return pointwise_strides(as_cast_by_iterator(args, dtype, rule.unpromoted_arg), shape);
    case ResultLayout::kIteratorSwapped: {
      // CPU's rsub(self, other) runs sub(other, self): other's strides decide
      // a tie (rsub(x, x.t()) is column-major).
      if (args.size() < 2) return {};
      std::vector<c10::IValue> swapped(args.begin(), args.end());
      std::swap(swapped[0], swapped[1]);
      return pointwise_strides(as_cast_by_iterator(swapped, dtype, rule.unpromoted_arg), shape);
    }
    case ResultLayout::kPreserveSelf:
      // empty_like(self, Preserve) is TensorIterator's rule over self alone.
      if (args.empty() || !args[0].isTensor() || args[0].toTensor().sizes() != shape) return {};
      return pointwise_strides(args.slice(0, 1), shape);
    case ResultLayout::kColumnMajor:
      // A solve from the right (X A = B) is computed transposed and comes
      // back row-major.
      if (index == 0 && rule.left_arg >= 0 && rule.left_arg < static_cast<int>(args.size()) &&
          args[rule.left_arg].isBool() && !args[rule.left_arg].toBool()) {
        return {};
      }
      return column_major_strides(shape);
    case ResultLayout::kLstsqSolution: return lstsq_strides(args, shape);
    case ResultLayout::kFftC2C:
    case ResultLayout::kFftR2C:
    case ResultLayout::kFftC2R: return fft_strides(rule.kind, args, shape);
    case ResultLayout::kInputChannelsLast: return pool_strides(args, shape);
    case ResultLayout::kAddr: return addr_strides(args, shape);
    case ResultLayout::kGlu: return glu_strides(args, shape);
    case ResultLayout::kIndex: return index_strides(args, shape);
    case ResultLayout::kCat: return cat_strides(args, shape);
    case ResultLayout::kConvolution:
      // Its gradients (empty when not asked for) are row-major.
      return index == 0 ? conv_strides(args, shape) : std::vector<int64_t>{};
  }
  return {};
}

}  // namespace ttpu::aten
