#include "pjrt/signature.h"

#include <cctype>
#include <cstdlib>

namespace ttpu::pjrt {
namespace {

// MLIR element type names -> PJRT types. Anything else stays "unknown".
std::optional<ElementType> element_type(const std::string& name) {
  static const std::pair<const char*, ElementType> kTypes[] = {
      {"i1", ElementType::kPred},
      {"i8", ElementType::kS8},
      {"i16", ElementType::kS16},
      {"i32", ElementType::kS32},
      {"i64", ElementType::kS64},
      {"ui8", ElementType::kU8},
      {"ui16", ElementType::kU16},
      {"ui32", ElementType::kU32},
      {"ui64", ElementType::kU64},
      {"f16", ElementType::kF16},
      {"f32", ElementType::kF32},
      {"f64", ElementType::kF64},
      {"bf16", ElementType::kBF16},
      {"complex<f32>", ElementType::kC64},
      {"complex<f64>", ElementType::kC128},
      {"f8E5M2", ElementType::kF8E5M2},
      {"f8E4M3FN", ElementType::kF8E4M3FN},
      {"f8E5M2FNUZ", ElementType::kF8E5M2FNUZ},
      {"f8E4M3FNUZ", ElementType::kF8E4M3FNUZ},
      {"f8E8M0FNU", ElementType::kF8E8M0FNU},
  };
  for (const auto& [n, t] : kTypes) {
    if (name == n) return t;
  }
  return std::nullopt;
}

// "tensor<2x3xf32>" (the text after "tensor<" up to its closing '>').
ParamType parse_tensor(const std::string& body) {
  ParamType p;
  size_t i = 0;
  std::vector<int64_t> dims;
  // Leading "<digits>x" groups are dimensions; the rest is the element type.
  while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) {
    size_t j = i;
    while (j < body.size() && std::isdigit(static_cast<unsigned char>(body[j]))) ++j;
    if (j >= body.size() || body[j] != 'x') break;
    dims.push_back(std::strtoll(body.substr(i, j - i).c_str(), nullptr, 10));
    i = j + 1;
  }
  auto type = element_type(body.substr(i));
  if (!type) return p;  // "?" dims, encodings, unknown types
  p.known = true;
  p.type = *type;
  p.dims = std::move(dims);
  return p;
}

ParamType parse_param(const std::string& arg) {
  // "%name: tensor<...> {attributes}"
  const size_t colon = arg.find(':');
  if (colon == std::string::npos) return ParamType{};
  size_t start = arg.find_first_not_of(" \t\n", colon + 1);
  if (start == std::string::npos || arg.compare(start, 7, "tensor<") != 0) return ParamType{};
  start += 7;
  int depth = 1;
  for (size_t i = start; i < arg.size(); ++i) {
    if (arg[i] == '<') ++depth;
    if (arg[i] == '>' && --depth == 0) return parse_tensor(arg.substr(start, i - start));
  }
  return ParamType{};
}

}  // namespace

std::optional<std::vector<ParamType>> main_parameters(const std::string& text) {
  const size_t at = text.find("@main(");
  if (at == std::string::npos) return std::nullopt;
  // Split the argument list at top-level commas; brackets and strings nest
  // (attributes such as mhlo.sharding strings and sdy.sharding hold commas).
  std::vector<std::string> args(1);
  int depth = 0;
  for (size_t i = at + 6; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += (text[j] == '\\') ? 2 : 1;
      args.back() += text.substr(i, j + 1 - i);
      i = j;
      continue;
    }
    if (c == ')' && depth == 0) {
      std::vector<ParamType> params;
      for (const auto& a : args) {
        if (a.find_first_not_of(" \t\n") == std::string::npos) continue;  // "()"
        params.push_back(parse_param(a));
      }
      return params;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
    if (c == ',' && depth == 0) {
      args.emplace_back();
    } else {
      args.back() += c;
    }
  }
  return std::nullopt;  // unterminated
}

}  // namespace ttpu::pjrt
