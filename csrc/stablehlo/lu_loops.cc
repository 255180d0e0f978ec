// LU with partial pivoting and the row order of LAPACK pivots as loops over
// the columns (loop_kernels.h). Each iteration is one column of LAPACK
// getf2's right-looking algorithm on a whole batch; XLA compiles the body
// once, where the unrolled program (one copy of it per column) took 8.5 s to
// compile for a 64x64 solve on XLA:CPU.
#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "stablehlo/emit_util.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::stablehlo {
namespace {

using ir::Cmp;
using ir::DType;
using ir::TensorType;

constexpr int kLoopIndent = 6;  // the ops inside the while's regions

// One function body in StableHLO's generic syntax, a value a line. Names are
// `<prefix><N>`; the reduce regions take theirs from `region_counter` ("%r<N>"),
// so no name repeats anywhere in the function (MLIR rejects a nested region
// that redefines a name visible from outside it).
class Body {
 public:
  struct V {
    std::string name;
    TensorType type;
  };
  Body(std::string prefix, int* region_counter)
      : prefix_(std::move(prefix)), region_counter_(region_counter) {}

  V op(const std::string& name, const std::vector<V>& in, const TensorType& out,
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
  V constant(double value, const TensorType& t) {
    const uint64_t bits = ir::is_float(t.dtype)
                              ? ir::literal_bits(value, t.dtype)
                              : ir::literal_bits_int(static_cast<int64_t>(value), t.dtype);
    return op("stablehlo.constant", {}, t,
              "value = dense<" + detail::literal_text(bits, t.dtype) + "> : " + t.mlir());
  }
  V binary(const char* name, const V& a, const V& b) { return op(name, {a, b}, a.type); }
  V compare(Cmp cmp, const V& a, const V& b) {
    return op("stablehlo.compare", {a, b}, {DType::kBool, a.type.dims},
              "comparison_direction = " + detail::comparison_direction(cmp) +
                  ", compare_type = " + detail::comparison_type(a.type.dtype));
  }
  V select(const V& p, const V& a, const V& b) { return op("stablehlo.select", {p, a, b}, a.type); }
  V reshape(const V& a, const std::vector<int64_t>& dims) {
    return op("stablehlo.reshape", {a}, {a.type.dtype, dims});
  }
  V broadcast(const V& a, const std::vector<int64_t>& dims, const std::vector<int64_t>& map) {
    return op("stablehlo.broadcast_in_dim", {a}, {a.type.dtype, dims},
              "broadcast_dimensions = " + detail::i64_array(map));
  }
  V iota(const TensorType& t, int64_t dim) {
    return op("stablehlo.iota", {}, t, "iota_dimension = " + std::to_string(dim) + " : i64");
  }
  V dynamic_slice(const V& a, const std::vector<V>& starts, const std::vector<int64_t>& sizes) {
    std::vector<V> in{a};
    in.insert(in.end(), starts.begin(), starts.end());
    return op("stablehlo.dynamic_slice", in, {a.type.dtype, sizes},
              "slice_sizes = " + detail::i64_array(sizes));
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
    return op(
        "stablehlo.reduce", {a, zero}, {a.type.dtype, dims},
        "dimensions = " + detail::i64_array({1}),
        detail::reducer_region(ir::Reducer::kAdd, {a.type.dtype}, region_counter_, kLoopIndent));
  }
  // The first `index` of the largest `score` along dimension 1 (NaN largest,
  // as the IR's kArgMax reduce).
  V argmax_dim1(const V& score, const V& index) {
    const std::vector<int64_t> dims{score.type.dims[0]};
    V lowest = constant(-std::numeric_limits<double>::infinity(), {score.type.dtype, {}});
    V first = constant(0, {index.type.dtype, {}});
    const std::string region = detail::reducer_region(
        ir::Reducer::kArgMax, {score.type.dtype, index.type.dtype}, region_counter_, kLoopIndent);
    // Two results: written by hand (op() names one).
    const std::string name = prefix_ + std::to_string(next_++);
    const TensorType vt{score.type.dtype, dims}, it{index.type.dtype, dims};
    text_ += pad() + name + ":2 = \"stablehlo.reduce\"(" + score.name + ", " + index.name + ", " +
             lowest.name + ", " + first.name + ") (" + region +
             ") {dimensions = " + detail::i64_array({1}) + "} : (" + score.type.mlir() + ", " +
             index.type.mlir() + ", " + lowest.type.mlir() + ", " + first.type.mlir() + ") -> (" +
             vt.mlir() + ", " + it.mlir() + ")\n";
    return V{name + "#1", it};
  }
  const std::string& text() const { return text_; }

 private:
  static std::string pad() { return std::string(kLoopIndent, ' '); }
  std::string prefix_;
  int* region_counter_;
  int next_ = 0;
  std::string text_;
};

using V = Body::V;

std::string types_of(const std::vector<V>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].type.mlir();
  return s;
}
std::string names_of(const std::vector<V>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].name;
  return s;
}

