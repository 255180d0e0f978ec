// The symmetric eigendecomposition every eigh, eigvalsh and SVD lowering
// uses: XLA's Jacobi expander ("Eigh" custom call) in float64, then made as
// accurate as LAPACK's syevd.
//
// The expander ends its sweeps once the off-diagonal norm of V^T S V is about
// 1e-8 of the norm (measured on the CPU plugin: a coupling of 1e-8 between
// eigenvalues 1 and 2 is left unrotated, 1e-7 is rotated, at any scale of S).
// That leaves eigenvectors 1e-8 off and S reconstructed to 1e-8 where LAPACK
// gets 1e-15. With B = V^T S V = D + E, each pair (i, j) has the tangent of
// its 2x2 Jacobi rotation (Golub & Van Loan, Matrix Computations, 4th ed.,
// section 8.5.2):
//   t_ij = 2 e_ij sgn(d_j - d_i) / (|d_j - d_i| + hypot(d_j - d_i, 2 e_ij)),
// e_ij / (d_j - d_i) to first order; T is antisymmetric.
// - Separated pairs (|t| <= 0.1) all rotate at once: V (I + T), made
//   orthonormal again by QR. Each pass squares what is left of their error.
// - Near-degenerate pairs (|t| > 0.1) would carry the others' corrections
//   along with a large rotation, so they are solved apart: the groups they
//   join (connected components of the near-degenerate relation) form a
//   block-diagonal C = B on each group, each group's diagonal shifted by its
//   smallest d, zero elsewhere, whose couplings are now large against C's
//   norm, and the expander runs again on C: V <- V Q_C.
// Then one more pass of the first kind, the eigenvalues as diag(V^T S V), and
// both sorted ascending, as LAPACK returns them.
#include <limits>

#include "aten/rules/linalg/linalg_decomp.h"

