// torch.nn.functional.scaled_dot_product_attention as ONE program per call
// (and one for its backward), through the dispatch PyTorch offers out-of-tree
// backends: the `_fused_sdp_choice` stub picks the "overrideable" backend, and
// at::scaled_dot_product_attention then calls
// _scaled_dot_product_fused_attention_overrideable, whose autograd formula calls
// _scaled_dot_product_fused_attention_overrideable_backward.
//
// Why: the math decomposition ATen runs otherwise (q and k scaling, two bmm,
// _safe_softmax, ...) compiles several programs for every new key length, so
// a generate loop over a growing KV cache compiled about five per token for
// attention alone in strict mode.
//
// Semantics are ATen's math path (_scaled_dot_product_attention_math), which
// is what CPU's result is checked against:
// - bf16/f16 inputs are computed in f32 and only the output is rounded (the
//   math path's upcast, unless allowFP16BF16ReductionMathSDP is set, in which
//   case we leave the call to the math path);
// - scores = (q * sf) (k * sf)^T with sf = sqrt(|scale|) (negative for q when
//   scale < 0), scale defaulting to 1/sqrt(E); plus attn_bias (a bool mask has
//   already been turned into 0 / -inf by ATen), broadcast right-aligned;
// - is_causal masks (i, j) for j > i (top-left aligned, L != S included), on
//   top of attn_bias as CPU's flash kernel does for 4-D inputs (the math path
//   refuses the pair: 3-D calls go there and raise its error);
// - a row whose scores are all -inf gives zeros, not NaN (_safe_softmax).
// Calls this does not cover (dropout, GQA with unequal heads, broadcasting
// batch dims, other ranks, empty inputs) go to the math path unchanged.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "aten/growing_buckets.h"
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;
using ValueList = std::vector<Value>;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool is_tpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

bool plain(const at::Tensor& t) {
  return is_tpu(t) && !t.is_nested() && t.layout() == at::kStrided;
}

// Sizes are read as SymInts here and in sdpa_supported() / lowerable(): under
// torch.compile with dynamic shapes (a growing sequence recompiled as
// dynamic) the choice runs on fake tensors with symbolic sizes, where
// size() and numel() raise; a comparison of SymInts guards instead.

// `mask` adds onto scores of shape `target` in place (attn.add_(mask)): it
// broadcasts to it without growing it.
bool broadcasts_into(const at::Tensor& mask, c10::SymIntArrayRef target) {
  if (mask.dim() > static_cast<int64_t>(target.size())) return false;
  const int64_t off = static_cast<int64_t>(target.size()) - mask.dim();
  for (int64_t d = 0; d < mask.dim(); ++d) {
    if (mask.sym_size(d) != 1 && mask.sym_size(d) != target[off + d]) return false;
  }
  return true;
}

std::vector<c10::SymInt> score_shape(const at::Tensor& q, const at::Tensor& k) {
  std::vector<c10::SymInt> s = q.sym_sizes().vec();
  s.back() = k.sym_size(-2);
  return s;
}

// Whether the lowering below computes this call: tpu tensors on one device,
// 3-D or 4-D (what the op's meta function, used by torch.compile, accepts),
// one float dtype, equal batch and head dims (no matmul broadcasting, no GQA
// expansion), nothing empty, and a mask (bool only where ATen converts it
// before the op) that broadcasts into the scores.
bool sdpa_supported(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const std::optional<at::Tensor>& mask, bool bool_mask) {
  if (!plain(q) || !plain(k) || !plain(v)) return false;
  if (k.device() != q.device() || v.device() != q.device()) return false;
  if ((q.dim() != 3 && q.dim() != 4) || k.dim() != q.dim() || v.dim() != q.dim()) return false;
  const auto dt = q.scalar_type();
  if (k.scalar_type() != dt || v.scalar_type() != dt) return false;
  if (dt != at::kFloat && dt != at::kDouble && dt != at::kHalf && dt != at::kBFloat16) {
    return false;
  }
  for (int64_t d = 0; d < q.dim() - 2; ++d) {
    if (k.sym_size(d) != q.sym_size(d) || v.sym_size(d) != q.sym_size(d)) return false;
  }
  if (k.sym_size(-1) != q.sym_size(-1) || v.sym_size(-2) != k.sym_size(-2)) return false;
  if (q.sym_numel() == 0 || k.sym_numel() == 0 || v.sym_numel() == 0) return false;
  if (mask.has_value() && mask->defined()) {
    const at::Tensor& m = *mask;
    if (!plain(m) || m.device() != q.device()) return false;
    if (!(bool_mask && m.scalar_type() == at::kBool) && !at::isFloatingType(m.scalar_type())) {
      return false;
    }
    if (!broadcasts_into(m, score_shape(q, k))) return false;
  }
  return true;
}

