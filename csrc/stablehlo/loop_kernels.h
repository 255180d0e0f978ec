// Lowerings that need a loop, written as private StableHLO functions with a
// stablehlo.while and called through Op::kCall (the IR has no while op; the
// emitter appends each function once, and XLA inlines the call).
//
// Why a loop: integer pow visits every exponent bit (63 for int64). Unrolled,
// that is ~380 elementwise ops per pow, and XLA:CPU's compile time grows with
// them (issue 35: PyTorch's test_foreach integer _foreach_pow tests spent
// 20-71 s each compiling). The loop's body is compiled once. No torch, no PJRT.
#pragma once

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

}  // namespace ttpu::stablehlo
