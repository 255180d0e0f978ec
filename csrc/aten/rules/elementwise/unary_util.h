// Helpers shared by the pointwise lowering rules (unary*.cc and
// activation*.cc): PyTorch's dtype rules for pointwise math, which the
// CPU kernels encode in TensorIterator's configuration and AT_DISPATCH lists.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>

#include <initializer_list>
#include <string>

#include "aten/ops_util.h"

namespace ttpu::aten::pointwise {

// The result dtype of a unary float op (exp, sqrt, sigmoid, ...): integer and
// bool inputs give the default float dtype (TensorIterator's
// promote_integer_inputs_to_float), floats keep theirs.
inline ir::DType float_result(ir::DType t) {
  return ir::is_float(t) ? t : to_ir(c10::get_default_dtype_as_scalartype());
}

// The dtype the arithmetic runs in: f16/bf16 compute in f32 and round once at
// the end, as PyTorch's CPU kernels do (at::opmath_type<Half> is float).
inline ir::DType opmath(ir::DType t) {
  return t == ir::DType::kF16 || t == ir::DType::kBF16 ? ir::DType::kF32 : t;
}

// The NotImplementedError that AT_DISPATCH raises for a dtype outside a CPU
// kernel's list, with the same text ("\"elu_cpu\" not implemented for 'Long'")
// so code that matches on it behaves the same on tpu.
[[noreturn]] inline void not_implemented(const char* kernel, ir::DType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", kernel, "\" not implemented for '", to_aten(t), "'");
}

inline void require_float(const char* kernel, ir::DType t) {
  if (!ir::is_float(t)) not_implemented(kernel, t);
}

// PyTorch's result type of several operands (tensors, Python scalars; None
// entries are skipped), as at::native::result_type over a TensorList.
inline c10::ScalarType result_type_of(std::initializer_list<const c10::IValue*> values) {
  at::native::ResultTypeState state{};
  for (const c10::IValue* v : values) {
    if (v->isNone()) continue;
    state = v->isTensor() ? at::native::update_result_type_state(v->toTensor(), state)
                          : at::native::update_result_type_state(v->toScalar(), state);
  }
  return at::native::result_type(state);
}

// A Python scalar as a parameter of `like`'s dtype, broadcast to its shape.
inline ir::Value scalar_like(LoweringContext& ctx, const c10::Scalar& s, ir::Value like) {
  return broadcast_to(ctx, ctx.scalar(s, dtype(ctx, like)), dims(ctx, like));
}

// select(pred, a, b) with all three broadcast to their common shape.
inline ir::Value where(LoweringContext& ctx, ir::Value pred, ir::Value a, ir::Value b) {
  auto shape = broadcast_shape(ctx, a, b);
  shape = at::infer_size(dims(ctx, pred), shape);
  return ctx.g().select(broadcast_to(ctx, pred, shape), broadcast_to(ctx, a, shape),
                        broadcast_to(ctx, b, shape));
}

// Shorthands for the activation formulas (activation*.cc).
inline ir::Value mul(LoweringContext& c, ir::Value a, ir::Value b) {
  return c.g().binary(ir::Op::kMul, a, b);
}
inline ir::Value add(LoweringContext& c, ir::Value a, ir::Value b) {
  return c.g().binary(ir::Op::kAdd, a, b);
}
inline ir::Value sub(LoweringContext& c, ir::Value a, ir::Value b) {
  return c.g().binary(ir::Op::kSub, a, b);
}
// A constant `v` shaped like `like`.
inline ir::Value k(LoweringContext& c, ir::Value like, double v) { return full_like(c, like, v); }

// gelu's `approximate` argument (position i), checked as ATen's
// get_gelutype_enum checks it.
inline std::string gelu_approximate(const Args& a, size_t i) {
  std::string mode = a.is_none(i) ? "none" : a[i].toStringRef();
  TORCH_CHECK(mode == "none" || mode == "tanh",
              "approximate argument must be either none or tanh.");
  return mode;
}

}  // namespace ttpu::aten::pointwise
