// Builders for the matrix decompositions: cholesky, triangular_solve (StableHLO
// ops of the same names) and custom_call, whose targets XLA expands into plain
// HLO when it compiles. On the xla-cpu-pjrt plugin these targets are expanded
// (checked end to end in csrc/tests/stablehlo_run_linalg_test.cc):
//   "Qr"        (a [..., m, n]) -> (a', taus [..., min(m, n)]): LAPACK geqrf's
//               packed Householder form (R on and above the diagonal, the
//               reflectors' tails below it).
//   "ProductOfElementaryHouseholderReflectors"
//               (a [..., m, n], taus [..., k]) -> q [..., m, n]: LAPACK orgqr.
//   "Eigh"      (a [..., n, n]) -> (v [..., n, n], w [..., n]), backend_config
//               "lower,sort,max_iter,tol": Jacobi eigendecomposition of the
//               symmetric matrix read from one triangle; eigenvectors are the
//               columns of v, eigenvalues ascending when sort is 1.
#include "ir/graph.h"
#include "ir/graph_check.h"

namespace ttpu::ir {

using detail::fail;

namespace {

// a must be a float [..., n, n].
void check_square(const char* op, const TensorType& t) {
  if (!is_float(t.dtype)) fail(op, "operand " + t.mlir() + " must have a float element type");
  if (t.rank() < 2 || t.dims[t.rank() - 1] != t.dims[t.rank() - 2]) {
    fail(op, "operand " + t.mlir() + " must be a batch of square matrices [..., n, n]");
  }
}

}  // namespace

Value Graph::cholesky(Value a, bool lower) {
  const TensorType t = operand_type("cholesky", a);
  check_square("cholesky", t);
  Attrs at;
  at.linalg.lower = lower;
  return add_node(Node{Op::kCholesky, {a}, {t}, std::move(at)});
}

Value Graph::triangular_solve(Value a, Value b, const LinalgFlags& flags) {
  const char* op = "triangular_solve";
  const TensorType ta = operand_type(op, a);
  const TensorType tb = operand_type(op, b);
  check_square(op, ta);
  const int64_t r = ta.rank();
  bool ok = tb.dtype == ta.dtype && tb.rank() == r;
  for (int64_t d = 0; ok && d < r - 2; ++d) ok = tb.dims[d] == ta.dims[d];
  if (ok) ok = tb.dims[flags.left_side ? r - 2 : r - 1] == ta.dims[r - 1];
  if (!ok) {
    fail(op, "b " + tb.mlir() + " does not fit a " + ta.mlir() + " (same dtype and batch dims; " +
                 (flags.left_side ? "rows" : "columns") + " = n)");
  }
  Attrs at;
  at.linalg = flags;
  return add_node(Node{Op::kTriangularSolve, {a, b}, {tb}, std::move(at)});
}

std::vector<Value> Graph::custom_call(const CustomCall& call, const std::vector<Value>& operands,
                                      const std::vector<TensorType>& results) {
  if (call.target.empty()) fail("custom_call", "call target name is empty");
  if (results.empty()) fail("custom_call", call.target + " needs at least one result");
  for (Value v : operands) operand_type("custom_call", v);
  for (const TensorType& t : results) detail::check_dims("custom_call", t.dims);
  Attrs at;
  at.custom_call = call;
  Value v = add_node(Node{Op::kCustomCall, operands, results, std::move(at)});
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) out.push_back(Value{v.node, static_cast<int32_t>(i)});
  return out;
}

}  // namespace ttpu::ir
