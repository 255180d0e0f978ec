// Preparing a user's StableHLO module for inlining (see kernel_module.h).
//
// This is a scanner, not an MLIR parser: it finds the module's top-level
// func.func operations by bracket matching (skipping string literals and
// comments), keeps each body's text verbatim and rewrites only the function
// headers and the @symbol references to the module's own functions. The
// plugin's MLIR parser checks everything else when the program compiles, and
// the caller compiles each kernel once on its own first, so a body the plugin
// rejects is reported naming the kernel.
#include "stablehlo/kernel_module.h"

#include <cctype>
#include <set>
#include <vector>

#include "stablehlo/emit_util.h"

namespace ttpu::stablehlo {

using ir::DType;
using ir::TensorType;

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

class Scanner {
 public:
  Scanner(const std::string& s, std::string what) : s_(s), what_(std::move(what)) {}

  [[noreturn]] void fail(const std::string& msg) const {
    throw KernelTextError(what_ + ": " + msg);
  }
  size_t pos() const { return i_; }
  void set_pos(size_t i) { i_ = i; }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }

  void skip_ws() {
    while (!at_end()) {
      if (std::isspace(static_cast<unsigned char>(s_[i_]))) {
        ++i_;
      } else if (s_.compare(i_, 2, "//") == 0) {
        while (!at_end() && s_[i_] != '\n') ++i_;
      } else {
        return;
      }
    }
  }
  // Consumes `word` if it is next as a whole word.
  bool word(const char* w) {
    const size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return false;
    if (i_ + n < s_.size() && ident_char(s_[i_ + n])) return false;
    i_ += n;
    return true;
  }
  // Index just past the string literal starting at `i` (a '"').
  size_t string_end(size_t i) const {
    for (++i; i < s_.size(); ++i) {
      if (s_[i] == '\\') {
        ++i;
      } else if (s_[i] == '"') {
        return i + 1;
      }
    }
    fail("unterminated string literal");
  }
  // Index just past the bracket group ((), {} or []) that opens at `i`.
  size_t group_end(size_t i) const {
    std::vector<char> stack;
    for (; i < s_.size(); ++i) {
      const char c = s_[i];
      if (c == '"') {
        i = string_end(i) - 1;
      } else if (c == '/' && s_.compare(i, 2, "//") == 0) {
        while (i < s_.size() && s_[i] != '\n') ++i;
      } else if (c == '(' || c == '{' || c == '[') {
        stack.push_back(c == '(' ? ')' : c == '{' ? '}' : ']');
      } else if (c == ')' || c == '}' || c == ']') {
        if (stack.empty() || stack.back() != c) fail(std::string("unbalanced '") + c + "'");
        stack.pop_back();
        if (stack.empty()) return i + 1;
      }
    }
    fail("unbalanced brackets (the text ends inside a group)");
  }
  // The group opening at the current position (which must be `open`); returns
  // its inner text and moves past it.
  std::string group(char open, const std::string& what) {
    if (peek() != open) fail(std::string("expected '") + open + "' " + what);
    const size_t end = group_end(i_);
    std::string inner = s_.substr(i_ + 1, end - i_ - 2);
    i_ = end;
    return inner;
  }
  // A symbol name after '@' (bare or quoted); moves past it.
  std::string symbol() {
    if (peek() != '@') fail("expected a function name (@name)");
    ++i_;
    if (peek() == '"') {
      const size_t end = string_end(i_);
      std::string name = s_.substr(i_ + 1, end - i_ - 2);
      i_ = end;
      return name;
    }
    const size_t b = i_;
    if (!ident_start(peek())) fail("expected a function name after '@'");
    while (!at_end() && ident_char(s_[i_])) ++i_;
    return s_.substr(b, i_ - b);
  }
  // One type up to whitespace or '{' outside angle brackets ("tensor<2xf32>").
  std::string type() {
    const size_t b = i_;
    int angle = 0;
    while (!at_end()) {
      const char c = s_[i_];
      if (c == '<') ++angle;
      if (c == '>' && angle > 0) --angle;
      if (angle == 0 && (std::isspace(static_cast<unsigned char>(c)) || c == '{')) break;
      ++i_;
    }
    if (i_ == b) fail("expected a result type after '->'");
    return s_.substr(b, i_ - b);
  }

 private:
  const std::string& s_;
  std::string what_;
  size_t i_ = 0;
};

// Splits at commas outside brackets (angle brackets included) and strings.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  size_t b = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '(' || c == '{' || c == '[' || c == '<') {
      ++depth;
    } else if ((c == ')' || c == '}' || c == ']' || c == '>') && depth > 0) {
      if (!(c == '>' && i > 0 && s[i - 1] == '-')) --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(b, i - b)));
      b = i + 1;
    }
  }
  const std::string last = trim(s.substr(b));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

// "type {attrs}" -> "type": the attribute dictionary that may follow an
// argument's or result's type (dropped: it only means something on an entry).
std::string strip_attrs(const std::string& s) {
  int angle = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++angle;
    if (s[i] == '>' && angle > 0) --angle;
    if (s[i] == '{' && angle == 0) return trim(s.substr(0, i));
  }
  return trim(s);
}

