// Lowerings of the fused optimizer steps: _fused_adam_, _fused_adamw_ and
// _fused_sgd_ (torch.optim.Adam/AdamW/SGD(fused=True); transformers' Trainer
// uses fused AdamW by default). Each updates every parameter of a group, and
// its optimizer state, in one program.
//
// They take GradScaler's grad_scale and found_inf tensors themselves
// (`_step_supports_amp_scaling`), so with them a GradScaler step reads nothing
// on the host: the gradients are unscaled inside the step and, when found_inf
// is 1, every tensor keeps its old value (a select on the device, where the
// CPU kernel returns early after reading the flag).
//
// Formulas follow ATen's CPU kernels (aten/src/ATen/native/cpu/
// FusedAdamKernel.cpp, FusedSGDKernel.cpp): arithmetic in float32 (float64
// for double parameters), the updated gradient (unscaled) written back, the
// step count read from state_steps (already incremented by the optimizer).
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;

// The shared parts of a fused step: the compute dtype, scalar parameters and
// the found_inf guard.
struct Step {
  LoweringContext& ctx;
  std::optional<at::Tensor> grad_scale;
  std::optional<at::Tensor> found_inf;

  ir::Graph& g() { return ctx.g(); }

  static DType acc(const at::Tensor& t) {
    return t.scalar_type() == at::kDouble ? DType::kF64 : DType::kF32;
  }
  // A Python float as a parameter of `dtype` broadcast to `sizes` (a changing
  // learning rate never recompiles).
  Value param(double v, DType dtype, c10::IntArrayRef sizes) {
    return broadcast_to(ctx, ctx.scalar(c10::Scalar(v), dtype), sizes);
  }
  Value constant(double v, DType dtype, c10::IntArrayRef sizes) {
    return broadcast_to(ctx, g().constant(v, {dtype, {}}), sizes);
  }
  // A 1-element tensor (lr, grad_scale, a step count) as a value of `dtype`
  // broadcast to `sizes`.
  Value one(const at::Tensor& t, DType dtype, c10::IntArrayRef sizes) {
    TORCH_CHECK(t.numel() == 1, ctx.op(), ": expected a 1-element tensor, got ", t.sizes());
    return broadcast_to(ctx, g().convert(g().reshape(ctx.tensor(t), {}), dtype), sizes);
  }
  // Writes `value` into `dst`, or keeps dst's value when found_inf is 1.
  void write(const at::Tensor& dst, Value value) {
    if (found_inf.has_value()) {
      const Value flag = g().reshape(ctx.tensor(*found_inf), {});
      const Value skip = g().compare(ir::Cmp::kEQ, g().convert(flag, DType::kF32),
                                     g().constant(1, {DType::kF32, {}}));
      const Value old = g().convert(ctx.tensor(dst), g().type(value).dtype);
      value = g().select(broadcast_to(ctx, skip, dst.sizes()), old, value);
    }
    ctx.write(dst, value);
  }
  // The gradient in the compute dtype, unscaled by grad_scale (and written
  // back so, as the CPU kernel does).
  Value grad(const at::Tensor& grad, DType dtype) {
    Value v = g().convert(ctx.tensor(grad), dtype);
    if (grad_scale.has_value()) {
      v = g().binary(Op::kDiv, v, one(*grad_scale, dtype, grad.sizes()));
      write(grad, v);
    }
    return v;
  }
};

void check_lists(const std::string& op, const std::vector<std::vector<at::Tensor>>& lists) {
  for (const auto& l : lists) {
    TORCH_CHECK(l.size() == lists[0].size(), op, ": the tensor lists must have equal lengths, got ",
                lists[0].size(), " and ", l.size());
  }
  for (size_t i = 0; i < lists[0].size(); ++i) {
    for (const auto& l : lists) {
      TORCH_CHECK(l[i].sizes() == lists[0][i].sizes(), op, ": tensor ", i,
                  " has different sizes across the lists: ", lists[0][i].sizes(), " and ",
                  l[i].sizes());
    }
  }
}

