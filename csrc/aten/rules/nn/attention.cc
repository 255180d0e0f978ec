// Lowerings of PyTorch's inference fast paths for attention:
// _native_multi_head_attention (nn.MultiheadAttention in eval mode),
// _transformer_encoder_layer_fwd (nn.TransformerEncoderLayer in eval mode) and
// _masked_softmax. They have CPU/CUDA kernels only, so without these rules a
// tpu call went through the CPU fallback. Each call is ONE program here.
//
// Semantics follow ATen's aten/src/ATen/native/transformers/{attention,
// transformer}.cpp and SoftMax.cpp (masked_softmax_cpu):
// - in_proj weight [3D, D] packs q, k, v in that order; q = (x Wq^T + bq) / sqrt(D/H),
//   k = x Wk^T + bk, v = x Wv^T + bv, heads split D as [H, D/H].
// - a mask is True (or nonzero, for a float mask) where attention is NOT allowed.
//   mask_type 0: [L, L] (attn_mask); 1: [B, L] (key padding); 2: [B, H, L, L].
//   A mask that is not 2-D is taken as type 2. A fully masked row gives NaN, as
//   ATen's CPU kernel does.
// - need_weights returns the softmax probabilities, averaged over heads when
//   average_attn_weights ([B, L, L]), else per head ([B, H, L, L]).
// - the encoder layer: norm_first ? x + SA(LN1(x)), then + FFN(LN2(.))
//   : LN1(x + SA(x)), then LN2(. + FFN(.)); FFN = W2 act(W1 x + b1) + b2 with
//   act = attention_gelu (erf form) when use_gelu, else relu.
// bf16/f16 compute in f32 and round where ATen's kernels store a tensor, so
// the roundings match CPU's; the checks repeat ATen's messages in its order.
#include <ATen/ExpandUtils.h>

#include <cmath>

#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;
using ValueList = std::vector<Value>;

// The dtypes of one call: `out` is the activations' dtype, `acc` the one they
// are computed in.
struct Precision {
  DType out, acc;
  // A value stored as `out` and read back: where ATen materializes a bf16
  // tensor. Nothing for f32/f64.
  Value round(LoweringContext& ctx, Value v) const {
    if (out == acc) return v;
    return ctx.g().convert(ctx.g().convert(v, out), acc);
  }
};

Precision precision_of(const at::Tensor& t) {
  const DType out = to_ir(t.scalar_type());
  return {out, acc_dtype(out)};
}

// ATen's nn.Linear path checks (addmm's expand of the bias, then mm's shapes)
// for x [rows, in] and weight [out, in], with their messages.
void check_linear(int64_t rows, int64_t in, const at::Tensor& w, const at::Tensor& b) {
  at::inferExpandGeometry_dimvector(b.sizes(), b.strides(), {rows, w.size(0)});
  TORCH_CHECK(in == w.size(1), "mat1 and mat2 shapes cannot be multiplied (", rows, "x", in,
              " and ", w.size(1), "x", w.size(0), ")");
}

void check_attention_dtypes(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  TORCH_CHECK(x.scalar_type() == w.scalar_type(),
              "mat1 and mat2 must have the same dtype, but got ", x.scalar_type(), " and ",
              w.scalar_type());
  TORCH_CHECK(b.scalar_type() == w.scalar_type(),
              "self and mat2 must have the same dtype, but got ", b.scalar_type(), " and ",
              w.scalar_type());
}

// x [..., in] W^T -> [..., out] (contracting W's storage-inner dim, no transpose).
Value project(LoweringContext& ctx, Value x, Value w) {
  const int64_t last = static_cast<int64_t>(dims(ctx, x).size()) - 1;
  return ctx.g().dot_general(x, w, {}, {}, {last}, {1});
}

Value add_bias(LoweringContext& ctx, Value y, Value b) {
  return ctx.g().binary(Op::kAdd, y, broadcast_to(ctx, b, dims(ctx, y)));
}

Value read(LoweringContext& ctx, const at::Tensor& t, DType dt) {
  return ctx.g().convert(ctx.tensor(t), dt);
}