// Whether at::scaled_dot_product_attention should call the op: sdpa_supported,
// and where the math path would decide differently, we leave it the call.
bool lowerable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal) {
  if (!sdpa_supported(q, k, v, mask, /*bool_mask=*/true) || dropout_p != 0.0) return false;
  const auto dt = q.scalar_type();
  if ((dt == at::kHalf || dt == at::kBFloat16) &&
      at::globalContext().allowFP16BF16ReductionMathSDP()) {
    return false;  // the math path then computes in the narrow type
  }
  if (is_causal && mask.has_value() && mask->defined()) {
    // CPU's flash kernel (its choice for 4-D inputs and 2-D/4-D masks that
    // need no grad) applies both a mask and is_causal; its math path (the
    // other cases) refuses the pair, so those go there and raise its error.
    // Flash's other conditions (CPU's sdp_utils): equal head dims and unit
    // last strides; without them CPU takes the math path too.
    const at::Tensor& m = *mask;
    if (q.dim() != 4 || (m.dim() != 2 && m.dim() != 4) || m.requires_grad()) return false;
    if (q.sym_size(-1) != k.sym_size(-1) || q.sym_size(-1) != v.sym_size(-1)) return false;
    if (q.sym_stride(-1) != 1 || k.sym_stride(-1) != 1 || v.sym_stride(-1) != 1) return false;
  }
  return true;
}

// The _fused_sdp_choice_stub for PrivateUse1 (and the _fused_sdp_choice op).
// Honours torch.nn.attention.sdpa_kernel: overrideable when enabled and
// lowerable, else math when enabled, else error ("No viable backend").
int64_t sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                   std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && lowerable(q, k, v, mask, dropout_p, is_causal)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  return static_cast<int64_t>(ctx.userEnabledMathSDP() ? at::SDPBackend::math
                                                       : at::SDPBackend::error);
}

// ------------------------------------------------------------------ lowering

struct Inputs {
  DType out, acc;
  int64_t rank;                // of q
  std::vector<int64_t> batch;  // dot_general batch dims (all but the last two)
  double sf_q, sf_k;           // the math path's factors on q and k
  Value qs, ks, v;             // q * sf_q, k * sf_k, v, in acc
  // A bucketed key and value (growing_buckets.h): ks and v hold the whole
  // bucket along the key length, the first `kv_length` keys (a 0-d i64
  // parameter) t's, v zero past them; invalid otherwise.
  Value kv_length;
};

// k and v [..., S, E] of one bucket along S (a dynamic KV cache grown by
// torch.cat with torchtpu.config.growing_buckets on), read whole, v's rows past
// the length zeroed; false (nothing read) when they are not.
bool read_bucketed_kv(LoweringContext& ctx, const at::Tensor& k, const at::Tensor& v, Inputs& in) {
  const int64_t d = in.rank - 2;
  const int64_t cap = bucket_capacity(k, d);
  if (cap == 0 || bucket_capacity(v, d) != cap) return false;
  auto& g = ctx.g();
  auto whole = [&](const at::Tensor& t, const LoweringContext::InBucket& b) {
    std::vector<int64_t> sizes = t.sizes().vec();
    sizes[d] = cap;
    return g.convert(g.reshape(b.value, sizes), in.acc);
  };
  LoweringContext::InBucket kb = ctx.read_in_bucket(k, d);
  LoweringContext::InBucket vb = ctx.read_in_bucket(v, d);
  in.kv_length = kb.length;
  in.ks = whole(k, kb);
  in.ks = g.binary(Op::kMul, in.ks, full_like(ctx, in.ks, in.sf_k));
  in.v = whole(v, vb);
  const std::vector<int64_t> vd = dims(ctx, in.v);
  Value keep =
      g.compare(ir::Cmp::kLT, g.iota({DType::kI64, vd}, d), g.broadcast_in_dim(kb.length, vd, {}));
  in.v = g.select(keep, in.v, full_like(ctx, in.v, 0));
  return true;
}