// _fused_adam(w)_(self[], grads[], exp_avgs[], exp_avg_sqs[], max_exp_avg_sqs[],
//     state_steps[], *, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
//     grad_scale, found_inf) -> (); lr a float or (tensor_lr) a 1-element tensor.
std::vector<Value> fused_adam(LoweringContext& ctx, const Args& a, bool adamw) {
  const auto params = a.tensors(0), grads = a.tensors(1), avgs = a.tensors(2), sqs = a.tensors(3),
             maxs = a.tensors(4), steps = a.tensors(5);
  const double beta1 = a.real(7), beta2 = a.real(8), wd = a.real(9), eps = a.real(10);
  const bool amsgrad = a.boolean(11), maximize = a.boolean(12);
  check_lists(ctx.op(), {params, grads, avgs, sqs});
  if (amsgrad) check_lists(ctx.op(), {params, maxs});
  TORCH_CHECK(steps.size() == params.size(), ctx.op(),
              ": the tensor lists must have equal "
              "lengths, got ",
              params.size(), " and ", steps.size());
  Step s{ctx, a.opt_tensor(13), a.opt_tensor(14)};
  auto& g = ctx.g();
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (p.numel() == 0) continue;
    const DType t = Step::acc(p);
    const auto n = p.sizes();
    const Value lr = a[6].isTensor() ? s.one(a.tensor(6), t, n) : s.param(a.real(6), t, n);
    Value grad = s.grad(grads[i], t);
    if (maximize) grad = g.unary(Op::kNeg, grad);
    Value param = g.convert(ctx.tensor(p), t);
    if (wd != 0) {
      if (adamw) {  // decoupled: param *= 1 - lr * weight_decay
        const Value decay = g.binary(Op::kMul, lr, s.param(wd, t, n));
        param = g.binary(Op::kSub, param, g.binary(Op::kMul, param, decay));
      } else {
        grad = g.binary(Op::kAdd, grad, g.binary(Op::kMul, param, s.param(wd, t, n)));
      }
    }
    const Value step = s.one(steps[i], t, n);
    const Value b1 = s.param(beta1, t, n), b2 = s.param(beta2, t, n);
    const Value one = s.constant(1, t, n);
    const Value bc1 = g.binary(Op::kSub, one, g.binary(Op::kPow, b1, step));
    const Value bc2_sqrt =
        g.unary(Op::kSqrt, g.binary(Op::kSub, one, g.binary(Op::kPow, b2, step)));
    const Value avg = g.binary(Op::kAdd, g.binary(Op::kMul, b1, g.convert(ctx.tensor(avgs[i]), t)),
                               g.binary(Op::kMul, g.binary(Op::kSub, one, b1), grad));
    const Value sq =
        g.binary(Op::kAdd, g.binary(Op::kMul, b2, g.convert(ctx.tensor(sqs[i]), t)),
                 g.binary(Op::kMul, g.binary(Op::kSub, one, b2), g.binary(Op::kMul, grad, grad)));
    Value second = sq;
    if (amsgrad) {
      second = g.binary(Op::kMax, g.convert(ctx.tensor(maxs[i]), t), sq);
      s.write(maxs[i], second);
    }
    const Value denom = g.binary(Op::kAdd, g.binary(Op::kDiv, g.unary(Op::kSqrt, second), bc2_sqrt),
                                 s.param(eps, t, n));
    const Value step_size = g.binary(Op::kDiv, lr, bc1);
    param =
        g.binary(Op::kSub, param, g.binary(Op::kMul, step_size, g.binary(Op::kDiv, avg, denom)));
    s.write(avgs[i], avg);
    s.write(sqs[i], sq);
    s.write(p, param);
  }
  return {};
}

// _fused_sgd_(self[], grads[], momentum_buffer_list[], *, weight_decay,
//     momentum, lr, dampening, nesterov, maximize, is_first_step, grad_scale,
//     found_inf) -> (); lr a float or (tensor_lr) a 1-element tensor.
std::vector<Value> fused_sgd(LoweringContext& ctx, const Args& a) {
  const auto params = a.tensors(0), grads = a.tensors(1), bufs = a.tensors(2);
  const double wd = a.real(3), momentum = a.real(4), dampening = a.real(6);
  const bool nesterov = a.boolean(7), maximize = a.boolean(8), first = a.boolean(9);
  check_lists(ctx.op(), {params, grads});
  if (momentum != 0) check_lists(ctx.op(), {params, bufs});
  Step s{ctx, a.opt_tensor(10), a.opt_tensor(11)};
  auto& g = ctx.g();
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (p.numel() == 0) continue;
    const DType t = Step::acc(p);
    const auto n = p.sizes();
    const Value lr = a[5].isTensor() ? s.one(a.tensor(5), t, n) : s.param(a.real(5), t, n);
    Value grad = s.grad(grads[i], t);
    if (maximize) grad = g.unary(Op::kNeg, grad);
    Value param = g.convert(ctx.tensor(p), t);
    if (wd != 0) grad = g.binary(Op::kAdd, grad, g.binary(Op::kMul, param, s.param(wd, t, n)));
    if (momentum != 0) {
      const Value m = s.param(momentum, t, n);
      Value buf = grad;
      if (!first) {
        buf = g.binary(Op::kAdd, g.binary(Op::kMul, m, g.convert(ctx.tensor(bufs[i]), t)),
                       g.binary(Op::kMul, s.param(1 - dampening, t, n), grad));
      }
      s.write(bufs[i], buf);
      grad = nesterov ? g.binary(Op::kAdd, grad, g.binary(Op::kMul, m, buf)) : buf;
    }
    s.write(p, g.binary(Op::kSub, param, g.binary(Op::kMul, lr, grad)));
  }
  return {};
}

std::vector<Value> adam(LoweringContext& c, const Args& a) { return fused_adam(c, a, false); }
std::vector<Value> adamw(LoweringContext& c, const Args& a) { return fused_adam(c, a, true); }

RegisterOutOnly r_adam("_fused_adam_", adam);
RegisterOutOnly r_adam_t("_fused_adam_.tensor_lr", adam);
RegisterOutOnly r_adamw("_fused_adamw_", adamw);
RegisterOutOnly r_adamw_t("_fused_adamw_.tensor_lr", adamw);
RegisterOutOnly r_sgd("_fused_sgd_", fused_sgd);
RegisterOutOnly r_sgd_t("_fused_sgd_.tensor_lr", fused_sgd);

}  // namespace
}  // namespace ttpu::aten