// nn.Linear on an IR value: x W^T + b, rounded as ATen's addmm result.
Value linear(LoweringContext& ctx, const Precision& p, Value x, const at::Tensor& w,
             const at::Tensor& b) {
  return p.round(ctx, add_bias(ctx, project(ctx, x, read(ctx, w, p.acc)), read(ctx, b, p.acc)));
}

// ------------------------------------------------------------------ masked softmax

// The mask as a bool value broadcast to scores' shape [B, H, L, S], after
// masked_softmax_cpu's checks (`mask_type` as passed; a non-2-D mask or a
// non-4-D input is type 2).
Value mask_for(LoweringContext& ctx, const at::Tensor& mask, std::optional<int64_t> mask_type,
               const std::vector<int64_t>& shape) {
  auto& g = ctx.g();
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (mask.dim() != 2 || rank != 4) mask_type = 2;
  TORCH_CHECK(mask_type.has_value(), "Mask Type should be defined");
  std::vector<int64_t> bdims;
  if (*mask_type == 2) {
    TORCH_CHECK(mask.sizes() == c10::IntArrayRef(shape),
                "For mask_type == 2 mask shape should match input shape");
    for (int64_t d = 0; d < rank; ++d) bdims.push_back(d);
  } else if (*mask_type == 1) {
    TORCH_CHECK(shape[0] == mask.size(0) && shape[2] == mask.size(1),
                "For mask_type == 1 mask shape should be (B, L)");
    bdims = {0, 3};
  } else if (*mask_type == 0) {
    TORCH_CHECK(shape[2] == mask.size(0) && shape[2] == mask.size(1),
                "For mask_type == 0 mask shape should be (L, L)");
    bdims = {2, 3};
  } else {
    TORCH_CHECK(false, "Unknown mask_type ", *mask_type);
  }
  Value m = ctx.tensor(mask);
  if (mask.scalar_type() != at::kBool) {  // ATen's mask.to(kBool): nonzero masks
    m = g.compare(ir::Cmp::kNE, m, full_like(ctx, m, 0));
  }
  return g.broadcast_in_dim(m, shape, bdims);
}

// Softmax over the last dim with masked scores taken as -inf: a masked
// position gets 0, a fully masked row NaN (0 / 0), as on CPU.
Value masked_softmax(LoweringContext& ctx, Value scores, std::optional<Value> mask) {
  auto& g = ctx.g();
  const std::vector<int64_t> shape = dims(ctx, scores);
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  if (mask) {
    scores = g.select(*mask, full_like(ctx, scores, -INFINITY), scores);
  }
  Value m = reduce(ctx, scores, {last}, /*keepdim=*/true, ir::Reducer::kMax);
  Value e = g.unary(Op::kExp, g.binary(Op::kSub, scores, broadcast_to(ctx, m, shape)));
  return g.binary(Op::kDiv, e, sum_broadcast(ctx, e, {last}));
}

// _masked_softmax(self, mask, dim?, mask_type?): a type 0/1 mask broadcasts
// over the scores as CPU's expansion does, for any softmax dim; a dim other
// than the last is moved last and back.
ValueList masked_softmax_rule(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mask = a.tensor(1);
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"masked_softmax\" not implemented for '", self.scalar_type(), "'");
  const Precision p = precision_of(self);
  auto& g = ctx.g();
  Value m = mask_for(ctx, mask, a.opt_integer(3), self.sizes().vec());
  Value x = read(ctx, self, p.acc);
  if (self.dim() == 0) {  // softmax of one element, viewed as [1]
    Value y = masked_softmax(ctx, g.reshape(x, {1}), g.reshape(m, {1}));
    return {g.convert(g.reshape(y, {}), p.out)};
  }
  const int64_t rank = self.dim();
  const int64_t dim = wrap_dim(a.opt_integer(2).value_or(rank - 1), rank);
  if (dim == rank - 1) return {g.convert(masked_softmax(ctx, x, m), p.out)};
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) perm.push_back(d);
  }
  perm.push_back(dim);
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  Value y = masked_softmax(ctx, g.transpose(x, perm), g.transpose(m, perm));
  return {g.convert(g.transpose(y, inverse), p.out)};
}

// ------------------------------------------------------------ multi-head attention

