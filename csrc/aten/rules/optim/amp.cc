// Lowerings of the two ops behind torch.amp.GradScaler: the gradient unscale
// with its inf/NaN check, and the loss-scale update. Both mutate their
// arguments in place and are only called through their in-place overloads, so
// they are "self-writing" rules (RegisterOutOnly): each writes its results into
// the argument tensors itself. Everything stays on the device: GradScaler's
// unscale_ and update() read no value on the host (its step() reads found_inf
// once, as on CUDA, to decide whether to call optimizer.step()).
//
// Semantics follow ATen's CPU kernels (aten/src/ATen/native/cpu/
// AmpGradScalerKernels.cpp), checked against them in tests/device/test_amp.py.
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ir::Value;

void check_one_element_float(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be a float tensor.");
}

// A 1-element tensor read as a 0-d value.
Value scalar_of(LoweringContext& ctx, const at::Tensor& t) {
  return ctx.g().reshape(ctx.tensor(t), {});
}

// A 0-d value shaped as the 1-element tensor `like` (for ctx.write).
Value shaped_as(LoweringContext& ctx, Value v, const at::Tensor& like) {
  return ctx.g().reshape(v, std::vector<int64_t>(like.sizes().begin(), like.sizes().end()));
}

// _amp_foreach_non_finite_check_and_unscale_(Tensor(a!)[] self,
//     Tensor(b!) found_inf, Tensor inv_scale) -> ()
// Every gradient is multiplied by inv_scale (in float32, float64 for double
// gradients, then rounded to its dtype); found_inf becomes 1.0 when any
// element of any gradient is inf or NaN and keeps its value otherwise.
std::vector<Value> unscale(LoweringContext& ctx, const Args& a) {
  const std::vector<at::Tensor> grads = a.tensors(0);
  const at::Tensor& found_inf = a.tensor(1);
  const at::Tensor& inv_scale = a.tensor(2);
  check_one_element_float(inv_scale, "inv_scale");
  check_one_element_float(found_inf, "found_inf");
  TORCH_CHECK(found_inf.device() == inv_scale.device(),
              "found_inf and inv_scale must be on the same device, got ", found_inf.device(),
              " and ", inv_scale.device());
  if (grads.empty()) return {};
  auto& g = ctx.g();
  Value any_bad = g.constant(0, {DType::kBool, {}});
  const Value inv32 = scalar_of(ctx, inv_scale);
  for (const at::Tensor& grad : grads) {
    TORCH_CHECK(grad.device() == found_inf.device(),
                "scaled_grads must be on the same device as found_inf (", found_inf.device(),
                "), got one on ", grad.device());
    TORCH_CHECK(grad.layout() == at::kStrided, "One of scaled_grads was not a strided tensor.");
    TORCH_CHECK(at::isFloatingType(grad.scalar_type()), "scaled_grads must be floating point, got ",
                grad.scalar_type());
    if (grad.numel() == 0) continue;
    const Value v = ctx.tensor(grad);
    const DType acc = grad.scalar_type() == at::kDouble ? DType::kF64 : DType::kF32;
    const Value wide = g.convert(v, acc);
    const auto d = dims(ctx, wide);
    std::vector<int64_t> all(d.size());
    for (size_t i = 0; i < d.size(); ++i) all[i] = static_cast<int64_t>(i);
    // isfinite is false for inf and NaN alike: one reduction finds both.
    const Value finite = g.unary(Op::kIsFinite, wide);
    const Value bad = g.unary(
        Op::kNot, g.reduce({finite}, {g.constant(1, {DType::kBool, {}})}, all, Reducer::kAnd)[0]);
    any_bad = g.binary(Op::kOr, any_bad, bad);
    const Value inv = broadcast_to(ctx, g.convert(inv32, acc), grad.sizes());
    ctx.write(grad, g.binary(Op::kMul, wide, inv));
  }
  const Value old = scalar_of(ctx, found_inf);
  ctx.write(found_inf,
            shaped_as(ctx, g.select(any_bad, g.constant(1, {DType::kF32, {}}), old), found_inf));
  return {};
}

// _amp_update_scale_(Tensor(a!) self, Tensor(b!) growth_tracker,
//     Tensor found_inf, float growth_factor, float backoff_factor,
//     int growth_interval) -> Tensor(a!)
// found_inf > 0: scale *= backoff_factor, tracker = 0. Otherwise the tracker
// counts the step; when it reaches growth_interval the scale grows by
// growth_factor (kept only if the product is finite) and the tracker resets.
std::vector<Value> update_scale(LoweringContext& ctx, const Args& a) {
  const at::Tensor& scale = a.tensor(0);
  const at::Tensor& tracker = a.tensor(1);
  const at::Tensor& found_inf = a.tensor(2);
  TORCH_CHECK(tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  check_one_element_float(scale, "current_scale");
  check_one_element_float(found_inf, "found_inf");
  TORCH_CHECK(scale.device() == tracker.device() && scale.device() == found_inf.device(),
              "current_scale, growth_tracker and found_inf must be on the same device");
  auto& g = ctx.g();
  const ir::TensorType f32{DType::kF32, {}};
  const ir::TensorType i32{DType::kI32, {}};
  const Value s = scalar_of(ctx, scale);
  const Value n = scalar_of(ctx, tracker);
  const Value inf = g.compare(ir::Cmp::kGT, scalar_of(ctx, found_inf), g.constant(0, f32));
  // The factors are parameters: a scaler with other factors reuses the program.
  const Value growth = ctx.scalar(a.scalar(3), DType::kF32);
  const Value backoff = ctx.scalar(a.scalar(4), DType::kF32);
  const Value interval = ctx.scalar(c10::Scalar(a.integer(5)), DType::kI32);
  const Value counted = g.binary(Op::kAdd, n, g.constant(1, i32));
  const Value grow = g.compare(ir::Cmp::kEQ, counted, interval);
  const Value grown = g.binary(Op::kMul, s, growth);
  const Value grown_ok = g.unary(Op::kIsFinite, grown);
  const Value zero = g.constant(0, i32);
  const Value ok_scale = g.select(grow, g.select(grown_ok, grown, s), s);
  const Value ok_tracker = g.select(grow, zero, counted);
  const Value new_scale = g.select(inf, g.binary(Op::kMul, s, backoff), ok_scale);
  const Value new_tracker = g.select(inf, zero, ok_tracker);
  ctx.write(scale, shaped_as(ctx, new_scale, scale));
  ctx.write(tracker, shaped_as(ctx, new_tracker, tracker));
  return {};
}

RegisterOutOnly r_unscale("_amp_foreach_non_finite_check_and_unscale_", unscale);
RegisterOutOnly r_update("_amp_update_scale_", update_scale);

}  // namespace
}  // namespace ttpu::aten
