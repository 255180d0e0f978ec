// Lowerings of small math ops with no better home: linalg_cross, renorm, and
// the integer gcd / lcm.
#include <ATen/ExpandUtils.h>

#include "aten/rules/reduce_util.h"
#include "aten/rules/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
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
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of "
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
  ir::Value scaled = g.binary(Op::kDiv, limit, g.binary(Op::kAdd, norm, full_like(ctx, norm, 1e-7)));
  ir::Value factor = g.select(g.compare(Cmp::kGT, norm, limit), scaled, full_like(ctx, norm, 1));
  ir::Value x = g.convert(ctx.tensor(self), acc);
  return {g.convert(g.binary(Op::kMul, x, broadcast_to(ctx, factor, self.sizes())), dt)};
}

// gcd(|a|, |b|) by Euclid's algorithm (ATen's calc_gcd), unrolled: the
// number of steps is bounded by the Fibonacci numbers (the worst case of
// Euclid, Lame's theorem), so 93 steps cover int64. Finished lanes keep
// their values.
ir::Value gcd_values(LoweringContext& ctx, ir::Value a, ir::Value b) {
  auto& g = ctx.g();
  DType dt = dtype(ctx, a);
  int64_t bits = 8 * ir::byte_size(dt);
  int64_t steps = bits >= 64 ? 93 : bits >= 32 ? 47 : bits >= 16 ? 24 : 13;
  if (!ir::is_unsigned(dt)) {
    a = g.unary(Op::kAbs, a);
    b = g.unary(Op::kAbs, b);
  }
  ir::Value zero = full_like(ctx, a, 0);
  ir::Value one = full_like(ctx, a, 1);
  for (int64_t i = 0; i < steps; ++i) {
    ir::Value live = g.compare(Cmp::kNE, a, zero);
    ir::Value r = g.binary(Op::kRem, b, g.select(live, a, one));
    b = g.select(live, a, b);
    a = g.select(live, r, a);
  }
  return b;
}

ValueList gcd_lcm(LoweringContext& ctx, const Args& a, bool is_lcm) {
  DType dt = to_ir(result_type(a[0], a[1]));
  if (!ir::is_integral(dt)) pointwise::not_implemented(is_lcm ? "lcm_cpu" : "gcd_cpu", dt);
  auto& g = ctx.g();
  auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
  ir::Value d = gcd_values(ctx, x, y);
  if (!is_lcm) return {d};
  // lcm = |a / g * b|, 0 when g == 0 (ATen's calc_lcm).
  ir::Value zero = full_like(ctx, d, 0);
  ir::Value is_zero = g.compare(Cmp::kEQ, d, zero);
  ir::Value q = g.binary(Op::kDiv, x, g.select(is_zero, full_like(ctx, d, 1), d));
  ir::Value l = g.binary(Op::kMul, q, y);
  if (!ir::is_unsigned(dt)) l = g.unary(Op::kAbs, l);
  return {g.select(is_zero, zero, l)};
}

RegisterLowering kRules[] = {
    {"linalg_cross", cross},
    {"renorm", renorm},
    {"gcd", [](LoweringContext& c, const Args& a) { return gcd_lcm(c, a, false); }},
    {"lcm", [](LoweringContext& c, const Args& a) { return gcd_lcm(c, a, true); }},
};

}  // namespace
}  // namespace ttpu::aten
