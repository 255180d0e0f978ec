// Nested tensors (torch.nested, the strided layout) on tpu: the kernels
// nn.TransformerEncoder's eval fast path calls with a padding mask
// (_nested_tensor_from_mask, each layer's _transformer_encoder_layer_fwd on the
// nested value, to_padded_tensor), MultiheadAttention's fast path on a nested
// query, the conversions a user needs to look at the result (.cpu(), .to(),
// clone, unbind, size metadata) and elementwise math on nested values.
//
// A nested tensor is a NestedTensorImpl: a flat tpu buffer plus CPU metadata
// (per-component sizes/strides/offsets); its dispatch key is
// NestedTensorPrivateUse1. ATen registers its nested kernels for
// NestedTensorCPU/CUDA only; those that only call other ATen ops on the buffer
// (no data_ptr of device memory, no CPU-only stub) are registered here too.
//
// The attention kernels run the dense lowering (rules/nn/attention.cc) on the
// padded form with a key-padding mask (mask_type 1), which computes exactly
// what ATen's per-sequence nested path computes for every real row; padded
// rows are computed and dropped. Padding and unpadding are one gather each,
// with row indices built on the host from the sizes (which live on the host),
// so a batch of B sequences costs the same few programs for any B (ATen's
// generic versions pad each component separately: one program per length).
#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/_native_multi_head_attention.h>
#include <ATen/ops/_nested_from_padded_native.h>
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/is_same_size_native.h>
#include <ATen/ops/isnan_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/masked_fill_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/sgn_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <ATen/ops/unbind_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/where_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace ttpu::aten {
namespace {

using at::native::get_nested_tensor_impl;
using at::native::NestedTensorImpl;

// The shape of a nested tensor of B matrices [len_b, D] (the transformer case):
// contiguous, every component 2-D with the same D. Empty when it is not one.
struct Rows {
  std::vector<int64_t> lengths;
  int64_t width = 0;
  int64_t total = 0;  // sum of lengths
  int64_t max_len = 0;
};

std::optional<Rows> rows_of(const at::Tensor& nested) {
  const NestedTensorImpl* nt = get_nested_tensor_impl(nested);
  const at::Tensor& sizes = nt->get_nested_sizes();
  if (sizes.dim() != 2 || sizes.size(0) == 0 || sizes.size(1) != 2 ||
      !at::native::nested_tensor_impl_is_contiguous(nt)) {
    return std::nullopt;
  }
  const int64_t* s = sizes.const_data_ptr<int64_t>();
  Rows r;
  r.width = s[1];
  for (int64_t b = 0; b < sizes.size(0); ++b) {
    if (s[2 * b + 1] != r.width) return std::nullopt;
    r.lengths.push_back(s[2 * b]);
    r.total += s[2 * b];
    r.max_len = std::max(r.max_len, s[2 * b]);
  }
  return r;
}

// A host int64 index vector as a tensor on `device` (one small upload).
at::Tensor upload(const std::vector<int64_t>& v, const c10::Device& device) {
  at::Tensor host = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), host.data_ptr<int64_t>());
  return host.to(device);
}

// [B, T, D] with rows [b, t < len_b] from the nested rows and `padding` elsewhere.
at::Tensor pad_rows(const at::Tensor& nested, const Rows& r, int64_t T, double padding) {
  const at::Tensor buffer = get_nested_tensor_impl(nested)->get_buffer();
  const int64_t B = static_cast<int64_t>(r.lengths.size());
  // Row `total` is the padding row appended below.
  std::vector<int64_t> index(B * T, r.total);
  int64_t offset = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < r.lengths[b]; ++t) index[b * T + t] = offset + t;
    offset += r.lengths[b];
  }
  // The buffer may be longer than its components (a storage shared with more).
  at::Tensor flat = buffer.narrow(0, 0, r.total * r.width).view({r.total, r.width});
  at::Tensor rows = at::constant_pad_nd(flat, {0, 0, 0, 1}, padding);
  return at::index_select(rows, 0, upload(index, buffer.device())).view({B, T, r.width});
}

