// Lowerings of the activation functions' backward ops (threshold_backward for
// relu, gelu_backward, elu_backward, ...), which autograd calls on tpu tensors.
//
// Each is a TensorIterator binary op in PyTorch: grad and input broadcast and
// promote to a common dtype, and the derivative is the CPU kernel's formula
// (native/cpu/Activation.cpp, cited per rule). silu_backward and mish_backward
// are CompositeImplicitAutograd (they decompose into lowered ops), so they
// have no rule here.
#include <cmath>

#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using pointwise::add;
using pointwise::k;
using pointwise::mul;
using pointwise::not_implemented;
using pointwise::opmath;
using pointwise::result_type_of;
using pointwise::sub;

// grad and the saved tensor (input or result), broadcast and in the opmath of
// their common dtype; `dt` is the dtype of the result.
struct GradInput {
  ir::Value grad, x;
  DType dt;
};

GradInput grad_input(LoweringContext& ctx, const Args& a, size_t grad_i, size_t x_i,
                     const char* kernel, bool float_only = true) {
  DType dt = to_ir(result_type_of({&a[grad_i], &a[x_i]}));
  if (float_only) pointwise::require_float(kernel, dt);
  if (dt == DType::kBool) not_implemented(kernel, dt);
  auto [grad, x] = broadcast_pair(ctx, ctx.g().convert(ctx.tensor(a.tensor(grad_i)), opmath(dt)),
                                  ctx.g().convert(ctx.tensor(a.tensor(x_i)), opmath(dt)));
  return {grad, x, dt};
}

ir::Value s(LoweringContext& c, const c10::Scalar& v, ir::Value like) {
  return pointwise::scalar_like(c, v, like);
}

// where(pred, 0, grad), rounded to the result dtype.
std::vector<ir::Value> zero_where(LoweringContext& ctx, const GradInput& in, ir::Value pred) {
  return {ctx.g().convert(ctx.g().select(pred, k(ctx, in.grad, 0), in.grad), in.dt)};
}

// threshold_backward = threshold(self, threshold, 0) applied to grad:
// self <= threshold ? 0 : grad (integers allowed, as in the forward).
std::vector<ir::Value> threshold_backward(LoweringContext& ctx, const Args& a) {
  auto in = grad_input(ctx, a, 0, 1, "threshold_cpu", /*float_only=*/false);
  return zero_where(ctx, in, ctx.g().compare(Cmp::kLE, in.x, s(ctx, a.scalar(2), in.x)));
}

// gelu_backward_kernel: grad * (cdf + x * pdf), or for approximate="tanh" the
// derivative of the approximation, with t = tanh(beta * (x + kappa * x^3)):
// 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * beta * (1 + 3 * kappa * x^2).
std::vector<ir::Value> gelu_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  bool tanh = pointwise::gelu_approximate(a, 2) == "tanh";
  auto in = grad_input(ctx, a, 0, 1, "GeluBackwardKernelImpl");
  ir::Value x = in.x;
  ir::Value one = k(ctx, x, 1);
  ir::Value d;
  if (tanh) {
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
    ir::Value x_sq = mul(ctx, x, x);
    ir::Value cube_term = mul(ctx, k(ctx, x, kappa), mul(ctx, x_sq, x));
    ir::Value t = g.unary(Op::kTanh, mul(ctx, k(ctx, x, beta), add(ctx, x, cube_term)));
    ir::Value left = mul(ctx, k(ctx, x, 0.5), x);
    ir::Value left_derivative = mul(ctx, k(ctx, x, 0.5), add(ctx, one, t));
    ir::Value right_derivative = mul(ctx, left, sub(ctx, one, mul(ctx, t, t)));
    right_derivative = mul(ctx, right_derivative, k(ctx, x, beta));
    right_derivative =
        mul(ctx, right_derivative, add(ctx, one, mul(ctx, k(ctx, x, 3 * kappa), x_sq)));
    d = add(ctx, left_derivative, right_derivative);
  } else {
    const double beta = M_2_SQRTPI * M_SQRT1_2 * 0.5;  // 1 / sqrt(2 * pi)
    ir::Value erf = g.unary(Op::kErf, mul(ctx, x, k(ctx, x, M_SQRT1_2)));
    ir::Value cdf = mul(ctx, k(ctx, x, 0.5), add(ctx, one, erf));
    ir::Value gauss = g.unary(Op::kExp, mul(ctx, mul(ctx, x, x), k(ctx, x, -0.5)));
    ir::Value pdf = mul(ctx, k(ctx, x, beta), gauss);
    d = add(ctx, cdf, mul(ctx, x, pdf));
  }
  return {g.convert(mul(ctx, in.grad, d), in.dt)};
}

