// Depthwise convolutions (groups == input channels, weight [C*m, 1, k...]) as
// sums over the kernel taps, for the CPU plugin (conv.cc decides when).
//
// Why: XLA:CPU (xla-cpu-pjrt 0.0.1) runs a feature-grouped convolution one
// group at a time; at efficientnet_b0's 12 depthwise shapes (batch 8) its
// forward was 7-34x slower than this form (12x over the sum), forward +
// backward 5-72x (18x). Written as prod(k) strided slices of the padded input
// times a per-channel weight, added up, XLA fuses the whole sum into one loop
// (bench/bench_depthwise.py; numbers in csrc/aten/README.md).
#pragma once

#include <vector>

#include "aten/ops_util.h"

namespace ttpu::aten {

// Size of `n` elements with `d - 1` holes between neighbours (lax._dilate_shape).
inline int64_t dilate(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

// A forward convolution's stride, padding and dilation (one entry per spatial dim).
struct DepthwiseParams {
  std::vector<int64_t> stride, padding, dilation;
};

// True on the CPU plugin unless TORCHTPU_CPU_DEPTHWISE_TAPS=0 (read once).
bool depthwise_taps_enabled();

// Whether the taps form applies: enabled, a non-transposed float convolution
// with groups == input channels > 1, a weight of one input channel per group,
// non-empty operands and at most kMaxDepthwiseTaps kernel taps (beyond that
// the sum would make a large program; XLA's convolution takes it).
bool use_depthwise_taps(const std::vector<int64_t>& input_dims,
                        const std::vector<int64_t>& weight_dims, int64_t groups, bool transposed,
                        ir::DType dtype);

// x [N, C, in...], w [C*m, 1, k...] -> [N, C*m, out...] (float32/float64;
// the caller widens half types).
ir::Value depthwise_forward(LoweringContext& ctx, ir::Value x, ir::Value w,
                            const DepthwiseParams& p);
// dy [N, C*m, out...], w -> dx of dims `input_dims` [N, C, in...] (half types
// accumulate in float32).
ir::Value depthwise_input_grad(LoweringContext& ctx, ir::Value dy, ir::Value w,
                               const DepthwiseParams& p, const std::vector<int64_t>& input_dims);
// x [N, C, in...], dy [N, C*m, out...] -> dw [C*m, 1, k...] (half types
// accumulate in float32).
ir::Value depthwise_weight_grad(LoweringContext& ctx, ir::Value x, ir::Value dy,
                                const DepthwiseParams& p, const std::vector<int64_t>& k);

}  // namespace ttpu::aten
