#include "aten/barebones_dtypes.h"

#include <unordered_set>

namespace ttpu::aten {
namespace {

bool is_barebones(c10::ScalarType t) {
  return t == c10::kUInt16 || t == c10::kUInt32 || t == c10::kUInt64;
}

bool is_float8(c10::ScalarType t) { return c10::isFloat8Type(t); }

bool tensor_is(const c10::IValue& v, bool (*pred)(c10::ScalarType)) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return t.defined() && pred(t.scalar_type());
  }
  if (v.isList()) {  // Tensor[] and Tensor?[]
    for (const auto& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined() && pred(e.toTensor().scalar_type())) {
        return true;
      }
    }
  }
  return false;
}

bool is_dtype_argument(const c10::Argument& a) {
  auto type = a.real_type();
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

bool any_dtype(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
               bool (*pred)(c10::ScalarType)) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (tensor_is(args[i], pred)) return true;
    if (i < schema.arguments().size() && is_dtype_argument(schema.arguments()[i]) &&
        args[i].isInt() && pred(static_cast<c10::ScalarType>(args[i].toInt()))) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool any_barebones_unsigned(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  return any_dtype(schema, args, is_barebones);
}

bool any_float8(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  return any_dtype(schema, args, is_float8);
}

bool float8_native(const std::string& key) {
  // Lowered ops whose CPU kernels take float8 and only move, select or
  // compare values: bit-exact by construction (conversions follow PyTorch's
  // rounding, ir/float8.h). Checked one by one against CPU, NaN codes
  // included. Arithmetic CPU does in float (mul, abs, matmul) stays on CPU,
  // and so does roll: XLA:CPU rewrote e5m2 NaN codes in roll's slices +
  // concatenate (measured; cat alone, on the bit patterns, keeps them).
  static const std::unordered_set<std::string> kNative = {
      "fill.Scalar",  "fill.Tensor",     "zero",         "cat",
      "repeat",       "constant_pad_nd", "index.Tensor", "_unsafe_index.Tensor",
      "index_select", "masked_select",   "where.self",   "eq.Tensor",
      "eq.Scalar",    "ne.Tensor",       "ne.Scalar",    "isnan",
  };
  return kNative.count(key) != 0;
}

bool barebones_unsigned_native(const std::string& key) {
  // The lowered ops whose CPU kernels dispatch on the barebones unsigned types
  // (AT_BAREBONES_UNSIGNED_TYPES in ATen), checked one by one against CPU.
  // Ops that compute in a floating type (sin, true division, x * 1.5) need no
  // entry: the kernel runs them natively when every result is floating.
  static const std::unordered_set<std::string> kNative = {
      "fill.Scalar",
      "fill.Tensor",
      "zero",
      "random",
      "random.from",
      "random.to",
      "cat",
      "repeat",
      "roll",
      "constant_pad_nd",
      "index.Tensor",
      "masked_select",
      "where.self",
      "sort.stable",
      "_unique2",
      "unique_consecutive",
      "cumsum",
      "cumprod",
      "prod",
      "prod.dim_int",
      "sum",
      "sum.dim_IntList",
      "mul.Tensor",
      "mul.Scalar",
      "div.Tensor",
      "div.Scalar",
      "eq.Tensor",
      "eq.Scalar",
      "ne.Tensor",
      "ne.Scalar",
      "bitwise_and.Tensor",
      "bitwise_or.Tensor",
      "bitwise_xor.Tensor",
      "isnan",
      "isinf",
      "isneginf",
      "isposinf",
      "signbit",
      "nan_to_num",
      "any",
      "any.dim",
      "any.dims",
      "all",
      "all.dim",
      "all.dims",
      "copysign.Tensor",
  };
  return kNative.count(key) != 0;
}

}  // namespace ttpu::aten
