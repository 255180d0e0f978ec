// Lowerings of group norm, native_group_norm and native_group_norm_backward.
//
// The forward has a rule of its own rather than ATen's CompositeExplicitAutograd
// math_group_norm: that one starts with input.view(...), which raises for a
// channels_last input (CPU's kernel takes it; diffusers' UNet feeds it
// channels_last activations). Reading the input as a logical value works for
// every layout; ATen's check that refuses other strided inputs is kept.
// With the input viewed as [N, G, C/G, HxW], xhat = (x - mean) * rstd per
// (n, g), and g = dy * weight[c]:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (means over C/G and HxW)
//   dweight[c] = sum over n, HxW of dy * xhat,  dbias[c] = sum of dy,
// the same derivation as layer norm's (Wu & He, "Group Normalization", 2018,
// normalizes exactly like layer norm within each group).
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

void check_groups(const at::Tensor& input, int64_t c, int64_t group) {
  TORCH_CHECK(group > 0 && c % group == 0, "Expected number of channels in input to be divisible ",
              "by num_groups, but got input of shape ", input.sizes(), " and num_groups=", group);
}

// native_group_norm(input [N, C, *], weight? [C], bias? [C], N, C, HxW, group, eps)
// -> (out [N, C, *], mean [N, G], rstd [N, G]); statistics in the input's dtype
// (computed in f32 for bf16/f16), the biased variance, as ATen's CPU kernel.
ValueList group_norm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  auto weight = a.opt_tensor(1);
  auto bias = a.opt_tensor(2);
  const int64_t n = a.integer(3), c = a.integer(4), hxw = a.integer(5), group = a.integer(6);
  check_groups(input, c, group);
  TORCH_CHECK(input.numel() == n * c * hxw, "Expected input to have ", n * c * hxw,
              " elements, but got ", input.numel());
  // ATen's native_group_norm checks this before its kernel (group_norm.cpp,
  // CPU's rule: dense in the suggested format, so channels_last passes),
  // written as ATen writes it so the message starts as CPU's. The math below
  // reads any layout, but group_norm hands the op a contiguous() copy, and a
  // direct call with a strided input raises on CPU and CUDA.
  const at::Tensor& X = input;
  const auto memory_format = X.suggest_memory_format();
  TORCH_CHECK(X.is_contiguous(memory_format));
  for (const auto& p : {weight, bias}) {
    TORCH_CHECK(!p.has_value() || !p->defined() || (p->dim() == 1 && p->numel() == c),
                "Expected weight and bias to be a vector of size equal to the number of ",
                "channels in input, but got weight of shape ", p->sizes(), " and input of shape ",
                input.sizes());
  }
  auto& g = ctx.g();
  const DType out = to_ir(input.scalar_type());
  const DType acc = acc_dtype(out);
  const std::vector<int64_t> shape{n, group, c / group, hxw};
  const std::vector<int64_t> in_group{2, 3};
  const double count = static_cast<double>((c / group) * hxw);
  // Statistics over each (n, g): [N, G, 1, 1], broadcast where used.
  auto mean_of = [&](ir::Value v) {
    ir::Value s = reduce(ctx, v, in_group, /*keepdim=*/true, Reducer::kAdd);
    return g.binary(Op::kDiv, s, full_like(ctx, s, count));
  };
  ir::Value x = g.reshape(g.convert(ctx.tensor(input), acc), shape);
  ir::Value mean = mean_of(x);
  ir::Value dev = g.binary(Op::kSub, x, broadcast_to(ctx, mean, shape));
  ir::Value var = mean_of(g.binary(Op::kMul, dev, dev));
  ir::Value eps = full_like(ctx, var, a.scalar(7).toDouble());
  ir::Value rstd = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, eps));
  ir::Value y = g.binary(Op::kMul, dev, broadcast_to(ctx, rstd, shape));
  auto per_channel = [&](const at::Tensor& p) {
    ir::Value v = g.reshape(g.convert(ctx.tensor(p), acc), {group, c / group});
    return g.broadcast_in_dim(v, shape, {1, 2});
  };
  if (weight.has_value() && weight->defined()) y = g.binary(Op::kMul, y, per_channel(*weight));
  if (bias.has_value() && bias->defined()) y = g.binary(Op::kAdd, y, per_channel(*bias));
  auto stat = [&](ir::Value v) { return g.convert(g.reshape(v, {n, group}), out); };
  return {g.convert(g.reshape(y, input.sizes().vec()), out), stat(mean), stat(rstd)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW,
// group, output_mask) -> (grad_input, grad_weight, grad_bias).
ValueList group_norm_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_out = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  auto weight = a.opt_tensor(4);
  const int64_t n = a.integer(5), c = a.integer(6), hxw = a.integer(7), group = a.integer(8);
  std::vector<bool> mask;
  for (const auto& b : a[9].toBoolList()) mask.push_back(b);
  check_groups(input, c, group);
  TORCH_CHECK(input.numel() == n * c * hxw, "Expected input to have ", n * c * hxw,
              " elements, but got ", input.numel());
  const bool has_weight = weight.has_value() && weight->defined();
  auto& g = ctx.g();
  const DType out = to_ir(input.scalar_type());
  const DType acc = acc_dtype(out);
  const DType param_dt = has_weight ? to_ir(weight->scalar_type()) : out;
  const std::vector<int64_t> shape{n, group, c / group, hxw};
  auto grouped = [&](const at::Tensor& t) {
    return g.reshape(g.convert(ctx.tensor(t), acc), shape);
  };
  auto per_group = [&](const at::Tensor& t) {  // [N, G] statistics
    return g.broadcast_in_dim(g.reshape(g.convert(ctx.tensor(t), acc), {n, group}), shape, {0, 1});
  };
  ir::Value x = grouped(input);
  ir::Value dy = grouped(grad_out);
  ir::Value rstd = per_group(a.tensor(3));
  ir::Value xhat = g.binary(Op::kMul, g.binary(Op::kSub, x, per_group(a.tensor(2))), rstd);
  ValueList r;
  if (mask[0]) {
    ir::Value gw = dy;
    if (has_weight) {
      ir::Value w = g.reshape(g.convert(ctx.tensor(*weight), acc), {group, c / group});
      gw = g.binary(Op::kMul, dy, g.broadcast_in_dim(w, shape, {1, 2}));
    }
    const std::vector<int64_t> in_group{2, 3};
    ir::Value inner = g.binary(
        Op::kSub, g.binary(Op::kSub, gw, mean_broadcast(ctx, gw, in_group)),
        g.binary(Op::kMul, xhat, mean_broadcast(ctx, g.binary(Op::kMul, gw, xhat), in_group)));
    ir::Value dx = g.binary(Op::kMul, rstd, inner);
    r.push_back(g.convert(g.reshape(dx, input.sizes().vec()), out));
  } else {
    r.push_back(empty_output(ctx, out));
  }
  auto per_channel = [&](ir::Value v) {
    return g.convert(g.reshape(reduce(ctx, v, {0, 3}, false, Reducer::kAdd), {c}), param_dt);
  };
  r.push_back(mask[1] ? per_channel(g.binary(Op::kMul, dy, xhat)) : empty_output(ctx, param_dt));
  r.push_back(mask[2] ? per_channel(dy) : empty_output(ctx, param_dt));
  return r;
}

RegisterLowering r_group_norm("native_group_norm", group_norm);
RegisterLowering r_group_norm_bwd("native_group_norm_backward", group_norm_backward);

}  // namespace
}  // namespace ttpu::aten
