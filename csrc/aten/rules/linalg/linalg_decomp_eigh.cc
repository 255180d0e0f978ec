// Lowerings of the symmetric eigendecomposition and the SVD: _linalg_eigh and
// _linalg_svd, which linalg.eigh/eigvalsh, svd, svdvals, matrix_rank, pinv,
// matrix_norm, cond and norm('nuc') reach after decomposition, and
// linalg_lstsq, solved through the SVD.
//
// eigh is XLA's Jacobi expander ("Eigh" custom call), run in float64 so the
// float32 results are as accurate as LAPACK's syevd. XLA has no SVD expander,
// so the SVD of A [p, q] is built from it:
//   A^T A = V diag(w) V^T   (eigh, float64, columns reordered descending)
//   A V = Q R               (Householder QR of the first min(p, q) columns;
//                            R is diagonal up to rounding because the
//                            columns of A V are orthogonal)
//   A = (Q D) |R| V^T,  D = sign(diag R)
// so S = |diag R| and U = Q D, whose columns stay orthonormal even for zero
// singular values (QR completes the basis), and U S V^T reproduces A to
// float64 rounding. Singular values and eigenvalues match LAPACK's to
// rounding; singular vectors and eigenvectors are unique only up to sign (and
// rotation within repeated values), and these signs are the Jacobi method's,
// not LAPACK's.
#include "aten/rules/linalg/linalg_decomp.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;
using namespace linalg;  // NOLINT: the shared matrix helpers

std::vector<Value> linalg_eigh(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::string uplo = a[1].toStringRef();
  const bool compute_v = a.boolean(2);
  check_square(self, "linalg.eigh");
  check_floating(self, "linalg.eigh");
  TORCH_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u",
              "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  check_lapack_dtype(self, "linalg_eigh_cpu");
  auto& g = ctx.g();
  Value v = ctx.tensor(self);
  const auto d = dims(ctx, v);
  const DType dt = dtype(ctx, v);
  Value no_vectors = g.constant(0, {dt, {0}});
  std::vector<int64_t> w_dims(d.begin(), d.end() - 1);
  if (numel(d) == 0) return {g.constant(0, {dt, w_dims}), compute_v ? v : no_vectors};
  auto [w, vectors] = eigh(ctx, v, uplo == "L" || uplo == "l");
  return {w, compute_v ? vectors : no_vectors};
}

// {U, S, Vh} of w [..., p, q] in float64 (see the file comment), k = min(p, q):
// U [p, k] ([p, p] when full), S [k], Vh [k, q] ([q, q] when full). For a
// wide w the last q - p columns of w V are zero and only the first p enter
// the QR.
std::vector<Value> svd_gram(LoweringContext& ctx, Value w, bool full) {
  auto& g = ctx.g();
  const auto d = dims(ctx, w);
  const size_t r = d.size();
  const int64_t p = d[r - 2], q = d[r - 1], k = std::min(p, q);
  const auto batch = batch_dims(d);
  Value v = eigh(ctx, matmul(ctx, mT(ctx, w), w), true).second;
  v = g.reverse(v, {static_cast<int64_t>(r) - 1});  // descending eigenvalues
  Value b = block(ctx, matmul(ctx, w, v), 0, p, 0, k);
  auto [packed, taus] = geqrf(ctx, b);
  Value diag = diagonal(ctx, packed);  // [..., k]
  Value s = g.unary(Op::kAbs, diag);
  Value sign = g.select(g.compare(ir::Cmp::kLT, diag, full_like(ctx, diag, 0)),
                        full_like(ctx, diag, -1), full_like(ctx, diag, 1));
  const int64_t cols = full ? p : k;
  Value q_mat = householder_product(ctx, pad_to(ctx, packed, p, cols), taus);
  if (cols > k) {
    std::vector<int64_t> lo(r - 1, 0), hi(r - 1, 0), interior(r - 1, 0);
    hi.back() = cols - k;
    sign = g.pad(sign, ctx.constant(1, DType::kF64), lo, hi, interior);
  }
  std::vector<int64_t> bd;
  for (size_t i = 0; i + 2 < r; ++i) bd.push_back(static_cast<int64_t>(i));
  bd.push_back(static_cast<int64_t>(r) - 1);  // the sign scales columns
  std::vector<int64_t> u_dims = batch;
  u_dims.push_back(p);
  u_dims.push_back(cols);
  Value u = g.binary(Op::kMul, q_mat, g.broadcast_in_dim(sign, u_dims, bd));
  Value vh = mT(ctx, v);
  return {u, s, full ? vh : block(ctx, vh, 0, k, 0, q)};
}

