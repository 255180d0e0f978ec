// Helpers shared by the decomposition lowerings (linalg_decomp*.cc,
// linalg_solve*.cc): batched matrix shapes [..., m, n] as IR values, and the
// argument checks of PyTorch's LinearAlgebraUtils.h with their text.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "aten/ops_util.h"

namespace ttpu::aten::linalg {

// --- argument checks (PyTorch's text, RuntimeError unless noted)
// "<fn>: The input tensor <arg> must have at least 2 dimensions."
void check_matrix(const at::Tensor& t, const std::string& fn, const char* arg = "A");
// The above, then "<fn>: <arg> must be batches of square matrices, but they are
// m by n matrices".
void check_square(const at::Tensor& t, const std::string& fn, const char* arg = "A");
// "<fn>: Expected a floating point or complex tensor as input. Got Long"; with
// `low_precision` false also "<fn>: Low precision dtypes not supported. Got Half".
void check_floating(const at::Tensor& t, const std::string& fn, bool low_precision = true);
// CPU's LAPACK kernels exist for float32/float64 (and complex) only: other
// dtypes raise NotImplementedError "\"<kernel>\" not implemented for 'Half'".
void check_lapack_dtype(const at::Tensor& t, const char* kernel);
// "<fn>: Expected A and B to have the same dtype, but found A of type Float
// and B of type Double instead" (names given).
void check_same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& fn,
                      const char* a_name = "A", const char* b_name = "B");

// --- shapes
std::vector<int64_t> batch_dims(const std::vector<int64_t>& d);  // all but the last two
int64_t numel(const std::vector<int64_t>& d);
// The broadcast of two batch shapes (at::infer_size's error on mismatch).
std::vector<int64_t> broadcast_batch(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// x [..., m, n] broadcast to batch + [m, n].
ir::Value expand_batch(LoweringContext& ctx, ir::Value x, const std::vector<int64_t>& batch);

// --- values
// x^T of the last two dimensions.
ir::Value mT(LoweringContext& ctx, ir::Value x);
// a [..., m, k] @ b [..., k, n] with equal batch dims, at full precision.
ir::Value matmul(LoweringContext& ctx, ir::Value a, ir::Value b);
// The identity, batch + [m, n], of `dtype`.
ir::Value eye(LoweringContext& ctx, ir::DType dtype, const std::vector<int64_t>& batch, int64_t m,
              int64_t n);
// A bool mask batch + [m, n]: true where col - row <= offset (lower, tril) or
// col - row >= offset (upper, triu).
ir::Value triangle_mask(LoweringContext& ctx, const std::vector<int64_t>& shape, bool lower,
                        int64_t offset);
// tril(x, offset) / triu(x, offset): the other entries 0.
ir::Value triangle(LoweringContext& ctx, ir::Value x, bool lower, int64_t offset = 0);
// The main diagonal [..., min(m, n)] (a masked sum: exact).
ir::Value diagonal(LoweringContext& ctx, ir::Value x);
// d [..., k] placed on the diagonal of a batch + [m, n] zero matrix.
ir::Value diag_embed(LoweringContext& ctx, ir::Value d, int64_t m, int64_t n);
// x [..., m, n] rows [r0, r1) and columns [c0, c1).
ir::Value block(LoweringContext& ctx, ir::Value x, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
// x padded with zeros at the end of its last two dimensions to [..., m, n].
ir::Value pad_to(LoweringContext& ctx, ir::Value x, int64_t m, int64_t n);
// The symmetric matrix whose `lower` (else upper) triangle is x's.
ir::Value symmetrize(LoweringContext& ctx, ir::Value x, bool lower);

// --- decompositions built on XLA's expanders
// Householder QR of a [..., m, n] (LAPACK geqrf's packed form and taus
// [..., min(m, n)]), through the "Qr" custom call.
std::pair<ir::Value, ir::Value> geqrf(LoweringContext& ctx, ir::Value a);
// The first n columns of the product of the reflectors (LAPACK orgqr): a
// [..., m, n] with m >= n, taus [..., k], k <= n.
ir::Value householder_product(LoweringContext& ctx, ir::Value a, ir::Value taus);
// Symmetric eigendecomposition from a's `lower` (else upper) triangle:
// eigenvalues ascending [..., n], eigenvectors as columns [..., n, n]. Runs the
// Jacobi expander in float64 (XLA:CPU has it) for LAPACK-like accuracy, and
// returns the input's dtype.
std::pair<ir::Value, ir::Value> eigh(LoweringContext& ctx, ir::Value a, bool lower);

// An i32 info tensor of shape `batch` from a per-matrix "first failing index"
// computation: `bad` bool [..., k] (true where column j fails), info = 1 + the
// first failing j, or 0 (LAPACK's convention).
ir::Value first_failure_info(LoweringContext& ctx, ir::Value bad);

// What a failing LAPACK info means, and so which error PyTorch raises
// (_linalg_check_errors and linalg_lu_factor_ex's check, BatchLinearAlgebra.cpp).
enum class InfoKind { kCholesky, kInverse, kSolve, kLuFactor };
// Checks the i32 `info` tensor (shape = the batch) now, a host read as on CPU
// and CUDA (the *_ex(check_errors=True) and raising APIs promise the error at
// the call), raising PyTorch's text: "<api>: (Batch element i): ..." for batched input.
void check_info(const at::Tensor& info, const std::string& api, bool is_matrix, InfoKind kind);

// Builds the values `build` returns in a program of its own, runs it now,
// check_info()s its value number `info_index` and returns all of them read
// into `ctx`: for the functions that raise on a failed factorization.
using Build = std::function<std::vector<ir::Value>(LoweringContext&)>;
std::vector<ir::Value> checked(LoweringContext& ctx, const Build& build, size_t info_index,
                               const std::string& api, bool is_matrix, InfoKind kind);

}  // namespace ttpu::aten::linalg
