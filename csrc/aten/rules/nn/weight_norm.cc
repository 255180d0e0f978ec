// Lowerings of weight normalization, _weight_norm_interface and its backward
// (what torch.nn.utils.weight_norm / parametrizations.weight_norm reach when
// the norm is taken over every dim but the first or the last; other dims go
// through ATen's composite norm_except_dim, already lowered).
//
// With n = ||v|| over every dim but `dim` (kept as size 1, g's shape):
//   w = v * g / n
//   grad_g = sum(grad_w * v) / n                  (same reduction)
//   grad_v = (g / n) * (grad_w - v * grad_g / n)
// (Salimans & Kingma, "Weight Normalization", 2016, eq. 3; ATen's
// aten/src/ATen/native/WeightNorm.cpp computes the same in this order.)
// bf16/f16 are computed in f32; the norms come back in g's dtype, f32 for a
// bf16 g, as ATen's CPU kernel returns them.
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

// Every dim of a rank-`rank` tensor but `dim` (all of them for dim -1, the
// whole-tensor norm).
std::vector<int64_t> dims_except(int64_t rank, int64_t dim) {
  std::vector<int64_t> r;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) r.push_back(d);
  }
  return r;
}

DType norm_dtype(const at::Tensor& g) {
  return g.scalar_type() == c10::kBFloat16 ? DType::kF32 : to_ir(g.scalar_type());
}

// The norms [g's shape] in the compute dtype, and v in it.
struct Normed {
  ir::Value v, norm;  // norm keeps v's rank, size 1 but at `dim`
};

Normed norms(LoweringContext& ctx, const at::Tensor& v_t, int64_t dim, DType acc) {
  auto& g = ctx.g();
  ir::Value v = g.convert(ctx.tensor(v_t), acc);
  ir::Value sq = reduce(ctx, g.binary(Op::kMul, v, v), dims_except(v_t.dim(), dim),
                        /*keepdim=*/true, Reducer::kAdd);
  return {v, g.unary(Op::kSqrt, sq)};
}

int64_t checked_dim(const at::Tensor& v, int64_t dim) {
  TORCH_CHECK(dim == -1 || (dim >= 0 && dim < std::max<int64_t>(v.dim(), 1)),
              "_weight_norm_interface: dim ", dim, " out of range for a tensor of rank ", v.dim());
  return dim;
}

// _weight_norm_interface(v, g, dim) -> (w [v's shape, v's dtype], norms [g's shape]).
ValueList weight_norm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& v_t = a.tensor(0);
  const at::Tensor& g_t = a.tensor(1);
  const int64_t dim = checked_dim(v_t, a.integer(2));
  auto& g = ctx.g();
  const DType out = to_ir(v_t.scalar_type());
  const DType acc = acc_dtype(out);
  Normed n = norms(ctx, v_t, dim, acc);
  std::vector<int64_t> shape = v_t.sizes().vec();
  ir::Value gain = g.reshape(g.convert(ctx.tensor(g_t), acc), dims(ctx, n.norm));
  ir::Value scale = g.binary(Op::kDiv, gain, n.norm);
  ir::Value w = g.binary(Op::kMul, n.v, broadcast_to(ctx, scale, shape));
  return {g.convert(w, out), g.convert(g.reshape(n.norm, g_t.sizes().vec()), norm_dtype(g_t))};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
// -> (grad_v [v's shape], grad_g [g's shape]).
ValueList weight_norm_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_t = a.tensor(0);
  const at::Tensor& v_t = a.tensor(1);
  const at::Tensor& g_t = a.tensor(2);
  const at::Tensor& norms_t = a.tensor(3);
  const int64_t dim = checked_dim(v_t, a.integer(4));
  auto& g = ctx.g();
  const DType out = to_ir(v_t.scalar_type());
  const DType acc = acc_dtype(out);
  std::vector<int64_t> shape = v_t.sizes().vec();
  ir::Value v = g.convert(ctx.tensor(v_t), acc);
  ir::Value grad_w = g.convert(ctx.tensor(grad_t), acc);
  ir::Value n = g.convert(ctx.tensor(norms_t), acc);
  std::vector<int64_t> kept = shape;
  for (int64_t d : dims_except(v_t.dim(), dim)) kept[d] = 1;
  n = g.reshape(n, kept);
  ir::Value gain = g.reshape(g.convert(ctx.tensor(g_t), acc), kept);
  ir::Value dot = reduce(ctx, g.binary(Op::kMul, grad_w, v), dims_except(v_t.dim(), dim),
                         /*keepdim=*/true, Reducer::kAdd);
  ir::Value grad_g = g.binary(Op::kDiv, dot, n);
  ir::Value proj = g.binary(Op::kMul, v, broadcast_to(ctx, g.binary(Op::kDiv, grad_g, n), shape));
  ir::Value grad_v = g.binary(Op::kMul, broadcast_to(ctx, g.binary(Op::kDiv, gain, n), shape),
                              g.binary(Op::kSub, grad_w, proj));
  return {g.convert(grad_v, out),
          g.convert(g.reshape(grad_g, g_t.sizes().vec()), to_ir(g_t.scalar_type()))};
}

RegisterLowering r_weight_norm("_weight_norm_interface", weight_norm);
RegisterLowering r_weight_norm_bwd("_weight_norm_interface_backward", weight_norm_backward);

}  // namespace
}  // namespace ttpu::aten
