// Attribute text and the region bodies (reducers, sort comparators, select) of
// the StableHLO emitter.
#include <algorithm>
#include <cinttypes>
#include <cctype>
#include <cstdio>

#include "stablehlo/emit_util.h"

namespace ttpu::stablehlo::detail {

using ir::Cmp;
using ir::DType;
using ir::IrError;
using ir::Reducer;
using ir::TensorType;

std::string symbol(const std::string& name) {
  bool bare =
      !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) {
    bare =
        bare && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.');
  }
  if (bare) return "@" + name;
  std::string s = "@\"";
  for (char c : name) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  return s + "\"";
}

std::string i64_array(const std::vector<int64_t>& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : ": ") + std::to_string(v[i]);
  return s + ">";
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string padding_attr(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  std::string s = "dense<[";
  for (size_t i = 0; i < lo.size(); ++i) {
    s += (i ? ", [" : "[") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  }
  return s + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

std::string literal_text(uint64_t bits, DType dtype) {
  if (dtype == DType::kBool) return bits ? "true" : "false";
  if (ir::is_complex(dtype)) {  // real-valued (types.h): "(re, 0x0...)"
    const DType part = ir::complex_part(dtype);
    return "(" + literal_text(bits, part) + ", " + literal_text(0, part) + ")";
  }
  if (ir::is_float(dtype)) {
    const int digits = static_cast<int>(2 * ir::byte_size(dtype));
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%0*" PRIX64, digits, bits);
    return buf;
  }
  if (ir::is_unsigned(dtype)) {
    const int64_t bytes = ir::byte_size(dtype);
    const uint64_t mask = bytes == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bytes)) - 1;
    return std::to_string(bits & mask);
  }
  return std::to_string(ir::literal_to_int(bits, dtype));
}

std::string comparison_direction(Cmp cmp) {
  const char* names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  const auto i = static_cast<size_t>(cmp);
  if (i >= 6) throw IrError("stablehlo emit: unknown comparison direction");
  return std::string("#stablehlo<comparison_direction ") + names[i] + ">";
}

std::string comparison_type(DType dtype) {
  const char* t = ir::is_float(dtype) || ir::is_complex(dtype) ? "FLOAT"
                  : ir::is_unsigned(dtype)                     ? "UNSIGNED"
                                                               : "SIGNED";
  return std::string("#stablehlo<comparison_type ") + t + ">";
}

// ---------------------------------------------------------------- Region

Region::Region(int* counter, const std::vector<DType>& arg_dtypes) : counter_(counter) {
  for (DType t : arg_dtypes) args_.push_back(Val{fresh(), t});
}

std::string Region::fresh() { return "%r" + std::to_string((*counter_)++); }

Region::Val Region::op(const std::string& name, const std::vector<Val>& operands, DType result) {
  Val r{fresh(), result};
  std::string names, types;
  for (size_t i = 0; i < operands.size(); ++i) {
    names += (i ? ", " : "") + operands[i].name;
    types += (i ? ", " : "") + scalar_type(operands[i].dtype);
  }
  lines_.push_back(r.name + " = \"" + name + "\"(" + names + ") : (" + types + ") -> " +
                   scalar_type(result));
  return r;
}

Region::Val Region::compare(Cmp cmp, const Val& a, const Val& b) {
  Val r{fresh(), DType::kBool};
  const std::string t = scalar_type(a.dtype);
  lines_.push_back(r.name + " = \"stablehlo.compare\"(" + a.name + ", " + b.name +
                   ") {comparison_direction = " + comparison_direction(cmp) + ", compare_type = " +
                   comparison_type(a.dtype) + "} : (" + t + ", " + t + ") -> tensor<i1>");
  return r;
}

Region::Val Region::select(const Val& pred, const Val& on_true, const Val& on_false) {
  return op("stablehlo.select", {pred, on_true, on_false}, on_true.dtype);
}

Region::Val Region::is_nan(const Val& x) { return compare(Cmp::kNE, x, x); }

