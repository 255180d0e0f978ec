// Lowerings of the activation functions' forward ops (relu, gelu, silu, elu,
// softplus, ...). Their backward ops are in activation_backward.cc.
//
// Each formula is the one PyTorch's CPU kernel evaluates (Activation.cpp and
// native/cpu/Activation.cpp, cited per rule), so results agree to rounding, and
// NaN/inf inputs take the same branch. Float-only activations reject other
// dtypes with the CPU kernel's NotImplementedError text. Half-precision inputs
// are computed in f32, like the CPU kernels' opmath.
#include <cmath>
#include <limits>

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
using pointwise::require_float;
using pointwise::scalar_like;

// The input of a float-only activation in its opmath dtype, and the dtype the
// result is rounded back to.
struct FloatInput {
  ir::Value x;
  DType dt;
};

FloatInput float_input(LoweringContext& ctx, const at::Tensor& t, const char* kernel) {
  ir::Value x = ctx.tensor(t);
  DType dt = dtype(ctx, x);
  require_float(kernel, dt);
  return {ctx.g().convert(x, opmath(dt)), dt};
}

std::vector<ir::Value> relu(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  TORCH_CHECK(dtype(ctx, x) != DType::kBool, "Boolean inputs not supported for relu");
  // max propagates NaN, as the CPU kernel's clamp_min does.
  return {ctx.g().binary(Op::kMax, x, k(ctx, x, 0))};
}

// GeluKernelImpl: x * 0.5 * (1 + erf(x / sqrt(2))), or with approximate="tanh"
// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
std::vector<ir::Value> gelu(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  bool tanh = pointwise::gelu_approximate(a, 1) == "tanh";
  auto [x, dt] = float_input(ctx, a.tensor(0), "GeluKernelImpl");
  ir::Value y;
  if (tanh) {
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5;
    ir::Value cube = mul(ctx, mul(ctx, x, x), x);
    ir::Value inner = mul(ctx, k(ctx, x, beta), add(ctx, x, mul(ctx, k(ctx, x, 0.044715), cube)));
    y = mul(ctx, mul(ctx, k(ctx, x, 0.5), x), add(ctx, k(ctx, x, 1), g.unary(Op::kTanh, inner)));
  } else {
    ir::Value erf = g.unary(Op::kErf, mul(ctx, x, k(ctx, x, M_SQRT1_2)));
    y = mul(ctx, mul(ctx, x, k(ctx, x, 0.5)), add(ctx, k(ctx, x, 1), erf));
  }
  return {g.convert(y, dt)};
}

// silu_kernel: x / (1 + exp(-x)).
std::vector<ir::Value> silu(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "silu_cpu");
  ir::Value den = add(ctx, k(ctx, x, 1), g.unary(Op::kExp, g.unary(Op::kNeg, x)));
  return {g.convert(g.binary(Op::kDiv, x, den), dt)};
}

// mish_kernel: x * tanh(log1p(exp(x))).
std::vector<ir::Value> mish(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "mish_cpu");
  ir::Value sp = g.unary(Op::kLog1p, g.unary(Op::kExp, x));
  return {g.convert(mul(ctx, x, g.unary(Op::kTanh, sp)), dt)};
}

// threshold_kernel: x <= threshold ? value : x, in self's dtype (integers
// too: the scalars are converted to it first).
std::vector<ir::Value> threshold(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(a.tensor(0));
  if (dtype(ctx, x) == DType::kBool) not_implemented("threshold_cpu", DType::kBool);
  ir::Value below = g.compare(Cmp::kLE, x, scalar_like(ctx, a.scalar(1), x));
  return {g.select(below, scalar_like(ctx, a.scalar(2), x), x)};
}

