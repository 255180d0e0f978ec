// Lowering of rrelu_with_noise (F.rrelu): in evaluation a leaky ReLU with slope
// (lower + upper) / 2; in training every element x <= 0 is scaled by a uniform
// draw r in [lower, upper) and `noise` (mutated, as the schema's Tensor(b!)
// says) records r there and 1 elsewhere, for the backward. ATen's
// rrelu_with_noise_out_cpu and _rrelu_with_noise_train (Activation.cpp); the
// draws come from the tpu generator, so they differ from CPU's.
#include "aten/rules/random/random_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

// rrelu_with_noise(self, noise, lower, upper, training, generator).
std::vector<Value> rrelu_with_noise(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& noise = a.tensor(1);
  const double lower = a.scalar(2).toDouble(), upper = a.scalar(3).toDouble();
  const bool training = a.boolean(4);
  TORCH_CHECK(self.sizes() == noise.sizes(),
              "noise tensor shape must match self tensor shape. Got self.shape = ", self.sizes(),
              " noise.shape = ", noise.sizes());
  const auto st = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"",
                              training ? "rrelu_with_noise_out_cpu" : "leaky_relu_cpu",
                              "\" not implemented for '", st, "'");
  const DType dt = to_ir(st);
  const auto shape = self.sizes().vec();
  Value x = ctx.tensor(self);
  if (self.numel() == 0) return {x};
  Value zero = g.constant(0, {dt, shape});
  if (!training) {
    Value slope = g.broadcast_in_dim(ctx.scalar((lower + upper) / 2, dt), shape, {});
    return {g.select(g.compare(Cmp::kGT, x, zero), x, g.binary(Op::kMul, x, slope))};
  }
  TORCH_CHECK(lower <= upper,
              "Expected from <= to to be true, but got false.  (Could this error message be "
              "improved?  If so, please report an enhancement request to PyTorch.)");
  const DType ct = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  // dt's digits, so that r stays below upper once converted to a 16-bit float.
  Value u = uniform01(ctx, three_fry_state(ctx, generator(a, 5)), shape, ct, digits_of(dt));
  Value lo = g.broadcast_in_dim(ctx.scalar(lower, ct), shape, {});
  Value span = g.broadcast_in_dim(ctx.scalar(upper - lower, ct), shape, {});
  Value r = g.convert(g.binary(Op::kAdd, lo, g.binary(Op::kMul, u, span)), dt);
  Value negative = g.compare(Cmp::kLE, x, zero);
  ctx.write(noise, g.select(negative, r, g.constant(1, {dt, shape})));
  return {g.select(negative, g.binary(Op::kMul, x, r), x)};
}

RegisterLowering kRreluRules[] = {
    {"rrelu_with_noise", rrelu_with_noise},
};

}  // namespace
}  // namespace ttpu::aten