struct Func {
  std::string name;
  bool is_public = true;
  std::vector<std::string> args;     // "%arg0: tensor<2xf32>"
  std::vector<std::string> results;  // "tensor<2xf32>"
  std::string body;                  // between the braces, verbatim
};

// `text` with every @reference to a name in `names` prefixed; string literals
// and comments are copied untouched.
std::string rename(const std::string& text, const std::set<std::string>& names,
                   const std::string& prefix, const Scanner& sc) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {
      size_t e = i + 1;
      for (; e < text.size() && text[e] != '"'; ++e) {
        if (text[e] == '\\') ++e;
      }
      if (e >= text.size()) sc.fail("unterminated string literal");
      out += text.substr(i, e + 1 - i);
      i = e + 1;
    } else if (c == '/' && text.compare(i, 2, "//") == 0) {
      const size_t e = text.find('\n', i);
      const size_t end = e == std::string::npos ? text.size() : e;
      out += text.substr(i, end - i);
      i = end;
    } else if (c == '@' && i + 1 < text.size() &&
               (text[i + 1] == '"' || ident_start(text[i + 1]))) {
      size_t e = i + 1;
      std::string name;
      if (text[e] == '"') {
        for (++e; e < text.size() && text[e] != '"'; ++e) {
          if (text[e] == '\\') ++e;
          if (e < text.size()) name += text[e];
        }
        ++e;
      } else {
        while (e < text.size() && ident_char(text[e])) name += text[e++];
      }
      out += names.count(name) ? detail::symbol(prefix + name) : text.substr(i, e - i);
      i = e;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// `text` without debug locations: the `#loc... = loc(...)` alias lines (jax.export
// prints them around the module) and every `loc(...)` annotation. They carry
// only source positions, and an alias outside the module could not be inlined.
std::string strip_locations(const std::string& text, const Scanner& sc) {
  std::string out;
  bool line_start = true;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (line_start && text.compare(i, 4, "#loc") == 0) {
      const size_t e = text.find('\n', i);
      i = e == std::string::npos ? text.size() : e;
      continue;
    }
    if (c == '"') {
      const size_t e = sc.string_end(i);
      out += text.substr(i, e - i);
      i = e;
      line_start = false;
      continue;
    }
    if (c == '/' && text.compare(i, 2, "//") == 0) {
      const size_t e = text.find('\n', i);
      const size_t end = e == std::string::npos ? text.size() : e;
      out += text.substr(i, end - i);
      i = end;
      continue;
    }
    if (text.compare(i, 4, "loc(") == 0 && (i == 0 || !ident_char(text[i - 1]))) {
      i = sc.group_end(i + 3);
      while (!out.empty() && out.back() == ' ') out.pop_back();
      continue;
    }
    out += c;
    if (c == '\n') {
      line_start = true;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      line_start = false;
    }
    ++i;
  }
  return out;
}

}  // namespace

TensorType parse_tensor_type(const std::string& text, const std::string& what) {
  const std::string t = trim(text);
  auto bad = [&](const std::string& why) {
    throw KernelTextError(what + ": type " + t + " is not supported (" + why + ")");
  };
  if (t.rfind("tensor<", 0) != 0 || t.back() != '>') bad("only ranked tensor types are");
  std::string inner = t.substr(7, t.size() - 8);
  TensorType out;
  size_t i = 0;
  while (i < inner.size() &&
         (std::isdigit(static_cast<unsigned char>(inner[i])) || inner[i] == '?')) {
    if (inner[i] == '?') bad("dynamic dimensions; shapes must be static");
    size_t e = i;
    while (e < inner.size() && std::isdigit(static_cast<unsigned char>(inner[e]))) ++e;
    if (e >= inner.size() || inner[e] != 'x' || e - i > 18) bad("malformed shape");
    out.dims.push_back(std::stoll(inner.substr(i, e - i)));
    i = e + 1;
  }
  const std::string elem = inner.substr(i);
  if (elem.find(',') != std::string::npos) bad("tensor encodings");
  static const std::pair<const char*, DType> kTypes[] = {{"i1", DType::kBool},
                                                         {"ui8", DType::kU8},
                                                         {"i8", DType::kI8},
                                                         {"i16", DType::kI16},
                                                         {"i32", DType::kI32},
                                                         {"i64", DType::kI64},
                                                         {"ui32", DType::kU32},
                                                         {"ui64", DType::kU64},
                                                         {"ui16", DType::kU16},
                                                         {"f16", DType::kF16},
                                                         {"bf16", DType::kBF16},
                                                         {"f32", DType::kF32},
                                                         {"f64", DType::kF64},
                                                         {"complex<f32>", DType::kC64},
                                                         {"complex<f64>", DType::kC128},
                                                         {"f8E4M3FN", DType::kF8E4M3FN},
                                                         {"f8E5M2", DType::kF8E5M2},
                                                         {"f8E4M3FNUZ", DType::kF8E4M3FNUZ},
                                                         {"f8E5M2FNUZ", DType::kF8E5M2FNUZ},
                                                         {"f8E8M0FNU", DType::kF8E8M0FNU}};
  for (const auto& [name, dtype] : kTypes) {
    if (elem == name) {
      out.dtype = dtype;
      return out;
    }
  }
  bad("element type " + elem + " has no torch dtype here");
  return out;  // not reached
}

