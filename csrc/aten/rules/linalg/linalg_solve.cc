// Lowerings of the LU family: linalg_lu_factor_ex, linalg_lu, lu_unpack,
// linalg_lu_solve, _linalg_det, _linalg_slogdet, linalg_inv_ex and
// _linalg_solve_ex (linalg.solve, inv, det, slogdet, logdet, matrix_power,
// tensorinv and tensorsolve reach these).
//
// XLA has no LU expander, so LU with partial pivoting is a stablehlo.while over
// the columns (stablehlo/loop_kernels.h: LAPACK getf2's right-looking
// algorithm: pick the first row of largest |a| in the column, swap, scale,
// rank-1 update). Its pivots are LAPACK's (same choice rule, 1-based), so LU,
// pivots, P, L and U match CPU's up to rounding and ties. Each iteration
// touches the whole matrix (no dynamic shapes: O(m n) work a column), so
// matrices with more than kMaxOnDevice columns run these ops through the
// counted CPU fallback instead.
#include <ATen/core/dispatch/Dispatcher.h>

#include <limits>

#include "aten/fallback.h"
#include "aten/rules/linalg/linalg_decomp.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;
using namespace linalg;  // NOLINT: the shared matrix helpers

// Largest min(m, n) factored on the device. A 64x64 f64 solve runs in 0.9 ms
// on XLA:CPU (CPU PyTorch: 0.1 ms), 128x128 f32 in 7.9 ms (CPU: 0.18 ms),
// 512x512 in 306 ms (CPU: 2.5 ms): past 64 the fallback's copies cost less.
constexpr int64_t kMaxOnDevice = 64;

bool on_device(const at::Tensor& a) { return std::min(a.size(-2), a.size(-1)) <= kMaxOnDevice; }

// Runs aten::<name>.<overload> through the counted CPU fallback and reads its
// tpu results into `ctx`.
std::vector<Value> on_cpu(LoweringContext& ctx, const char* name, const char* overload,
                          std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack(std::move(args));
  run_cpu_fallback(op, &stack);
  // Reading tensors made by tpu ops that ran inside this rule is fragile (to
  // be fixed in the runtime): in fused mode this program cannot read the
  // fallback's fresh uploads directly (the pending graph's arguments and
  // parameters disagree) but can read a lowered copy of them; in strict mode
  // the copy is what goes wrong (read back with another dtype).
  const bool fused = runtime::Runtime::get().mode() == runtime::EagerMode::kFused;
  std::vector<Value> out;
  for (const auto& v : stack) {
    out.push_back(ctx.tensor(fused ? v.toTensor().clone() : v.toTensor()));
  }
  return out;
}

struct Lu {
  Value lu;      // [..., m, n]
  Value pivots;  // i32 [..., k], 1-based (LAPACK ipiv)
  Value perm;    // i64 [..., m]: row i of P^T A is row perm[i] of A
  Value info;    // i32 [...]: first j with U[j, j] == 0 (1-based), else 0
};

// P^T A = L U by partial pivoting, a loop over k = min(m, n) columns
// (stablehlo::lu_factor_loop).
Lu lu_factor(LoweringContext& ctx, Value a) {
  auto& g = ctx.g();
  const auto d = dims(ctx, a);
  const auto batch = batch_dims(d);
  const int64_t m = d[d.size() - 2], n = d.back(), k = std::min(m, n);
  const int64_t bsz = numel(batch);
  std::vector<int64_t> piv_dims = batch;
  piv_dims.push_back(k);
  std::vector<int64_t> perm_dims = batch;
  perm_dims.push_back(m);
  Lu out;
  if (k == 0 || bsz == 0) {
    out.lu = a;
    out.perm = g.iota({DType::kI64, perm_dims}, static_cast<int64_t>(batch.size()));
    out.pivots = g.constant_int(0, {DType::kI32, piv_dims});
    out.info = g.constant_int(0, {DType::kI32, batch});
    return out;
  }
  const ir::TensorType x{dtype(ctx, a), {bsz, m, n}};
  auto r = g.call(stablehlo::lu_factor_loop(x), {g.reshape(a, x.dims)});
  out.lu = g.reshape(r[0], d);
  out.perm = g.reshape(r[1], perm_dims);
  Value piv =
      g.binary(Op::kAdd, g.convert(r[2], DType::kI32), g.constant_int(1, {DType::kI32, {bsz, k}}));
  out.pivots = g.reshape(piv, piv_dims);
  out.info = g.reshape(first_failure_info(ctx, r[3]), batch);
  return out;
}