std::vector<Value> linalg_svd(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool full = a.boolean(1), compute_uv = a.boolean(2);
  check_matrix(self, "linalg.svd");
  check_floating(self, "linalg.svd");
  TORCH_CHECK(a.is_none(3),
              "torch.linalg.svd: keyword argument `driver=` is only supported on "
              "CUDA inputs with cuSOLVER backend.");
  check_lapack_dtype(self, "linalg_svd_cpu");
  auto& g = ctx.g();
  Value x = ctx.tensor(self);
  const auto d = dims(ctx, x);
  const auto batch = batch_dims(d);
  const DType dt = dtype(ctx, x);
  const int64_t m = self.size(-2), n = self.size(-1), k = std::min(m, n);
  Value none = g.constant(0, {dt, {0}});
  auto shaped = [&](int64_t rows, int64_t cols) {
    std::vector<int64_t> s = batch;
    s.push_back(rows);
    s.push_back(cols);
    return s;
  };
  std::vector<int64_t> s_dims = batch;
  s_dims.push_back(k);
  if (numel(d) == 0) {
    Value s = g.constant(0, {dt, s_dims});
    if (!compute_uv) return {none, s, none};
    Value u = full ? eye(ctx, dt, batch, m, m) : g.constant(0, {dt, shaped(m, k)});
    Value vh = full ? eye(ctx, dt, batch, n, n) : g.constant(0, {dt, shaped(k, n)});
    return {u, s, vh};
  }
  // A wide A goes through A^T = U S Vh, A = Vh^T S U^T. (Either way the signs
  // are not LAPACK's; this way happens to agree with gesdd more often on
  // PyTorch's low-rank SVD samples.)
  Value w = g.convert(x, DType::kF64);
  const bool wide = m < n;
  auto usv = svd_gram(ctx, wide ? mT(ctx, w) : w, full);
  Value s = g.convert(usv[1], dt);
  if (!compute_uv) return {none, s, none};
  Value u = wide ? mT(ctx, usv[2]) : usv[0];
  Value vh = wide ? mT(ctx, usv[0]) : usv[2];
  return {g.convert(u, dt), s, g.convert(vh, dt)};
}

