// End-to-end emitter suite, part 3: the decompositions (cholesky,
// triangular_solve, and the custom calls XLA expands: Qr,
// ProductOfElementaryHouseholderReflectors, Eigh) golden text, then compiled
// and run on the CPU plugin against host references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "stablehlo/loop_kernels.h"
#include "stablehlo_run_util.h"

namespace ttpu::testing {
namespace {

using ir::CustomCall;
using ir::DType;
using ir::Graph;
using ir::LinalgFlags;
using ir::TensorType;
using ir::Value;
using Doubles = std::vector<double>;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\nin:\n" << text;
}

// n x n row-major product a * b.
Doubles matmul(const Doubles& a, const Doubles& b, int n) {
  Doubles c(static_cast<size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k) c[i * n + j] += a[i * n + k] * b[k * n + j];
  return c;
}

Doubles transposed(const Doubles& a, int n) {
  Doubles t(a.size());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) t[j * n + i] = a[i * n + j];
  return t;
}

// A symmetric positive definite 3x3 matrix and its lower Cholesky factor.
const Doubles kSpd = {4, 2, 0.6, 2, 5, 1, 0.6, 1, 3};

TEST(GoldenLinalg, Attributes) {
  Graph g;
  Value a = g.parameter({DType::kF32, {3, 3}});
  LinalgFlags f;
  f.left_side = true;
  f.lower = true;
  f.transpose_a = true;
  Value l = g.cholesky(a, true);
  Value x = g.triangular_solve(l, a, f);
  auto e =
      g.custom_call({"Eigh", "1,1,100,1e-6"}, {x}, {{DType::kF32, {3, 3}}, {DType::kF32, {3}}});
  g.set_outputs({e[0], e[1]});
  const std::string text = stablehlo::emit(g, "m");
  expect_contains(
      text, R"("stablehlo.cholesky"(%arg0) {lower = true} : (tensor<3x3xf32>) -> tensor<3x3xf32>)");
  expect_contains(text,
                  "\"stablehlo.triangular_solve\"(%1, %arg0) {left_side = true, lower = true, "
                  "unit_diagonal = false, transpose_a = #stablehlo<transpose TRANSPOSE>}");
  expect_contains(text,
                  "%3:2 = \"stablehlo.custom_call\"(%2) {call_target_name = \"Eigh\", "
                  "backend_config = \"1,1,100,1e-6\", api_version = 1 : i32} : "
                  "(tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>)");
}

TEST(GoldenLinalg, CustomCallStringsAreEscaped) {
  Graph g;
  Value a = g.parameter({DType::kF32, {2}});
  g.set_outputs(g.custom_call({"Qr", "a\"b\\c\n"}, {a}, {{DType::kF32, {2}}}));
  expect_contains(stablehlo::emit(g, "m"), R"(backend_config = "a\"b\\c\0A")");
}

TEST(RunLinalg, CholeskyAndTriangularSolve) {
  Graph g;
  Value a = g.parameter({DType::kF32, {3, 3}});
  Value l = g.cholesky(a, true);
  LinalgFlags left_lower;
  left_lower.left_side = true;
  left_lower.lower = true;
  Value y = g.triangular_solve(l, a, left_lower);  // L y = A, so y = L^T
  LinalgFlags right_t = left_lower;
  right_t.left_side = false;
  right_t.transpose_a = true;
  Value z = g.triangular_solve(l, a, right_t);  // z L^T = A, so z = L
  Value u = g.cholesky(a, false);
  g.set_outputs({l, y, z, u});
  auto out = run(g, {array_of(DType::kF32, {3, 3}, kSpd)});
  // Lower triangle only: XLA leaves the other one unspecified.
  const Doubles want = {2, 0, 0, 1, 2, 0, 0.3, 0.35, std::sqrt(3 - 0.09 - 0.1225)};
  Doubles got = out[0].doubles();
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j) got[i * 3 + j] = 0;
  expect_near(got, want, 1e-5, 1e-6, "cholesky lower");
  expect_near(out[1].doubles(), transposed(want, 3), 1e-5, 1e-5, "L^-1 A");
  expect_near(out[2].doubles(), want, 1e-5, 1e-5, "A L^-T");
  Doubles upper = out[3].doubles();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < i; ++j) upper[i * 3 + j] = 0;
  expect_near(upper, transposed(want, 3), 1e-5, 1e-6, "cholesky upper");
}

