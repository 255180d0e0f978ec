// Pieces for writing loop lowerings as StableHLO text (loop_kernels.h): a
// function body in generic syntax, a value a line, and a counted
// stablehlo.while around it. Internal to the stablehlo layer.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo/emit_util.h"

namespace ttpu::stablehlo::detail {

inline constexpr int kLoopIndent = 6;  // the ops inside the while's regions

// One function body in StableHLO's generic syntax, a value a line. Names are
// `<prefix><N>`; the reduce regions take theirs from `region_counter` ("%r<N>"),
// so no name repeats anywhere in the function (MLIR rejects a nested region
// that redefines a name visible from outside it).
class Body {
 public:
  struct V {
    std::string name;
    ir::TensorType type;
  };
  Body(std::string prefix, int* region_counter)
      : prefix_(std::move(prefix)), region_counter_(region_counter) {}

  V op(const std::string& name, const std::vector<V>& in, const ir::TensorType& out,
       const std::string& attrs = "", const std::string& region = "") {
    V r{prefix_ + std::to_string(next_++), out};
    std::string names, types;
    for (size_t i = 0; i < in.size(); ++i) {
      names += (i ? ", " : "") + in[i].name;
      types += (i ? ", " : "") + in[i].type.mlir();
    }
    text_ += pad() + r.name + " = \"" + name + "\"(" + names + ")";
    if (!region.empty()) text_ += " (" + region + ")";
    if (!attrs.empty()) text_ += " {" + attrs + "}";
    text_ += " : (" + types + ") -> " + out.mlir() + "\n";
    return r;
  }
  V constant(double value, const ir::TensorType& t) {
    const uint64_t bits = ir::is_float(t.dtype)
                              ? ir::literal_bits(value, t.dtype)
                              : ir::literal_bits_int(static_cast<int64_t>(value), t.dtype);
    return op("stablehlo.constant", {}, t,
              "value = dense<" + literal_text(bits, t.dtype) + "> : " + t.mlir());
  }
  V binary(const char* name, const V& a, const V& b) { return op(name, {a, b}, a.type); }
  V compare(ir::Cmp cmp, const V& a, const V& b) {
    return op("stablehlo.compare", {a, b}, {ir::DType::kBool, a.type.dims},
              "comparison_direction = " + comparison_direction(cmp) +
                  ", compare_type = " + comparison_type(a.type.dtype));
  }
  V select(const V& p, const V& a, const V& b) { return op("stablehlo.select", {p, a, b}, a.type); }
  V reshape(const V& a, const std::vector<int64_t>& dims) {
    return op("stablehlo.reshape", {a}, {a.type.dtype, dims});
  }
  V broadcast(const V& a, const std::vector<int64_t>& dims, const std::vector<int64_t>& map) {
    return op("stablehlo.broadcast_in_dim", {a}, {a.type.dtype, dims},
              "broadcast_dimensions = " + i64_array(map));
  }
  V iota(const ir::TensorType& t, int64_t dim) {
    return op("stablehlo.iota", {}, t, "iota_dimension = " + std::to_string(dim) + " : i64");
  }
  V dynamic_slice(const V& a, const std::vector<V>& starts, const std::vector<int64_t>& sizes) {
    std::vector<V> in{a};
    in.insert(in.end(), starts.begin(), starts.end());
    return op("stablehlo.dynamic_slice", in, {a.type.dtype, sizes},
              "slice_sizes = " + i64_array(sizes));
  }
  V update_slice(const V& a, const V& update, const std::vector<V>& starts) {
    std::vector<V> in{a, update};
    in.insert(in.end(), starts.begin(), starts.end());
    return op("stablehlo.dynamic_update_slice", in, a.type);
  }
  // The sum of `a` along dimension 1.
  V sum_dim1(const V& a) {
    std::vector<int64_t> dims = a.type.dims;
    dims.erase(dims.begin() + 1);
    V zero = constant(0, {a.type.dtype, {}});
    return op("stablehlo.reduce", {a, zero}, {a.type.dtype, dims}, "dimensions = " + i64_array({1}),
              reducer_region(ir::Reducer::kAdd, {a.type.dtype}, region_counter_, kLoopIndent));
  }
  // The first `index` of the largest `score` along dimension 1 (NaN largest,
  // as the IR's kArgMax reduce).
  V argmax_dim1(const V& score, const V& index) {
    const std::vector<int64_t> dims{score.type.dims[0]};
    V lowest = constant(-std::numeric_limits<double>::infinity(), {score.type.dtype, {}});
    V first = constant(0, {index.type.dtype, {}});
    const std::string region = reducer_region(
        ir::Reducer::kArgMax, {score.type.dtype, index.type.dtype}, region_counter_, kLoopIndent);
    // Two results: written by hand (op() names one).
    const std::string name = prefix_ + std::to_string(next_++);
    const ir::TensorType vt{score.type.dtype, dims}, it{index.type.dtype, dims};
    text_ += pad() + name + ":2 = \"stablehlo.reduce\"(" + score.name + ", " + index.name + ", " +
             lowest.name + ", " + first.name + ") (" + region +
             ") {dimensions = " + i64_array({1}) + "} : (" + score.type.mlir() + ", " +
             index.type.mlir() + ", " + lowest.type.mlir() + ", " + first.type.mlir() + ") -> (" +
             vt.mlir() + ", " + it.mlir() + ")\n";
    return V{name + "#1", it};
  }
  // True where every element of the bool `a` is (a scalar i1).
  V all(const V& a) {
    if (a.type.dims.empty()) return a;
    std::vector<int64_t> every(a.type.dims.size());
    for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int64_t>(i);
    V yes = constant(1, {ir::DType::kBool, {}});
    return op("stablehlo.reduce", {a, yes}, {ir::DType::kBool, {}},
              "dimensions = " + i64_array(every),
              reducer_region(ir::Reducer::kAnd, {ir::DType::kBool}, region_counter_, kLoopIndent));
  }
  const std::string& text() const { return text_; }

