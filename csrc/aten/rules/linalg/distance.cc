// Lowerings of the pairwise distances: _cdist_forward, _cdist_backward,
// _pdist_forward, _pdist_backward (torch.cdist and F.pdist are
// CompositeImplicitAutograd and reach these).
//
// Semantics from ATen's Distance.cpp and cpu/DistanceOpsKernel.cpp: the p-norm
// of every row difference, with the kernels' special cases p = 0 (count of
// non-zero differences), 1, 2, inf, and the "mm" path of cdist for p = 2
// (_euclidean_dist: [-2 x1, |x1|^2, 1] . [x2, 1, |x2|^2], clamped at 0, square
// root), taken when compute_mode asks for it or, by default, when either side
// has more than 25 rows. The backward's per-element derivative is the
// kernels' *_calc::backward; pdist's pairs i < j come in row-major order.
#include <ATen/ExpandUtils.h>

#include <cmath>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Reducer;
using ir::Value;

Value distance_splat(LoweringContext& ctx, double v, const std::vector<int64_t>& shape, DType dt) {
  return ctx.g().constant(v, {dt, shape});
}

// diff [..., M] reduced over the last dim to the p-norm (the kernels' map /
// reduce / finish).
Value pnorm(LoweringContext& ctx, Value diff, double p) {
  auto& g = ctx.g();
  const auto shape = dims(ctx, diff);
  const DType dt = dtype(ctx, diff);
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  Value a = g.unary(Op::kAbs, diff);
  if (p == 0) {
    Value nz = g.select(g.compare(Cmp::kNE, diff, distance_splat(ctx, 0, shape, dt)),
                        distance_splat(ctx, 1, shape, dt), distance_splat(ctx, 0, shape, dt));
    return reduce(ctx, nz, {last}, false, Reducer::kAdd);
  }
  if (p == 1) return reduce(ctx, a, {last}, false, Reducer::kAdd);
  if (p == 2)
    return g.unary(Op::kSqrt,
                   reduce(ctx, g.binary(Op::kMul, diff, diff), {last}, false, Reducer::kAdd));
  if (std::isinf(p)) {
    // The kernel starts from 0 and takes the maximum.
    Value m = reduce(ctx, a, {last}, false, Reducer::kMax);
    return g.binary(Op::kMax, m, full_like(ctx, m, 0));
  }
  Value s = reduce(ctx, g.binary(Op::kPow, a, distance_splat(ctx, p, shape, dt)), {last}, false,
                   Reducer::kAdd);
  return g.binary(Op::kPow, s, full_like(ctx, s, 1.0 / p));
}

// d dist / d x1 for one coordinate difference `diff` at distance `dist`
// (both shaped alike), times `grad`: the kernels' backward functions.
Value pnorm_grad(LoweringContext& ctx, Value diff, Value dist, Value grad, double p) {
  auto& g = ctx.g();
  const auto shape = dims(ctx, diff);
  const DType dt = dtype(ctx, diff);
  auto c = [&](double v) { return distance_splat(ctx, v, shape, dt); };
  if (p == 0) return c(0);
  Value sign = g.binary(Op::kSub, g.select(g.compare(Cmp::kGT, diff, c(0)), c(1), c(0)),
                        g.select(g.compare(Cmp::kLT, diff, c(0)), c(1), c(0)));
  Value a = g.unary(Op::kAbs, diff);
  Value zero_dist = g.compare(Cmp::kEQ, dist, c(0));
  if (p == 1) return g.binary(Op::kMul, grad, sign);
  if (p == 2)
    return g.select(zero_dist, c(0), g.binary(Op::kDiv, g.binary(Op::kMul, grad, diff), dist));
  if (std::isinf(p)) {
    return g.select(g.compare(Cmp::kEQ, a, dist), g.binary(Op::kMul, grad, sign), c(0));
  }
  if (p < 2) {
    Value r = g.binary(Op::kMul, g.binary(Op::kMul, sign, g.binary(Op::kPow, a, c(p - 1))), grad);
    r = g.binary(Op::kDiv, r, g.binary(Op::kPow, dist, c(p - 1)));
    Value zero = zero_dist;
    if (p < 1) zero = g.binary(Op::kOr, zero, g.compare(Cmp::kEQ, diff, c(0)));
    return g.select(zero, c(0), r);
  }
  Value r = g.binary(Op::kMul, g.binary(Op::kMul, diff, g.binary(Op::kPow, a, c(p - 2))), grad);
  r = g.binary(Op::kDiv, r, g.binary(Op::kPow, dist, c(p - 1)));
  return g.select(zero_dist, c(0), r);
}

