// linalg.matrix_exp's Taylor polynomial and squarings as one loop
// (loop_kernels.h). Unrolled, they were 18 + 40 matrix products in one
// program (a 1.6 s compile on XLA:CPU for any shape) and the squarings
// stopped at 40, so a matrix of 1-norm above 2^40 * theta (a rotation
// generator [[0, 1e13], [-1e13, 0]], say) came out as another rotation.
#include <string>
#include <vector>

#include "stablehlo/emit_util.h"
#include "stablehlo/loop_body.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::stablehlo {
namespace {

using namespace loop_names;  // NOLINT(google-build-using-namespace): loop_body.h

// a @ b over matrices [..., n, n], the leading dims a batch.
V batched_matmul(Body& b, const V& x, const V& y) {
  const int64_t r = static_cast<int64_t>(x.type.dims.size());
  std::vector<int64_t> batch;
  for (int64_t i = 0; i < r - 2; ++i) batch.push_back(i);
  std::string dn = "dot_dimension_numbers = #stablehlo.dot<";
  if (!batch.empty()) {
    dn += "lhs_batching_dimensions = " + detail::int_list(batch) +
          ", rhs_batching_dimensions = " + detail::int_list(batch) + ", ";
  }
  dn += "lhs_contracting_dimensions = " + detail::int_list({r - 1}) +
        ", rhs_contracting_dimensions = " + detail::int_list({r - 2}) + ">";
  return b.op("stablehlo.dot_general", {x, y}, x.type, dn);
}

std::string matrix_exp_text(const TensorType& t) {
  const TensorType index{DType::kI64, {}};
  const int64_t r = static_cast<int64_t>(t.dims.size());
  int regions = 0;
  Body outer("%v", &regions);
  const V x{"%x", t}, s{"%s", t}, count{"%count", index};
  const std::string params = "%x: " + t.mlir() + ", %s: " + t.mlir() + ", %count: " + index.mlir();
  const TensorType ti{DType::kI64, t.dims};
  const V eq = outer.compare(Cmp::kEQ, outer.iota(ti, r - 2), outer.iota(ti, r - 1));
  const V id = outer.select(eq, outer.constant(1, t), outer.constant(0, t));
  const int64_t degree = kMatrixExpTaylorDegree;
  auto step = [&](Body& b, const std::vector<V>& st) -> std::vector<V> {
    const V &j = st[0], &xs = st[1], &ss = st[2], &ids = st[3], &p = st[4];
    // j < degree: Horner's step p = I + x p / (degree - j); after that, the
    // squaring j - degree, kept where it is below the matrix's s.
    const V taylor = b.compare(Cmp::kLT, j, b.constant(static_cast<double>(degree), index));
    const V taylor_all = b.broadcast(taylor, t.dims, {});
    const V product = batched_matmul(b, b.select(taylor_all, xs, p), p);
    const V k =
        b.binary("stablehlo.maximum", b.binary("stablehlo.subtract", b.constant(degree, index), j),
                 b.constant(1, index));
    const V kf = b.op("stablehlo.convert", {b.broadcast(k, t.dims, {})}, t);
    const V horner = b.binary("stablehlo.add", ids, b.binary("stablehlo.divide", product, kf));
    const V squaring = b.binary("stablehlo.subtract", j, b.constant(degree, index));
    const V squaring_f = b.op("stablehlo.convert", {b.broadcast(squaring, t.dims, {})}, t);
    const V square = b.select(b.compare(Cmp::kLT, squaring_f, ss), product, p);
    return {xs, ss, ids, b.select(taylor_all, horner, square)};
  };
  return detail::counted_loop(params, t.mlir(), outer, {x, s, id, id}, 0, count, {3}, &regions,
                              step);
}

}  // namespace

std::shared_ptr<const ir::UserFunction> matrix_exp_loop(const ir::TensorType& t) {
  const size_t r = t.dims.size();
  if (t.dtype != DType::kF64 || r < 2 || t.dims[r - 1] != t.dims[r - 2]) {
    throw ir::IrError("matrix_exp_loop: " + t.mlir() + " is not f64 [..., n, n]");
  }
  return detail::cached_loop(t.mlir(), "matrix_exp", [&] { return matrix_exp_text(t); });
}

}  // namespace ttpu::stablehlo
