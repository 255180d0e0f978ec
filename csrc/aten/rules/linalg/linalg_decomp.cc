// Lowerings of the Cholesky, triangular-solve and QR families (cholesky,
// linalg_cholesky_ex, cholesky_inverse, _cholesky_solve_helper,
// triangular_solve, linalg_solve_triangular, geqrf, linalg_qr,
// linalg_householder_product, ormqr) and linalg_matrix_exp. The
// factorizations are XLA's own (stablehlo.cholesky, stablehlo.triangular_solve,
// and the "Qr" / "ProductOfElementaryHouseholderReflectors" custom calls, which
// XLA expands when it compiles; see ir/graph_linalg.cc). XLA's Householder QR uses
// LAPACK's reflector convention (geqrf / orgqr), so its packed form and taus
// match CPU's up to rounding.
//
// Argument checks repeat the CPU kernels' (BatchLinearAlgebra.cpp,
// LinearAlgebraUtils.h) with their text; CPU's LAPACK kernels have no
// half-precision instantiation, so those raise NotImplementedError as on CPU.
#include <cmath>

#include "aten/rules/linalg/linalg_decomp.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;
using namespace linalg;  // NOLINT: the shared matrix helpers

ir::LinalgFlags flags(bool left, bool lower, bool unit, bool transpose) {
  ir::LinalgFlags f;
  f.left_side = left;
  f.lower = lower;
  f.unit_diagonal = unit;
  f.transpose_a = transpose;
  return f;
}

bool has_zero_dim(LoweringContext& ctx, Value v) { return numel(dims(ctx, v)) == 0; }

// ---------------------------------------------------------------- Cholesky

// Per matrix (bool, batch shape): every entry of x [..., n, n] is finite.
Value all_finite(LoweringContext& ctx, Value x) {
  const int64_t r = static_cast<int64_t>(dims(ctx, x).size());
  Value bad = ctx.g().unary(Op::kNot, ctx.g().unary(Op::kIsFinite, x));
  Value any_bad = reduce(ctx, bad, {r - 2, r - 1}, false, ir::Reducer::kOr);
  return ctx.g().unary(Op::kNot, any_bad);
}

// (factor, info) of the symmetric matrix read from a's lower (upper) triangle:
// L lower-triangular with A = L L^T, or U = L^T for `upper`; info (i32, batch
// shape) is LAPACK potrf's: the order of the first leading minor that is not
// positive definite, else 0.
//
// XLA's expander returns an all-NaN factor when A is not positive definite,
// which says whether but not where. Since every leading minor of a positive
// definite matrix is positive definite, the failing order is found by
// bisection: ceil(log2 n) more factorizations of A's leading k x k block
// completed with the identity (k per batch element).
std::pair<Value, Value> cholesky_core(LoweringContext& ctx, Value a, bool upper) {
  auto& g = ctx.g();
  const auto d = dims(ctx, a);
  const auto batch = batch_dims(d);
  const ir::TensorType ti{DType::kI32, batch};
  if (numel(d) == 0) return {a, g.constant_int(0, ti)};
  const int64_t n = d.back();
  const int64_t r = static_cast<int64_t>(d.size());
  Value sym = symmetrize(ctx, a, !upper);
  Value l = triangle(ctx, g.cholesky(sym, true), true);
  Value ok = all_finite(ctx, l);
  Value lo = g.constant_int(0, ti), hi = g.constant_int(n, ti);
  const ir::TensorType tm{DType::kI32, d};
  Value row = g.iota(tm, r - 2), col = g.iota(tm, r - 1);
  Value id = eye(ctx, dtype(ctx, a), batch, n, n);
  std::vector<int64_t> bd;
  for (int64_t i = 0; i < r - 2; ++i) bd.push_back(i);
  for (int64_t span = n; span > 1; span = (span + 1) / 2) {
    Value mid = g.binary(Op::kDiv, g.binary(Op::kAdd, lo, hi), g.constant_int(2, ti));
    Value k = g.broadcast_in_dim(mid, d, bd);
    Value inside =
        g.binary(Op::kAnd, g.compare(ir::Cmp::kLT, row, k), g.compare(ir::Cmp::kLT, col, k));
    Value minor_ok = all_finite(ctx, g.cholesky(g.select(inside, sym, id), true));
    lo = g.select(minor_ok, mid, lo);
    hi = g.select(minor_ok, hi, mid);
  }
  Value info = g.select(ok, g.constant_int(0, ti), hi);
  return {upper ? mT(ctx, l) : l, info};
}