// hardtanh_out (Activation.cpp): a clamp in self's dtype; integer inputs take
// the limits truncated to integers ("legacy behavior of boundaries not causing
// type promotion").
std::vector<ir::Value> hardtanh(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  c10::Scalar lo = a.scalar(1), hi = a.scalar(2);
  if (c10::isIntegralType(self.scalar_type(), false)) {
    lo = lo.toLong();
    hi = hi.toLong();
    TORCH_CHECK(self.scalar_type() != at::kByte || (lo.toLong() >= 0 && hi.toLong() >= 0),
                "cannot do hardtanh on an unsigned type with negative limits");
  }
  ir::Value x = ctx.tensor(self);
  x = ctx.g().binary(Op::kMax, x, scalar_like(ctx, lo, x));
  return {ctx.g().binary(Op::kMin, x, scalar_like(ctx, hi, x))};
}

// leaky_relu_kernel: x > 0 ? x : x * negative_slope.
std::vector<ir::Value> leaky_relu(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "leaky_relu_cpu");
  ir::Value y = g.select(g.compare(Cmp::kGT, x, k(ctx, x, 0)), x,
                         mul(ctx, x, scalar_like(ctx, a.scalar(1), x)));
  return {g.convert(y, dt)};
}

// elu_kernel: x > 0 ? x * scale : expm1(x * input_scale) * (alpha * scale).
std::vector<ir::Value> elu(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "elu_cpu");
  ir::Value alpha = scalar_like(ctx, a.scalar(1), x);
  ir::Value scale = scalar_like(ctx, a.scalar(2), x);
  ir::Value input_scale = scalar_like(ctx, a.scalar(3), x);
  ir::Value neg = mul(ctx, g.unary(Op::kExpm1, mul(ctx, x, input_scale)), mul(ctx, alpha, scale));
  ir::Value y = g.select(g.compare(Cmp::kGT, x, k(ctx, x, 0)), mul(ctx, x, scale), neg);
  return {g.convert(y, dt)};
}

// softplus_kernel: x * beta > threshold ? x : log1p(exp(x * beta)) / beta.
std::vector<ir::Value> softplus(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "softplus_cpu");
  ir::Value beta = scalar_like(ctx, a.scalar(1), x);
  ir::Value xb = mul(ctx, x, beta);
  ir::Value soft = g.binary(Op::kDiv, g.unary(Op::kLog1p, g.unary(Op::kExp, xb)), beta);
  ir::Value y = g.select(g.compare(Cmp::kGT, xb, scalar_like(ctx, a.scalar(2), x)), x, soft);
  return {g.convert(y, dt)};
}

// min(max(x + 3, 0), 6), the ReLU6 shared by hardsigmoid and hardswish.
ir::Value relu6_of_x_plus_3(LoweringContext& ctx, ir::Value x) {
  auto& g = ctx.g();
  ir::Value r = g.binary(Op::kMax, add(ctx, x, k(ctx, x, 3)), k(ctx, x, 0));
  return g.binary(Op::kMin, r, k(ctx, x, 6));
}

// hardsigmoid_kernel: relu6(x + 3) / 6.
std::vector<ir::Value> hardsigmoid(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "hardsigmoid_cpu");
  return {g.convert(g.binary(Op::kDiv, relu6_of_x_plus_3(ctx, x), k(ctx, x, 6)), dt)};
}

// hardswish_kernel: x * relu6(x + 3) / 6.
std::vector<ir::Value> hardswish(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "hardswish_cpu");
  ir::Value y = g.binary(Op::kDiv, mul(ctx, x, relu6_of_x_plus_3(ctx, x)), k(ctx, x, 6));
  return {g.convert(y, dt)};
}

