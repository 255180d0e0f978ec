// Lowering of linalg_cross, the 3-vector cross product along one dim.
#include <ATen/ExpandUtils.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Op;
using ValueList = std::vector<ir::Value>;

// Component i (0..2) of `v` along `dim`, keeping the dim (size 1).
ir::Value component(LoweringContext& ctx, ir::Value v, int64_t dim, int64_t i) {
  std::vector<int64_t> shape = dims(ctx, v);
  std::vector<int64_t> lo(shape.size(), 0), strides(shape.size(), 1);
  lo[dim] = i;
  shape[dim] = i + 1;
  return ctx.g().slice(v, lo, shape, strides);
}

// linalg_cross(self, other, *, dim=-1): the 3-vector cross product along dim,
// after broadcasting. Checks and messages from ATen (Cross.cpp, linalg_cross meta).
ValueList cross(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& other = a.tensor(1);
  const int64_t raw_dim = a.integer(2);
  TORCH_CHECK(self.dim() == other.dim(),
              "linalg.cross: inputs must have the same number of "
              "dimensions.");
  const int64_t dim = wrap_dim(raw_dim, self.dim());
  TORCH_CHECK(self.size(dim) == 3 && other.size(dim) == 3, "linalg.cross: inputs dimension ",
              raw_dim, " must have length 3. Got ", self.size(dim), " and ", other.size(dim));
  std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "expected scalar type ",
              self.scalar_type(), " but found ", other.scalar_type());
  auto& g = ctx.g();
  ir::Value x = broadcast_to(ctx, ctx.tensor(self), shape);
  ir::Value y = broadcast_to(ctx, ctx.tensor(other), shape);
  auto c = [&](ir::Value v, int64_t i) { return component(ctx, v, dim, i); };
  auto term = [&](int64_t i, int64_t j) {
    return g.binary(Op::kSub, g.binary(Op::kMul, c(x, i), c(y, j)),
                    g.binary(Op::kMul, c(x, j), c(y, i)));
  };
  return {g.concatenate({term(1, 2), term(2, 0), term(0, 1)}, dim)};
}

RegisterLowering kCrossRules[] = {
    {"linalg_cross", cross},
};

}  // namespace
}  // namespace ttpu::aten