// Swaps entries j and p[b] of each row b of `perm` (i64 [B, m]); `pos` is iota
// along dimension 1, `jm` the column index j broadcast to [B, m], `p` i64 [B].
V swap_entries(Body& b, const V& perm, const V& pos, const V& j, const V& jm, const V& p) {
  const auto& s = perm.type.dims;
  V pm = b.compare(Cmp::kEQ, pos, b.broadcast(p, s, {0}));
  V pj = b.compare(Cmp::kEQ, pos, jm);
  V perm_p = b.sum_dim1(b.select(pm, perm, b.constant(0, perm.type)));
  V zero = b.constant(0, {DType::kI64, {}});
  V perm_j = b.reshape(b.dynamic_slice(perm, {zero, j}, {s[0], 1}), {s[0]});
  return b.select(pj, b.broadcast(perm_p, s, {0}), b.select(pm, b.broadcast(perm_j, s, {0}), perm));
}

// A function of `args` whose result is the while's state after running
// `step` for j = 0 .. count - 1. `init` (names of values in `outer`, whose
// text comes first) starts the state after j; `step` gets the body and the
// state (j first) and returns the next state without j. Returns the module.
template <typename Step>
std::string counted_loop(const std::string& params, const std::string& result_types,
                         const Body& outer, const std::vector<V>& init, int64_t count,
                         std::vector<size_t> results, int* region_counter, Step step) {
  const TensorType index{DType::kI64, {}};
  std::vector<V> state{V{"%j", index}};
  const char* names[] = {"%s0", "%s1", "%s2", "%s3", "%s4", "%s5"};
  for (size_t i = 0; i < init.size(); ++i) state.push_back(V{names[i], init[i].type});
  std::string x = "module {\n  func.func @main(" + params + ") -> (" + result_types + ") {\n";
  x += outer.text();
  x += "    %j0 = stablehlo.constant dense<0> : tensor<i64>\n";
  x += "    %w:" + std::to_string(state.size()) + " = stablehlo.while(%j = %j0";
  for (size_t i = 0; i < init.size(); ++i) x += ", " + state[i + 1].name + " = " + init[i].name;
  x += ") : " + types_of(state) + "\n    cond {\n";
  Body cond("%c", region_counter);
  V more = cond.compare(Cmp::kLT, state[0], cond.constant(static_cast<double>(count), index));
  x += cond.text() + "      stablehlo.return " + more.name + " : tensor<i1>\n    } do {\n";
  Body body("%b", region_counter);
  std::vector<V> next{body.binary("stablehlo.add", state[0], body.constant(1, index))};
  for (const V& v : step(body, state)) next.push_back(v);
  x += body.text() + "      stablehlo.return " + names_of(next) + " : " + types_of(next) + "\n";
  x += "    }\n    return ";
  std::string types;
  for (size_t i = 0; i < results.size(); ++i) {
    x += (i ? ", %w#" : "%w#") + std::to_string(results[i] + 1);
    types += (i ? ", " : "") + state[results[i] + 1].type.mlir();
  }
  return x + " : " + types + "\n  }\n}\n";
}

