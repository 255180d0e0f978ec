// LU with partial pivoting and the row order of LAPACK pivots as loops over
// the columns (loop_kernels.h). Each iteration is one column of LAPACK
// getf2's right-looking algorithm on a whole batch; XLA compiles the body
// once, where the unrolled program (one copy of it per column) took 8.5 s to
// compile for a 64x64 solve on XLA:CPU.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "stablehlo/loop_body.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::stablehlo {
namespace {

using namespace loop_names;  // NOLINT(google-build-using-namespace): loop_body.h

// Swaps entries j and p[b] of each row b of `perm` (i64 [B, m]); `pos` is iota
// along dimension 1, `jm` the column index j broadcast to [B, m], `p` i64 [B].
V swap_entries(Body& b, const V& perm, const V& pos, const V& j, const V& jm, const V& p) {
  const auto& s = perm.type.dims;
  V pm = b.compare(Cmp::kEQ, pos, b.broadcast(p, s, {0}));
  V pj = b.compare(Cmp::kEQ, pos, jm);
  V perm_p = b.sum_dim1(b.select(pm, perm, b.constant(0, perm.type)));
  V zero = b.constant(0, {DType::kI64, {}});
  V perm_j = b.reshape(b.dynamic_slice(perm, {zero, j}, {s[0], 1}), {s[0]});
  return b.select(pj, b.broadcast(perm_p, s, {0}), b.select(pm, b.broadcast(perm_j, s, {0}), perm));
}

std::string lu_text(const TensorType& x) {
  const int64_t bsz = x.dims[0], m = x.dims[1], n = x.dims[2], k = std::min(m, n);
  const DType dt = x.dtype;
  const TensorType perm_t{DType::kI64, {bsz, m}}, piv_t{DType::kI64, {bsz, k}};
  const TensorType zero_t{DType::kBool, {bsz, k}};
  int regions = 0;
  Body outer("%v", &regions);
  const V a{"%a", x};
  const V perm0 = outer.iota(perm_t, 1);
  const V piv0 = outer.constant(0, piv_t);
  const V zero0 = outer.constant(0, zero_t);
  const std::string results =
      x.mlir() + ", " + perm_t.mlir() + ", " + piv_t.mlir() + ", " + zero_t.mlir();
  auto step = [&](Body& b, const std::vector<V>& s) -> std::vector<V> {
    const V &j = s[0], &xs = s[1], &perm = s[2], &piv = s[3], &zero = s[4];
    const std::vector<int64_t> shape{bsz, m, n};
    const TensorType ti{DType::kI64, shape};
    V c0 = b.constant(0, {DType::kI64, {}});
    V pos = b.iota(perm_t, 1), row = b.iota(ti, 1), col = b.iota(ti, 2);
    V jm = b.broadcast(j, {bsz, m}, {}), j3 = b.broadcast(j, shape, {});
    // Pivot: the first row >= j of largest |x[:, j]| (LAPACK i?amax).
    V column = b.reshape(b.dynamic_slice(xs, {c0, c0, j}, {bsz, m, 1}), {bsz, m});
    V score = b.select(b.compare(Cmp::kGE, pos, jm), b.op("stablehlo.abs", {column}, column.type),
                       b.constant(-1, column.type));
    V p = b.argmax_dim1(score, pos);  // i64 [B]
    // Swap rows j and p (row p picked by a masked sum: exact).
    V is_p = b.compare(Cmp::kEQ, row, b.broadcast(p, shape, {0}));
    V is_j = b.compare(Cmp::kEQ, row, j3);
    V row_p = b.sum_dim1(b.select(is_p, xs, b.constant(0, x)));  // [B, n]
    V row_j = b.reshape(b.dynamic_slice(xs, {c0, j, c0}, {bsz, 1, n}), {bsz, n});
    V rows_p = b.broadcast(row_p, shape, {0, 2});
    V x1 = b.select(is_j, rows_p, b.select(is_p, b.broadcast(row_j, shape, {0, 2}), xs));
    V perm1 = swap_entries(b, perm, pos, j, jm, p);
    // Scale the column below the pivot (left as is for a zero pivot, whose
    // column is all zero: LAPACK reports it in info and goes on).
    V pivot = b.reshape(b.dynamic_slice(row_p, {c0, j}, {bsz, 1}), {bsz});
    V is_zero = b.compare(Cmp::kEQ, pivot, b.constant(0, pivot.type));
    V safe = b.select(is_zero, b.constant(1, pivot.type), pivot);
    V after_j = b.compare(Cmp::kGT, row, j3);
    V below = b.binary("stablehlo.and", after_j, b.compare(Cmp::kEQ, col, j3));
    V scaled = b.binary("stablehlo.divide", x1, b.broadcast(safe, shape, {0}));
    V x2 = b.select(below, scaled, x1);
    // Rank-1 update of the trailing block.
    V l = b.reshape(b.dynamic_slice(x2, {c0, c0, j}, {bsz, m, 1}), {bsz, m});
    V update = b.binary("stablehlo.multiply", b.broadcast(l, shape, {0, 1}), rows_p);
    V trailing = b.binary("stablehlo.and", after_j, b.compare(Cmp::kGT, col, j3));
    V x3 = b.select(trailing, b.binary("stablehlo.subtract", x2, update), x2);
    V piv1 = b.update_slice(piv, b.reshape(p, {bsz, 1}), {c0, j});
    V zero1 = b.update_slice(zero, b.reshape(is_zero, {bsz, 1}), {c0, j});
    return {x3, perm1, piv1, zero1};
  };
  const V count = outer.constant(static_cast<double>(k), {DType::kI64, {}});
  return detail::counted_loop("%a: " + x.mlir(), results, outer, {a, perm0, piv0, zero0}, 0, count,
                              {0, 1, 2, 3}, &regions, step);
}

std::string permutation_text(int64_t bsz, int64_t m, int64_t k) {
  const TensorType perm_t{DType::kI64, {bsz, m}}, piv_t{DType::kI64, {bsz, k}};
  int regions = 0;
  Body outer("%v", &regions);
  const V piv{"%a", piv_t};
  const V perm0 = outer.iota(perm_t, 1);
  auto step = [&](Body& b, const std::vector<V>& s) -> std::vector<V> {
    const V &j = s[0], &pv = s[1], &perm = s[2];
    V c0 = b.constant(0, {DType::kI64, {}});
    V p = b.reshape(b.dynamic_slice(pv, {c0, j}, {bsz, 1}), {bsz});
    V pos = b.iota(perm_t, 1);
    return {pv, swap_entries(b, perm, pos, j, b.broadcast(j, {bsz, m}, {}), p)};
  };
  const V count = outer.constant(static_cast<double>(k), {DType::kI64, {}});
  return detail::counted_loop("%a: " + piv_t.mlir(), perm_t.mlir(), outer, {piv, perm0}, 0, count,
                              {1}, &regions, step);
}

}  // namespace

