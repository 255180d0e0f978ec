// Lowerings of prelu's kernel and its backward.
#include <ATen/ExpandUtils.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// _prelu_kernel(self, weight): self > 0 ? self : weight * self, with weight
// already shaped to broadcast (prelu reshapes it first).
ValueList prelu(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, w] = broadcast_pair(ctx, ctx.tensor(a.tensor(0)), ctx.tensor(a.tensor(1)));
  ir::Value pos = g.compare(Cmp::kGT, x, full_like(ctx, x, 0));
  return {g.select(pos, x, g.binary(Op::kMul, w, x))};
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight),
// both of the broadcast shape (autograd sums grad_weight to weight's shape):
// ATen's kernel (Activation.cpp): self > 0 ? g : w * g, and self > 0 ? 0 : self * g.
ValueList prelu_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  std::vector<int64_t> shape =
      at::infer_size(at::infer_size(a.tensor(0).sizes(), a.tensor(1).sizes()), a.tensor(2).sizes());
  ir::Value go = broadcast_to(ctx, ctx.tensor(a.tensor(0)), shape);
  ir::Value x = broadcast_to(ctx, ctx.tensor(a.tensor(1)), shape);
  ir::Value w = broadcast_to(ctx, ctx.tensor(a.tensor(2)), shape);
  ir::Value pos = g.compare(Cmp::kGT, x, full_like(ctx, x, 0));
  return {g.select(pos, go, g.binary(Op::kMul, w, go)),
          g.select(pos, full_like(ctx, x, 0), g.binary(Op::kMul, x, go))};
}

RegisterLowering kPreluRules[] = {
    {"_prelu_kernel", prelu},
    {"_prelu_kernel_backward", prelu_backward},
};

}  // namespace
}  // namespace ttpu::aten
