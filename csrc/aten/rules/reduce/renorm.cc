// Lowering of renorm: every slice along a dim whose p-norm exceeds maxnorm is
// scaled down to it (the norm is linalg_vector_norm's rule).
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// renorm(self, p, dim, maxnorm): each slice along dim whose p-norm exceeds
// maxnorm is scaled to norm maxnorm (ATen's factor maxnorm / (norm + 1e-7),
// Normalization.cpp / RenormKernel), computed in the accumulate dtype.
ValueList renorm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const c10::Scalar p = a.scalar(1);
  const c10::Scalar maxnorm = a.scalar(3);
  TORCH_CHECK(!p.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p.toDouble() > 0.0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm.toDouble() >= 0.0, "renorm: expected maxnorm to be >= 0 but got ",
              maxnorm.toDouble());
  const int64_t ndim = self.dim();
  TORCH_CHECK(ndim > 1, "renorm: input needs at least 2 dimensions, got ", ndim, " dimensions");
  const int64_t dim = wrap_dim(a.integer(2), ndim);
  std::vector<int64_t> reduce_dims;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d != dim) reduce_dims.push_back(d);
  }
  DType dt = to_ir(self.scalar_type());
  DType acc = acc_dtype(dt);
  std::vector<c10::IValue> args{self, p, reduce_dims, true, to_aten(acc)};
  ir::Value norm = lowering_table().at("linalg_vector_norm")(ctx, Args(args))[0];
  auto& g = ctx.g();
  ir::Value limit = broadcast_to(ctx, ctx.scalar(maxnorm, acc), dims(ctx, norm));
  ir::Value scaled =
      g.binary(Op::kDiv, limit, g.binary(Op::kAdd, norm, full_like(ctx, norm, 1e-7)));
  ir::Value factor = g.select(g.compare(Cmp::kGT, norm, limit), scaled, full_like(ctx, norm, 1));
  ir::Value x = g.convert(ctx.tensor(self), acc);
  return {g.convert(g.binary(Op::kMul, x, broadcast_to(ctx, factor, self.sizes())), dt)};
}

RegisterLowering kRenormRules[] = {
    {"renorm", renorm},
};

}  // namespace
}  // namespace ttpu::aten
