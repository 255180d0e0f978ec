// Loop lowerings as private StableHLO functions (loop_kernels.h).
#include "stablehlo/loop_kernels.h"

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "stablehlo/emit_util.h"
#include "stablehlo/loop_body.h"
#include "stablehlo/kernel_module.h"

namespace ttpu::stablehlo {
namespace {

// prepare_kernel's key: hex digits, the first 16 naming the symbols. An FNV-1a
// hash of the text comes first (distinct symbols per type in one module),
// then the text itself in hex, so equal keys mean equal functions exactly.
std::string content_key(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  std::string key = buf;
  for (unsigned char c : text) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    key += buf;
  }
  return key;
}

// The module text; %b, %e: base and exponent, both `type`.
std::string integer_pow_text(const ir::TensorType& type) {
  const std::string t = type.mlir();
  const std::string s = ir::TensorType{type.dtype, {}}.mlir();
  const std::string p = ir::TensorType{ir::DType::kBool, type.dims}.mlir();
  const int bits = 8 * static_cast<int>(ir::byte_size(type.dtype));
  const int per_iteration = std::min(kIntegerPowBitsPerIteration, bits);
  std::string dims;
  for (size_t i = 0; i < type.dims.size(); ++i) dims += (i ? ", " : "") + std::to_string(i);

  std::string x = "module {\n  func.func @main(%b: " + t + ", %e: " + t + ") -> " + t + " {\n";
  x += "    %one = stablehlo.constant dense<1> : " + t + "\n";
  x += "    %zero = stablehlo.constant dense<0> : " + t + "\n";
  // Negative exponents visit no bit (the caller fixes their results up).
  const bool is_signed = !ir::is_unsigned(type.dtype);
  x += is_signed ? "    %ep = stablehlo.maximum %e, %zero : " + t + "\n"
                 : "    %ep = stablehlo.add %e, %zero : " + t + "\n";
  // m: the largest exponent, shifted with the exponents; the loop ends when
  // no exponent has a bit left.
  if (type.dims.empty()) {
    x += "    %m0 = stablehlo.add %ep, %zero : " + t + "\n";
  } else {
    x += "    %zs = stablehlo.constant dense<0> : " + s + "\n";
    x += "    %m0 = stablehlo.reduce(%ep init: %zs) applies stablehlo.maximum across dimensions = "
         "[" +
         dims + "] : (" + t + ", " + s + ") -> " + s + "\n";
  }
  x += "    %w:4 = stablehlo.while(%m = %m0, %r = %one, %a = %b, %x = %ep) : " + s + ", " + t +
       ", " + t + ", " + t + "\n";
  x += "    cond {\n";
  x += "      %z = stablehlo.constant dense<0> : " + s + "\n";
  x += "      %more = stablehlo.compare NE, %m, %z : (" + s + ", " + s + ") -> tensor<i1>\n";
  x += "      stablehlo.return %more : tensor<i1>\n";
  x += "    } do {\n";
  x += "      %c1 = stablehlo.constant dense<1> : " + t + "\n";
  x += "      %c0 = stablehlo.constant dense<0> : " + t + "\n";
  std::string r = "%r", a = "%a", e = "%x";
  for (int k = 0; k < per_iteration; ++k) {
    const std::string n = std::to_string(k);
    x += "      %bit" + n + " = stablehlo.and " + e + ", %c1 : " + t + "\n";
    x += "      %odd" + n + " = stablehlo.compare NE, %bit" + n + ", %c0 : (" + t + ", " + t +
         ") -> " + p + "\n";
    x += "      %ra" + n + " = stablehlo.multiply " + r + ", " + a + " : " + t + "\n";
    x += "      %r" + n + " = stablehlo.select %odd" + n + ", %ra" + n + ", " + r + " : " + p +
         ", " + t + "\n";
    x += "      %a" + n + " = stablehlo.multiply " + a + ", " + a + " : " + t + "\n";
    x += "      %x" + n + " = stablehlo.shift_right_logical " + e + ", %c1 : " + t + "\n";
    r = "%r" + n;
    a = "%a" + n;
    e = "%x" + n;
  }
  x +=
      "      %step = stablehlo.constant dense<" + std::to_string(per_iteration) + "> : " + s + "\n";
  x += "      %m1 = stablehlo.shift_right_logical %m, %step : " + s + "\n";
  x += "      stablehlo.return %m1, " + r + ", " + a + ", " + e + " : " + s + ", " + t + ", " + t +
       ", " + t + "\n";
  x += "    }\n";
  x += "    return %w#1 : " + t + "\n  }\n}\n";
  return x;
}

}  // namespace

namespace detail {
ir::UserFunction loop_function(const std::string& text, const std::string& name) {
  return prepare_kernel(text, name, content_key(text));
}

std::shared_ptr<const ir::UserFunction> cached_loop(const std::string& key, const char* name,
                                                    const std::function<std::string()>& text) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const ir::UserFunction>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& fn = cache[std::string(name) + ' ' + key];
  if (!fn) fn = std::make_shared<const ir::UserFunction>(loop_function(text(), name));
  return fn;
}
}  // namespace detail

std::shared_ptr<const ir::UserFunction> integer_pow_loop(const ir::TensorType& type) {
  if (!ir::is_integral(type.dtype) || type.dtype == ir::DType::kBool) {
    throw ir::IrError("integer_pow_loop: " + type.mlir() + " is not an integer type");
  }
  return detail::cached_loop(type.mlir(), "integer_pow", [&] { return integer_pow_text(type); });
}

}  // namespace ttpu::stablehlo
