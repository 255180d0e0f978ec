// Shared pieces of the decomposition lowerings (see linalg_decomp.h).
#include <ATen/ExpandUtils.h>
#include <c10/util/Exception.h>

#include "aten/deferred_check.h"
#include "aten/rules/linalg/linalg_decomp.h"

namespace ttpu::aten::linalg {

using ir::DType;
using ir::Op;
using ir::Value;

// ---------------------------------------------------------------- checks

void check_matrix(const at::Tensor& t, const std::string& fn, const char* arg) {
  TORCH_CHECK(t.dim() >= 2, fn, ": The input tensor ", arg, " must have at least 2 dimensions.");
}

void check_square(const at::Tensor& t, const std::string& fn, const char* arg) {
  check_matrix(t, fn, arg);
  TORCH_CHECK(t.size(-1) == t.size(-2), fn, ": ", arg,
              " must be batches of square matrices, but they are ", t.size(-2), " by ", t.size(-1),
              " matrices");
}

void check_floating(const at::Tensor& t, const std::string& fn, bool low_precision) {
  const auto st = t.scalar_type();
  TORCH_CHECK(at::isFloatingType(st) || at::isComplexType(st), fn,
              ": Expected a floating point or complex tensor as input. Got ", st);
  if (!low_precision) {
    TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kComplexFloat ||
                    st == at::kComplexDouble,
                fn, ": Low precision dtypes not supported. Got ", st);
  }
}

void check_lapack_dtype(const at::Tensor& t, const char* kernel) {
  const auto st = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(st == at::kFloat || st == at::kDouble || at::isComplexType(st), "\"",
                              kernel, "\" not implemented for '", st, "'");
}

void check_same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& fn,
                      const char* a_name, const char* b_name) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), fn, ": Expected ", a_name, " and ", b_name,
              " to have the same dtype, but found ", a_name, " of type ", a.scalar_type(), " and ",
              b_name, " of type ", b.scalar_type(), " instead");
}

// ---------------------------------------------------------------- shapes

std::vector<int64_t> batch_dims(const std::vector<int64_t>& d) {
  return std::vector<int64_t>(d.begin(), d.end() - 2);
}

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

std::vector<int64_t> broadcast_batch(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  auto r = at::infer_size(a, b);
  return std::vector<int64_t>(r.begin(), r.end());
}

Value expand_batch(LoweringContext& ctx, Value x, const std::vector<int64_t>& batch) {
  auto d = dims(ctx, x);
  std::vector<int64_t> target = batch;
  target.push_back(d[d.size() - 2]);
  target.push_back(d[d.size() - 1]);
  return target == d ? x : broadcast_to(ctx, x, target);
}

// ---------------------------------------------------------------- values

Value mT(LoweringContext& ctx, Value x) {
  const int64_t r = static_cast<int64_t>(dims(ctx, x).size());
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r - 2; ++i) perm.push_back(i);
  perm.push_back(r - 1);
  perm.push_back(r - 2);
  return ctx.g().transpose(x, perm);
}

Value matmul(LoweringContext& ctx, Value a, Value b) {
  const int64_t r = static_cast<int64_t>(dims(ctx, a).size());
  std::vector<int64_t> batch;
  for (int64_t i = 0; i < r - 2; ++i) batch.push_back(i);
  return ctx.g().dot_general(a, b, batch, batch, {r - 1}, {r - 2});
}

Value triangle_mask(LoweringContext& ctx, const std::vector<int64_t>& shape, bool lower,
                    int64_t offset) {
  auto& g = ctx.g();
  const int64_t r = static_cast<int64_t>(shape.size());
  const ir::TensorType t{DType::kI64, shape};
  Value diff = g.binary(Op::kSub, g.iota(t, r - 1), g.iota(t, r - 2));  // col - row
  return g.compare(lower ? ir::Cmp::kLE : ir::Cmp::kGE, diff, g.constant_int(offset, t));
}

Value triangle(LoweringContext& ctx, Value x, bool lower, int64_t offset) {
  const auto d = dims(ctx, x);
  return ctx.g().select(triangle_mask(ctx, d, lower, offset), x, full_like(ctx, x, 0));
}

Value eye(LoweringContext& ctx, DType dtype, const std::vector<int64_t>& batch, int64_t m,
          int64_t n) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  const int64_t r = static_cast<int64_t>(shape.size());
  const ir::TensorType ti{DType::kI64, shape};
  Value on = g.compare(ir::Cmp::kEQ, g.iota(ti, r - 2), g.iota(ti, r - 1));
  const ir::TensorType t{dtype, shape};
  return g.select(on, g.constant(1, t), g.constant(0, t));
}

Value diagonal(LoweringContext& ctx, Value x) {
  auto d = dims(ctx, x);
  const size_t r = d.size();
  const int64_t k = std::min(d[r - 2], d[r - 1]);
  x = block(ctx, x, 0, k, 0, k);
  d = dims(ctx, x);
  const ir::TensorType ti{DType::kI64, d};
  auto& g = ctx.g();
  Value on = g.compare(ir::Cmp::kEQ, g.iota(ti, r - 2), g.iota(ti, r - 1));
  Value masked = g.select(on, x, full_like(ctx, x, 0));
  return reduce(ctx, masked, {static_cast<int64_t>(r) - 1}, false, ir::Reducer::kAdd);
}

