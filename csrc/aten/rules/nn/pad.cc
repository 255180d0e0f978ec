// Lowerings of reflection_pad{1,2,3}d and replication_pad{1,2,3}d (what
// torch.nn.functional.pad's 'reflect' and 'replicate' modes call). Each padded
// dim is a gather of input positions computed from an iota: output j reads
// input j - left, reflected about the edges (|i|, then 2(n-1) - i past the end:
// ATen's ReflectionPad.cpp) or clamped to [0, n) (ReplicationPadding.cpp).
// Negative padding crops, as on CPU.
#include <c10/util/Exception.h>

#include <sstream>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;

ir::Value pad_dim(LoweringContext& ctx, ir::Value x, int64_t dim, int64_t left, int64_t right,
                  bool reflect) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, x);
  const int64_t n = shape[dim];
  const int64_t m = n + left + right;
  if (left == 0 && right == 0) return x;
  const ir::TensorType t{DType::kI64, {m}};
  ir::Value i = g.binary(Op::kSub, g.iota(t, 0), g.constant_int(left, t));
  if (reflect) {
    i = g.unary(Op::kAbs, i);
    ir::Value back = g.binary(Op::kSub, g.constant_int(2 * (n - 1), t), i);
    i = g.select(g.compare(Cmp::kGE, i, g.constant_int(n, t)), back, i);
  } else {
    i = g.clamp(g.constant_int(0, t), i, g.constant_int(n - 1, t));
  }
  return take_along_dim(ctx, x, dim, i);
}

std::string sizes_text(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

// ATen's checks (padding::check_valid_input and the kernels' shape checks),
// with its messages; `k` padded dims.
void check_pad(const at::Tensor& self, const std::vector<int64_t>& p, int64_t k, bool reflect) {
  TORCH_CHECK(static_cast<int64_t>(p.size()) == 2 * k, "padding size is expected to be ", 2 * k);
  const bool batch = self.dim() == k + 2;
  const bool valid = (batch || self.dim() == k + 1) && [&] {
    for (int64_t d = batch ? 1 : 0; d < self.dim(); ++d) {
      if (self.size(d) == 0) return false;
    }
    return true;
  }();
  TORCH_CHECK(valid, "Expected ", k + 1, "D or ", k + 2,
              "D (batch mode) tensor with possibly 0 "
              "batch size and other non-zero dimensions for input, but got: ",
              sizes_text(self));
  static const char* kNames[] = {"W", "H", "D"};
  std::ostringstream in, out;
  bool small = false;
  for (int64_t j = k - 1; j >= 0; --j) {
    const int64_t dim = self.dim() - 1 - j;
    const int64_t n = self.size(dim), l = p[2 * j], r = p[2 * j + 1];
    if (reflect) {
      TORCH_CHECK(l < n && r < n, "Argument #", 4 + 2 * j,
                  ": Padding size should be less than "
                  "the corresponding input dimension, but got: padding (",
                  l, ", ", r, ") at dimension ", dim, " of input ", sizes_text(self));
    }
    in << (j < k - 1 ? ", " : "") << kNames[j] << ": " << n;
    out << (j < k - 1 ? " " : "") << kNames[j] << ": " << n + l + r;
    small = small || n + l + r < 1;
  }
  TORCH_CHECK(!small, "input (", in.str(), ") is too small. Calculated output ", out.str());
}

std::vector<ir::Value> pad(LoweringContext& ctx, const Args& a, int64_t k, bool reflect) {
  const at::Tensor& self = a.tensor(0);
  const std::vector<int64_t> p = a.ints(1);
  check_pad(self, p, k, reflect);
  ir::Value x = ctx.tensor(self);
  if (self.numel() == 0) {  // a 0 batch: only the shape changes
    std::vector<int64_t> out = self.sizes().vec();
    for (int64_t j = 0; j < k; ++j) out[self.dim() - 1 - j] += p[2 * j] + p[2 * j + 1];
    return {ctx.g().constant(0, {dtype(ctx, x), out})};
  }
  for (int64_t j = 0; j < k; ++j) {
    x = pad_dim(ctx, x, self.dim() - 1 - j, p[2 * j], p[2 * j + 1], reflect);
  }
  return {x};
}

template <int64_t K, bool Reflect>
std::vector<ir::Value> pad_rule(LoweringContext& ctx, const Args& a) {
  return pad(ctx, a, K, Reflect);
}

RegisterLowering kPadRules[] = {
    {"reflection_pad1d", pad_rule<1, true>},   {"reflection_pad2d", pad_rule<2, true>},
    {"reflection_pad3d", pad_rule<3, true>},   {"replication_pad1d", pad_rule<1, false>},
    {"replication_pad2d", pad_rule<2, false>}, {"replication_pad3d", pad_rule<3, false>},
};

}  // namespace
}  // namespace ttpu::aten