struct Attention {
  const at::Tensor& qkv_weight;
  const at::Tensor& qkv_bias;
  const at::Tensor& proj_weight;
  const at::Tensor& proj_bias;
  int64_t embed_dim, num_heads;
  std::optional<at::Tensor> mask;
  std::optional<int64_t> mask_type;
};

// native_multi_head_attention_cpu's argument checks, in its order.
void check_attention(const Attention& att, const at::Tensor& query, const at::Tensor& key,
                     const at::Tensor& value) {
  const int64_t D = att.embed_dim;
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.size(2) == D, "passed-in embed_dim ", D, " didn't match last dim of query ",
              query.size(2));
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(att.qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", att.qkv_weight.dim(),
              "-D tensor");
  TORCH_CHECK(D * 3 == att.qkv_weight.size(0),
              "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(D == att.qkv_weight.size(1), "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(att.qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", att.qkv_bias.dim(),
              "-D tensor");
  TORCH_CHECK(att.qkv_bias.size(0) == 3 * D,
              "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(att.num_heads > 0 && D % att.num_heads == 0,
              "`embed_dim` must divide evenly by `num_heads`");
  TORCH_CHECK(query.scalar_type() == att.qkv_weight.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", query.dtype(),
              " != ", att.qkv_weight.dtype());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(query.scalar_type()),
                              "\"transform_bias_rescale_qkv\" not implemented for '",
                              query.scalar_type(), "'");
  TORCH_CHECK(att.qkv_bias.scalar_type() == query.scalar_type(), "expected `qkv_bias` dtype ",
              att.qkv_bias.scalar_type(), " to match query's ", query.scalar_type());
  const int64_t rows = query.size(0) * query.size(1);
  TORCH_CHECK(att.proj_weight.dim() == 2, "mat2 must be a matrix, got ", att.proj_weight.dim(),
              "-D tensor");
  check_attention_dtypes(query, att.proj_weight, att.proj_bias);
  check_linear(rows, D, att.proj_weight, att.proj_bias);
}

// [B, L, D] -> [B, H, L, D/H].
Value split_heads(LoweringContext& ctx, Value x, int64_t heads) {
  auto s = dims(ctx, x);
  Value r = ctx.g().reshape(x, {s[0], s[1], heads, s[2] / heads});
  return ctx.g().transpose(r, {0, 2, 1, 3});
}

// Attention of (query, key, value) [B, L, D] in `p.acc`: the projected output
// [B, L, E] and, when asked, the weights (invalid otherwise). `packed`: one
// tensor serves all three (self-attention), projected by one product.
std::pair<Value, Value> attend(LoweringContext& ctx, const Precision& p, const Attention& att,
                               Value q_in, Value k_in, Value v_in, bool packed, bool need_weights,
                               bool average) {
  auto& g = ctx.g();
  const int64_t D = att.embed_dim, H = att.num_heads;
  const auto in = dims(ctx, q_in);
  const int64_t B = in[0], L = in[1];
  Value w = read(ctx, att.qkv_weight, p.acc);
  Value bias = read(ctx, att.qkv_bias, p.acc);
  auto chunk = [&](Value v, int64_t i, int64_t dim) {
    auto s = dims(ctx, v);
    std::vector<int64_t> start(s.size(), 0), limit = s, strides(s.size(), 1);
    start[dim] = i * D;
    limit[dim] = (i + 1) * D;
    return g.slice(v, start, limit, strides);
  };
  Value q, k, v;
  if (packed) {
    Value qkv = p.round(ctx, project(ctx, q_in, w));
    q = chunk(qkv, 0, 2), k = chunk(qkv, 1, 2), v = chunk(qkv, 2, 2);
  } else {
    q = p.round(ctx, project(ctx, q_in, chunk(w, 0, 0)));
    k = p.round(ctx, project(ctx, k_in, chunk(w, 1, 0)));
    v = p.round(ctx, project(ctx, v_in, chunk(w, 2, 0)));
  }
  // ATen's _transform_bias_rescale_qkv: the scale is 1/sqrt(D/H) in the input's dtype.
  const double scale = 1.0 / std::sqrt(static_cast<double>(D / H));
  Value qs = add_bias(ctx, q, chunk(bias, 0, 0));
  qs = g.binary(Op::kMul, qs, g.convert(g.constant(scale, {p.out, dims(ctx, qs)}), p.acc));
  q = split_heads(ctx, p.round(ctx, qs), H);
  k = split_heads(ctx, p.round(ctx, add_bias(ctx, k, chunk(bias, 1, 0))), H);
  v = split_heads(ctx, p.round(ctx, add_bias(ctx, v, chunk(bias, 2, 0))), H);
  Value scores = p.round(ctx, g.dot_general(q, k, {0, 1}, {0, 1}, {3}, {3}));  // [B, H, L, L]
  std::optional<Value> mask;
  if (att.mask) mask = mask_for(ctx, *att.mask, att.mask_type, {B, H, L, L});
  Value probs = p.round(ctx, masked_softmax(ctx, scores, mask));
  Value heads = p.round(ctx, g.dot_general(probs, v, {0, 1}, {0, 1}, {3}, {2}));
  Value merged = g.reshape(g.transpose(heads, {0, 2, 1, 3}), {B, L, D});
  Value out = linear(ctx, p, merged, att.proj_weight, att.proj_bias);
  Value weights;
  if (need_weights) {
    weights = probs;
    if (average) {  // ATen: qkt.sum(1), then /= num_heads, each stored
      Value s = p.round(ctx, reduce(ctx, probs, {1}, /*keepdim=*/false, ir::Reducer::kAdd));
      weights = g.binary(Op::kDiv, s, full_like(ctx, s, static_cast<double>(H)));
    }
  }
  return {out, weights};
}