ir::UserFunction prepare_kernel(const std::string& original, const std::string& name,
                                const std::string& key) {
  const std::string what = "kernel '" + name + "'";
  if (key.size() < 16) throw KernelTextError(what + ": content key too short");
  const std::string text = strip_locations(original, Scanner(original, what));
  Scanner sc(text, what);
  sc.skip_ws();
  size_t body_begin = sc.pos(), body_end = text.size();
  if (sc.peek() == '#') sc.fail("attribute aliases (#...) outside the module are not supported");
  if (sc.word("module")) {
    sc.skip_ws();
    if (sc.peek() == '@') sc.symbol();
    sc.skip_ws();
    if (sc.word("attributes")) {
      sc.skip_ws();
      sc.group('{', "after 'attributes'");
      sc.skip_ws();
    }
    if (sc.peek() != '{') sc.fail("expected '{' opening the module body");
    body_begin = sc.pos() + 1;
    body_end = sc.group_end(sc.pos()) - 1;
    sc.set_pos(body_end + 1);
    sc.skip_ws();
    if (!sc.at_end()) {
      sc.fail("unexpected text after the module (one module per kernel)");
    }
  }
  std::vector<Func> funcs;
  sc.set_pos(body_begin);
  for (;;) {
    sc.skip_ws();
    if (sc.pos() >= body_end) break;
    if (!sc.word("func.func")) {
      const std::string found = text.substr(sc.pos(), std::min<size_t>(40, body_end - sc.pos()));
      sc.fail("only func.func operations are supported at the top of a kernel module, found '" +
              found + "'");
    }
    Func f;
    sc.skip_ws();
    if (sc.word("private") || sc.word("nested")) {
      f.is_public = false;
    } else {
      sc.word("public");
    }
    sc.skip_ws();
    f.name = sc.symbol();
    sc.skip_ws();
    for (const std::string& arg : split_top(sc.group('(', "opening @" + f.name + "'s arguments"))) {
      const std::string a = strip_attrs(arg);
      const size_t colon = a.find(':');
      if (a.empty() || a[0] != '%' || colon == std::string::npos) {
        sc.fail("@" + f.name +
                ": an argument is not '%name: type' (a declaration without a body?)");
      }
      f.args.push_back(a);
    }
    sc.skip_ws();
    if (text.compare(sc.pos(), 2, "->") == 0) {
      sc.set_pos(sc.pos() + 2);
      sc.skip_ws();
      if (sc.peek() == '(') {
        for (const std::string& r : split_top(sc.group('(', "of results"))) {
          f.results.push_back(strip_attrs(r));
        }
      } else {
        f.results.push_back(sc.type());
      }
      sc.skip_ws();
    }
    if (sc.word("attributes")) {
      sc.skip_ws();
      sc.group('{', "after 'attributes'");
      sc.skip_ws();
    }
    if (sc.peek() != '{') sc.fail("@" + f.name + " has no body (declarations are not supported)");
    f.body = sc.group('{', "opening the body");
    funcs.push_back(std::move(f));
  }
  if (funcs.empty()) sc.fail("the module defines no function");

  const Func* entry = nullptr;
  for (const Func& f : funcs) {
    if (f.name == "main") entry = &f;
  }
  if (entry == nullptr) {
    for (const Func& f : funcs) {
      if (!f.is_public) continue;
      if (entry != nullptr) sc.fail("no @main and several public functions: which is the entry?");
      entry = &f;
    }
  }
  if (entry == nullptr) sc.fail("no @main and no public function");

  std::set<std::string> names;
  for (const Func& f : funcs) {
    if (!names.insert(f.name).second) sc.fail("@" + f.name + " is defined twice");
  }
  ir::UserFunction out;
  out.name = name;
  out.key = key;
  const std::string prefix = "ttpu_k" + key.substr(0, 16) + "_";
  out.entry = detail::symbol(prefix + entry->name).substr(1);
  for (const std::string& a : entry->args) {
    out.params.push_back(parse_tensor_type(a.substr(a.find(':') + 1), what + " argument"));
  }
  for (const std::string& r : entry->results) {
    out.results.push_back(parse_tensor_type(r, what + " result"));
  }
  for (const Func& f : funcs) {
    std::string s = "  func.func private " + detail::symbol(prefix + f.name) + "(";
    for (size_t i = 0; i < f.args.size(); ++i) s += (i ? ", " : "") + f.args[i];
    s += ") -> (";
    for (size_t i = 0; i < f.results.size(); ++i) s += (i ? ", " : "") + f.results[i];
    s += ") {" + rename(f.body, names, prefix, sc) + "}\n";
    out.funcs += s;
  }
  return out;
}

}  // namespace ttpu::stablehlo