// x1 [B, P, M], x2 [B, R, M] -> x1[b, i] - x2[b, j] as [B, P, R, M].
Value pair_diff(LoweringContext& ctx, Value x1, Value x2) {
  auto& g = ctx.g();
  const auto s1 = dims(ctx, x1), s2 = dims(ctx, x2);
  const std::vector<int64_t> shape{s1[0], s1[1], s2[1], s1[2]};
  return g.binary(Op::kSub, g.broadcast_in_dim(x1, shape, {0, 1, 3}),
                  g.broadcast_in_dim(x2, shape, {0, 2, 3}));
}

// The broadcast batch sizes of x1 and x2 (all but their last two dims).
std::vector<int64_t> batch_of(const at::Tensor& x1, const at::Tensor& x2) {
  return at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
}

// t expanded to batch + its last two sizes, flattened to [B, rows, cols].
Value batched(LoweringContext& ctx, const at::Tensor& t, const std::vector<int64_t>& batch) {
  std::vector<int64_t> full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Value v = broadcast_to(ctx, ctx.tensor(t), full);
  return ctx.g().reshape(v, {c10::multiply_integers(batch), t.size(-2), t.size(-1)});
}

// _cdist_forward(x1, x2, p, compute_mode): ATen's cdist_impl.
std::vector<Value> cdist_forward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& x1 = a.tensor(0);
  const at::Tensor& x2 = a.tensor(1);
  const double p = a.real(2);
  const auto mode_arg = a.opt_integer(3);
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()),
              "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()),
              "cdist only supports floating-point dtypes, X2 got: ", x2.scalar_type());
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1),
              "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  const int64_t mode = mode_arg.value_or(0);
  TORCH_CHECK(mode >= 0 && mode <= 2, "possible modes: 0, 1, 2, but was: ", mode);
  const auto batch = batch_of(x1, x2);
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2), c = x1.size(-1);
  std::vector<int64_t> out_shape = batch;
  out_shape.push_back(r1);
  out_shape.push_back(r2);
  const DType dt = to_ir(x1.scalar_type());
  const int64_t b = c10::multiply_integers(batch);
  if (r1 == 0 || r2 == 0 || b == 0 || c == 0) return {g.constant(0, {dt, out_shape})};
  Value v1 = batched(ctx, x1, batch), v2 = batched(ctx, x2, batch);
  if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)))) {
    // _euclidean_dist.
    Value n1 = reduce(ctx, g.binary(Op::kMul, v1, v1), {2}, true, Reducer::kAdd);
    Value n2 = reduce(ctx, g.binary(Op::kMul, v2, v2), {2}, true, Reducer::kAdd);
    Value a1 = g.concatenate({g.binary(Op::kMul, v1, distance_splat(ctx, -2, {b, r1, c}, dt)), n1,
                              distance_splat(ctx, 1, {b, r1, 1}, dt)},
                             2);
    Value a2 = g.concatenate({v2, distance_splat(ctx, 1, {b, r2, 1}, dt), n2}, 2);
    Value r = g.dot_general(a1, a2, {0}, {0}, {2}, {2});
    r = g.unary(Op::kSqrt, g.binary(Op::kMax, r, distance_splat(ctx, 0, {b, r1, r2}, dt)));
    return {g.reshape(r, out_shape)};
  }
  return {g.reshape(pnorm(ctx, pair_diff(ctx, v1, v2), p), out_shape)};
}