// `bucket`: a bucketed key and value are read whole (read_bucketed_kv).
Inputs read_inputs(LoweringContext& ctx, const at::Tensor& q, const at::Tensor& k,
                   const at::Tensor& v, std::optional<double> scale, bool bucket = false) {
  auto& g = ctx.g();
  Inputs in;
  in.out = to_ir(q.scalar_type());
  in.acc = acc_dtype(in.out);
  in.rank = q.dim();
  for (int64_t d = 0; d < in.rank - 2; ++d) in.batch.push_back(d);
  // sdp::calculate_scale: 1/sqrt(E) unless given; sqrt of its magnitude
  // goes on both operands, the sign on q.
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  const double sf = std::sqrt(std::abs(s));
  in.sf_q = s < 0 ? -sf : sf;
  in.sf_k = sf;
  auto scaled = [&](const at::Tensor& t, double f) {
    Value x = g.convert(ctx.tensor(t), in.acc);
    return g.binary(Op::kMul, x, full_like(ctx, x, f));
  };
  in.qs = scaled(q, in.sf_q);
  if (bucket && read_bucketed_kv(ctx, k, v, in)) return in;
  in.ks = scaled(k, in.sf_k);
  in.v = g.convert(ctx.tensor(v), in.acc);
  return in;
}

// The softmax probabilities [..., L, S] (zeros on rows of all -inf) and, when
// asked, the rows' log-sum-exp [..., L] (-inf on such rows).
std::pair<Value, Value> probabilities(LoweringContext& ctx, const Inputs& in,
                                      const at::Tensor& bias, bool is_causal, bool want_lse) {
  auto& g = ctx.g();
  const int64_t last = in.rank - 1;
  Value s = g.dot_general(in.qs, in.ks, in.batch, in.batch, {last}, {last});
  const std::vector<int64_t> shape = dims(ctx, s);
  if (bias.defined()) {
    s = g.binary(Op::kAdd, s, broadcast_to(ctx, g.convert(ctx.tensor(bias), in.acc), shape));
  }
  if (in.kv_length.valid()) {  // keys past the length: none
    Value key = g.iota({DType::kI64, shape}, last);
    Value keep = g.compare(ir::Cmp::kLT, key, g.broadcast_in_dim(in.kv_length, shape, {}));
    s = g.select(keep, s, full_like(ctx, s, kNegInf));
  }
  if (is_causal) {
    const int64_t L = shape[last - 1], S = shape[last];
    Value row = g.iota({DType::kI64, {L, S}}, 0);
    Value col = g.iota({DType::kI64, {L, S}}, 1);
    Value keep = g.broadcast_in_dim(g.compare(ir::Cmp::kLE, col, row), shape, {last - 1, last});
    s = g.select(keep, s, full_like(ctx, s, kNegInf));
  }
  Value m = reduce(ctx, s, {last}, /*keepdim=*/true, ir::Reducer::kMax);
  Value dead = g.compare(ir::Cmp::kEQ, m, full_like(ctx, m, kNegInf));
  Value e = g.unary(Op::kExp, g.binary(Op::kSub, s, broadcast_to(ctx, m, shape)));
  Value sum = reduce(ctx, e, {last}, /*keepdim=*/true, ir::Reducer::kAdd);
  Value p = g.binary(Op::kDiv, e, broadcast_to(ctx, sum, shape));
  p = g.select(broadcast_to(ctx, dead, shape), full_like(ctx, p, 0), p);
  Value lse;
  if (want_lse) {
    lse = g.binary(Op::kAdd, m, g.unary(Op::kLog, sum));
    lse = g.select(dead, full_like(ctx, lse, kNegInf), lse);
    std::vector<int64_t> rows(shape.begin(), shape.end() - 1);
    lse = g.reshape(lse, rows);
  }
  return {p, lse};
}