void check_cholesky_input(const at::Tensor& self, const char* fn) {
  check_square(self, fn);
  check_floating(self, fn);
  check_lapack_dtype(self, "cholesky_cpu");
}

std::vector<Value> linalg_cholesky_ex(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool upper = a.boolean(1), check_errors = a.boolean(2);
  check_cholesky_input(self, "linalg.cholesky");
  auto build = [&](LoweringContext& c) -> std::vector<Value> {
    auto [l, info] = cholesky_core(c, c.tensor(self), upper);
    return {l, info};
  };
  if (!check_errors) return build(ctx);
  return checked(ctx, build, 1, "linalg.cholesky_ex", self.dim() == 2, InfoKind::kCholesky);
}

// torch.cholesky (deprecated) always raises on a matrix that is not positive
// definite.
std::vector<Value> cholesky(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool upper = a.boolean(1);
  check_square(self, "cholesky");
  check_lapack_dtype(self, "cholesky_cpu");
  auto build = [&](LoweringContext& c) -> std::vector<Value> {
    auto [l, info] = cholesky_core(c, c.tensor(self), upper);
    return {l, info};
  };
  return {checked(ctx, build, 1, "cholesky", self.dim() == 2, InfoKind::kCholesky)[0]};
}

// inverse(A) for A = L L^T (or U^T U): L^-T L^-1 (LAPACK potri). A zero on the
// factor's diagonal is LAPACK trtri's singular error.
std::vector<Value> cholesky_inverse(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool upper = a.boolean(1);
  check_square(self, "cholesky_inverse");
  check_lapack_dtype(self, "cholesky_inverse_out_cpu");
  auto build = [&](LoweringContext& c) -> std::vector<Value> {
    auto& g = c.g();
    Value f = c.tensor(self);
    const auto d = dims(c, f);
    const auto batch = batch_dims(d);
    if (numel(d) == 0) return {f, g.constant_int(0, {DType::kI32, batch})};
    const int64_t n = d.back();
    Value tri = triangle(c, f, !upper);
    Value id = eye(c, dtype(c, f), batch, n, n);
    // lower: X = L^-1, inverse = X^T X; upper: Y = U^-1, inverse = Y Y^T.
    Value x = g.triangular_solve(tri, id, flags(true, !upper, false, false));
    Value inv = upper ? matmul(c, x, mT(c, x)) : matmul(c, mT(c, x), x);
    Value diag = diagonal(c, tri);
    Value info = first_failure_info(c, g.compare(ir::Cmp::kEQ, diag, full_like(c, diag, 0)));
    return {inv, info};
  };
  return {checked(ctx, build, 1, "cholesky_inverse", self.dim() == 2, InfoKind::kInverse)[0]};
}

// X = A^-1 B for A = L L^T (or U^T U), B and the factor already broadcast by
// cholesky_solve: two triangular solves (LAPACK potrs).
std::vector<Value> cholesky_solve_helper(LoweringContext& ctx, const Args& a) {
  const at::Tensor& b = a.tensor(0);
  const at::Tensor& factor = a.tensor(1);
  const bool upper = a.boolean(2);
  check_lapack_dtype(b, "cholesky_solve_cpu");
  auto& g = ctx.g();
  Value vb = ctx.tensor(b);
  if (has_zero_dim(ctx, vb)) return {vb};
  Value f = ctx.tensor(factor);
  Value y = g.triangular_solve(f, vb, flags(true, !upper, false, upper));
  return {g.triangular_solve(f, y, flags(true, !upper, false, !upper))};
}

// ---------------------------------------------------------------- triangular

std::vector<Value> triangular_solve(LoweringContext& ctx, const Args& a) {
  const at::Tensor& b = a.tensor(0);
  const at::Tensor& m = a.tensor(1);
  const bool upper = a.boolean(2), transpose = a.boolean(3), unit = a.boolean(4);
  TORCH_CHECK(b.dim() >= 2,
              "torch.triangular_solve: Expected b to have at least 2 dimensions, "
              "but it has ",
              b.dim(), " dimensions instead");
  TORCH_CHECK(m.dim() >= 2,
              "torch.triangular_solve: Expected A to have at least 2 dimensions, "
              "but it has ",
              m.dim(), " dimensions instead");
  TORCH_CHECK(m.size(-1) == m.size(-2), "A must be batches of square matrices, but they are ",
              m.size(-2), " by ", m.size(-1), " matrices");
  TORCH_CHECK(m.size(-1) == b.size(-2),
              "Incompatible matrix sizes for triangular_solve: each A "
              "matrix is ",
              m.size(-1), " by ", m.size(-1), " but each b matrix is ", b.size(-2), " by ",
              b.size(-1));
  check_same_dtype(b, m, "triangular_solve", "b", "A");
  check_lapack_dtype(b, "triangular_solve_cpu");
  const auto batch = broadcast_batch(std::vector<int64_t>(b.sizes().begin(), b.sizes().end() - 2),
                                     std::vector<int64_t>(m.sizes().begin(), m.sizes().end() - 2));
  Value vb = expand_batch(ctx, ctx.tensor(b), batch);
  Value vm = expand_batch(ctx, ctx.tensor(m), batch);
  if (has_zero_dim(ctx, vb) || has_zero_dim(ctx, vm)) return {vb, vm};
  return {ctx.g().triangular_solve(vm, vb, flags(true, !upper, unit, transpose)), vm};
}