// i64 [B, m] row order from LAPACK pivots i32 [B, k] (1-based): the swaps
// (j, pivots[j] - 1) applied in order to 0..m-1.
Value perm_from_pivots(LoweringContext& ctx, Value pivots, int64_t m) {
  auto& g = ctx.g();
  const auto d = dims(ctx, pivots);
  const int64_t bsz = d[0], k = d[1];
  if (bsz == 0 || k == 0) return g.iota({DType::kI64, {bsz, m}}, 1);
  Value piv =
      g.binary(Op::kSub, g.convert(pivots, DType::kI64), g.constant_int(1, {DType::kI64, d}));
  return g.call(stablehlo::pivots_to_permutation_loop(bsz, m, k), {piv})[0];
}

// P [..., m, m] with A = P L U from the row order perm [..., m]:
// P[r, c] = (perm[c] == r).
Value permutation_matrix(LoweringContext& ctx, Value perm, DType dt) {
  auto& g = ctx.g();
  auto d = dims(ctx, perm);
  const int64_t r = static_cast<int64_t>(d.size()) + 1;
  std::vector<int64_t> shape = d;
  shape.push_back(d.back());
  std::vector<int64_t> bd;
  for (int64_t i = 0; i < r - 2; ++i) bd.push_back(i);
  bd.push_back(r - 1);  // perm[c] runs along the columns
  Value on =
      g.compare(Cmp::kEQ, g.broadcast_in_dim(perm, shape, bd), g.iota({DType::kI64, shape}, r - 2));
  return g.select(on, g.constant(1, {dt, shape}), g.constant(0, {dt, shape}));
}

// X with A X = B (adjoint: A^T X = B) for A = P L U given as (LU, P); the
// batch dims of all three already equal. LAPACK getrs.
Value lu_solve_core(LoweringContext& ctx, Value lu, Value p, Value b, bool adjoint) {
  auto& g = ctx.g();
  ir::LinalgFlags lower_unit, upper;
  lower_unit.left_side = upper.left_side = true;
  lower_unit.lower = lower_unit.unit_diagonal = true;
  if (!adjoint) {
    Value y = g.triangular_solve(lu, matmul(ctx, mT(ctx, p), b), lower_unit);
    return g.triangular_solve(lu, y, upper);
  }
  lower_unit.transpose_a = upper.transpose_a = true;
  Value z = g.triangular_solve(lu, b, upper);
  return matmul(ctx, p, g.triangular_solve(lu, z, lower_unit));
}

Value lower_unit_l(LoweringContext& ctx, Value lu, int64_t m, int64_t k) {
  const auto batch = batch_dims(dims(ctx, lu));
  Value l = triangle(ctx, block(ctx, lu, 0, m, 0, k), true, -1);
  return ctx.g().binary(Op::kAdd, l, eye(ctx, dtype(ctx, lu), batch, m, k));
}

// ---------------------------------------------------------------- rules

void check_lu_input(const at::Tensor& a, const char* fn, bool pivot) {
  TORCH_CHECK(a.dim() >= 2, fn,
              ": Expected tensor with 2 or more dimensions. Got size: ", a.sizes(), " instead");
  TORCH_CHECK(pivot, fn, ": LU without pivoting is not implemented on the CPU");
  check_lapack_dtype(a, "lu_cpu");
}

std::vector<Value> linalg_lu_factor_ex(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool pivot = a.boolean(1), check_errors = a.boolean(2);
  check_lu_input(self, "torch.lu_factor", pivot);
  if (!on_device(self)) {
    return on_cpu(ctx, "aten::linalg_lu_factor_ex", "", {self, pivot, check_errors});
  }
  auto build = [&](LoweringContext& c) -> std::vector<Value> {
    Lu f = lu_factor(c, c.tensor(self));
    return {f.lu, f.pivots, f.info};
  };
  if (!check_errors) return build(ctx);
  return checked(ctx, build, 2, "torch.linalg.lu_factor_ex", self.dim() == 2, InfoKind::kLuFactor);
}