// The checks of a direct call (at::scaled_dot_product_attention only calls
// the op for what sdp_choice accepted).
void check_call(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& bias, double dropout_p) {
  TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0.0,
                              "_scaled_dot_product_fused_attention_overrideable: dropout_p > 0 is "
                              "not supported on tpu (scaled_dot_product_attention uses the math "
                              "path for it)");
  TORCH_CHECK(sdpa_supported(q, k, v, bias, /*bool_mask=*/false),
              "_scaled_dot_product_fused_attention_overrideable: expected tpu query, key and "
              "value on one device, of one float dtype, 3-D or 4-D with equal batch and head "
              "dims, query/key of one head size, key/value of one length, none empty, and a "
              "float attn_bias that broadcasts to the scores; got query ",
              q.sizes(), " ", q.scalar_type(), ", key ", k.sizes(), " ", k.scalar_type(),
              ", value ", v.sizes(), " ", v.scalar_type());
}

// Dense strides for `shape` that lay dims out in the order of `t`'s strides
// (largest first, ties in dim order): what the op's meta functions give the
// output (alloc_with_matching_layout) and the gradients (empty_like of each
// input, at::infer_dense_strides for one with gaps); torch.compile's graphs
// view the results by that layout. It also makes a transposed-heads query
// (Hugging Face's [B, L, H, E] storage, split out of one projection or not)
// give an output whose transpose back is free.
std::vector<int64_t> ordered_strides(const at::Tensor& t, c10::IntArrayRef shape) {
  const int64_t r = t.dim();
  std::vector<int64_t> order(r);
  for (int64_t d = 0; d < r; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  std::vector<int64_t> strides(r);
  int64_t stride = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    strides[order[i]] = stride;
    stride *= std::max<int64_t>(shape[order[i]], 1);
  }
  return strides;
}

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt,
                                 c10::SymInt, at::Tensor, at::Tensor, at::Tensor>;

// _scaled_dot_product_fused_attention_overrideable(query, key, value, attn_bias?,
// dropout_p, is_causal, return_debug_mask, *, scale?) -> (output [..., L, Ev],
// logsumexp f32 [B, H, L] (B = 1 for 3-D), cum_seq_q, cum_seq_k (undefined),
// max_q = L, max_k = S, philox_seed, philox_offset (0-d i64 zeros: no dropout),
// debug_attn_mask (undefined)).
ForwardResult sdpa_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const std::optional<at::Tensor>& bias, double dropout_p, bool is_causal,
                           bool /*return_debug_mask*/, std::optional<double> scale) {
  check_call(q, k, v, bias, dropout_p);
  LoweringContext ctx("aten::_scaled_dot_product_fused_attention_overrideable", q.device().index());
  auto& g = ctx.g();
  const at::Tensor mask = bias.value_or(at::Tensor());
  Inputs in = read_inputs(ctx, q, k, v, scale, /*bucket=*/!mask.defined());
  auto [p, lse] = probabilities(ctx, in, mask, is_causal, true);
  const int64_t last = in.rank - 1;
  Value out = g.convert(g.dot_general(p, in.v, in.batch, in.batch, {last}, {last - 1}), in.out);
  std::vector<int64_t> lse_shape = dims(ctx, lse);
  if (in.rank == 3) lse_shape.insert(lse_shape.begin(), 1);
  lse = g.reshape(g.convert(lse, DType::kF32), lse_shape);
  Value zero = g.constant_int(0, {DType::kI64, {}});
  ctx.set_result_strides(0, ordered_strides(q, dims(ctx, out)));
  auto t = ctx.run({out, lse, zero, zero});
  return {t[0], t[1], at::Tensor(), at::Tensor(), c10::SymInt(q.size(-2)), c10::SymInt(k.size(-2)),
          t[2], t[3], at::Tensor()};
}