// Qr gives LAPACK geqrf's packed form; the product of its reflectors is Q, and
// Q R reconstructs A.
TEST(RunLinalg, QrAndHouseholderProduct) {
  Graph g;
  Value a = g.parameter({DType::kF32, {3, 3}});
  const TensorType t{DType::kF32, {3, 3}};
  auto qr = g.custom_call({"Qr", ""}, {a}, {t, {DType::kF32, {3}}});
  auto q = g.custom_call({"ProductOfElementaryHouseholderReflectors", ""}, {qr[0], qr[1]}, {t});
  g.set_outputs({qr[0], qr[1], q[0]});
  auto out = run(g, {array_of(DType::kF32, {3, 3}, kSpd)});
  // Reference values: LAPACK sgeqrf / sorgqr (torch.geqrf, torch.linalg.qr on CPU).
  expect_near(out[1].doubles(), {1.88648, 1.98750, 0}, 1e-4, 1e-5, "taus");
  const Doubles packed = out[0].doubles();
  Doubles r(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = i; j < 3; ++j) r[i * 3 + j] = packed[i * 3 + j];
  expect_near({r[0], r[1], r[2], r[4]}, {-4.51221, -4.12215, -1.37405, -3.60664}, 1e-4, 1e-5, "R");
  expect_near(matmul(out[2].doubles(), r, 3), kSpd, 1e-5, 1e-5, "Q R");
}

// Eigh: ascending eigenvalues; V diag(w) V^T reconstructs A (V's column signs
// are the Jacobi method's, not LAPACK's).
TEST(RunLinalg, Eigh) {
  Graph g;
  Value a = g.parameter({DType::kF64, {3, 3}});
  auto e =
      g.custom_call({"Eigh", "1,1,100,1e-6"}, {a}, {{DType::kF64, {3, 3}}, {DType::kF64, {3}}});
  g.set_outputs({e[0], e[1]});
  auto out = run(g, {array_of(DType::kF64, {3, 3}, kSpd)});
  const Doubles w = out[1].doubles();
  expect_near(w, {2.37246898, 2.72250821, 6.90502281}, 1e-6, 1e-6, "eigenvalues");
  const Doubles v = out[0].doubles();
  Doubles vw(9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) vw[i * 3 + j] = v[i * 3 + j] * w[j];
  expect_near(matmul(vw, transposed(v, 3), 3), kSpd, 1e-9, 1e-9, "V diag(w) V^T");
}

// LU by the column loop (loop_kernels.h) on two 3x3 matrices worked by hand
// with LAPACK getf2's rule; the second has an all-zero first column (a zero
// pivot: reported, its column left unscaled, the loop goes on).
TEST(RunLinalg, LuFactorLoop) {
  Graph g;
  const TensorType t{DType::kF64, {2, 3, 3}};
  Value a = g.parameter(t);
  g.set_outputs(g.call(stablehlo::lu_factor_loop(t), {a}));
  auto out = run(g, {array_of(DType::kF64, {2, 3, 3},
                              {1, 2, 3, 4, 5, 6, 7, 8, 10, 0, 1, 2, 0, 3, 4, 0, 5, 6})});
  expect_near(out[0].doubles(),
              {7, 8, 10, 1.0 / 7, 6.0 / 7, 11.0 / 7, 4.0 / 7, 0.5, -0.5,  // first
               0, 1, 2, 0, 5, 6, 0, 0.6, 0.4},                            // second
              1e-12, 1e-12, "LU");
  EXPECT_EQ(out[1].doubles(), (Doubles{2, 0, 1, 0, 2, 1})) << "row order";
  EXPECT_EQ(out[2].doubles(), (Doubles{2, 2, 2, 0, 2, 2})) << "pivots";
  EXPECT_EQ(out[3].doubles(), (Doubles{0, 0, 0, 1, 0, 0})) << "zero pivots";
}