std::vector<Value> linalg_lu(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool pivot = a.boolean(1);
  check_lu_input(self, "linalg.lu", pivot);
  if (!on_device(self)) return on_cpu(ctx, "aten::linalg_lu", "", {self, pivot});
  const int64_t m = self.size(-2), n = self.size(-1), k = std::min(m, n);
  Value v = ctx.tensor(self);
  Lu f = lu_factor(ctx, v);
  Value p = permutation_matrix(ctx, f.perm, dtype(ctx, v));
  Value u = triangle(ctx, block(ctx, f.lu, 0, k, 0, n), false);
  return {p, lower_unit_l(ctx, f.lu, m, k), u};
}

std::vector<Value> lu_unpack(LoweringContext& ctx, const Args& a) {
  const at::Tensor& lu = a.tensor(0);
  const at::Tensor& pivots = a.tensor(1);
  const bool unpack_data = a.boolean(2), unpack_pivots = a.boolean(3);
  const char* fn = "torch.lu_unpack";
  TORCH_CHECK(lu.dim() >= 2, fn,
              ": Expected tensor with 2 or more dimensions. Got size: ", lu.sizes(), " instead");
  TORCH_CHECK(pivots.scalar_type() == at::kInt, fn,
              ": LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
              "Note: this function is intended to be used with the output produced by "
              "torch.linalg.lu_factor");
  const int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
  TORCH_CHECK(pivots.dim() >= 1 && pivots.size(-1) == k, fn,
              ": Expected LU_pivots.size(-1) == min(LU.size(-1), LU.size(-2)), but got ",
              pivots.dim() >= 1 ? pivots.size(-1) : 0, " and ", k);
  if (unpack_pivots && pivots.size(-1) > kMaxOnDevice) {
    return on_cpu(ctx, "aten::lu_unpack", "", {lu, pivots, unpack_data, unpack_pivots});
  }
  auto& g = ctx.g();
  Value v = ctx.tensor(lu);
  const DType dt = dtype(ctx, v);
  Value none = g.constant(0, {dt, {0}});
  Value l = none, u = none, p = none;
  if (unpack_data) {
    l = lower_unit_l(ctx, v, m, k);
    u = triangle(ctx, block(ctx, v, 0, k, 0, n), false);
  }
  if (unpack_pivots) {
    std::vector<int64_t> batch(pivots.sizes().begin(), pivots.sizes().end() - 1);
    const int64_t bsz = numel(batch);
    Value piv = g.reshape(ctx.tensor(pivots), {bsz, k});
    std::vector<int64_t> perm_dims = batch;
    perm_dims.push_back(m);
    Value perm = g.reshape(perm_from_pivots(ctx, piv, m), perm_dims);
    p = permutation_matrix(ctx, perm, dt);
  }
  return {p, l, u};
}

// lu_solve on (LU, pivots) broadcast against B; left = false solves X A = B
// as A^T X^T = B^T.
Value lu_solve(LoweringContext& ctx, Value lu, Value perm, Value b, bool left, bool adjoint) {
  const auto batch = broadcast_batch(batch_dims(dims(ctx, lu)), batch_dims(dims(ctx, b)));
  Value vl = expand_batch(ctx, lu, batch);
  Value p = expand_batch(ctx, permutation_matrix(ctx, perm, dtype(ctx, lu)), batch);
  Value vb = expand_batch(ctx, b, batch);
  if (left) return lu_solve_core(ctx, vl, p, vb, adjoint);
  return mT(ctx, lu_solve_core(ctx, vl, p, mT(ctx, vb), !adjoint));
}