// _cdist_backward(grad, x1, x2, p, cdist): the gradient for x1 expanded to the
// broadcast batch (autograd sums it back), sum over j of grad[i, j] *
// d dist(i, j) / d x1[i].
std::vector<Value> cdist_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& x1 = a.tensor(1);
  const at::Tensor& x2 = a.tensor(2);
  const double p = a.real(3);
  const at::Tensor& dist = a.tensor(4);
  const auto batch = batch_of(x1, x2);
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2), c = x1.size(-1);
  std::vector<int64_t> x1_shape = batch;
  x1_shape.push_back(r1);
  x1_shape.push_back(c);
  const DType dt = to_ir(x1.scalar_type());
  const int64_t b = c10::multiply_integers(batch);
  if (r1 == 0 || r2 == 0 || c == 0 || b == 0) return {g.constant(0, {dt, x1.sizes().vec()})};
  Value v1 = batched(ctx, x1, batch), v2 = batched(ctx, x2, batch);
  const std::vector<int64_t> shape{b, r1, r2, c};
  Value gr = g.broadcast_in_dim(g.reshape(ctx.tensor(grad), {b, r1, r2}), shape, {0, 1, 2});
  Value d = g.broadcast_in_dim(g.reshape(ctx.tensor(dist), {b, r1, r2}), shape, {0, 1, 2});
  Value per = pnorm_grad(ctx, pair_diff(ctx, v1, v2), d, gr, p);
  return {g.reshape(reduce(ctx, per, {2}, false, Reducer::kAdd), x1_shape)};
}

// _pdist_forward(self, p): the distances of rows i < j in row-major order.
std::vector<Value> pdist_forward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const double p = a.real(1);
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "pdist only supports floating-point dtypes");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  const int64_t n = self.size(0), m = self.size(1);
  const DType dt = to_ir(self.scalar_type());
  const int64_t pairs = n <= 1 ? 0 : n * (n - 1) / 2;
  if (pairs == 0 || m == 0) return {g.constant(0, {dt, {pairs}})};
  Value x = g.reshape(ctx.tensor(self), {1, n, m});
  Value full = g.reshape(pnorm(ctx, pair_diff(ctx, x, x), p), {n * n});
  std::vector<Value> rows;
  for (int64_t i = 0; i + 1 < n; ++i)
    rows.push_back(g.slice(full, {i * n + i + 1}, {(i + 1) * n}, {1}));
  return {rows.size() == 1 ? rows[0] : g.concatenate(rows, 0)};
}

// The pair vector v [n (n - 1) / 2] as the symmetric [n, n] matrix with a zero
// diagonal.
Value symmetric(LoweringContext& ctx, Value v, int64_t n) {
  auto& g = ctx.g();
  const DType dt = dtype(ctx, v);
  Value zero = ctx.constant(0, dt);
  std::vector<Value> rows;
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = n - 1 - i;
    Value row = len == 0 ? g.constant(0, {dt, {0}}) : g.slice(v, {start}, {start + len}, {1});
    rows.push_back(g.reshape(g.pad(row, zero, {i + 1}, {0}, {0}), {1, n}));
    start += len;
  }
  Value upper = g.concatenate(rows, 0);
  return g.binary(Op::kAdd, upper, g.transpose(upper, {1, 0}));
}

// _pdist_backward(grad, self, p, pdist): row i gathers the derivative of every
// pair it is in (pair (i, j) adds f(x_i - x_j) to i and f(x_j - x_i) to j).
std::vector<Value> pdist_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  const double p = a.real(2);
  const at::Tensor& dist = a.tensor(3);
  const int64_t n = self.size(0), m = self.size(1);
  const DType dt = to_ir(self.scalar_type());
  if (n <= 1 || m == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  Value x = g.reshape(ctx.tensor(self), {1, n, m});
  const std::vector<int64_t> shape{1, n, n, m};
  Value gr = g.broadcast_in_dim(symmetric(ctx, g.reshape(ctx.tensor(grad), {n * (n - 1) / 2}), n),
                                shape, {1, 2});
  Value d = g.broadcast_in_dim(symmetric(ctx, g.reshape(ctx.tensor(dist), {n * (n - 1) / 2}), n),
                               shape, {1, 2});
  Value per = pnorm_grad(ctx, pair_diff(ctx, x, x), d, gr, p);
  return {g.reshape(reduce(ctx, per, {2}, false, Reducer::kAdd), {n, m})};
}

RegisterLowering kDistanceRules[] = {
    {"_cdist_forward", cdist_forward},
    {"_cdist_backward", cdist_backward},
    {"_pdist_forward", pdist_forward},
    {"_pdist_backward", pdist_backward},
};

}  // namespace
}  // namespace ttpu::aten
