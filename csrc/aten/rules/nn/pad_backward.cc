// Lowerings of reflection_pad{1,2,3}d_backward and
// replication_pad{1,2,3}d_backward. The forward (pad.cc) is a gather per padded
// dim of input position index[j] for output position j; its gradient sums the
// output gradient into those positions, one padded dim at a time: a product
// with the [m, n] one-hot matrix (index[j] == i). The index is pad.cc's:
// reflected about the edges (ReflectionPad.cpp) or clamped (ReplicationPadding.cpp).
#include <c10/util/Exception.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

// The [m, n] matrix mapping output position j to its input position.
Value pad_matrix(LoweringContext& ctx, int64_t n, int64_t left, int64_t right, bool reflect,
                 DType dt) {
  auto& g = ctx.g();
  const int64_t m = n + left + right;
  const ir::TensorType t{DType::kI64, {m}};
  Value i = g.binary(Op::kSub, g.iota(t, 0), g.constant_int(left, t));
  if (reflect) {
    i = g.unary(Op::kAbs, i);
    Value back = g.binary(Op::kSub, g.constant_int(2 * (n - 1), t), i);
    i = g.select(g.compare(Cmp::kGE, i, g.constant_int(n, t)), back, i);
  } else {
    i = g.clamp(g.constant_int(0, t), i, g.constant_int(n - 1, t));
  }
  Value hit =
      g.compare(Cmp::kEQ, g.broadcast_in_dim(i, {m, n}, {0}), g.iota({DType::kI64, {m, n}}, 1));
  return g.select(hit, g.constant(1, {dt, {m, n}}), g.constant(0, {dt, {m, n}}));
}

// The CPU kernels' grad_output checks, with their (inconsistent) wording:
// width first, then height, then depth.
void check_grad(const at::Tensor& grad, const at::Tensor& self, const std::vector<int64_t>& p,
                int64_t k, bool reflect) {
  const bool underscore = reflect && k != 2;  // "grad_output" or "gradOutput"
  const bool comma = !(k == 1 && !reflect);   // replication_pad1d has no comma
  static const char* kNames[] = {"width", "height", "depth"};
  TORCH_CHECK(grad.dim() == self.dim(), "tpu: grad_output must have the rank of self (", self.dim(),
              "), got ", grad.dim());
  for (int64_t j = 0; j < k; ++j) {
    const int64_t d = self.dim() - 1 - j;
    const int64_t expected = self.size(d) + p[2 * j] + p[2 * j + 1];
    TORCH_CHECK(grad.size(d) == expected, underscore ? "grad_output " : "gradOutput ", kNames[j],
                " unexpected. Expected: ", expected, comma ? ", Got: " : " Got: ", grad.size(d));
  }
  for (int64_t d = 0; d < self.dim() - k; ++d) {
    TORCH_CHECK(grad.size(d) == self.size(d), "tpu: grad_output size ", grad.sizes(),
                " does not match the input's ", self.sizes(), " outside the padded dims");
  }
}

template <int64_t K, bool Reflect>
std::vector<Value> pad_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  const auto p = a.ints(2);
  TORCH_CHECK(static_cast<int64_t>(p.size()) == 2 * K, "padding size is expected to be ", 2 * K,
              Reflect && K == 3 ? ", but got: " : "",
              Reflect && K == 3 ? std::to_string(p.size()) : "");
  TORCH_CHECK(self.dim() == K + 1 || self.dim() == K + 2, "Expected ", K + 1, "D or ", K + 2,
              "D (batch mode) tensor for input, but got: ", self.sizes());
  check_grad(grad, self, p, K, Reflect);
  const auto st = grad.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"",
                              Reflect ? "reflection_pad" : "replication_pad", K,
                              "d_backward\" not implemented for '", st, "'");
  const DType dt = to_ir(st);
  if (grad.numel() == 0 || self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  // 16-bit floats accumulate in f32 here (the dot's sums).
  const DType acc = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  Value dy = g.convert(ctx.tensor(grad), acc);
  for (int64_t j = 0; j < K; ++j) {
    const int64_t d = self.dim() - 1 - j;
    if (p[2 * j] == 0 && p[2 * j + 1] == 0) continue;
    dy = contract_dim(ctx, dy, d,
                      pad_matrix(ctx, self.size(d), p[2 * j], p[2 * j + 1], Reflect, acc));
  }
  return {g.convert(dy, dt)};
}

RegisterLowering kPadBackwardRules[] = {
    {"reflection_pad1d_backward", pad_backward<1, true>},
    {"reflection_pad2d_backward", pad_backward<2, true>},
    {"reflection_pad3d_backward", pad_backward<3, true>},
    {"replication_pad1d_backward", pad_backward<1, false>},
    {"replication_pad2d_backward", pad_backward<2, false>},
    {"replication_pad3d_backward", pad_backward<3, false>},
};

}  // namespace
}  // namespace ttpu::aten