std::vector<Value> linalg_lu_solve(LoweringContext& ctx, const Args& a) {
  const at::Tensor& lu = a.tensor(0);
  const at::Tensor& pivots = a.tensor(1);
  const at::Tensor& b = a.tensor(2);
  const bool left = a.boolean(3), adjoint = a.boolean(4);
  const char* fn = "linalg.lu_solve";
  check_matrix(b, fn, "B");
  check_square(lu, fn, "LU");
  TORCH_CHECK(left ? lu.size(-1) == b.size(-2) : lu.size(-1) == b.size(-1), fn,
              ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B",
              " (", lu.size(-2), "x", lu.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  check_same_dtype(lu, b, fn, "LU", "B");
  TORCH_CHECK(pivots.scalar_type() == at::kInt, fn,
              ": pivots should be a Tensor of scalar type torch.int32");
  TORCH_CHECK(lu.sizes().slice(0, lu.dim() - 1) == pivots.sizes(), fn,
              ": Expected LU.shape[:-1] == pivots.shape, but got ", pivots.sizes());
  check_lapack_dtype(lu, "lu_solve_cpu");
  if (lu.size(-1) > kMaxOnDevice) {
    return on_cpu(ctx, "aten::linalg_lu_solve", "", {lu, pivots, b, left, adjoint});
  }
  auto& g = ctx.g();
  Value vb = ctx.tensor(b);
  const auto batch = broadcast_batch(std::vector<int64_t>(lu.sizes().begin(), lu.sizes().end() - 2),
                                     std::vector<int64_t>(b.sizes().begin(), b.sizes().end() - 2));
  if (numel(dims(ctx, vb)) == 0 || lu.numel() == 0) return {expand_batch(ctx, vb, batch)};
  const int64_t n = lu.size(-1);
  std::vector<int64_t> pbatch(pivots.sizes().begin(), pivots.sizes().end() - 1);
  Value piv = g.reshape(ctx.tensor(pivots), {numel(pbatch), n});
  std::vector<int64_t> perm_dims = pbatch;
  perm_dims.push_back(n);
  Value perm = g.reshape(perm_from_pivots(ctx, piv, n), perm_dims);
  return {lu_solve(ctx, ctx.tensor(lu), perm, vb, left, adjoint)};
}

// CPU factors A^T when A is contiguous (LAPACK is column-major, so no copy);
// the det/slogdet backward (linalg_det_backward) makes the same choice from A's
// layout, so the returned LU must follow it.
Lu det_factor(LoweringContext& ctx, const at::Tensor& self) {
  Value v = ctx.tensor(self);
  return lu_factor(ctx, self.is_contiguous() ? mT(ctx, v) : v);
}

// (-1)^(number of row swaps), in dtype dt, [...].
Value pivot_parity(LoweringContext& ctx, Value pivots, DType dt) {
  auto& g = ctx.g();
  const auto d = dims(ctx, pivots);
  const int64_t r = static_cast<int64_t>(d.size());
  const ir::TensorType ti{DType::kI32, d};
  Value expect = g.binary(Op::kAdd, g.iota(ti, r - 1), g.constant_int(1, ti));
  Value swapped = g.convert(g.compare(Cmp::kNE, pivots, expect), DType::kI32);
  Value count = reduce(ctx, swapped, {r - 1}, false, ir::Reducer::kAdd);
  const ir::TensorType tb{DType::kI32, dims(ctx, count)};
  Value odd =
      g.compare(Cmp::kEQ, g.binary(Op::kRem, count, g.constant_int(2, tb)), g.constant_int(1, tb));
  const ir::TensorType tf{dt, dims(ctx, count)};
  return g.select(odd, g.constant(-1, tf), g.constant(1, tf));
}

std::vector<Value> linalg_det(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  check_square(self, "linalg.det");
  check_floating(self, "linalg.det");
  check_lapack_dtype(self, "lu_cpu");
  if (!on_device(self)) return on_cpu(ctx, "aten::_linalg_det", "", {self});
  auto& g = ctx.g();
  Lu f = det_factor(ctx, self);
  const int64_t r = self.dim();
  Value prod = reduce(ctx, diagonal(ctx, f.lu), {r - 2}, false, ir::Reducer::kMul);
  Value det = g.binary(Op::kMul, prod, pivot_parity(ctx, f.pivots, dtype(ctx, prod)));
  return {det, f.lu, f.pivots};
}

std::vector<Value> linalg_slogdet(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  check_square(self, "linalg.slogdet");
  check_floating(self, "linalg.slogdet", false);
  if (!on_device(self)) return on_cpu(ctx, "aten::_linalg_slogdet", "", {self});
  auto& g = ctx.g();
  Lu f = det_factor(ctx, self);
  const int64_t r = self.dim();
  Value diag = diagonal(ctx, f.lu);
  Value signs = reduce(ctx, g.unary(Op::kSign, diag), {r - 2}, false, ir::Reducer::kMul);
  Value sign = g.binary(Op::kMul, signs, pivot_parity(ctx, f.pivots, dtype(ctx, signs)));
  Value logabs =
      reduce(ctx, g.unary(Op::kLog, g.unary(Op::kAbs, diag)), {r - 2}, false, ir::Reducer::kAdd);
  return {sign, logabs, f.lu, f.pivots};
}

std::vector<Value> linalg_inv_ex(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool check_errors = a.boolean(1);
  check_square(self, "linalg.inv");
  check_floating(self, "linalg.inv", false);
  if (!on_device(self)) return on_cpu(ctx, "aten::linalg_inv_ex", "", {self, check_errors});
  auto build = [&](LoweringContext& c) -> std::vector<Value> {
    Value v = c.tensor(self);
    const auto d = dims(c, v);
    const auto batch = batch_dims(d);
    if (numel(d) == 0) return {v, c.g().constant_int(0, {DType::kI32, batch})};
    Lu f = lu_factor(c, v);
    Value id = eye(c, dtype(c, v), batch, d.back(), d.back());
    return {lu_solve(c, f.lu, f.perm, id, true, false), f.info};
  };
  if (!check_errors) return build(ctx);
  return checked(ctx, build, 1, "linalg.inv_ex", self.dim() == 2, InfoKind::kInverse);
}

// PyTorch's linalg_solve_is_vector_rhs: B is a vector (or a batch of them).
bool vector_rhs(const at::Tensor& a, const at::Tensor& b) {
  return b.dim() == 1 || (a.dim() - 1 == b.dim() && b.sizes() == a.sizes().slice(0, a.dim() - 1));
}

std::vector<Value> linalg_solve_ex(LoweringContext& ctx, const Args& a) {
  const at::Tensor& m = a.tensor(0);
  const at::Tensor& b = a.tensor(1);
  const bool left = a.boolean(2), check_errors = a.boolean(3);
  const char* fn = "linalg.solve";
  check_floating(m, fn);
  TORCH_CHECK(m.scalar_type() == b.scalar_type(), fn,
              ": Expected A and B to have the same dtype, but found A of type ", m.scalar_type(),
              " and B of type ", b.scalar_type(), " instead");
  const bool vector_case = vector_rhs(m, b);
  const at::Tensor b2 = vector_case ? b.unsqueeze(-1) : b;
  check_square(m, fn);
  check_matrix(b2, fn, "B");
  TORCH_CHECK(left ? m.size(-1) == b2.size(-2) : m.size(-1) == b2.size(-1), fn,
              ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B",
              " (", m.size(-2), "x", m.size(-1), " and ", b2.size(-2), "x", b2.size(-1), ")");
  TORCH_CHECK(left || !vector_case, fn,
              ": Vector broadcasting of the left hand side is not supported for left=False. "
              "In this case linalg.solve is equivalent to B / A.squeeze(-1)");
  check_lapack_dtype(m, "lu_cpu");
  if (!on_device(m)) return on_cpu(ctx, "aten::_linalg_solve_ex", "", {m, b, left, check_errors});
  auto build = [&](LoweringContext& c) -> std::vector<Value> {
    auto& g = c.g();
    Value vm = c.tensor(m);
    Value vb = c.tensor(b2);
    Lu f = lu_factor(c, vm);
    const auto batch = broadcast_batch(batch_dims(dims(c, vm)), batch_dims(dims(c, vb)));
    Value x;
    if (numel(dims(c, vm)) == 0 || numel(dims(c, vb)) == 0) {
      x = expand_batch(c, vb, batch);
    } else {
      x = lu_solve(c, f.lu, f.perm, vb, left, false);
    }
    if (vector_case) {
      auto xd = dims(c, x);
      xd.pop_back();
      x = g.reshape(x, xd);
    }
    return {x, f.lu, f.pivots, f.info};
  };
  if (!check_errors) return build(ctx);
  return checked(ctx, build, 3, "torch.linalg.solve_ex", m.dim() == 2, InfoKind::kSolve);
}

RegisterLowering r_lu_factor_ex("linalg_lu_factor_ex", linalg_lu_factor_ex);
RegisterLowering r_lu("linalg_lu", linalg_lu);
RegisterLowering r_lu_unpack("lu_unpack", lu_unpack);
RegisterLowering r_lu_solve("linalg_lu_solve", linalg_lu_solve);
RegisterLowering r_det("_linalg_det", linalg_det);
RegisterLowering r_slogdet("_linalg_slogdet", linalg_slogdet);
RegisterLowering r_inv_ex("linalg_inv_ex", linalg_inv_ex);
RegisterLowering r_solve_ex("_linalg_solve_ex", linalg_solve_ex);

}  // namespace
}  // namespace ttpu::aten
