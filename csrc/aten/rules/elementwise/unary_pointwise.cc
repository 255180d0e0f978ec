// Lowerings of the pointwise ops that select, bound or fill values (clamp,
// where, fill, zero, masked_fill, nan_to_num) and the pointwise updates that
// optimizers are built from (lerp, addcmul, addcdiv).
//
// Result dtypes follow TensorIterator's promotion over all tensor and scalar
// operands (at::native::result_type), as each op's CPU kernel configures it.
#include <limits>

#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using pointwise::not_implemented;
using pointwise::opmath;
using pointwise::result_type_of;
using pointwise::where;

// An operand of a pointwise op in `dt`: a tensor, a Python scalar, or None.
std::optional<ir::Value> opt_operand(LoweringContext& ctx, const c10::IValue& v, DType dt) {
  if (v.isNone()) return std::nullopt;
  return operand(ctx, v, dt);
}

// min(max(x, lo), hi) with NaN propagation from any operand (the StableHLO
// maximum/minimum semantics, which are PyTorch's clamp semantics), broadcast to
// the common shape. Unlike stablehlo.clamp this also takes full-shape bounds.
// The Scalar overloads reject bool (their CPU kernel's dispatch list lacks
// it, named by `scalar_kernel`); the Tensor overloads take it.
std::vector<ir::Value> clamp_values(LoweringContext& ctx, const c10::IValue& self,
                                    const c10::IValue& lo, const c10::IValue& hi,
                                    const char* scalar_kernel) {
  TORCH_CHECK(!lo.isNone() || !hi.isNone(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  DType dt = to_ir(result_type_of({&self, &lo, &hi}));
  if (dt == DType::kBool && scalar_kernel != nullptr) not_implemented(scalar_kernel, dt);
  ir::Value x = operand(ctx, self, dt);
  if (auto l = opt_operand(ctx, lo, dt)) x = binary(ctx, Op::kMax, x, *l);
  if (auto h = opt_operand(ctx, hi, dt)) x = binary(ctx, Op::kMin, x, *h);
  return {x};
}

std::vector<ir::Value> clamp_rule(LoweringContext& c, const Args& a) {
  return clamp_values(c, a[0], a[1], a[2], "clamp_scalar_cpu");
}
std::vector<ir::Value> clamp_tensor(LoweringContext& c, const Args& a) {
  return clamp_values(c, a[0], a[1], a[2], nullptr);
}
std::vector<ir::Value> clamp_min(LoweringContext& c, const Args& a) {
  return clamp_values(c, a[0], a[1], c10::IValue(),
                      a[1].isTensor() ? nullptr : "clamp_min_scalar_cpu");
}
std::vector<ir::Value> clamp_max(LoweringContext& c, const Args& a) {
  return clamp_values(c, a[0], c10::IValue(), a[1],
                      a[1].isTensor() ? nullptr : "clamp_max_scalar_cpu");
}

std::vector<ir::Value> where_self(LoweringContext& ctx, const Args& a) {
  const at::Tensor& cond = a.tensor(0);
  TORCH_CHECK(cond.scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              cond.scalar_type());
  DType dt = to_ir(result_type_of({&a[1], &a[2]}));
  return {where(ctx, ctx.tensor(cond), operand(ctx, a[1], dt), operand(ctx, a[2], dt))};
}

// fill: the value broadcast to self's shape and dtype; self is not read.
// A one-element self takes ATen's scalar_fill conversion (Scalar::to<T>,
// what CPU's fill_ of one element and scalar_tensor use): 1e6 into float16
// is inf there, while a larger fill checks the range (CPU raises "value
// cannot be converted to type c10::Half without overflow"). where(c, half,
// 1e6) makes its scalar operand this way.
std::vector<ir::Value> fill_scalar(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  c10::Scalar s = a.scalar(1);
  if (self.numel() == 1 && !s.isComplex() && !c10::isComplexType(self.scalar_type())) {
    s = at::scalar_tensor(s, at::device(at::kCPU).dtype(self.scalar_type())).item();
  }
  ir::Value v = ctx.scalar(s, to_ir(self.scalar_type()));
  return {broadcast_to(ctx, v, self.sizes())};
}

std::vector<ir::Value> fill_tensor(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& value = a.tensor(1);
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  ir::Value v = ctx.g().convert(ctx.tensor(value), to_ir(self.scalar_type()));
  return {broadcast_to(ctx, v, self.sizes())};
}

std::vector<ir::Value> zero_rule(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  return {ctx.g().constant(0, {to_ir(self.scalar_type()), sizes})};
}

// masked_fill: the result has the broadcast shape of self and mask (ATen's
// functional masked_fill expands both, then fills a clone) and self's dtype.
std::vector<ir::Value> masked_fill(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mask = a.tensor(1);
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.dtype());
  DType dt = to_ir(self.scalar_type());
  ir::Value value;
  if (a[2].isTensor()) {
    const at::Tensor& v = a.tensor(2);
    TORCH_CHECK(v.dim() == 0,
                "masked_fill_ only supports a 0-dimensional value tensor, but got "
                "tensor with ",
                v.dim(), " dimension(s).");
    value = ctx.g().convert(ctx.tensor(v), dt);
  } else {
    value = ctx.scalar(a.scalar(2), dt);
  }
  return {where(ctx, ctx.tensor(mask), value, ctx.tensor(self))};
}

double largest(DType dt) {
  switch (dt) {
    case DType::kF16: return 65504.0;
    case DType::kBF16: return 3.38953138925153547590470800371487866880e+38;
    case DType::kF32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// nan_to_num: NaN -> nan (0), +inf -> posinf (the dtype's largest finite),
// -inf -> neginf (the lowest finite). The identity on integers and bool.
std::vector<ir::Value> nan_to_num(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(a.tensor(0));
  DType dt = dtype(ctx, x);
  if (!ir::is_float(dt)) return {x};
  auto replacement = [&](size_t i, double fallback) {
    ir::Value v = a.is_none(i) ? ctx.constant(fallback, dt) : ctx.scalar(a.real(i), dt);
    return broadcast_to(ctx, v, dims(ctx, x));
  };
  ir::Value inf = full_like(ctx, x, INFINITY);
  ir::Value y = g.select(g.compare(Cmp::kEQ, x, inf), replacement(2, largest(dt)), x);
  y = g.select(g.compare(Cmp::kEQ, x, g.unary(Op::kNeg, inf)), replacement(3, -largest(dt)), y);
  return {g.select(g.compare(Cmp::kNE, x, x), replacement(1, 0.0), y)};
}

// PyTorch's lerp (Lerp.h): self + w * (end - self) for |w| < 0.5, else
// end - (end - self) * (1 - w), which is exact at both ends.
ir::Value lerp_values(LoweringContext& ctx, ir::Value self, ir::Value end, ir::Value w) {
  auto& g = ctx.g();
  auto shape = at::infer_size(broadcast_shape(ctx, self, end), dims(ctx, w));
  self = broadcast_to(ctx, self, shape);
  end = broadcast_to(ctx, end, shape);
  w = broadcast_to(ctx, w, shape);
  ir::Value diff = g.binary(Op::kSub, end, self);
  ir::Value small = g.compare(Cmp::kLT, g.unary(Op::kAbs, w), full_like(ctx, w, 0.5));
  ir::Value lo = g.binary(Op::kAdd, self, g.binary(Op::kMul, w, diff));
  ir::Value hi = g.binary(Op::kSub, end,
                          g.binary(Op::kMul, diff, g.binary(Op::kSub, full_like(ctx, w, 1), w)));
  return g.select(small, lo, hi);
}

void check_lerp_end(const at::Tensor& self, const at::Tensor& end) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(),
              " for `end` but got dtype ", end.dtype());
}

std::vector<ir::Value> lerp_scalar(LoweringContext& ctx, const Args& a) {
  check_lerp_end(a.tensor(0), a.tensor(1));
  DType dt = to_ir(a.tensor(0).scalar_type());
  if (!ir::is_float(dt)) not_implemented("lerp_kernel_scalar", dt);
  DType op = opmath(dt);
  ir::Value self = ctx.g().convert(ctx.tensor(a.tensor(0)), op);
  ir::Value end = ctx.g().convert(ctx.tensor(a.tensor(1)), op);
  return {ctx.g().convert(lerp_values(ctx, self, end, ctx.scalar(a.scalar(2), op)), dt)};
}

// A 0-d weight may have another float dtype: lerp.Tensor then promotes it
// (Lerp.cpp's promote_weight), which never changes self's float dtype.
std::vector<ir::Value> lerp_tensor(LoweringContext& ctx, const Args& a) {
  const at::Tensor& weight = a.tensor(2);
  check_lerp_end(a.tensor(0), a.tensor(1));
  TORCH_CHECK(weight.dim() == 0 || a.tensor(0).dtype() == weight.dtype(), "expected dtype ",
              a.tensor(0).dtype(), " for `weight` but got dtype ", weight.dtype());
  DType dt = to_ir(result_type_of({&a[0], &a[1], &a[2]}));
  if (!ir::is_float(dt)) not_implemented("lerp_kernel_tensor", dt);
  DType op = opmath(dt);
  ir::Value self = ctx.g().convert(ctx.tensor(a.tensor(0)), op);
  ir::Value end = ctx.g().convert(ctx.tensor(a.tensor(1)), op);
  ir::Value w = ctx.g().convert(ctx.tensor(weight), op);
  return {ctx.g().convert(lerp_values(ctx, self, end, w), dt)};
}

// addcmul / addcdiv: self + value * t1 (op) t2, grouped as PyTorch's kernels
// (PointwiseOpsKernel.cpp) group it: (value * t1) * t2 and (value * t1) / t2.
std::vector<ir::Value> addc(LoweringContext& ctx, const Args& a, Op op) {
  DType dt = to_ir(result_type_of({&a[0], &a[1], &a[2]}));
  if (dt == DType::kBool) not_implemented(op == Op::kMul ? "addcmul_cpu_out" : "addcdiv_cpu", dt);
  DType math = opmath(dt);
  auto& g = ctx.g();
  ir::Value self = g.convert(operand(ctx, a[0], dt), math);
  ir::Value t1 = g.convert(operand(ctx, a[1], dt), math);
  ir::Value t2 = g.convert(operand(ctx, a[2], dt), math);
  // The kernels read value as opmath_t for floats and as scalar_t for integers.
  ir::Value value = g.convert(ctx.scalar(a.scalar(3), ir::is_float(dt) ? math : dt), math);
  ir::Value prod = binary(ctx, op, binary(ctx, Op::kMul, value, t1), t2);
  return {g.convert(binary(ctx, Op::kAdd, self, prod), dt)};
}

std::vector<ir::Value> addcdiv(LoweringContext& ctx, const Args& a) {
  TORCH_CHECK(!(c10::isIntegralType(a.tensor(1).scalar_type(), true) &&
                c10::isIntegralType(a.tensor(2).scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future  ",
              "release addcdiv will perform a true division of tensor1 and tensor2. ",
              "The historic addcdiv behavior can be implemented as ",
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ",
              "for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. ",
              "The future addcdiv behavior is just the latter implementation: ",
              "(input + value * tensor1 / tensor2), for all dtypes.");
  return addc(ctx, a, Op::kDiv);
}

RegisterLowering kUnaryPointwiseRules[] = {
    {"clamp", clamp_rule},
    {"clamp.Tensor", clamp_tensor},
    {"clamp_min", clamp_min},
    {"clamp_min.Tensor", clamp_min},
    {"clamp_max", clamp_max},
    {"clamp_max.Tensor", clamp_max},
    {"where.self", where_self},
    {"fill.Scalar", fill_scalar},
    {"fill.Tensor", fill_tensor},
    {"zero", zero_rule},
    {"masked_fill.Scalar", masked_fill},
    {"masked_fill.Tensor", masked_fill},
    {"nan_to_num", nan_to_num},
    {"lerp.Scalar", lerp_scalar},
    {"lerp.Tensor", lerp_tensor},
    {"addcmul", [](LoweringContext& c, const Args& a) { return addc(c, a, Op::kMul); }},
    {"addcdiv", addcdiv},
};

}  // namespace
}  // namespace ttpu::aten