Value diag_embed(LoweringContext& ctx, Value d, int64_t m, int64_t n) {
  auto& g = ctx.g();
  auto dd = dims(ctx, d);
  const int64_t k = dd.back();
  std::vector<int64_t> shape(dd.begin(), dd.end() - 1);
  shape.push_back(k);
  shape.push_back(k);
  const int64_t r = static_cast<int64_t>(shape.size());
  std::vector<int64_t> bd;
  for (int64_t i = 0; i < r - 1; ++i) bd.push_back(i);  // d's entries run along the columns
  Value rows = g.broadcast_in_dim(d, shape, bd);
  const ir::TensorType ti{DType::kI64, shape};
  Value on = g.compare(ir::Cmp::kEQ, g.iota(ti, r - 2), g.iota(ti, r - 1));
  Value sq = g.select(on, rows, full_like(ctx, rows, 0));
  return pad_to(ctx, sq, m, n);
}

Value block(LoweringContext& ctx, Value x, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  auto d = dims(ctx, x);
  const size_t r = d.size();
  if (r0 == 0 && c0 == 0 && r1 == d[r - 2] && c1 == d[r - 1]) return x;
  std::vector<int64_t> start(r, 0), limit = d, strides(r, 1);
  start[r - 2] = r0;
  start[r - 1] = c0;
  limit[r - 2] = r1;
  limit[r - 1] = c1;
  return ctx.g().slice(x, start, limit, strides);
}

Value pad_to(LoweringContext& ctx, Value x, int64_t m, int64_t n) {
  auto d = dims(ctx, x);
  const size_t r = d.size();
  if (d[r - 2] == m && d[r - 1] == n) return x;
  std::vector<int64_t> lo(r, 0), hi(r, 0), interior(r, 0);
  hi[r - 2] = m - d[r - 2];
  hi[r - 1] = n - d[r - 1];
  return ctx.g().pad(x, ctx.constant(0, dtype(ctx, x)), lo, hi, interior);
}

Value symmetrize(LoweringContext& ctx, Value x, bool lower) {
  auto& g = ctx.g();
  Value part = triangle(ctx, x, lower, 0);
  Value strict = triangle(ctx, x, lower, lower ? -1 : 1);
  return g.binary(Op::kAdd, part, mT(ctx, strict));
}

// ---------------------------------------------------------------- expanders

std::pair<Value, Value> geqrf(LoweringContext& ctx, Value a) {
  const auto d = dims(ctx, a);
  const size_t r = d.size();
  std::vector<int64_t> taus(d.begin(), d.end() - 2);
  taus.push_back(std::min(d[r - 2], d[r - 1]));
  const DType dt = dtype(ctx, a);
  auto out = ctx.g().custom_call({"Qr", ""}, {a}, {{dt, d}, {dt, taus}});
  return {out[0], out[1]};
}

Value householder_product(LoweringContext& ctx, Value a, Value taus) {
  return ctx.g().custom_call({"ProductOfElementaryHouseholderReflectors", ""}, {a, taus},
                             {ctx.g().type(a)})[0];
}

Value first_failure_info(LoweringContext& ctx, Value bad) {
  auto& g = ctx.g();
  const auto d = dims(ctx, bad);
  const int64_t r = static_cast<int64_t>(d.size());
  const int64_t k = d.back();
  const ir::TensorType ti{DType::kI32, d};
  Value pos = g.binary(Op::kAdd, g.iota(ti, r - 1), g.constant_int(1, ti));
  Value cand = g.select(bad, pos, g.constant_int(k + 1, ti));
  Value first = reduce(ctx, cand, {r - 1}, false, ir::Reducer::kMin);
  const ir::TensorType tb{DType::kI32, dims(ctx, first)};
  Value none = g.compare(ir::Cmp::kEQ, first, g.constant_int(k + 1, tb));
  return g.select(none, g.constant_int(0, tb), first);
}

void check_info(const at::Tensor& info, const std::string& api, bool is_matrix, InfoKind kind) {
  if (info.numel() == 0) return;
  // Read now, as ATen's _linalg_check_errors reads info on CPU and CUDA: the
  // API promises the error at the call (cholesky_ex(check_errors=True), inv),
  // not at some later read.
  const at::Tensor host = info.cpu().contiguous();
  const auto* p = host.data_ptr<int32_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    const int64_t k = p[i];
    if (k == 0) continue;
    const std::string where = is_matrix ? api : api + ": (Batch element " + std::to_string(i) + ")";
    switch (kind) {
      case InfoKind::kCholesky:
        TORCH_CHECK_LINALG(false, where,
                           ": The factorization could not be completed because the input is "
                           "not positive-definite (the leading minor of order ",
                           k, " is not positive-definite).");
      case InfoKind::kInverse:
        TORCH_CHECK_LINALG(false, where, ": The diagonal element ", k,
                           " is zero, the inversion could not be completed because the input "
                           "matrix is singular.");
      case InfoKind::kSolve:
        TORCH_CHECK_LINALG(false, where,
                           ": The solver failed because the input matrix is singular.");
      case InfoKind::kLuFactor:
        TORCH_CHECK(false, api, ": U[", k, ",", k,
                    "] is zero and using it on lu_solve would result in a division by zero. "
                    "If you still want to perform the factorization, consider calling "
                    "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)");
    }
  }
}

std::vector<Value> checked(LoweringContext& ctx, const Build& build, size_t info_index,
                           const std::string& api, bool is_matrix, InfoKind kind) {
  LoweringContext probe(ctx.op(), ctx.device());
  auto tensors = probe.run(build(probe));
  check_info(tensors.at(info_index), api, is_matrix, kind);
  std::vector<Value> out;
  for (const auto& t : tensors) out.push_back(ctx.tensor(t));
  return out;
}

}  // namespace ttpu::aten::linalg