std::string Region::finish(const std::vector<Val>& results, int indent) const {
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string s = "{\n" + pad + "^bb0(";
  for (size_t i = 0; i < args_.size(); ++i) {
    s += (i ? ", " : "") + args_[i].name + ": " + scalar_type(args_[i].dtype);
  }
  s += "):\n";
  for (const std::string& line : lines_) s += pad + "  " + line + "\n";
  std::string names, types;
  for (size_t i = 0; i < results.size(); ++i) {
    names += (i ? ", " : "") + results[i].name;
    types += (i ? ", " : "") + scalar_type(results[i].dtype);
  }
  s += pad + "  \"stablehlo.return\"(" + names + ") : (" + types + ") -> ()\n";
  return s + pad + "}";
}

// ---------------------------------------------------------------- bodies

namespace {

// The combining op of a simple reducer. On i1, add/mul/max/min are written as
// or/and (the same boolean functions) so no backend has to support i1 arithmetic.
std::string combiner(Reducer r, DType dtype) {
  const bool pred = dtype == DType::kBool;
  switch (r) {
    case Reducer::kAdd: return pred ? "stablehlo.or" : "stablehlo.add";
    case Reducer::kMul: return pred ? "stablehlo.and" : "stablehlo.multiply";
    case Reducer::kMax: return pred ? "stablehlo.or" : "stablehlo.maximum";
    case Reducer::kMin: return pred ? "stablehlo.and" : "stablehlo.minimum";
    case Reducer::kAnd: return "stablehlo.and";
    case Reducer::kOr: return "stablehlo.or";
    default: throw IrError("stablehlo emit: reducer has no combining op");
  }
}

// (value, index) pairs: a wins when its value is better (greater for argmax,
// smaller for argmin) or it is NaN and b is not (PyTorch's max/min/argmax treat
// NaN as the extreme); equal values (or both NaN) keep the smaller index. The
// result is commutative and associative, as reduce requires, so XLA may combine
// in any order.
std::vector<Region::Val> arg_reducer(Region& g, bool is_max) {
  const Region::Val& va = g.arg(0);
  const Region::Val& ia = g.arg(1);
  const Region::Val& vb = g.arg(2);
  const Region::Val& ib = g.arg(3);
  Region::Val better = g.compare(is_max ? Cmp::kGT : Cmp::kLT, va, vb);
  Region::Val same = g.compare(Cmp::kEQ, va, vb);
  if (ir::is_float(va.dtype)) {
    const Region::Val a_nan = g.is_nan(va);
    const Region::Val b_nan = g.is_nan(vb);
    // One line per statement: argument evaluation order is unspecified in C++,
    // and the golden text must not depend on the compiler.
    const Region::Val b_not_nan = g.not_(b_nan);
    const Region::Val only_a_nan = g.and_(a_nan, b_not_nan);
    better = g.or_(better, only_a_nan);
    const Region::Val both_nan = g.and_(a_nan, b_nan);
    same = g.or_(same, both_nan);
  }
  const Region::Val index_lt = g.compare(Cmp::kLT, ia, ib);
  const Region::Val tie_to_a = g.and_(same, index_lt);
  const Region::Val pick_a = g.or_(better, tie_to_a);
  const Region::Val value = g.select(pick_a, va, vb);
  const Region::Val index = g.select(pick_a, ia, ib);
  return {value, index};
}

}  // namespace

std::string reducer_region(Reducer reducer, const std::vector<DType>& dtypes, int* counter,
                           int indent) {
  std::vector<DType> args = dtypes;
  args.insert(args.end(), dtypes.begin(), dtypes.end());
  Region g(counter, args);
  const size_t n = dtypes.size();
  std::vector<Region::Val> results;
  if (reducer == Reducer::kArgMax || reducer == Reducer::kArgMin) {
    if (n != 2) throw IrError("stablehlo emit: argmax/argmin reduce needs (values, indices)");
    results = arg_reducer(g, reducer == Reducer::kArgMax);
  } else if (reducer == Reducer::kReplace) {
    for (size_t i = 0; i < n; ++i) results.push_back(g.arg(n + i));  // the update wins
  } else {
    for (size_t i = 0; i < n; ++i) {
      const Region::Val& a = g.arg(i);
      const Region::Val& b = g.arg(n + i);
      Region::Val r = g.op(combiner(reducer, dtypes[i]), {a, b}, dtypes[i]);
      if ((reducer == Reducer::kMax || reducer == Reducer::kMin) && ir::is_float(dtypes[i])) {
        // NaN wins, as in emit.cc's elementwise maximum/minimum (the CPU
        // plugin's fast min/max would drop it).
        const Region::Val a_nan = g.is_nan(a);
        const Region::Val b_nan = g.is_nan(b);
        const Region::Val with_a = g.select(a_nan, a, r);
        r = g.select(b_nan, b, with_a);
      }
      results.push_back(r);
    }
  }
  return g.finish(results, indent);
}

