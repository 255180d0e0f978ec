// Lowerings of convolution: on a PrivateUse1 device at::_convolution (after its
// shape checks, with 1-D convolutions already viewed as 2-D) selects
// ConvBackend::Overrideable and calls convolution_overrideable; autograd's
// convolution_backward calls convolution_backward_overrideable. Both are lowered
// here for any number of spatial dimensions, grouped, dilated and transposed.
//
// Layouts are PyTorch's: input [N, C, spatial...], weight [O, C/groups, k...]
// (transposed: [C, O/groups, k...]), output [N, O, spatial...], which are the
// IR's fixed convolution layouts. The gradients are convolutions themselves,
// derived as in JAX's lax convolution transpose rules
// (jax/_src/lax/convolution.py: _conv_general_dilated_transpose_lhs/_rhs and
// _conv_general_vjp_lhs_padding/_rhs_padding).
#include <sstream>

#include "aten/ops_util.h"
#include "aten/rules/nn/conv_depthwise.h"

namespace ttpu::aten {
namespace {

using ir::Op;
using ir::Value;

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// A stride/padding/... list for `n` spatial dims; one entry stands for all (as
// at::native's expand_param_if_needed accepts).
std::vector<int64_t> expand_param(std::vector<int64_t> v, const char* name, int64_t n) {
  if (v.size() == 1 && n > 1) v.assign(static_cast<size_t>(n), v[0]);
  TORCH_CHECK(static_cast<int64_t>(v.size()) == n, "expected ", name,
              " to be a single integer value or a ", "list of ", n,
              " values to match the convolution dimensions, but got ", name, "=",
              c10::IntArrayRef(v));
  return v;
}

// Arguments from `first` on: stride, padding, dilation, transposed, output_padding, groups.
ConvParams params_of(const Args& a, size_t first, int64_t spatial) {
  ConvParams p;
  p.stride = expand_param(a.ints(first), "stride", spatial);
  p.padding = expand_param(a.ints(first + 1), "padding", spatial);
  p.dilation = expand_param(a.ints(first + 2), "dilation", spatial);
  p.transposed = a.boolean(first + 3);
  p.output_padding = expand_param(a.ints(first + 4), "output_padding", spatial);
  p.groups = a.integer(first + 5);
  TORCH_CHECK(p.groups > 0, "non-positive groups is not supported");
  return p;
}

std::vector<int64_t> spatial_dims(LoweringContext& ctx, Value v) {
  const auto& d = dims(ctx, v);
  return {d.begin() + 2, d.end()};
}

// [a, b, rest...] -> [b, a, rest...]
Value swap01(LoweringContext& ctx, Value v) {
  std::vector<int64_t> perm(dims(ctx, v).size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[0], perm[1]);
  return ctx.g().transpose(v, perm);
}

// A convolution whose half-precision (bf16/f16) operands accumulate in float32
// and round once, as CPU's kernels do (at::opmath_type); XLA:CPU would
// accumulate in the narrow type.
Value convolution_op(LoweringContext& ctx, Value lhs, Value rhs, const ir::ConvDims& d) {
  auto& g = ctx.g();
  const ir::DType dt = dtype(ctx, lhs);
  if (dt != ir::DType::kBF16 && dt != ir::DType::kF16) return g.convolution(lhs, rhs, d);
  return g.convert(
      g.convolution(g.convert(lhs, ir::DType::kF32), g.convert(rhs, ir::DType::kF32), d), dt);
}

// conv(x, w): x [N, C, in...], w [O, C/g, k...] -> [N, O, out...].
Value conv(LoweringContext& ctx, Value x, Value w, const ConvParams& p) {
  ir::ConvDims d;
  d.window_strides = p.stride;
  d.padding_low = p.padding;
  d.padding_high = p.padding;
  d.rhs_dilation = p.dilation;
  d.feature_group_count = p.groups;
  return convolution_op(ctx, x, w, d);
}

// The gradient of conv(x, w) w.r.t. x for x of spatial sizes `in`, given
// dy [N, O, out...]: a convolution of dy, dilated by the stride, with the
// spatially reversed kernel whose in/out features are swapped within each group.
Value conv_input_grad(LoweringContext& ctx, Value dy, Value w, const ConvParams& p,
                      const std::vector<int64_t>& in) {
  auto& g = ctx.g();
  const auto wd = dims(ctx, w);
  const int64_t n = static_cast<int64_t>(wd.size()) - 2;
  const int64_t o = wd[0], c_per_group = wd[1], groups = p.groups;
  // [O, C/g, k...] -> [g, O/g, C/g, k...] -> [g, C/g, O/g, k...] -> [C, O/g, k...]
  std::vector<int64_t> split{groups, o / groups, c_per_group}, perm{0, 2, 1};
  std::vector<int64_t> merged{groups * c_per_group, o / groups};
  std::vector<int64_t> rev;
  for (int64_t d = 0; d < n; ++d) {
    split.push_back(wd[2 + d]);
    merged.push_back(wd[2 + d]);
    perm.push_back(3 + d);
    rev.push_back(2 + d);
  }
  Value k = g.reshape(g.transpose(g.reshape(w, split), perm), merged);
  k = g.reverse(k, rev);
  const auto out = spatial_dims(ctx, dy);
  ir::ConvDims d;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t kd = dilate(wd[2 + i], p.dilation[i]);
    const int64_t before = kd - 1 - p.padding[i];
    d.padding_low.push_back(before);
    d.padding_high.push_back(in[i] + kd - 1 - dilate(out[i], p.stride[i]) - before);
  }
  d.lhs_dilation = p.stride;
  d.rhs_dilation = p.dilation;
  d.feature_group_count = groups;
  return convolution_op(ctx, dy, k, d);
}

// The gradient of conv(x, w) w.r.t. w for a kernel of spatial sizes `k`, given
// x [N, C, in...] and dy [N, O, out...]: a convolution over the batch, with
// x's channels as the batch and the groups as batch groups.
Value conv_weight_grad(LoweringContext& ctx, Value x, Value dy, const ConvParams& p,
                       const std::vector<int64_t>& k) {
  const auto in = spatial_dims(ctx, x);
  const auto out = spatial_dims(ctx, dy);
  ir::ConvDims d;
  for (size_t i = 0; i < k.size(); ++i) {
    const int64_t kd = dilate(k[i], p.dilation[i]);
    d.padding_low.push_back(p.padding[i]);
    d.padding_high.push_back(dilate(out[i], p.stride[i]) - in[i] + kd - 1 - p.padding[i]);
  }
  d.window_strides = p.dilation;
  d.rhs_dilation = p.stride;
  d.batch_group_count = p.groups;
  // [C, N, in...] * [O, N, out...] -> [C/g, O, k...] -> [O, C/g, k...]
  return swap01(ctx, convolution_op(ctx, swap01(ctx, x), swap01(ctx, dy), d));
}

// Depthwise convolutions take the taps form on the CPU plugin (conv_depthwise.h).
bool depthwise(LoweringContext& ctx, Value x, Value w, const ConvParams& p) {
  return use_depthwise_taps(dims(ctx, x), dims(ctx, w), p.groups, p.transposed, dtype(ctx, x));
}

DepthwiseParams depthwise_params(const ConvParams& p) { return {p.stride, p.padding, p.dilation}; }

// A transposed convolution's output sizes (at::native::conv_input_size).
std::vector<int64_t> transposed_out(const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                                    const ConvParams& p) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    out.push_back((in[i] - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (k[i] - 1) +
                  p.output_padding[i] + 1);
  }
  return out;
}

