// What the random lowerings share (random.cc, random_sample.cc):
// the generator argument, the THREE_FRY state of one draw, uniform floats.
#pragma once

#include <optional>
#include <vector>

#include "aten/ops_util.h"

namespace ttpu::aten {

// The dtype random values are computed in: f32 for the 16-bit floats (their
// few significand bits would bias sums like Box-Muller's), else the dtype.
inline ir::DType random_compute_dtype(ir::DType dt) {
  return dt == ir::DType::kF64 ? ir::DType::kF64 : ir::DType::kF32;
}

// Argument `i` of a random op's schema (`Generator? generator`).
std::optional<at::Generator> generator(const Args& a, size_t i);

// One draw of `gen` (the device's default when empty) as a ui64[2] THREE_FRY
// state for rng_bit_generator: the generator's offset advances by one, and
// draws never share counters (see random.cc).
ir::Value three_fry_state(LoweringContext& ctx, const std::optional<at::Generator>& gen);

// Significand bits of a float dtype (std::numeric_limits<T>::digits).
int digits_of(ir::DType dt);

// Uniform values in [0, 1) of float dtype `dt` shaped `shape`, from `state`,
// with `digits` random bits (0: dt's own), so 1 is never drawn.
ir::Value uniform01(LoweringContext& ctx, ir::Value state, const std::vector<int64_t>& shape,
                    ir::DType dt, int digits = 0);

// Standard normal values shaped `shape` in float dtype `dt` from `state`
// (Box-Muller).
ir::Value standard_normal(LoweringContext& ctx, ir::Value state, const std::vector<int64_t>& shape,
                          ir::DType dt);

}  // namespace ttpu::aten
