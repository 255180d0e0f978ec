// float8 element types (f8E4M3FN, f8E5M2, their FNUZ variants, f8E8M0FNU):
// their values and conversions as PyTorch defines them. XLA's convert differs
// at the edges (measured on XLA:CPU, all 256 codes and every float between
// neighbouring codes): PyTorch saturates e4m3fn overflow (and infinities) to
// +-448 where XLA gives NaN, encodes an e5m2 NaN as 0x7F where XLA gives 0x7E,
// widens NaN codes to other float NaN payloads, and rounds e8m0 (a bare
// exponent) in its own way. Graph::convert applies these rules (graph_float8.cc);
// constants use the functions below.
#pragma once

#include <cstdint>

#include "ir/types.h"

namespace ttpu::ir {

// The code of `value` in float8 type `t`, as PyTorch converts a float:
// round to nearest, ties to even (e8m0: ties up, from the float's exponent);
// overflow saturates for e4m3fn (infinity too), is infinity for e5m2 and NaN
// for the FNUZ types and e8m0; NaN keeps its sign where the type has one.
// A double converts to float first (PyTorch does the same).
uint8_t float8_bits(float value, DType t);

// The float32 bit pattern PyTorch gives a float8 code (its NaN codes widen to
// fixed NaN payloads, not the canonical quiet NaN).
uint32_t float8_to_f32_bits(uint8_t code, DType t);

}  // namespace ttpu::ir