std::string lu_text(const TensorType& x) {
  const int64_t bsz = x.dims[0], m = x.dims[1], n = x.dims[2], k = std::min(m, n);
  const DType dt = x.dtype;
  const TensorType perm_t{DType::kI64, {bsz, m}}, piv_t{DType::kI64, {bsz, k}};
  const TensorType zero_t{DType::kBool, {bsz, k}};
  int regions = 0;
  Body outer("%v", &regions);
  const V a{"%a", x};
  const V perm0 = outer.iota(perm_t, 1);
  const V piv0 = outer.constant(0, piv_t);
  const V zero0 = outer.constant(0, zero_t);
  const std::string results =
      x.mlir() + ", " + perm_t.mlir() + ", " + piv_t.mlir() + ", " + zero_t.mlir();
  auto step = [&](Body& b, const std::vector<V>& s) -> std::vector<V> {
    const V &j = s[0], &xs = s[1], &perm = s[2], &piv = s[3], &zero = s[4];
    const std::vector<int64_t> shape{bsz, m, n};
    const TensorType ti{DType::kI64, shape};
    V c0 = b.constant(0, {DType::kI64, {}});
    V pos = b.iota(perm_t, 1), row = b.iota(ti, 1), col = b.iota(ti, 2);
    V jm = b.broadcast(j, {bsz, m}, {}), j3 = b.broadcast(j, shape, {});
    // Pivot: the first row >= j of largest |x[:, j]| (LAPACK i?amax).
    V column = b.reshape(b.dynamic_slice(xs, {c0, c0, j}, {bsz, m, 1}), {bsz, m});
    V score = b.select(b.compare(Cmp::kGE, pos, jm), b.op("stablehlo.abs", {column}, column.type),
                       b.constant(-1, column.type));
    V p = b.argmax_dim1(score, pos);  // i64 [B]
    // Swap rows j and p (row p picked by a masked sum: exact).
    V is_p = b.compare(Cmp::kEQ, row, b.broadcast(p, shape, {0}));
    V is_j = b.compare(Cmp::kEQ, row, j3);
    V row_p = b.sum_dim1(b.select(is_p, xs, b.constant(0, x)));  // [B, n]
    V row_j = b.reshape(b.dynamic_slice(xs, {c0, j, c0}, {bsz, 1, n}), {bsz, n});
    V rows_p = b.broadcast(row_p, shape, {0, 2});
    V x1 = b.select(is_j, rows_p, b.select(is_p, b.broadcast(row_j, shape, {0, 2}), xs));
    V perm1 = swap_entries(b, perm, pos, j, jm, p);
    // Scale the column below the pivot (left as is for a zero pivot, whose
    // column is all zero: LAPACK reports it in info and goes on).
    V pivot = b.reshape(b.dynamic_slice(row_p, {c0, j}, {bsz, 1}), {bsz});
    V is_zero = b.compare(Cmp::kEQ, pivot, b.constant(0, pivot.type));
    V safe = b.select(is_zero, b.constant(1, pivot.type), pivot);
    V after_j = b.compare(Cmp::kGT, row, j3);
    V below = b.binary("stablehlo.and", after_j, b.compare(Cmp::kEQ, col, j3));
    V scaled = b.binary("stablehlo.divide", x1, b.broadcast(safe, shape, {0}));
    V x2 = b.select(below, scaled, x1);
    // Rank-1 update of the trailing block.
    V l = b.reshape(b.dynamic_slice(x2, {c0, c0, j}, {bsz, m, 1}), {bsz, m});
    V update = b.binary("stablehlo.multiply", b.broadcast(l, shape, {0, 1}), rows_p);
    V trailing = b.binary("stablehlo.and", after_j, b.compare(Cmp::kGT, col, j3));
    V x3 = b.select(trailing, b.binary("stablehlo.subtract", x2, update), x2);
    V piv1 = b.update_slice(piv, b.reshape(p, {bsz, 1}), {c0, j});
    V zero1 = b.update_slice(zero, b.reshape(is_zero, {bsz, 1}), {c0, j});
    return {x3, perm1, piv1, zero1};
  };
  return counted_loop("%a: " + x.mlir(), results, outer, {a, perm0, piv0, zero0}, k, {0, 1, 2, 3},
                      &regions, step);
}

std::string permutation_text(int64_t bsz, int64_t m, int64_t k) {
  const TensorType perm_t{DType::kI64, {bsz, m}}, piv_t{DType::kI64, {bsz, k}};
  int regions = 0;
  Body outer("%v", &regions);
  const V piv{"%a", piv_t};
  const V perm0 = outer.iota(perm_t, 1);
  auto step = [&](Body& b, const std::vector<V>& s) -> std::vector<V> {
    const V &j = s[0], &pv = s[1], &perm = s[2];
    V c0 = b.constant(0, {DType::kI64, {}});
    V p = b.reshape(b.dynamic_slice(pv, {c0, j}, {bsz, 1}), {bsz});
    V pos = b.iota(perm_t, 1);
    return {pv, swap_entries(b, perm, pos, j, b.broadcast(j, {bsz, m}, {}), p)};
  };
  return counted_loop("%a: " + piv_t.mlir(), perm_t.mlir(), outer, {piv, perm0}, k, {1}, &regions,
                      step);
}

std::shared_ptr<const ir::UserFunction> cached_loop(const std::string& text, const char* name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const ir::UserFunction>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& fn = cache[text];
  if (!fn) fn = std::make_shared<const ir::UserFunction>(detail::loop_function(text, name));
  return fn;
}

}  // namespace

std::shared_ptr<const ir::UserFunction> lu_factor_loop(const TensorType& x) {
  if (x.dims.size() != 3 || (x.dtype != DType::kF32 && x.dtype != DType::kF64)) {
    throw ir::IrError("lu_factor_loop: " + x.mlir() + " is not a batch of f32 or f64 matrices");
  }
  if (x.dims[0] == 0 || std::min(x.dims[1], x.dims[2]) == 0) {
    throw ir::IrError("lu_factor_loop: " + x.mlir() + " has no column to factor");
  }
  return cached_loop(lu_text(x), "lu_factor");
}

std::shared_ptr<const ir::UserFunction> pivots_to_permutation_loop(int64_t bsz, int64_t m,
                                                                   int64_t k) {
  if (bsz <= 0 || k <= 0 || m < k) {
    throw ir::IrError("pivots_to_permutation_loop: no pivots for a batch of " +
                      std::to_string(bsz) + " with m " + std::to_string(m) + ", k " +
                      std::to_string(k));
  }
  return cached_loop(permutation_text(bsz, m, k), "pivots_to_permutation");
}

}  // namespace ttpu::stablehlo