// sigmoid_backward: grad * (1 - y) * y, with y the forward's result.
std::vector<ir::Value> sigmoid_backward(LoweringContext& ctx, const Args& a) {
  auto in = grad_input(ctx, a, 0, 1, "sigmoid_backward_cpu");
  ir::Value y = in.x;
  ir::Value r = mul(ctx, mul(ctx, in.grad, sub(ctx, k(ctx, y, 1), y)), y);
  return {ctx.g().convert(r, in.dt)};
}

// tanh_backward: grad * (1 - y * y), with y the forward's result.
std::vector<ir::Value> tanh_backward(LoweringContext& ctx, const Args& a) {
  auto in = grad_input(ctx, a, 0, 1, "tanh_backward_cpu");
  ir::Value y = in.x;
  return {ctx.g().convert(mul(ctx, in.grad, sub(ctx, k(ctx, y, 1), mul(ctx, y, y))), in.dt)};
}

// hardtanh_backward: min < x < max ? grad : 0. A NaN input gets 0, as in the
// CPU kernel's vectorized loop, which handles all but a tensor's short tail
// (its scalar tail loop passes grad through instead). The CPU kernel shares
// the shrink backward's dispatch, hence that name in the dtype error.
std::vector<ir::Value> hardtanh_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "hardshrink_backward_cpu");
  ir::Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGT, in.x, s(ctx, a.scalar(2), in.x)),
                              g.compare(Cmp::kLT, in.x, s(ctx, a.scalar(3), in.x)));
  return zero_where(ctx, in, g.unary(Op::kNot, inside));
}

// hardshrink/softshrink backward (shrink_backward_kernel): x < -l || x > l ?
// grad : 0, NaN giving 0 as in the vectorized loop (see hardtanh_backward).
std::vector<ir::Value> shrink_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "shrink_backward_cpu");
  ir::Value l = s(ctx, a.scalar(2), in.x);
  ir::Value outside = g.binary(Op::kOr, g.compare(Cmp::kLT, in.x, g.unary(Op::kNeg, l)),
                               g.compare(Cmp::kGT, in.x, l));
  return zero_where(ctx, in, g.unary(Op::kNot, outside));
}

// leaky_relu_backward: x > 0 ? grad : grad * negative_slope.
std::vector<ir::Value> leaky_relu_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  TORCH_CHECK(!a.boolean(3) || a.scalar(2).toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which "
              "is not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place "
              "leakRelu backward calculation with negative slope");
  auto in = grad_input(ctx, a, 0, 1, "leaky_relu_backward_cpu");
  ir::Value r = g.select(g.compare(Cmp::kGT, in.x, k(ctx, in.x, 0)), in.grad,
                         mul(ctx, in.grad, s(ctx, a.scalar(2), in.x)));
  return {g.convert(r, in.dt)};
}

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result):
// for x <= 0, grad * input_scale * (y + alpha * scale) from the result y, or
// grad * input_scale * alpha * scale * exp(x * input_scale) from the input x;
// grad * scale otherwise.
std::vector<ir::Value> elu_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  bool is_result = a.boolean(4);
  TORCH_CHECK(!is_result || a.scalar(1).toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  auto in = grad_input(ctx, a, 0, 5, "elu_backward_cpu");
  ir::Value x = in.x;
  ir::Value negcoef = mul(ctx, s(ctx, a.scalar(1), x), s(ctx, a.scalar(2), x));
  ir::Value poscoef = s(ctx, a.scalar(2), x);
  ir::Value negiptcoef = s(ctx, a.scalar(3), x);
  ir::Value neg = is_result ? mul(ctx, mul(ctx, in.grad, negiptcoef), add(ctx, x, negcoef))
                            : mul(ctx, mul(ctx, mul(ctx, in.grad, negiptcoef), negcoef),
                                  g.unary(Op::kExp, mul(ctx, x, negiptcoef)));
  ir::Value r = g.select(g.compare(Cmp::kLE, x, k(ctx, x, 0)), neg, mul(ctx, in.grad, poscoef));
  return {g.convert(r, in.dt)};
}