 private:
  static std::string pad() { return std::string(kLoopIndent, ' '); }
  std::string prefix_;
  int* region_counter_;
  int next_ = 0;
  std::string text_;
};

using LoopValue = Body::V;

inline std::string types_of(const std::vector<LoopValue>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].type.mlir();
  return s;
}
inline std::string names_of(const std::vector<LoopValue>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].name;
  return s;
}

// A module whose @main(`params`) returns some of a while's state: the loop
// runs `step` for j = start .. count - 1 (count: an i64 scalar of `outer`,
// carried in the state, so it may be computed). `init` (values of `outer`,
// whose text comes first) starts the state after j; `step` gets the body and
// the state (j first, then the `init` values) and returns their next values.
// `results` index `init`. With `until_all` (an index of `init`, a bool
// tensor), the loop also ends once that state is true everywhere (every
// element converged), so it runs only as long as its slowest element.
template <typename Step>
std::string counted_loop(const std::string& params, const std::string& result_types,
                         const Body& outer, const std::vector<LoopValue>& init, int64_t start,
                         const LoopValue& count, const std::vector<size_t>& results,
                         int* region_counter, Step step, int until_all = -1) {
  using V = LoopValue;
  const ir::TensorType index{ir::DType::kI64, {}};
  std::vector<V> state{V{"%loop_j", index}, V{"%loop_n", index}};
  for (size_t i = 0; i < init.size(); ++i) {
    state.push_back(V{"%loop_s" + std::to_string(i), init[i].type});
  }
  std::string x = "module {\n  func.func @main(" + params + ") -> (" + result_types + ") {\n";
  x += outer.text();
  x += "    %loop_j0 = stablehlo.constant dense<" + std::to_string(start) + "> : tensor<i64>\n";
  x += "    %loop_w:" + std::to_string(state.size()) +
       " = stablehlo.while(%loop_j = %loop_j0, %loop_n = " + count.name;
  for (size_t i = 0; i < init.size(); ++i) x += ", " + state[i + 2].name + " = " + init[i].name;
  x += ") : " + types_of(state) + "\n    cond {\n";
  Body cond("%c", region_counter);
  V more = cond.compare(ir::Cmp::kLT, state[0], state[1]);
  if (until_all >= 0) {
    const V all = cond.all(state[static_cast<size_t>(until_all) + 2]);
    more = cond.binary("stablehlo.and", more, cond.op("stablehlo.not", {all}, all.type));
  }
  x += cond.text() + "      stablehlo.return " + more.name + " : tensor<i1>\n    } do {\n";
  Body body("%b", region_counter);
  std::vector<V> next{body.binary("stablehlo.add", state[0], body.constant(1, index)), state[1]};
  std::vector<V> loop_state{state[0]};
  loop_state.insert(loop_state.end(), state.begin() + 2, state.end());
  for (const V& v : step(body, loop_state)) next.push_back(v);
  x += body.text() + "      stablehlo.return " + names_of(next) + " : " + types_of(next) + "\n";
  x += "    }\n    return ";
  std::string types;
  for (size_t i = 0; i < results.size(); ++i) {
    x += (i ? ", %loop_w#" : "%loop_w#") + std::to_string(results[i] + 2);
    types += (i ? ", " : "") + state[results[i] + 2].type.mlir();
  }
  return x + " : " + types + "\n  }\n}\n";
}

// The loop function `name` for `key` (what its text depends on): `text()`
// runs only the first time, so a lowering that finds it made builds no text.
// Thread-safe.
std::shared_ptr<const ir::UserFunction> cached_loop(const std::string& key, const char* name,
                                                    const std::function<std::string()>& text);

}  // namespace ttpu::stablehlo::detail

// The names every loop lowering's file uses (`using namespace loop_names;`
// inside its anonymous namespace).
namespace ttpu::stablehlo::loop_names {
using Body = detail::Body;
using V = detail::LoopValue;
using ir::Cmp;
using ir::DType;
using ir::TensorType;
}  // namespace ttpu::stablehlo::loop_names