std::vector<Value> linalg_solve_triangular(LoweringContext& ctx, const Args& a) {
  const at::Tensor& m = a.tensor(0);
  const at::Tensor& b = a.tensor(1);
  const bool upper = a.boolean(2), left = a.boolean(3), unit = a.boolean(4);
  const char* fn = "linalg.solve_triangular";
  check_square(m, fn);
  check_matrix(b, fn, "B");
  check_same_dtype(m, b, fn);
  check_floating(m, fn);
  TORCH_CHECK(left ? m.size(-1) == b.size(-2) : b.size(-1) == m.size(-1), fn,
              ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B",
              " (", m.size(-2), "x", m.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  check_lapack_dtype(m, "triangular_solve_cpu");
  const auto batch = broadcast_batch(std::vector<int64_t>(b.sizes().begin(), b.sizes().end() - 2),
                                     std::vector<int64_t>(m.sizes().begin(), m.sizes().end() - 2));
  Value vb = expand_batch(ctx, ctx.tensor(b), batch);
  if (has_zero_dim(ctx, vb)) return {vb};
  Value vm = expand_batch(ctx, ctx.tensor(m), batch);
  return {ctx.g().triangular_solve(vm, vb, flags(left, !upper, unit, false))};
}

// ---------------------------------------------------------------- QR

std::vector<Value> geqrf_rule(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  check_lapack_dtype(self, "geqrf_cpu");
  Value v = ctx.tensor(self);
  if (has_zero_dim(ctx, v)) {
    auto taus = batch_dims(dims(ctx, v));
    taus.push_back(std::min(self.size(-2), self.size(-1)));
    return {v, ctx.g().constant(0, {dtype(ctx, v), taus})};
  }
  auto [packed, taus] = linalg::geqrf(ctx, v);
  return {packed, taus};
}

// Q of the reflectors packed in `packed` [..., m, n] (taus [..., k]): its first
// `cols` columns (cols <= m), padding the reflectors with identity ones.
Value q_from_reflectors(LoweringContext& ctx, Value packed, Value taus, int64_t cols) {
  const auto d = dims(ctx, packed);
  const int64_t m = d[d.size() - 2], n = d.back();
  Value a = n > cols ? block(ctx, packed, 0, m, 0, cols) : pad_to(ctx, packed, m, cols);
  return householder_product(ctx, a, taus);
}

std::vector<Value> linalg_qr(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::string mode = a[1].toStringRef();
  check_matrix(self, "linalg.qr");
  check_floating(self, "linalg.qr");
  TORCH_CHECK(mode == "reduced" || mode == "r" || mode == "complete",
              "qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
  check_lapack_dtype(self, "geqrf_cpu");
  auto& g = ctx.g();
  Value v = ctx.tensor(self);
  const auto d = dims(ctx, v);
  const auto batch = batch_dims(d);
  const int64_t m = d[d.size() - 2], n = d.back(), k = std::min(m, n);
  const DType dt = dtype(ctx, v);
  const bool complete = mode == "complete";
  const int64_t q_cols = complete ? m : k;
  Value empty_q = g.constant(0, {dt, {0}});
  if (numel(d) == 0) {
    auto r_dims = batch;
    r_dims.push_back(complete ? m : k);
    r_dims.push_back(n);
    Value r = g.constant(0, {dt, r_dims});
    if (mode == "r") return {empty_q, r};
    return {eye(ctx, dt, batch, m, q_cols), r};
  }
  auto [packed, taus] = linalg::geqrf(ctx, v);
  Value r = triangle(ctx, complete ? packed : block(ctx, packed, 0, k, 0, n), false);
  if (mode == "r") return {empty_q, r};
  return {q_from_reflectors(ctx, packed, taus, q_cols), r};
}

std::vector<Value> householder_product_rule(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const at::Tensor& tau = a.tensor(1);
  const char* fn = "torch.linalg.householder_product";
  TORCH_CHECK(input.dim() >= 2, fn, ": input must have at least 2 dimensions.");
  TORCH_CHECK(input.size(-2) >= input.size(-1), fn,
              ": input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(input.size(-1) >= tau.size(-1), fn,
              ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(input.dim() - tau.dim() == 1, fn,
              ": Expected tau to have one dimension less than input, but got tau.ndim equal to ",
              tau.dim(), " and input.ndim is equal to ", input.dim());
  TORCH_CHECK(input.sizes().slice(0, input.dim() - 2) == tau.sizes().slice(0, tau.dim() - 1), fn,
              ": Expected batch dimensions of tau to be equal to input.shape[:-2], but got ",
              tau.sizes().slice(0, tau.dim() - 1));
  // CPU's own wording for this op (not the "Expected input and tau..." of ormqr's).
  TORCH_CHECK(tau.scalar_type() == input.scalar_type(), fn, ": tau dtype ", tau.scalar_type(),
              " does not match input dtype ", input.scalar_type());
  check_lapack_dtype(input, "orgqr_cpu");
  Value v = ctx.tensor(input);
  const auto d = dims(ctx, v);
  if (numel(d) == 0) return {v};
  if (tau.size(-1) == 0) return {eye(ctx, dtype(ctx, v), batch_dims(d), d[d.size() - 2], d.back())};
  return {householder_product(ctx, v, ctx.tensor(tau))};
}

// op(Q) C or C op(Q), Q the full square product of input's reflectors (LAPACK
// ormqr), formed explicitly then multiplied.
std::vector<Value> ormqr(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const at::Tensor& tau = a.tensor(1);
  const at::Tensor& other = a.tensor(2);
  const bool left = a.boolean(3), transpose = a.boolean(4);
  const char* fn = "torch.ormqr";
  TORCH_CHECK(input.dim() >= 2, fn, ": input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 2, fn, ": other must have at least 2 dimensions.");
  // CPU's checks (PyTorch 2.13), in its order and words.
  const int64_t side = left ? -2 : -1;
  TORCH_CHECK(other.size(side) == input.size(-2), fn, ": other.shape[", side,
              "] must be equal to input.shape[-2]");
  TORCH_CHECK(tau.size(-1) == std::min(other.size(side), input.size(-1)), fn,
              ": tau.shape[-1] must be equal to min(other.shape[", side, "], input.shape[-1])");
  TORCH_CHECK(input.dim() - tau.dim() == 1, fn,
              ": Expected tau to have one dimension less than input, but got tau.ndim equal to ",
              tau.dim(), " and input.ndim is equal to ", input.dim());
  TORCH_CHECK(input.dim() == other.dim(), fn,
              ": Expected other to have the same number of dimensions as input, but got "
              "other.ndim equal to ",
              other.dim(), " and input.ndim is equal to ", input.dim());
  const auto batch = input.sizes().slice(0, input.dim() - 2);
  TORCH_CHECK(tau.sizes().slice(0, tau.dim() - 1) == batch, fn,
              ": Expected batch dimensions of tau to be equal to input.shape[:-2], but got ",
              tau.sizes().slice(0, tau.dim() - 1));
  TORCH_CHECK(other.sizes().slice(0, other.dim() - 2) == batch, fn,
              ": Expected batch dimensions of other to be equal to input.shape[:-2], but got ",
              other.sizes().slice(0, other.dim() - 2));
  // CPU's wording, its missing space after "dtype" included.
  for (const auto& [t, name] : {std::pair<const at::Tensor*, const char*>{&tau, "tau"},
                                std::pair<const at::Tensor*, const char*>{&other, "other"}}) {
    TORCH_CHECK(input.scalar_type() == t->scalar_type(), fn, ": Expected input and ", name,
                " to have the same dtype, but input has dtype", input.scalar_type(), " and ", name,
                " has dtype ", t->scalar_type());
  }
  check_lapack_dtype(input, "ormqr_cpu");
  Value c = ctx.tensor(other);
  if (has_zero_dim(ctx, c)) return {c};
  Value v = ctx.tensor(input);
  const auto d = dims(ctx, v);
  const int64_t m = d[d.size() - 2];
  Value q = tau.size(-1) == 0 ? eye(ctx, dtype(ctx, v), batch_dims(d), m, m)
                              : q_from_reflectors(ctx, v, ctx.tensor(tau), m);
  if (transpose) q = mT(ctx, q);
  return {left ? matmul(ctx, q, c) : matmul(ctx, c, q)};
}

// ---------------------------------------------------------------- matrix_exp

// Scaling and squaring as CPU does it (LinearAlgebra.cpp, mexp_impl; Bader,
// Blanes and Casas, "Computing the matrix exponential with an optimized Taylor
// polynomial approximation", Mathematics 7(12), 2019): s = max(0,
// ceil(log2(|A|_1 / theta_18))) with theta_18 = 3.010066362817634 (float32;
// 1.090863719290036 for float64), exp(A) = T18(A / 2^s)^(2^s). The degree-18
// Taylor polynomial is evaluated by Horner's rule in float64 (its truncation
// error at norm theta_18 is below float32 rounding), then each matrix squared
// s times, in one loop (stablehlo::matrix_exp_loop) that runs to the largest s
// of the batch. A finite float64 norm gives s <= 1025; a norm that is not
// finite gives s = 0 (the result is NaN or inf either way). (CPU picks a lower
// degree for small norms, accurate to the same rounding.)
constexpr int64_t kMaxSquarings = 1025;  // s of the largest finite float64 norm

std::vector<Value> linalg_matrix_exp(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  check_square(self, "linalg.matrix_exp");
  check_floating(self, "linalg.matrix_exp");
  auto& g = ctx.g();
  Value v = ctx.tensor(self);
  const DType dt = dtype(ctx, v);
  const auto d = dims(ctx, v);
  if (numel(d) == 0) return {v};
  const int64_t n = d.back();
  const int64_t r = static_cast<int64_t>(d.size());
  if (n == 1) return {g.unary(Op::kExp, v)};
  const auto batch = batch_dims(d);
  Value x = g.convert(v, DType::kF64);
  const double theta = self.scalar_type() == at::kDouble ? 1.090863719290036 : 3.010066362817634;
  Value norm = reduce(ctx, reduce(ctx, g.unary(Op::kAbs, x), {r - 2}, false, ir::Reducer::kAdd),
                      {r - 2}, false, ir::Reducer::kMax);  // max column sum, batch shape
  const ir::TensorType tb{DType::kF64, batch};
  Value s =
      g.unary(Op::kCeil,
              g.binary(Op::kDiv, g.unary(Op::kLog, g.binary(Op::kDiv, norm, g.constant(theta, tb))),
                       g.constant(std::log(2.0), tb)));
  s = g.binary(Op::kMax, g.constant(0, tb), s);                      // log(0) = -inf gives 0
  s = g.select(g.unary(Op::kIsFinite, norm), s, g.constant(0, tb));  // NaN, inf: no squaring
  std::vector<int64_t> bd;
  for (int64_t i = 0; i < r - 2; ++i) bd.push_back(i);
  Value scale = g.binary(Op::kPow, g.constant(2, tb), s);
  x = g.binary(Op::kDiv, x, g.broadcast_in_dim(scale, d, bd));
  constexpr int64_t kDegree = stablehlo::kMatrixExpTaylorDegree;
  Value count = loop_count(ctx, g.convert(s, DType::kI64), 0, kMaxSquarings);
  count = g.binary(Op::kAdd, count, g.constant_int(kDegree, {DType::kI64, {}}));
  Value p = g.call(stablehlo::matrix_exp_loop({DType::kF64, d}),
                   {x, g.broadcast_in_dim(s, d, bd), count})[0];
  return {g.convert(p, dt)};
}

RegisterLowering r_cholesky("cholesky", cholesky);
RegisterLowering r_cholesky_ex("linalg_cholesky_ex", linalg_cholesky_ex);
RegisterLowering r_cholesky_inverse("cholesky_inverse", cholesky_inverse);
RegisterLowering r_cholesky_solve("_cholesky_solve_helper", cholesky_solve_helper);
RegisterLowering r_triangular_solve("triangular_solve", triangular_solve);
RegisterLowering r_solve_triangular("linalg_solve_triangular", linalg_solve_triangular);
RegisterLowering r_geqrf("geqrf", geqrf_rule);
RegisterLowering r_qr("linalg_qr", linalg_qr);
RegisterLowering r_householder("linalg_householder_product", householder_product_rule);
RegisterLowering r_ormqr("ormqr", ormqr);
RegisterLowering r_matrix_exp("linalg_matrix_exp", linalg_matrix_exp);

}  // namespace
}  // namespace ttpu::aten