// The loop's text is one column's work whatever the column count: a program
// unrolled over 64 columns took 8.5 s to compile on XLA:CPU.
TEST(RunLinalg, LuLoopTextDoesNotGrowWithColumns) {
  auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  const auto small = stablehlo::lu_factor_loop({DType::kF32, {1, 4, 4}});
  const auto large = stablehlo::lu_factor_loop({DType::kF32, {1, 64, 64}});
  EXPECT_EQ(lines(small->funcs), lines(large->funcs));
  EXPECT_EQ(lines(stablehlo::pivots_to_permutation_loop(1, 4, 4)->funcs),
            lines(stablehlo::pivots_to_permutation_loop(1, 64, 64)->funcs));
  EXPECT_THROW(stablehlo::lu_factor_loop({DType::kI32, {1, 4, 4}}), ir::IrError);
  EXPECT_THROW(stablehlo::lu_factor_loop({DType::kF32, {1, 0, 4}}), ir::IrError);
}

// matrix_exp's loop on a batch of two: a rotation generator [[0, 8], [-8, 0]]
// scaled by 2^-4 and squared 4 times (exp is the rotation by 8 radians), and
// diag(1, 2), s = 0, never squared while the loop runs on for the first.
TEST(RunLinalg, MatrixExpLoop) {
  Graph g;
  const TensorType t{DType::kF64, {2, 2, 2}};
  Value x = g.parameter(t), s = g.parameter(t), count = g.parameter({DType::kI64, {}});
  g.set_outputs(g.call(stablehlo::matrix_exp_loop(t), {x, s, count}));
  auto out =
      run(g, {array_of(DType::kF64, {2, 2, 2}, {0, 0.5, -0.5, 0, 1, 0, 0, 2}),
              array_of(DType::kF64, {2, 2, 2}, {4, 4, 4, 4, 0, 0, 0, 0}),
              array(DType::kI64, {}, std::vector<int64_t>{stablehlo::kMatrixExpTaylorDegree + 4})});
  const double c = std::cos(8.0), sn = std::sin(8.0), e = std::exp(1.0);
  expect_near(out[0].doubles(), {c, sn, -sn, c, e, 0, 0, e * e}, 1e-12, 1e-12, "exp");
  EXPECT_THROW(stablehlo::matrix_exp_loop({DType::kF32, {2, 2}}), ir::IrError);
  EXPECT_THROW(stablehlo::matrix_exp_loop({DType::kF64, {2, 3}}), ir::IrError);
}

// Pivots (0-based, one per column) to the row order: the swaps in order.
TEST(RunLinalg, PivotsToPermutationLoop) {
  Graph g;
  Value p = g.parameter({DType::kI64, {2, 3}});
  g.set_outputs(g.call(stablehlo::pivots_to_permutation_loop(2, 4, 3), {p}));
  auto out = run(g, {array(DType::kI64, {2, 3}, std::vector<int64_t>{2, 2, 2, 3, 1, 3})});
  // [0 1 2 3] -swap(0,2)-> [2 1 0 3] -swap(1,2)-> [2 0 1 3] -swap(2,2)-> same;
  // [0 1 2 3] -swap(0,3)-> [3 1 2 0] -swap(1,1)-> same -swap(2,3)-> [3 1 0 2].
  EXPECT_EQ(out[0].doubles(), (Doubles{2, 0, 1, 3, 3, 1, 0, 2}));
}

}  // namespace
}  // namespace ttpu::testing
