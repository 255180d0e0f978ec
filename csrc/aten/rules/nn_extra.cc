// Lowerings of small nn ops: prelu's kernel and its backward, and
// channel_shuffle.
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

// channel_shuffle(self, groups): [N, C, *] viewed as [N, g, C/g, *], the two
// group dims swapped, and viewed back. Checks and messages from ATen
// (ChanelShuffle.cpp).
ValueList channel_shuffle(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const int64_t groups = a.integer(1);
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input with > 2 dims, but got input with "
              "sizes ", self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive. Value of "
              "groups:", groups);
  const int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c,
              " channels and ", groups, " groups.");
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (self.numel() == 0) return {x};
  std::vector<int64_t> split = self.sizes().vec();
  split[1] = c / groups;
  split.insert(split.begin() + 1, groups);
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < static_cast<int64_t>(split.size()); ++k) perm.push_back(k);
  std::swap(perm[1], perm[2]);
  return {g.reshape(g.transpose(g.reshape(x, split), perm), self.sizes().vec())};
}

RegisterLowering kRules[] = {
    {"_prelu_kernel", prelu},
    {"_prelu_kernel_backward", prelu_backward},
    {"channel_shuffle", channel_shuffle},
};

}  // namespace
}  // namespace ttpu::aten
