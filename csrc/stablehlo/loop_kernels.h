// Lowerings that need a loop, written as private StableHLO functions with a
// stablehlo.while and called through Op::kCall (the IR has no while op; the
// emitter appends each function once, and XLA inlines the call).
//
// Why a loop: integer pow visits every exponent bit (63 for int64). Unrolled,
// that is ~380 elementwise ops per pow, and XLA:CPU's compile time grows with
// them (issue 35: PyTorch's test_foreach integer _foreach_pow tests spent
// 20-71 s each compiling). The loop's body is compiled once. No torch, no PJRT.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/graph.h"

namespace ttpu::stablehlo {

// Exponent bits one iteration of integer_pow_loop's while visits.
constexpr int kIntegerPowBitsPerIteration = 4;

// A function (base, exponent) -> base ** exponent of `type` (an integer
// dtype, base and exponent of equal shape) by square-and-multiply, wrapping on
// overflow as CPU PyTorch's powi does. It loops while any exponent still has a
// set bit, kIntegerPowBitsPerIteration bits an iteration, so a tensor of small
// exponents takes one iteration. A negative exponent is taken as 0 (the result
// 1): the caller replaces those results (CPU's rule: 1 for base 1, +-1 for
// base -1, else 0). Cached per type; thread-safe. Throws ir::IrError for a
// type that is not an integer.
std::shared_ptr<const ir::UserFunction> integer_pow_loop(const ir::TensorType& type);

// LU with partial pivoting (LAPACK getf2: the first row of largest |a| in the
// column, swap, scale, rank-1 update) of a batch x [B, m, n], f32 or f64,
// B >= 1, k = min(m, n) >= 1, a column an iteration (unrolled, a 64x64 solve
// compiled for 8.5 s on XLA:CPU; lu_loops.cc). The function returns
// (LU [B, m, n]; perm i64 [B, m]: row i of P^T x is row perm[i] of x;
// pivots i64 [B, k]: the 0-based row swapped with row j; zero pivot i1
// [B, k]: U[j, j] == 0, its column left unscaled). Cached per type;
// thread-safe. Throws ir::IrError for another type.
std::shared_ptr<const ir::UserFunction> lu_factor_loop(const ir::TensorType& x);

// The row order i64 [B, m] that 0-based pivots i64 [B, k] (k <= m) make of
// 0..m-1: the swaps (j, pivots[j]) applied in order, an iteration each.
// Throws ir::IrError for an empty batch or k < 1.
std::shared_ptr<const ir::UserFunction> pivots_to_permutation_loop(int64_t bsz, int64_t m,
                                                                   int64_t k);

// The three-term recurrences of torch.special's orthogonal polynomials
// (ATen's Math.h): Chebyshev T/U/V/W share one (they differ in p1), Hermite
// H and He, Laguerre L, Legendre P.
enum class PolynomialRecurrence { kChebyshev, kHermiteH, kHermiteHe, kLaguerre, kLegendre };

// A function (x, y, n, p0, p1, r0, count) -> result, all `t` (f32 or f64)
// but n (i64, t's shape) and count (i64 scalar): runs the recurrence from the
// terms of degrees 0 and 1 (p0, p1; y is Chebyshev's argument) for degrees
// 2 .. count - 1, each element taking the term of the largest degree <= its
// n; r0 is the result for n < 2. Cached per (recurrence, type); thread-safe.
// Throws ir::IrError for another dtype.
std::shared_ptr<const ir::UserFunction> polynomial_loop(PolynomialRecurrence r,
                                                        const ir::TensorType& t);

// The degree of linalg.matrix_exp's Taylor polynomial (Bader, Blanes and
// Casas' T18).
constexpr int kMatrixExpTaylorDegree = 18;

// A function (x, s, count) -> exp, all `t` (f64 [..., n, n]) but count (i64
// scalar): T18(x) = sum x^k / k! by Horner's rule (kMatrixExpTaylorDegree
// iterations), then squared while the iteration is below each matrix's s (s
// holds that matrix's count in every entry, a whole number in f64), for
// count - kMatrixExpTaylorDegree more iterations; an iteration is one matrix
// product. Cached per type; thread-safe. Throws ir::IrError for another type.
std::shared_ptr<const ir::UserFunction> matrix_exp_loop(const ir::TensorType& t);

// A function (x, q, count) -> (a, b, s, done), all `t` (f64) but count (i64
// scalar) and done (i1): the direct sum of Cephes' Hurwitz zeta (ATen's
// Math.h), s = q^-x + (q + 1)^-x + ..., a step an iteration for count
// iterations, each element stopping where Cephes' loop returns (converged:
// done) or ends (9 steps taken and a > 9); a is the last abscissa, b the last
// term. Cached per type; thread-safe. Throws ir::IrError for another dtype.
std::shared_ptr<const ir::UserFunction> zeta_direct_sum_loop(const ir::TensorType& t);

// A function (a, b, count) -> gcd, a and b of integer type `t` (their
// absolute values: the caller takes them), count an i64 scalar: count steps
// of Euclid's algorithm (ATen's calc_gcd), each element frozen once a is 0.
// Enough steps: the Fibonacci bound (Lame's theorem). Cached per type;
// thread-safe. Throws ir::IrError for a type that is not an integer.
std::shared_ptr<const ir::UserFunction> gcd_loop(const ir::TensorType& t);

// The power series of the regularized lower incomplete gamma P(a, x)
// (ATen's _igam_helper_series) and the continued fraction of the upper Q(a, x)
// (_igamc_helper_continued_fraction), each a function (a, x, live, count) ->
// value, all `t` (f32 or f64) but live (i1, t's shape) and count (i64 scalar):
// each element iterates until its own stopping test passes (Cephes' MACHEP of
// t's dtype), the loop until every live element has stopped or count
// iterations ran; elements not live take no step. The series returns
// 1 + x/(a+1) + x^2/((a+1)(a+2)) + ..., the fraction the value that the
// prefactor x^a e^-x / Gamma(a) multiplies. Cached per type; thread-safe.
// Throws ir::IrError for another dtype.
std::shared_ptr<const ir::UserFunction> igamma_series_loop(const ir::TensorType& t);
std::shared_ptr<const ir::UserFunction> igammac_fraction_loop(const ir::TensorType& t);

}  // namespace ttpu::stablehlo