// logit_kernel: log(z / (1 - z)) with z = x, or z = x clamped to [eps, 1 - eps]
// when eps >= 0 (a negative eps means none). Integer inputs give the default
// float dtype. NaN stays NaN (the kernel's clamp is two comparisons).
std::vector<ir::Value> logit(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(a.tensor(0));
  DType dt = pointwise::float_result(dtype(ctx, x));
  x = g.convert(x, opmath(dt));
  if (!a.is_none(1) && a.real(1) >= 0) {
    ir::Value lo = scalar_like(ctx, c10::Scalar(a.real(1)), x);
    ir::Value hi = g.binary(Op::kSub, k(ctx, x, 1), lo);
    x = g.select(g.compare(Cmp::kLT, x, lo), lo, x);
    x = g.select(g.compare(Cmp::kGT, x, hi), hi, x);
  }
  ir::Value y = g.unary(Op::kLog, g.binary(Op::kDiv, x, g.binary(Op::kSub, k(ctx, x, 1), x)));
  return {g.convert(y, dt)};
}

// The lambda check of softshrink_check (Activation.cpp), printed as the CPU
// kernel prints it: the bound in the input's own type.
template <typename T>
void check_lambda_as(double lambd, DType dt) {
  const double max = static_cast<double>(std::numeric_limits<T>::max());
  TORCH_CHECK(lambd >= 0 && lambd <= max, "lambda must be in range [0, ",
              std::numeric_limits<T>::max(), "] for input dtype ", to_aten(dt), ", but found ",
              lambd);
}

void check_lambda(double lambd, DType dt) {
  switch (dt) {
    case DType::kF16: return check_lambda_as<c10::Half>(lambd, dt);
    case DType::kBF16: return check_lambda_as<c10::BFloat16>(lambd, dt);
    case DType::kF32: return check_lambda_as<float>(lambd, dt);
    default: return check_lambda_as<double>(lambd, dt);
  }
}

// hardshrink_kernel: -lambd <= x <= lambd ? 0 : x.
std::vector<ir::Value> hardshrink(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "hardshrink_cpu");
  ir::Value l = scalar_like(ctx, a.scalar(1), x);
  ir::Value inside =
      g.binary(Op::kAnd, g.compare(Cmp::kGE, x, g.unary(Op::kNeg, l)), g.compare(Cmp::kLE, x, l));
  return {g.convert(g.select(inside, k(ctx, x, 0), x), dt)};
}

// softshrink_kernel: x > l ? x - l : (x < -l ? x + l : x * 0); x * 0 keeps NaN.
std::vector<ir::Value> softshrink(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "softshrink_check");
  check_lambda(a.scalar(1).toDouble(), dt);
  ir::Value l = scalar_like(ctx, a.scalar(1), x);
  ir::Value y = g.select(g.compare(Cmp::kLT, x, g.unary(Op::kNeg, l)), add(ctx, x, l),
                         mul(ctx, x, k(ctx, x, 0)));
  y = g.select(g.compare(Cmp::kGT, x, l), g.binary(Op::kSub, x, l), y);
  return {g.convert(y, dt)};
}

// log_sigmoid_cpu_kernel: min(x, 0) - log1p(exp(-|x|)); the buffer output is
// exp(-|x|), which the CPU backward reads.
std::vector<ir::Value> log_sigmoid_forward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  auto [x, dt] = float_input(ctx, a.tensor(0), "log_sigmoid_cpu");
  ir::Value z = g.unary(Op::kExp, g.unary(Op::kNeg, g.unary(Op::kAbs, x)));
  ir::Value y = g.binary(Op::kSub, g.binary(Op::kMin, x, k(ctx, x, 0)), g.unary(Op::kLog1p, z));
  return {g.convert(y, dt), g.convert(z, dt)};
}

RegisterLowering kActivationRules[] = {
    {"relu", relu},
    {"gelu", gelu},
    {"silu", silu},
    {"mish", mish},
    {"threshold", threshold},
    {"hardtanh", hardtanh},
    {"leaky_relu", leaky_relu},
    {"elu", elu},
    {"softplus", softplus},
    {"hardsigmoid", hardsigmoid},
    {"hardswish", hardswish},
    {"logit", logit},
    {"hardshrink", hardshrink},
    {"softshrink", softshrink},
    {"log_sigmoid_forward", log_sigmoid_forward},
};

}  // namespace
}  // namespace ttpu::aten