// The nested tensor of the rows [b, t < len_b] of padded [B, T, D].
at::Tensor unpad_rows(const at::Tensor& padded, const Rows& r, const at::Tensor& sizes) {
  const int64_t B = padded.size(0), T = padded.size(1);
  std::vector<int64_t> index;
  index.reserve(r.total);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < r.lengths[b]; ++t) index.push_back(b * T + t);
  }
  at::Tensor flat = padded.reshape({B * T, padded.size(2)});
  at::Tensor buffer = at::index_select(flat, 0, upload(index, padded.device())).reshape({-1});
  return at::detail::make_tensor<NestedTensorImpl>(std::move(buffer), sizes.clone());
}

// [B, T] bool, True at padding (t >= len_b): the key padding mask (mask_type 1).
at::Tensor padding_mask(const Rows& r, const c10::Device& device) {
  const int64_t B = static_cast<int64_t>(r.lengths.size()), T = r.max_len;
  at::Tensor host = at::empty({B, T}, at::kBool);
  bool* p = host.data_ptr<bool>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) p[b * T + t] = t >= r.lengths[b];
  }
  return host.to(device);
}

// to_padded_tensor(self, padding, output_size?): ATen's checks and result; the
// generic kernel for layouts other than B matrices of one width.
at::Tensor to_padded_tensor(const at::Tensor& self, double padding,
                            at::OptionalIntArrayRef output_size) {
  auto r = rows_of(self);
  if (!r) return at::native::NestedTensor_to_padded_tensor_generic(self, padding, output_size);
  const int64_t B = static_cast<int64_t>(r->lengths.size());
  std::vector<int64_t> out{B, r->max_len, r->width};
  if (output_size.has_value()) {
    TORCH_CHECK(output_size->size() == 3,
                "Length of output_size does not match NestedTensor "
                "dims. Broadcasting is not supported.");
    for (size_t i = 0; i < 3; ++i) {
      TORCH_CHECK((*output_size)[i] >= out[i],
                  "Value in output_size is less than NestedTensor "
                  "padded size. Truncation is not supported.");
    }
    out = output_size->vec();
  }
  at::Tensor padded = pad_rows(self, *r, out[1], padding);
  if (out[0] == B && out[2] == r->width) return padded;
  return at::constant_pad_nd(padded, {0, out[2] - r->width, 0, 0, 0, out[0] - B}, padding);
}

// _nested_from_padded(padded [B, T, D] (or [B, H, T, D/H] with
// fuse_transform_0213), sizes [B, 2] on the host).
at::Tensor nested_from_padded(const at::Tensor& padded, const at::Tensor& sizes,
                              bool fuse_transform_0213) {
  at::Tensor p = padded;
  if (fuse_transform_0213 && p.dim() == 4) {
    p = p.permute({0, 2, 1, 3}).reshape({p.size(0), p.size(2), p.size(1) * p.size(3)});
  }
  const bool simple = sizes.device().is_cpu() && sizes.dim() == 2 && sizes.size(1) == 2 &&
                      p.dim() == 3 && sizes.size(0) == p.size(0) && sizes.size(0) > 0;
  if (simple) {
    const at::Tensor s = sizes.to(at::kLong).contiguous();
    const int64_t* d = s.const_data_ptr<int64_t>();
    Rows r;
    bool fits = true;
    for (int64_t b = 0; b < s.size(0); ++b) {
      fits = fits && d[2 * b] <= p.size(1) && d[2 * b + 1] == p.size(2);
      r.lengths.push_back(d[2 * b]);
      r.total += d[2 * b];
    }
    if (fits) return unpad_rows(p, r, s);
  }
  return at::native::nested_from_padded_generic(padded, sizes, fuse_transform_0213);
}

// ATen's message for a mask with a nested input (native_multi_head_attention).
void check_no_mask(const std::optional<at::Tensor>& mask) {
  TORCH_CHECK(!mask.has_value() || !mask->defined(), "NestedTensor with mask is not supported yet");
}