// softplus_backward: x * beta > threshold ? grad : grad * z / (z + 1), z = exp(x * beta).
std::vector<ir::Value> softplus_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "softplus_backward_cpu");
  ir::Value xb = mul(ctx, in.x, s(ctx, a.scalar(2), in.x));
  ir::Value z = g.unary(Op::kExp, xb);
  ir::Value soft = g.binary(Op::kDiv, mul(ctx, in.grad, z), add(ctx, z, k(ctx, z, 1)));
  ir::Value r = g.select(g.compare(Cmp::kGT, xb, s(ctx, a.scalar(3), in.x)), in.grad, soft);
  return {g.convert(r, in.dt)};
}

// hardsigmoid_backward: -3 < x < 3 ? grad / 6 : 0.
std::vector<ir::Value> hardsigmoid_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "hardsigmoid_backward");
  ir::Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGT, in.x, k(ctx, in.x, -3)),
                              g.compare(Cmp::kLT, in.x, k(ctx, in.x, 3)));
  ir::Value r = g.select(inside, mul(ctx, in.grad, k(ctx, in.x, 1.0 / 6.0)), k(ctx, in.x, 0));
  return {g.convert(r, in.dt)};
}

// hardswish_backward: x <= -3 ? 0 : x < 3 ? grad * (x / 3 + 0.5) : grad.
std::vector<ir::Value> hardswish_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "hardswish_backward_cpu");
  ir::Value x = in.x;
  ir::Value mid = mul(ctx, in.grad, add(ctx, g.binary(Op::kDiv, x, k(ctx, x, 3)), k(ctx, x, 0.5)));
  ir::Value r = g.select(g.compare(Cmp::kLT, x, k(ctx, x, 3)), mid, in.grad);
  r = g.select(g.compare(Cmp::kLE, x, k(ctx, x, -3)), k(ctx, x, 0), r);
  return {g.convert(r, in.dt)};
}

// logit_backward: grad / (x * (1 - x)) inside the domain; outside it NaN
// without eps ([0, 1]) and 0 with eps ([eps, 1 - eps]).
std::vector<ir::Value> logit_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "logit_backward_cpu");
  ir::Value x = in.x;
  ir::Value d = g.binary(Op::kDiv, in.grad, mul(ctx, x, sub(ctx, k(ctx, x, 1), x)));
  bool has_eps = !a.is_none(2) && a.real(2) >= 0;
  ir::Value lo = has_eps ? s(ctx, c10::Scalar(a.real(2)), x) : k(ctx, x, 0);
  ir::Value hi = sub(ctx, k(ctx, x, 1), lo);
  ir::Value outside = g.binary(Op::kOr, g.compare(Cmp::kLT, x, lo), g.compare(Cmp::kGT, x, hi));
  ir::Value r = g.select(outside, k(ctx, x, has_eps ? 0.0 : NAN), d);
  return {g.convert(r, in.dt)};
}

// log_sigmoid_backward: grad * (max_deriv - sign * z / (1 + z)) with
// z = exp(-|x|), max_deriv = x < 0, sign = x < 0 ? 1 : -1. z is recomputed
// rather than read from the buffer, which may come from another device's
// forward (CUDA's is empty).
std::vector<ir::Value> log_sigmoid_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto in = grad_input(ctx, a, 0, 1, "log_sigmoid_backward_cpu");
  ir::Value x = in.x;
  ir::Value z = g.unary(Op::kExp, g.unary(Op::kNeg, g.unary(Op::kAbs, x)));
  ir::Value t = g.binary(Op::kDiv, z, add(ctx, k(ctx, z, 1), z));
  ir::Value negative = g.compare(Cmp::kLT, x, k(ctx, x, 0));
  ir::Value d = g.select(negative, sub(ctx, k(ctx, x, 1), t), t);
  return {g.convert(mul(ctx, in.grad, d), in.dt)};
}

RegisterLowering kActivationBackwardRules[] = {
    {"threshold_backward", threshold_backward},
    {"gelu_backward", gelu_backward},
    {"sigmoid_backward", sigmoid_backward},
    {"tanh_backward", tanh_backward},
    {"hardtanh_backward", hardtanh_backward},
    {"hardshrink_backward", shrink_backward},
    {"softshrink_backward", shrink_backward},
    {"leaky_relu_backward", leaky_relu_backward},
    {"elu_backward", elu_backward},
    {"softplus_backward", softplus_backward},
    {"hardsigmoid_backward", hardsigmoid_backward},
    {"hardswish_backward", hardswish_backward},
    {"logit_backward", logit_backward},
    {"log_sigmoid_backward", log_sigmoid_backward},
};

}  // namespace
}  // namespace ttpu::aten