// The leading `sizes` of v's spatial dims (dims from 2 on).
Value crop_spatial(LoweringContext& ctx, Value v, const std::vector<int64_t>& sizes) {
  auto limit = dims(ctx, v);
  std::vector<int64_t> start(limit.size(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) limit[2 + i] = sizes[i];
  if (limit == dims(ctx, v)) return v;
  return ctx.g().slice(v, start, limit, std::vector<int64_t>(limit.size(), 1));
}

// The CPU kernels dispatch on the input's dtype and read the weight with it.
void check_conv_dtypes(const at::Tensor& input, const at::Tensor& other) {
  TORCH_CHECK(input.scalar_type() == other.scalar_type(), "expected scalar type ",
              input.scalar_type(), " but found ", other.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() != at::kBool,
                              "\"slow_conv2d_cpu\" not implemented for 'Bool'");
}

void check_ranks(const at::Tensor& input, const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() >= 3, "weight should have at least three dimensions");
  TORCH_CHECK(input.dim() == weight.dim(), "Expected ", weight.dim(), "-dimensional input for ",
              weight.dim(), "-dimensional weight ", weight.sizes(), ", but got ", input.dim(),
              "-dimensional input of size ", input.sizes(), " instead");
}

// The CPU transposed kernels' check (slow_conv_transpose2d/3d shape checks):
// output_padding must be below the stride or the dilation in every dim.
void check_output_padding(const ConvParams& p) {
  static const char* const kNames[] = {"depth", "height", "width"};
  const size_t n = p.stride.size();
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    ok = ok && (p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i]);
  }
  if (ok) return;
  // Dims are named from the right: width, height, depth.
  auto dim_name = [&](size_t i) {
    return n <= 3 ? std::string(kNames[3 - n + i]) : std::to_string(i);
  };
  std::ostringstream msg;
  msg << "output padding must be smaller than either stride or dilation, but got";
  const std::pair<const char*, const std::vector<int64_t>*> lists[] = {
      {"output_padding", &p.output_padding}, {"stride", &p.stride}, {"dilation", &p.dilation}};
  for (const auto& [name, values] : lists) {
    for (size_t i = 0; i < n; ++i) msg << " " << name << "_" << dim_name(i) << ": " << (*values)[i];
  }
  TORCH_CHECK(false, msg.str());
}

