// Lowering of embedding_renorm (and, derived by the generic kernel, the
// in-place embedding_renorm_ that F.embedding calls for max_norm): every row of
// self named by `indices` whose norm_type-norm exceeds max_norm is scaled by
// max_norm / (norm + 1e-7). As in ATen's embedding_renorm_cpu_
// (Embedding.cpp) the norm is computed in self's dtype, the scale in double
// and then applied in self's dtype; a row named twice is scaled once.
#include <cmath>

#include "aten/deferred_check.h"
#include "aten/ops_util.h"
#include "aten/rules/index/index_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Reducer;
using ir::Value;

// ||row||_p over the last dim of x [n, d] (at::norm's special cases 0, inf, -inf).
Value row_norm(LoweringContext& ctx, Value x, double p) {
  auto& g = ctx.g();
  const auto shape = dims(ctx, x);
  const DType dt = dtype(ctx, x);
  Value a = g.unary(Op::kAbs, x);
  if (p == 0) {
    Value nz = g.select(g.compare(Cmp::kNE, x, g.constant(0, {dt, shape})),
                        g.constant(1, {dt, shape}), g.constant(0, {dt, shape}));
    return reduce(ctx, nz, {1}, false, Reducer::kAdd);
  }
  if (std::isinf(p)) return reduce(ctx, a, {1}, false, p > 0 ? Reducer::kMax : Reducer::kMin);
  if (p == 1) return reduce(ctx, a, {1}, false, Reducer::kAdd);
  if (p == 2)
    return g.unary(Op::kSqrt, reduce(ctx, g.binary(Op::kMul, x, x), {1}, false, Reducer::kAdd));
  Value s =
      reduce(ctx, g.binary(Op::kPow, a, g.constant(p, {dt, shape})), {1}, false, Reducer::kAdd);
  return g.binary(Op::kPow, s, g.constant(1.0 / p, {dt, {shape[0]}}));
}

// CPU visits the sorted indices and selects each row (self[i]): the first bad
// one, the smallest below -n or else the largest, raises select()'s
// IndexError. The values live on the device: the check is reported at the
// next host read (aten/deferred_check.h), at once in debug mode.
void check_rows(LoweringContext& ctx, const at::Tensor& indices, const at::Tensor& self) {
  const int64_t n = self.size(0), k = indices.numel();
  LoweringContext probe(ctx.op() + " (index range check)", ctx.device());
  auto& g = probe.g();
  Value v = g.reshape(read_index(probe, indices), {k});
  Value lo = reduce(probe, v, {0}, false, Reducer::kMin);
  Value hi = reduce(probe, v, {0}, false, Reducer::kMax);
  const ir::TensorType s{DType::kI64, {}};
  Value ok = g.binary(Op::kAnd, g.compare(Cmp::kGE, lo, g.constant_int(-n, s)),
                      g.compare(Cmp::kLT, hi, g.constant_int(n, s)));
  auto checked = probe.run({g.concatenate({g.reshape(lo, {1}), g.reshape(hi, {1})}, 0), ok});
  const auto sizes = self.sizes().vec();
  check_device_values(checked[0], checked[1], [n, sizes](const at::Tensor& host) {
    const int64_t lo = host[0].item<int64_t>(), hi = host[1].item<int64_t>();
    const int64_t bad = lo < -n ? lo : hi;
    TORCH_CHECK_INDEX(bad >= -n && bad < n, "select(): index ", bad,
                      " out of range for tensor of size ", c10::IntArrayRef(sizes),
                      " at dimension 0");
  });
}

// embedding_renorm(self, indices, max_norm, norm_type).
std::vector<Value> embedding_renorm(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& indices = a.tensor(1);
  const double max_norm = a.real(2), norm_type = a.real(3);
  TORCH_CHECK(self.dim() == 2, "Expected 2-dimensional tensor, but got ", self.dim(),
              "-dimensional tensor for argument #1 'self' (while checking arguments for "
              "embedding_renorm_)");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "Expected tensor for argument #2 'indices' to have one of the following scalar "
              "types: Long, Int; "
              "but got torch.",
              indices.scalar_type(),
              "Tensor instead (while checking arguments for "
              "embedding_renorm_)");  // CPU names the CPU tensor type
  const int64_t n = self.size(0), d = self.size(1), k = indices.numel();
  Value x = ctx.tensor(self);
  if (k == 0 || self.numel() == 0) return {x};
  check_rows(ctx, indices, self);
  const DType dt = to_ir(self.scalar_type());
  // Rows named by some index (negative ones wrap, as self[i] does).
  Value idx = g.reshape(read_index(ctx, indices), {k});
  const ir::TensorType it{DType::kI64, {k}};
  idx = g.select(g.compare(Cmp::kLT, idx, g.constant_int(0, it)),
                 g.binary(Op::kAdd, idx, g.constant_int(n, it)), idx);
  Value hit =
      g.compare(Cmp::kEQ, g.broadcast_in_dim(idx, {n, k}, {1}), g.iota({DType::kI64, {n, k}}, 0));
  Value named = reduce(ctx, hit, {1}, false, Reducer::kOr);
  Value norm = g.convert(row_norm(ctx, x, norm_type), DType::kF64);
  // max_norm is a parameter, so a new value does not recompile.
  Value limit = g.broadcast_in_dim(ctx.scalar(max_norm, DType::kF64), {n}, {});
  Value scale =
      g.binary(Op::kDiv, limit, g.binary(Op::kAdd, norm, g.constant(1e-7, {DType::kF64, {n}})));
  Value apply = g.binary(Op::kAnd, named, g.compare(Cmp::kGT, norm, limit));
  Value factor = g.select(apply, g.convert(scale, dt), g.constant(1, {dt, {n}}));
  Value scaled = g.binary(Op::kMul, x, g.broadcast_in_dim(factor, {n, d}, {0}));
  return {g.select(g.broadcast_in_dim(apply, {n, d}, {0}), scaled, x)};
}

RegisterLowering kEmbeddingRenormRules[] = {
    {"embedding_renorm", embedding_renorm},
};

}  // namespace
}  // namespace ttpu::aten