// Least squares through the SVD (float64): X = V diag(1/s) U^T B over the
// singular values above rcond * s_max, the minimum-norm solution every LAPACK
// driver returns for a full-rank A (gels assumes full rank and inverts all of
// them; gelsy, gelsd and gelss cut at rcond, default eps * max(m, n)).
// Returns {solution [.., n, k], squared residual norms [.., k], rank i64 [..],
// singular values [.., min(m, n)]}, all float64 but the rank.
std::vector<Value> lstsq_values(LoweringContext& ctx, const at::Tensor& self, const at::Tensor& b,
                                const c10::IValue& rcond_arg, bool gels) {
  auto& g = ctx.g();
  const DType dt = DType::kF64;
  const int64_t m = self.size(-2), n = self.size(-1), k = std::min(m, n);
  const auto batch =
      broadcast_batch(std::vector<int64_t>(self.sizes().begin(), self.sizes().end() - 2),
                      std::vector<int64_t>(b.sizes().begin(), b.sizes().end() - 2));
  Value x = expand_batch(ctx, g.convert(ctx.tensor(self), dt), batch);
  Value vb = expand_batch(ctx, g.convert(ctx.tensor(b), dt), batch);
  const int64_t cols = b.size(-1);
  const int64_t r = static_cast<int64_t>(batch.size()) + 2;
  auto shaped = [&](std::vector<int64_t> tail) {
    std::vector<int64_t> s = batch;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  if (numel(shaped({m, n, cols})) == 0) {
    return {g.constant(0, {dt, shaped({n, cols})}), g.constant(0, {dt, shaped({cols})}),
            g.constant_int(0, {DType::kI64, batch}), g.constant(0, {dt, shaped({k})})};
  }
  const bool wide = m < n;
  auto usv = svd_gram(ctx, wide ? mT(ctx, x) : x, false);
  Value u = wide ? mT(ctx, usv[2]) : usv[0];   // [m, k]
  Value vh = wide ? mT(ctx, usv[0]) : usv[2];  // [k, n]
  Value sv = usv[1];
  const double eps =
      self.scalar_type() == at::kDouble ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  Value rcond = rcond_arg.isNone() ? ctx.constant(eps * static_cast<double>(std::max(m, n)), dt)
                                   : ctx.scalar(rcond_arg.toScalar(), dt);
  Value smax = reduce(ctx, sv, {r - 2}, true, ir::Reducer::kMax);
  Value cut = g.binary(Op::kMul, broadcast_to(ctx, rcond, dims(ctx, smax)), smax);
  Value keep = g.compare(ir::Cmp::kGT, sv, broadcast_to(ctx, cut, dims(ctx, sv)));
  Value reciprocal = g.binary(Op::kDiv, full_like(ctx, sv, 1), sv);
  Value inv = gels ? reciprocal : g.select(keep, reciprocal, full_like(ctx, sv, 0));
  Value rank = reduce(ctx, g.convert(keep, DType::kI64), {r - 2}, false, ir::Reducer::kAdd);
  std::vector<int64_t> bd;
  for (int64_t i = 0; i < r - 1; ++i) bd.push_back(i);  // inv scales the rows
  Value ub = matmul(ctx, mT(ctx, u), vb);               // [k, cols]
  Value scaled = g.binary(Op::kMul, ub, g.broadcast_in_dim(inv, shaped({k, cols}), bd));
  Value sol = matmul(ctx, mT(ctx, vh), scaled);
  Value diff = g.binary(Op::kSub, matmul(ctx, x, sol), vb);
  Value res = reduce(ctx, g.binary(Op::kMul, diff, diff), {r - 2}, false, ir::Reducer::kAdd);
  return {sol, res, rank, sv};
}

std::vector<Value> linalg_lstsq(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& other = a.tensor(1);
  const char* fn = "torch.linalg.lstsq";
  TORCH_CHECK(self.dim() >= 2, fn, ": input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 1, fn, ": other must have at least 1 dimension.");
  check_floating(self, "linalg.lstsq");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), fn,
              ": Expected input and other to have the same dtype, but got input's dtype ",
              self.scalar_type(), " and other's dtype ", other.scalar_type());
  const std::string driver = a.is_none(3) ? "gelsy" : std::string(a[3].toStringRef());
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss", fn,
              ": parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  // CPU's order and messages: other has the dims of input or one fewer, and a
  // vector right-hand side names its last dim in the size check.
  const int64_t dim_diff = self.dim() - other.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1, fn,
              ": input.dim() must be greater or equal to other.dim() and "
              "(input.dim() - other.dim()) <= 1");
  const bool vector_case =
      other.dim() == 1 ||
      (other.dim() == self.dim() - 1 && other.sizes() == self.sizes().slice(0, self.dim() - 1));
  const at::Tensor b = vector_case ? other.unsqueeze(-1) : other;
  TORCH_CHECK(self.size(-2) == b.size(-2), fn,
              vector_case ? ": input.size(-2) should match other.size(-1)"
                          : ": input.size(-2) should match other.size(-2)");
  check_lapack_dtype(self, "linalg_lstsq_cpu");
  auto& g = ctx.g();
  const DType out_dt = to_ir(self.scalar_type());
  const bool gels = driver == "gels";
  const int64_t m = self.size(-2), n = self.size(-1);
  // CPU returns residuals when m > n, except for gelsy, and for gelsd/gelss
  // only if every matrix has full rank: that needs the ranks on the host.
  bool residuals = m > n && driver != "gelsy";
  if (residuals && !gels) {
    // The ranks decide the residuals' shape: computed and read on the host
    // first, by a program of their own (this one reads none of its values).
    LoweringContext probe(ctx.op() + " (rank)", ctx.device());
    auto ranks = probe.run({lstsq_values(probe, self, b, a[2], gels)[2]});
    residuals = ranks[0].cpu().eq(n).all().item<bool>();
  }
  std::vector<Value> v = lstsq_values(ctx, self, b, a[2], gels);
  Value empty = g.constant(0, {out_dt, {0}});
  Value sol = g.convert(v[0], out_dt);
  Value res = g.convert(v[1], out_dt);
  if (vector_case) {
    auto sd = dims(ctx, sol);
    sd.pop_back();
    sol = g.reshape(sol, sd);
    auto rd = dims(ctx, res);
    rd.pop_back();
    res = g.reshape(res, rd);
  }
  Value rank = gels ? g.constant_int(0, {DType::kI64, {0}}) : v[2];
  Value sv = driver == "gelsd" || driver == "gelss" ? g.convert(v[3], out_dt) : empty;
  return {sol, residuals ? res : empty, rank, sv};
}

RegisterLowering r_eigh("_linalg_eigh", linalg_eigh);
RegisterLowering r_svd("_linalg_svd", linalg_svd);
RegisterLowering r_lstsq("linalg_lstsq", linalg_lstsq);

}  // namespace
}  // namespace ttpu::aten
