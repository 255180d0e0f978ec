#include "aten/unsigned_gate.h"

#include <unordered_set>

namespace ttpu::aten {
namespace {

bool is_barebones(c10::ScalarType t) {
  return t == c10::kUInt16 || t == c10::kUInt32 || t == c10::kUInt64;
}

bool tensor_is_barebones(const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return t.defined() && is_barebones(t.scalar_type());
  }
  if (v.isList()) {  // Tensor[] and Tensor?[]
    for (const auto& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined() && is_barebones(e.toTensor().scalar_type())) {
        return true;
      }
    }
  }
  return false;
}

bool is_dtype_arg(const c10::Argument& a) {
  auto type = a.real_type();
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

}  // namespace

bool any_barebones_unsigned(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (tensor_is_barebones(args[i])) return true;
    if (i < schema.arguments().size() && is_dtype_arg(schema.arguments()[i]) &&
        args[i].isInt() && is_barebones(static_cast<c10::ScalarType>(args[i].toInt()))) {
      return true;
    }
  }
  return false;
}

bool barebones_unsigned_native(const std::string& key) {
  // The lowered ops whose CPU kernels dispatch on the barebones unsigned types
  // (AT_BAREBONES_UNSIGNED_TYPES in ATen), checked one by one against CPU.
  // Ops that compute in a floating type (sin, true division, x * 1.5) need no
  // entry: the kernel runs them natively when every result is floating.
  static const std::unordered_set<std::string> kNative = {
      "fill.Scalar", "fill.Tensor", "zero", "random", "random.from", "random.to",
      "cat", "repeat", "roll", "constant_pad_nd", "index.Tensor", "masked_select",
      "where.self", "sort.stable", "_unique2", "unique_consecutive", "cumsum", "cumprod",
      "prod", "prod.dim_int", "sum", "sum.dim_IntList", "mul.Tensor", "mul.Scalar",
      "div.Tensor", "div.Scalar", "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar",
      "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor", "isnan", "isinf",
      "isneginf", "isposinf", "signbit", "nan_to_num", "any", "any.dim", "any.dims", "all",
      "all.dim", "all.dims", "copysign.Tensor",
  };
  return kNative.count(key) != 0;
}

}  // namespace ttpu::aten