Attention attention_args(const Args& a, size_t first) {
  return Attention{
      a.tensor(first), a.tensor(first + 1), a.tensor(first + 2), a.tensor(first + 3), 0, 0,
      std::nullopt,    std::nullopt};
}

// _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
// qkv_bias, proj_weight, proj_bias, mask?, need_weights, average_attn_weights,
// mask_type?) -> (out [B, L, E], weights or undefined)
ValueList native_multi_head_attention(LoweringContext& ctx, const Args& a) {
  const at::Tensor& query = a.tensor(0);
  const at::Tensor& key = a.tensor(1);
  const at::Tensor& value = a.tensor(2);
  Attention att = attention_args(a, 5);
  att.embed_dim = a.integer(3);
  att.num_heads = a.integer(4);
  att.mask = a.opt_tensor(9);
  att.mask_type = a.opt_integer(12);
  const bool need_weights = a.boolean(10), average = a.boolean(11);
  check_attention(att, query, key, value);
  const Precision p = precision_of(query);
  auto& g = ctx.g();
  if (query.numel() == 0) {  // ATen returns empty_like(query) and no weights
    return {g.constant(0, {p.out, query.sizes().vec()}), Value{}};
  }
  const bool self = query.is_same(key) && key.is_same(value);
  Value q = read(ctx, query, p.acc);
  Value k = self ? q : read(ctx, key, p.acc);
  Value v = self ? q : read(ctx, value, p.acc);
  auto [out, weights] = attend(ctx, p, att, q, k, v, self, need_weights, average);
  return {g.convert(out, p.out), weights.valid() ? g.convert(weights, p.out) : Value{}};
}

// ------------------------------------------------------------ encoder layer

// Layer norm over the last dim (ATen's native_layer_norm, biased variance).
Value layer_norm_last_dim(LoweringContext& ctx, const Precision& p, Value x, const at::Tensor& w,
                          const at::Tensor& b, double eps) {
  auto& g = ctx.g();
  const auto shape = dims(ctx, x);
  const std::vector<int64_t> last{static_cast<int64_t>(shape.size()) - 1};
  Value dev = g.binary(Op::kSub, x, mean_broadcast(ctx, x, last));
  Value var = mean_broadcast(ctx, g.binary(Op::kMul, dev, dev), last);
  Value rstd = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, full_like(ctx, var, eps)));
  Value y = g.binary(Op::kMul, dev, rstd);
  y = g.binary(Op::kMul, y, broadcast_to(ctx, read(ctx, w, p.acc), shape));
  return p.round(ctx, add_bias(ctx, y, read(ctx, b, p.acc)));
}