namespace ttpu::aten::linalg {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;

// broadcast_in_dim dims that lay a [..., n] vector along the columns
// ([.., i, j] = x_j) or the rows ([.., i, j] = x_i) of a [..., n, n] matrix.
std::vector<int64_t> vector_dims(int64_t r, bool along_columns) {
  std::vector<int64_t> bd;
  for (int64_t i = 0; i + 2 < r; ++i) bd.push_back(i);
  bd.push_back(along_columns ? r - 1 : r - 2);
  return bd;
}

Value jacobi_call(LoweringContext& ctx, Value s64, bool lower) {
  const auto d = dims(ctx, s64);
  std::vector<int64_t> w_dims(d.begin(), d.end() - 1);
  // Sweeps until the off-diagonal norm is below tol * the norm, at most 100
  // (JAX's TPU eigh passes the same "lower,sort,max_iter,tol").
  const std::string config = std::string(lower ? "1" : "0") + ",1,100,1e-15";
  return ctx.g().custom_call({"Eigh", config}, {s64}, {{DType::kF64, d}, {DType::kF64, w_dims}})[0];
}

// Q of the QR of x [..., n, n], its columns' signs chosen so that R's
// diagonal is positive.
Value orthonormal_columns(LoweringContext& ctx, Value x) {
  auto& g = ctx.g();
  const auto d = dims(ctx, x);
  auto [packed, taus] = geqrf(ctx, x);
  Value q = householder_product(ctx, packed, taus);
  Value r_diag = diagonal(ctx, packed);
  Value sign = g.select(g.compare(ir::Cmp::kLT, r_diag, full_like(ctx, r_diag, 0)),
                        full_like(ctx, r_diag, -1), full_like(ctx, r_diag, 1));
  const int64_t r = static_cast<int64_t>(d.size());
  return g.binary(Op::kMul, q, g.broadcast_in_dim(sign, d, vector_dims(r, true)));
}

struct Pairs {
  Value b;          // V^T S V
  Value d;          // its diagonal [..., n]
  Value t;          // the rotations' tangents (file comment)
  Value separated;  // i != j, e_ij != 0, |t_ij| <= 0.1
  Value close;      // i != j, e_ij != 0, |t_ij| > 0.1
};

Pairs pairs_of(LoweringContext& ctx, Value s, Value v) {
  auto& g = ctx.g();
  const auto d = dims(ctx, v);
  const int64_t r = static_cast<int64_t>(d.size());
  Pairs p;
  p.b = matmul(ctx, matmul(ctx, mT(ctx, v), s), v);
  p.d = diagonal(ctx, p.b);
  Value diff = g.binary(Op::kSub, g.broadcast_in_dim(p.d, d, vector_dims(r, true)),
                        g.broadcast_in_dim(p.d, d, vector_dims(r, false)));
  const ir::TensorType ti{DType::kI64, d};
  Value on_diag = g.compare(ir::Cmp::kEQ, g.iota(ti, r - 2), g.iota(ti, r - 1));
  Value zero = full_like(ctx, p.b, 0);
  Value two_e = g.binary(Op::kMul, g.select(on_diag, zero, p.b), full_like(ctx, p.b, 2));
  Value sgn = g.select(g.compare(ir::Cmp::kLT, diff, zero), full_like(ctx, p.b, -1),
                       full_like(ctx, p.b, 1));
  Value hyp = g.unary(Op::kSqrt, g.binary(Op::kAdd, g.binary(Op::kMul, diff, diff),
                                          g.binary(Op::kMul, two_e, two_e)));
  p.t = g.binary(Op::kDiv, g.binary(Op::kMul, two_e, sgn),
                 g.binary(Op::kAdd, g.unary(Op::kAbs, diff), hyp));
  Value coupled = g.compare(ir::Cmp::kNE, two_e, zero);
  Value small = g.compare(ir::Cmp::kLE, g.unary(Op::kAbs, p.t), full_like(ctx, p.b, 0.1));
  p.separated = g.binary(Op::kAnd, coupled, small);
  p.close = g.binary(Op::kAnd, coupled, g.unary(Op::kNot, small));
  return p;
}

Value rotate_separated(LoweringContext& ctx, Value s, Value v) {
  auto& g = ctx.g();
  const auto d = dims(ctx, v);
  Pairs p = pairs_of(ctx, s, v);
  Value step = g.select(p.separated, p.t, full_like(ctx, p.t, 0));
  Value id = eye(ctx, DType::kF64, batch_dims(d), d[d.size() - 2], d.back());
  return orthonormal_columns(ctx, matmul(ctx, v, g.binary(Op::kAdd, id, step)));
}

Value solve_close_groups(LoweringContext& ctx, Value s, Value v) {
  auto& g = ctx.g();
  const auto d = dims(ctx, v);
  const int64_t r = static_cast<int64_t>(d.size()), n = d.back();
  Pairs p = pairs_of(ctx, s, v);
  Value zero = full_like(ctx, p.b, 0), one = full_like(ctx, p.b, 1);
  Value id = eye(ctx, DType::kF64, batch_dims(d), n, n);
  // Reachability by squaring: ceil(log2 n) products join chains of any length.
  Value reach = g.select(p.close, one, id);
  for (int64_t span = 1; span < n; span *= 2) {
    Value two_steps = matmul(ctx, reach, reach);
    reach = g.select(g.compare(ir::Cmp::kGT, two_steps, zero), one, zero);
  }
  Value in_group = g.compare(ir::Cmp::kGT, reach, zero);
  // Each group's smallest d, on every row of the group.
  Value inf = full_like(ctx, p.b, std::numeric_limits<double>::infinity());
  Value d_cols = g.broadcast_in_dim(p.d, d, vector_dims(r, true));
  Value shift = reduce(ctx, g.select(in_group, d_cols, inf), {r - 1}, false, ir::Reducer::kMin);
  Value shifted = g.binary(Op::kSub, p.b, diag_embed(ctx, shift, n, n));
  Value c = g.select(in_group, shifted, zero);
  return matmul(ctx, v, jacobi_call(ctx, c, true));
}

}  // namespace

std::pair<Value, Value> eigh(LoweringContext& ctx, Value a, bool lower) {
  auto& g = ctx.g();
  const DType dt = dtype(ctx, a);
  const auto d = dims(ctx, a);
  const int64_t r = static_cast<int64_t>(d.size());
  Value a64 = g.convert(a, DType::kF64);
  Value s = symmetrize(ctx, a64, lower);
  Value v = jacobi_call(ctx, a64, lower);
  for (int pass = 0; pass < 2; ++pass) v = rotate_separated(ctx, s, v);
  v = rotate_separated(ctx, s, solve_close_groups(ctx, s, v));
  Value w = diagonal(ctx, matmul(ctx, matmul(ctx, mT(ctx, v), s), v));
  auto sorted = g.sort({g.broadcast_in_dim(w, d, vector_dims(r, true)), v}, r - 1, ir::Cmp::kLT);
  return {g.convert(diagonal(ctx, sorted[0]), dt), g.convert(sorted[1], dt)};
}

}  // namespace ttpu::aten::linalg