std::string sort_region(Cmp cmp, const std::vector<DType>& dtypes, int* counter, int indent) {
  std::vector<DType> args;
  for (DType t : dtypes) {
    args.push_back(t);
    args.push_back(t);
  }
  Region g(counter, args);
  const Region::Val& a = g.arg(0);
  const Region::Val& b = g.arg(1);
  Region::Val result = g.compare(cmp, a, b);
  if (ir::is_float(a.dtype)) {
    // PyTorch sorts NaN as the largest value: last ascending, first descending.
    // A plain LT/GT is not a strict weak order with NaN present.
    //   LT: !isnan(a) && (isnan(b) || a < b);  GT: !isnan(b) && (isnan(a) || a > b)
    const Region::Val a_nan = g.is_nan(a);
    const Region::Val b_nan = g.is_nan(b);
    const bool lt = cmp == Cmp::kLT;
    const Region::Val not_nan = g.not_(lt ? a_nan : b_nan);
    const Region::Val nan_or_cmp = g.or_(lt ? b_nan : a_nan, result);
    result = g.and_(not_nan, nan_or_cmp);
  }
  return g.finish({result}, indent);
}

std::string select_region(Cmp cmp, DType dtype, int* counter, int indent) {
  Region g(counter, {dtype, dtype});
  return g.finish({g.compare(cmp, g.arg(0), g.arg(1))}, indent);
}

// XLA:CPU compiles a concatenate as one kernel with a branch per operand and
// fuses it into its reader: 3,000 parts took 13.6 s to compile, 147 s feeding
// a sum (xla-cpu-pjrt 0.0.1). More than kMaxConcatOperands parts are joined in
// groups of that many, each behind an optimization_barrier (without one, XLA
// flattens the nested concatenates back): 1.0 s and 1.3 s. The groups cost one
// more copy of the data.
constexpr size_t kMaxConcatOperands = 64;

std::string concatenate_lines(std::vector<std::pair<std::string, TensorType>> parts, int64_t dim,
                              const std::string& name, const TensorType& out, int* temp) {
  const std::string attr = "dimension = " + std::to_string(dim) + " : i64";
  std::string text;
  auto join = [&](size_t begin, size_t end, const std::string& result, const TensorType& t) {
    std::string names, types;
    for (size_t i = begin; i < end; ++i) {
      names += (i > begin ? ", " : "") + parts[i].first;
      types += (i > begin ? ", " : "") + parts[i].second.mlir();
    }
    text += "    " + result + " = \"stablehlo.concatenate\"(" + names + ") {" + attr + "} : (" +
            types + ") -> " + t.mlir() + "\n";
  };
  while (parts.size() > kMaxConcatOperands) {
    std::vector<std::pair<std::string, TensorType>> groups;
    for (size_t i = 0; i < parts.size(); i += kMaxConcatOperands) {
      const size_t end = std::min(parts.size(), i + kMaxConcatOperands);
      if (end - i == 1) {
        groups.push_back(parts[i]);
        continue;
      }
      TensorType t = parts[i].second;
      for (size_t j = i + 1; j < end; ++j) t.dims[dim] += parts[j].second.dims[dim];
      const std::string joined = "%t" + std::to_string((*temp)++);
      const std::string held = "%t" + std::to_string((*temp)++);
      join(i, end, joined, t);
      text += "    " + held + " = \"stablehlo.optimization_barrier\"(" + joined + ") : (" +
              t.mlir() + ") -> " + t.mlir() + "\n";
      groups.emplace_back(held, t);
    }
    parts = std::move(groups);
  }
  join(0, parts.size(), name, out);
  return text;
}

}  // namespace ttpu::stablehlo::detail