std::shared_ptr<const ir::UserFunction> lu_factor_loop(const TensorType& x) {
  if (x.dims.size() != 3 || (x.dtype != DType::kF32 && x.dtype != DType::kF64)) {
    throw ir::IrError("lu_factor_loop: " + x.mlir() + " is not a batch of f32 or f64 matrices");
  }
  if (x.dims[0] == 0 || std::min(x.dims[1], x.dims[2]) == 0) {
    throw ir::IrError("lu_factor_loop: " + x.mlir() + " has no column to factor");
  }
  return detail::cached_loop(x.mlir(), "lu_factor", [&] { return lu_text(x); });
}

std::shared_ptr<const ir::UserFunction> pivots_to_permutation_loop(int64_t bsz, int64_t m,
                                                                   int64_t k) {
  if (bsz <= 0 || k <= 0 || m < k) {
    throw ir::IrError("pivots_to_permutation_loop: no pivots for a batch of " +
                      std::to_string(bsz) + " with m " + std::to_string(m) + ", k " +
                      std::to_string(k));
  }
  const std::string key = std::to_string(bsz) + "x" + std::to_string(m) + "x" + std::to_string(k);
  return detail::cached_loop(key, "pivots_to_permutation",
                             [&] { return permutation_text(bsz, m, k); });
}

}  // namespace ttpu::stablehlo
