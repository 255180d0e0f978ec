// Lowering of group norm's backward, native_group_norm_backward.
//
// The forward (native_group_norm) reaches this backend through ATen's
// CompositeExplicitAutograd math_group_norm, built from ops that are lowered;
// the backward has only CPU/CUDA kernels. With the input viewed as
// [N, G, C/G, HxW], xhat = (x - mean) * rstd per (n, g), and g = dy * weight[c]:
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

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW,
// group, output_mask) -> (grad_input, grad_weight, grad_bias).
ValueList group_norm_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_out = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  auto weight = a.opt_tensor(4);
  const int64_t n = a.integer(5), c = a.integer(6), hxw = a.integer(7), group = a.integer(8);
  std::vector<bool> mask;
  for (const auto& b : a[9].toBoolList()) mask.push_back(b);
  TORCH_CHECK(group > 0 && c % group == 0, "Expected number of channels in input to be divisible ",
              "by num_groups, but got input of shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == n * c * hxw, "Expected input to have ", n * c * hxw,
              " elements, but got ", input.numel());
  const bool has_weight = weight.has_value() && weight->defined();
  auto& g = ctx.g();
  const DType out = to_ir(input.scalar_type());
  const DType acc = acc_dtype(out);
  const DType param_dt = has_weight ? to_ir(weight->scalar_type()) : out;
  const std::vector<int64_t> shape{n, group, c / group, hxw};
  auto grouped = [&](const at::Tensor& t) { return g.reshape(g.convert(ctx.tensor(t), acc), shape); };
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
    ir::Value inner = g.binary(Op::kSub, g.binary(Op::kSub, gw, mean_broadcast(ctx, gw, in_group)),
                               g.binary(Op::kMul, xhat,
                                        mean_broadcast(ctx, g.binary(Op::kMul, gw, xhat), in_group)));
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

RegisterLowering r_group_norm_bwd("native_group_norm_backward", group_norm_backward);

}  // namespace
}  // namespace ttpu::aten