void check_norm(const at::Tensor& w, const at::Tensor& b, int64_t D) {
  TORCH_CHECK(w.sizes() == c10::IntArrayRef{D},
              "Expected weight to be of same shape as "
              "normalized_shape, but got weight of shape ",
              w.sizes(), " and normalized_shape = [", D, "]");
  TORCH_CHECK(b.sizes() == c10::IntArrayRef{D},
              "Expected bias to be of same shape as "
              "normalized_shape, but got bias of shape ",
              b.sizes(), " and normalized_shape = [", D, "]");
}

// attention_gelu, erf form: x/2 (1 + erf(x / sqrt(2))).
Value attention_gelu(LoweringContext& ctx, Value x) {
  auto& g = ctx.g();
  Value e = g.unary(Op::kErf, g.binary(Op::kMul, x, full_like(ctx, x, M_SQRT1_2)));
  Value half_x = g.binary(Op::kMul, x, full_like(ctx, x, 0.5));
  return g.binary(Op::kMul, half_x, g.binary(Op::kAdd, e, full_like(ctx, e, 1.0)));
}

// _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
// proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
// norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
// mask?, mask_type?) -> [B, L, D]
ValueList transformer_encoder_layer(LoweringContext& ctx, const Args& a) {
  const at::Tensor& src = a.tensor(0);
  Attention att = attention_args(a, 3);
  att.embed_dim = a.integer(1);
  att.num_heads = a.integer(2);
  att.mask = a.opt_tensor(18);
  att.mask_type = a.opt_integer(19);
  const bool use_gelu = a.boolean(7), norm_first = a.boolean(8);
  const double eps = a.real(9);
  const at::Tensor &n1w = a.tensor(10), &n1b = a.tensor(11), &n2w = a.tensor(12),
                   &n2b = a.tensor(13);
  const at::Tensor &w1 = a.tensor(14), &b1 = a.tensor(15), &w2 = a.tensor(16), &b2 = a.tensor(17);
  const Precision p = precision_of(src);
  auto& g = ctx.g();
  if (src.numel() == 0) return {read(ctx, src, p.out)};  // ATen: src.clone()
  const int64_t D = att.embed_dim;
  if (norm_first) check_norm(n1w, n1b, src.size(-1));
  check_attention(att, src, src, src);
  if (!norm_first) check_norm(n1w, n1b, D);
  check_norm(n2w, n2b, D);
  TORCH_CHECK(w1.dim() == 2, "2d weights expected");
  TORCH_CHECK(w2.dim() == 2, "2d weights expected");
  const int64_t rows = src.size(0) * src.size(1);
  check_attention_dtypes(src, w1, b1);
  check_linear(rows, D, w1, b1);
  check_attention_dtypes(src, w2, b2);
  check_linear(rows, w1.size(0), w2, b2);

  Value x0 = read(ctx, src, p.acc);
  Value x = norm_first ? layer_norm_last_dim(ctx, p, x0, n1w, n1b, eps) : x0;
  Value sa = attend(ctx, p, att, x, x, x, /*packed=*/true, /*need_weights=*/false, true).first;
  x = p.round(ctx, g.binary(Op::kAdd, sa, x0));
  if (!norm_first) x = layer_norm_last_dim(ctx, p, x, n1w, n1b, eps);
  Value residual = x;
  if (norm_first) x = layer_norm_last_dim(ctx, p, x, n2w, n2b, eps);
  Value h = add_bias(ctx, project(ctx, x, read(ctx, w1, p.acc)), read(ctx, b1, p.acc));
  h = use_gelu ? attention_gelu(ctx, h) : g.binary(Op::kMax, h, full_like(ctx, h, 0));
  x = linear(ctx, p, p.round(ctx, h), w2, b2);
  x = p.round(ctx, g.binary(Op::kAdd, x, residual));
  if (!norm_first) x = layer_norm_last_dim(ctx, p, x, n2w, n2b, eps);
  return {g.convert(x, p.out)};
}

RegisterLowering r_mha("_native_multi_head_attention", native_multi_head_attention);
RegisterLowering r_encoder("_transformer_encoder_layer_fwd", transformer_encoder_layer);
RegisterLowering r_masked_softmax("_masked_softmax", masked_softmax_rule);

}  // namespace
}  // namespace ttpu::aten