at::Tensor encoder_layer_nested(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                                const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                                const at::Tensor& proj_weight, const at::Tensor& proj_bias,
                                bool use_gelu, bool norm_first, double eps,
                                const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
                                const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2,
                                const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
                                const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
                                const std::optional<at::Tensor>& mask,
                                std::optional<int64_t> mask_type) {
  const NestedTensorImpl* nt = get_nested_tensor_impl(src);
  if (nt->get_buffer_size() == 0) {  // ATen returns the input's buffer and sizes
    return at::detail::make_tensor<NestedTensorImpl>(nt->get_buffer(), nt->get_nested_sizes());
  }
  TORCH_CHECK(src.dim() == 3, "expected 3-D `query`, got ", src.dim(), "-D tensor");
  check_no_mask(mask);
  auto r = rows_of(src);
  TORCH_CHECK(r.has_value(),
              "_transformer_encoder_layer_fwd: expected a contiguous nested "
              "tensor of [length, embed_dim] sequences");
  at::Tensor padded = pad_rows(src, *r, r->max_len, 0.0);
  at::Tensor out = at::_transformer_encoder_layer_fwd(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
      norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
      ffn_bias_1, ffn_weight_2, ffn_bias_2, padding_mask(*r, padded.device()), 1);
  (void)mask_type;
  return unpad_rows(out, *r, nt->get_nested_sizes());
}

// MultiheadAttention's fast path on a nested query (self-attention only, as
// its Python side allows; no mask). need_weights gives the dense [B, L, L]
// (or [B, H, L, L]) weights of the padded form, zero outside each sequence.
std::tuple<at::Tensor, at::Tensor> mha_nested(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  check_no_mask(mask);
  (void)mask_type;
  TORCH_CHECK(query.is_same(key) && key.is_same(value),
              "_native_multi_head_attention: a nested "
              "query is supported for self-attention (query, key and value the same tensor)");
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  auto r = rows_of(query);
  TORCH_CHECK(r.has_value(),
              "_native_multi_head_attention: expected a contiguous nested tensor "
              "of [length, embed_dim] sequences");
  at::Tensor padded = pad_rows(query, *r, r->max_len, 0.0);
  auto [out, weights] = at::_native_multi_head_attention(
      padded, padded, padded, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
      padding_mask(*r, padded.device()), need_weights, average_attn_weights, 1);
  if (weights.defined()) {
    // ATen's nested softmax leaves rows of padded queries zero.
    at::Tensor pad = padding_mask(*r, padded.device());
    const int64_t B = pad.size(0), T = pad.size(1);
    weights =
        weights.masked_fill(weights.dim() == 4 ? pad.view({B, 1, T, 1}) : pad.view({B, T, 1}), 0);
  }
  const at::Tensor& sizes = get_nested_tensor_impl(query)->get_nested_sizes();
  at::Tensor out_sizes = sizes.clone();
  out_sizes.select(1, 1).fill_(out.size(2));
  return {unpad_rows(out, *r, out_sizes), weights};
}

// The lengths of a [N, L] keep-mask (True = a real element) read on the host,
// after ATen's checks of (t [N, L, D], mask); `aligned` tells whether every
// row is a run of True followed only by False. ATen computes both with device
// ops and reads them back; reading the (small) mask once costs one host read
// and no program.
struct MaskLengths {
  std::vector<int64_t> lengths;
  bool aligned = true;
};

MaskLengths mask_lengths(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of ScalarType Bool, but got ",
              mask.scalar_type(), " instead.");
  TORCH_CHECK(mask.dim() == 2, "Padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "Input should be a 3D tensor, N * L * D");
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1),
              "Mask size should match input size");
  const at::Tensor host = mask.to(at::kCPU).contiguous();
  const bool* m = host.const_data_ptr<bool>();
  const int64_t N = host.size(0), L = host.size(1);
  MaskLengths r;
  for (int64_t n = 0; n < N; ++n) {
    int64_t count = 0, first_false = L;
    for (int64_t l = 0; l < L; ++l) {
      if (m[n * L + l]) {
        ++count;
      } else if (first_false == L) {
        first_false = l;
      }
    }
    r.lengths.push_back(count);
    r.aligned = r.aligned && count == first_false;
  }
  return r;
}

bool nested_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  return mask_lengths(t, mask).aligned;
}

// _nested_tensor_from_mask(t [N, L, D], mask [N, L], mask_check): the nested
// tensor of each row's first length(mask[n]) elements.
at::Tensor nested_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  MaskLengths m = mask_lengths(t, mask);
  TORCH_CHECK(!mask_check || m.aligned, "Mask must be left-aligned without gaps");
  const int64_t N = t.size(0);
  at::Tensor sizes = at::empty({N, 2}, at::kLong);
  int64_t* s = sizes.data_ptr<int64_t>();
  Rows r;
  for (int64_t n = 0; n < N; ++n) {
    s[2 * n] = m.lengths[n];
    s[2 * n + 1] = t.size(2);
    r.lengths.push_back(m.lengths[n]);
    r.total += m.lengths[n];
  }
  if (N == 0) return at::native::nested_from_padded_generic(t, sizes, false);
  return unpad_rows(t, r, sizes);
}

}  // namespace

