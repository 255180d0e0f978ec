// Pooling shared by pool.cc (2-D) and pool3d.cc (3-D, adaptive max): the
// windowing of max and average pooling over the trailing spatial dims of a
// tensor, with the CPU kernels' arithmetic (see pool.cc). Callers do the
// argument checks; these only build IR.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "aten/lowering.h"

namespace ttpu::aten::pool {

// One pooling window configuration over the last in.size() dims of a tensor.
struct Window {
  std::vector<int64_t> kernel, stride, padding, dilation;
  std::vector<int64_t> in, out;  // spatial sizes
  int64_t spatial() const { return static_cast<int64_t>(in.size()); }
};

// Max pooling of x: {values, indices flat over one plane's spatial dims}.
std::pair<ir::Value, ir::Value> max_pool(LoweringContext& ctx, ir::Value x, const Window& w);
// The gradient of a max pool (plain or adaptive): grad_output[.., o] added at
// the input element indices[.., o] names within its plane (CPU's
// max_pool*_backward kernels); the last `spatial` dims form a plane. Shapes
// are checked by the caller.
ir::Value max_pool_backward(LoweringContext& ctx, const at::Tensor& grad_output,
                            const at::Tensor& input, const at::Tensor& indices, int64_t spatial);
// Average pooling of input (AvgPoolKernel.cpp) and its gradient for `input`.
ir::Value avg_pool(LoweringContext& ctx, const at::Tensor& input, const Window& w,
                   bool count_include_pad, std::optional<int64_t> divisor_override);
ir::Value avg_pool_backward(LoweringContext& ctx, const at::Tensor& grad_output,
                            const at::Tensor& input, const Window& w, bool count_include_pad,
                            std::optional<int64_t> divisor_override);
// The CPU kernels' dtype check: floats (plus int64 when allow_long), else
// NotImplementedError "\"kernel\" not implemented for 'T'".
void check_kernel_dtype(const at::Tensor& t, const char* kernel, bool allow_long);

}  // namespace ttpu::aten::pool