// convolution_overrideable(input, weight, bias?, stride, padding, dilation,
// transposed, output_padding, groups).
std::vector<Value> convolution(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& input = a.tensor(0);
  const at::Tensor& weight = a.tensor(1);
  const auto bias = a.opt_tensor(2);
  check_ranks(input, weight);
  check_conv_dtypes(input, weight);
  if (bias && bias->defined()) check_conv_dtypes(input, *bias);
  const ConvParams p = params_of(a, 3, weight.dim() - 2);
  if (p.transposed) check_output_padding(p);
  Value x = ctx.tensor(input);
  Value w = ctx.tensor(weight);
  // Half types: the products and the bias add in float32, one rounding at the
  // end, as CPU's kernels.
  const ir::DType dt = dtype(ctx, x);
  const ir::DType acc = dt == ir::DType::kBF16 || dt == ir::DType::kF16 ? ir::DType::kF32 : dt;
  x = g.convert(x, acc);
  w = g.convert(w, acc);
  const auto in = spatial_dims(ctx, x);
  const auto k = spatial_dims(ctx, w);
  Value y = p.transposed              ? conv_input_grad(ctx, x, w, p, transposed_out(in, k, p))
            : depthwise(ctx, x, w, p) ? depthwise_forward(ctx, x, w, depthwise_params(p))
                                      : conv(ctx, x, w, p);
  if (bias && bias->defined()) {
    Value b = g.convert(ctx.tensor(*bias), acc);
    y = g.binary(Op::kAdd, y, g.broadcast_in_dim(b, dims(ctx, y), {1}));
  }
  return {g.convert(y, dt)};
}

// Sum of dy over every dim but the features, accumulated in f32 for 16-bit floats
// (as CPU's sum accumulates them).
Value bias_grad(LoweringContext& ctx, Value dy) {
  const ir::DType dt = dtype(ctx, dy);
  const bool widen = dt == ir::DType::kF16 || dt == ir::DType::kBF16;
  std::vector<int64_t> rdims{0};
  for (size_t i = 2; i < dims(ctx, dy).size(); ++i) rdims.push_back(static_cast<int64_t>(i));
  Value s = reduce(ctx, widen ? ctx.g().convert(dy, ir::DType::kF32) : dy, rdims, false,
                   ir::Reducer::kAdd);
  return ctx.g().convert(s, dt);
}

// convolution_backward_overrideable(grad_output, input, weight, stride, padding,
// dilation, transposed, output_padding, groups, output_mask) ->
// (grad_input, grad_weight, grad_bias).
std::vector<Value> convolution_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const at::Tensor& weight = a.tensor(2);
  check_ranks(input, weight);
  check_conv_dtypes(input, weight);
  check_conv_dtypes(input, grad_output);
  const ConvParams p = params_of(a, 3, weight.dim() - 2);
  const auto mask = a[9].to<std::array<bool, 3>>();
  Value dy = ctx.tensor(grad_output);
  Value x = ctx.tensor(input);
  Value w = ctx.tensor(weight);
  const auto in = spatial_dims(ctx, x);
  const auto k = spatial_dims(ctx, w);
  // A gradient that was not asked for is returned empty: autograd never reads it,
  // and an empty result costs no program output.
  const Value none = g.constant(0, {dtype(ctx, x), {0}});
  std::vector<Value> grads{none, none, none};
  if (!p.transposed && depthwise(ctx, x, w, p)) {
    const DepthwiseParams dp = depthwise_params(p);
    if (mask[0]) grads[0] = depthwise_input_grad(ctx, dy, w, dp, dims(ctx, x));
    if (mask[1]) grads[1] = depthwise_weight_grad(ctx, x, dy, dp, k);
  } else if (!p.transposed) {
    if (mask[0]) grads[0] = conv_input_grad(ctx, dy, w, p, in);
    if (mask[1]) grads[1] = conv_weight_grad(ctx, x, dy, p, k);
  } else {
    // y = conv_transpose(x, w) is the input gradient of conv(., w), so its input
    // gradient is conv(dy, w) and its weight gradient that of conv(dy, w) w.r.t. w
    // with x in the role of the output gradient. With output_padding >= stride
    // (allowed when dilation is larger) conv(dy, w) is longer than x: crop it.
    if (mask[0]) grads[0] = crop_spatial(ctx, conv(ctx, dy, w, p), in);
    if (mask[1]) grads[1] = conv_weight_grad(ctx, dy, x, p, k);
  }
  if (mask[2]) grads[2] = bias_grad(ctx, dy);
  return grads;
}

RegisterLowering r_conv("convolution_overrideable", convolution);
RegisterLowering r_conv_bwd("convolution_backward_overrideable", convolution_backward);

}  // namespace
}  // namespace ttpu::aten