// Dense inputs: the constructors from a padded tensor and its mask.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask", &nested_from_mask);
  m.impl("_nested_tensor_from_mask_left_aligned", &nested_from_mask_left_aligned);
  m.impl("_nested_from_padded", &nested_from_padded);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", &encoder_layer_nested);
  m.impl("_native_multi_head_attention", &mha_nested);
  m.impl("to_padded_tensor", &to_padded_tensor);
  // ATen's nested kernels that only call ATen ops on the buffer (device-generic).
  m.impl("_to_copy", &at::native::_to_copy_nested);
  m.impl("empty_like", &at::native::empty_like_nested);
  m.impl("clone", &at::native::clone_nested);
  m.impl("copy_", &at::native::copy_nested_);
  m.impl("unbind.int", &at::native::NestedTensor_unbind);
  m.impl("values", &at::native::values_nested);
  m.impl("alias", &at::native::alias_nested);
  m.impl("is_same_size", &at::native::nested_is_same_size);
  m.impl("_nested_tensor_size", &at::native::_nested_tensor_size);
  m.impl("_nested_tensor_strides", &at::native::_nested_tensor_strides);
  m.impl("_nested_tensor_storage_offsets", &at::native::_nested_tensor_storage_offsets);
  // Elementwise math: ATen maps the dense op over the buffer (nested with
  // nested of the same sizes, or with a scalar).
  m.impl("add.Tensor", &at::native::NestedTensor_add_Tensor);
  m.impl("add_.Tensor", &at::native::NestedTensor_add__Tensor);
  m.impl("sub.Tensor", &at::native::NestedTensor_sub_Tensor);
  m.impl("mul.Tensor", &at::native::NestedTensor_mul_Tensor);
  m.impl("mul_.Tensor", &at::native::NestedTensor_mul__Tensor);
  m.impl("mul.Scalar", &at::native::NestedTensor_mul_Scalar);
  m.impl("mul_.Scalar", &at::native::NestedTensor_mul__Scalar);
  m.impl("div.Tensor", &at::native::NestedTensor_div_Tensor);
  m.impl("div.Scalar", &at::native::NestedTensor_div_Scalar);
  m.impl("relu", &at::native::NestedTensor_relu);
  m.impl("relu_", &at::native::NestedTensor_relu_);
  m.impl("gelu", &at::native::NestedTensor_gelu);
  m.impl("gelu_", &at::native::NestedTensor_gelu_);
  m.impl("silu", &at::native::NestedTensor_silu);
  m.impl("silu_", &at::native::NestedTensor_silu_);
  m.impl("tanh", &at::native::NestedTensor_tanh);
  m.impl("tanh_", &at::native::NestedTensor_tanh_);
  m.impl("neg", &at::native::NestedTensor_neg);
  m.impl("neg_", &at::native::NestedTensor_neg_);
  m.impl("abs", &at::native::NestedTensor_abs);
  m.impl("abs_", &at::native::NestedTensor_abs_);
  m.impl("sgn", &at::native::NestedTensor_sgn);
  m.impl("sgn_", &at::native::NestedTensor_sgn_);
  m.impl("sqrt", &at::native::NestedTensor_sqrt);
  m.impl("sin", &at::native::NestedTensor_sin);
  m.impl("cos", &at::native::NestedTensor_cos);
  m.impl("logical_not", &at::native::NestedTensor_logical_not);
  m.impl("logical_not_", &at::native::NestedTensor_logical_not_);
  m.impl("isnan", &at::native::NestedTensor_isnan);
  m.impl("masked_fill.Scalar", &at::native::NestedTensor_masked_fill);
  m.impl("where.self", &at::native::NestedTensor_where);
  m.impl("zero_", &at::native::zero_nested_);
  m.impl("fill_.Scalar",
         static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(&at::native::fill_nested_));
}

}  // namespace ttpu::aten
