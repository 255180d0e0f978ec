// Lowering of channel_shuffle: a reshape, transpose and reshape back.
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ValueList = std::vector<ir::Value>;

// channel_shuffle(self, groups): [N, C, *] viewed as [N, g, C/g, *], the two
// group dims swapped, and viewed back. Checks and messages from ATen
// (ChanelShuffle.cpp).
ValueList channel_shuffle(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const int64_t groups = a.integer(1);
  TORCH_CHECK(self.dim() > 2,
              "channel_shuffle expects input with > 2 dims, but got input with "
              "sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0,
              "Number of groups to divide channels in must be positive. Value of "
              "groups:",
              groups);
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

RegisterLowering kChannelShuffleRules[] = {
    {"channel_shuffle", channel_shuffle},
};

}  // namespace
}  // namespace ttpu::aten