// Sums `d` [..., L, S] down to `bias`'s shape (the broadcast's adjoint).
Value reduce_to(LoweringContext& ctx, Value d, const at::Tensor& bias) {
  const std::vector<int64_t> shape = dims(ctx, d);
  const int64_t off = static_cast<int64_t>(shape.size()) - bias.dim();
  std::vector<int64_t> rdims;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < off || (bias.size(i - off) == 1 && shape[i] != 1)) rdims.push_back(i);
  }
  Value r = rdims.empty() ? d : reduce(ctx, d, rdims, /*keepdim=*/false, ir::Reducer::kAdd);
  return ctx.g().reshape(r, bias.sizes().vec());
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query, key,
// value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k,
// max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale?)
// -> (grad_query, grad_key, grad_value, grad_attn_bias): the math path's
// gradients. The probabilities are recomputed from q, k and the bias (exact
// in every dtype, unlike exp(s - logsumexp) from an f32 logsumexp).
ValueList sdpa_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& dout = a.tensor(0);
  const at::Tensor& q = a.tensor(1);
  const at::Tensor& k = a.tensor(2);
  const at::Tensor& v = a.tensor(3);
  const at::Tensor& bias = a.tensor(4);
  const c10::List<bool> mask = a[5].toBoolList();
  const bool is_causal = a.boolean(13);
  std::optional<at::Tensor> opt_bias;
  if (bias.defined()) opt_bias = bias;
  check_call(q, k, v, opt_bias, a.real(12));
  std::vector<int64_t> out_shape = q.sizes().vec();
  out_shape.back() = v.size(-1);
  TORCH_CHECK(dout.sizes() == c10::IntArrayRef(out_shape),
              "_scaled_dot_product_fused_attention_overrideable_backward: grad_out of shape ",
              dout.sizes(), ", expected ", c10::IntArrayRef(out_shape));
  auto& g = ctx.g();
  std::optional<double> scale;
  if (!a.is_none(16)) scale = a.real(16);
  Inputs in = read_inputs(ctx, q, k, v, scale);
  Value p = probabilities(ctx, in, bias, is_causal, false).first;
  Value dy = g.convert(ctx.tensor(dout), in.acc);
  const int64_t last = in.rank - 1;
  ValueList grads(4);
  if (mask.get(2)) {  // dV = P^T dO
    grads[2] = g.convert(g.dot_general(p, dy, in.batch, in.batch, {last - 1}, {last - 1}), in.out);
  }
  if (!mask.get(0) && !mask.get(1) && !(mask.get(3) && bias.defined())) return grads;
  // dS = P * (dP - rowsum(P * dP)), dP = dO V^T (softmax's backward).
  Value dp = g.dot_general(dy, in.v, in.batch, in.batch, {last}, {last});
  Value row = sum_broadcast(ctx, g.binary(Op::kMul, p, dp), {last});
  Value ds = g.binary(Op::kMul, p, g.binary(Op::kSub, dp, row));
  if (mask.get(0)) {  // d(q * sf_q) = dS (k * sf_k), times sf_q
    Value d = g.dot_general(ds, in.ks, in.batch, in.batch, {last}, {last - 1});
    grads[0] = g.convert(g.binary(Op::kMul, d, full_like(ctx, d, in.sf_q)), in.out);
  }
  if (mask.get(1)) {  // d(k * sf_k) = dS^T (q * sf_q), times sf_k
    Value d = g.dot_general(ds, in.qs, in.batch, in.batch, {last - 1}, {last - 1});
    grads[1] = g.convert(g.binary(Op::kMul, d, full_like(ctx, d, in.sf_k)), in.out);
  }
  if (mask.get(3) && bias.defined()) {
    grads[3] = g.convert(reduce_to(ctx, ds, bias), to_ir(bias.scalar_type()));
  }
  for (size_t i = 0; i < 4; ++i) {  // empty_like of each input
    const at::Tensor& input = a.tensor(i + 1);
    if (grads[i].valid()) ctx.set_result_strides(i, ordered_strides(input, input.sizes()));
  }
  return grads;
}

RegisterLowering r_sdpa_backward("_scaled_dot_product_fused_attention_overrideable_backward",
                                 sdpa_backward);

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", &sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", &sdpa_forward);
}

}  // namespace ttpu::aten

namespace at::native {
// What at::scaled_dot_product_attention consults (a DispatchStub keyed on the
// device type, not the _fused_sdp_choice operator).
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &ttpu::aten::sdp_choice)
}  // namespace at::native
