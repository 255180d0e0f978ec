// Graph -> StableHLO text. One line per node in MLIR generic form:
//   %3 = "stablehlo.add"(%1, %2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// Parameters are the entry block arguments %argN; a node with several results is
// "%5:2 = ..." and its results "%5#0", "%5#1". Region bodies come from
// emit_regions.cc.
#include "stablehlo/emit.h"

#include <algorithm>
#include <cctype>

#include "stablehlo/emit_util.h"

namespace ttpu::stablehlo {

using ir::DType;
using ir::IrError;
using ir::Node;
using ir::Op;
using ir::TensorType;
using ir::Value;

namespace {

using namespace detail;  // NOLINT: the internal text helpers

constexpr int kRegionIndent = 6;

// An MLIR string attribute: quotes and backslashes escaped, other
// non-printable bytes as \XX hex escapes.
std::string string_literal(const std::string& v) {
  static const char* kHex = "0123456789ABCDEF";
  std::string s = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7F) {
      s += '\\';
      s += kHex[c >> 4];
      s += kHex[c & 15];
    } else {
      s += static_cast<char>(c);
    }
  }
  return s + "\"";
}

// The StableHLO (or CHLO) op of an elementwise IR op. op_name() already is the
// StableHLO name for ops StableHLO has; the rest are CHLO ops, which XLA
// legalizes when it compiles (checked on the xla-cpu-pjrt plugin by the
// end-to-end test in csrc/tests/stablehlo_run_test.cc).
std::string elementwise_op(Op op) {
  switch (op) {
    case Op::kErf: return "chlo.erf";
    case Op::kErfInv: return "chlo.erf_inv";
    case Op::kLgamma: return "chlo.lgamma";
    case Op::kDigamma: return "chlo.digamma";
    case Op::kAsin: return "chlo.asin";
    case Op::kAcos: return "chlo.acos";
    case Op::kSinh: return "chlo.sinh";
    case Op::kCosh: return "chlo.cosh";
    case Op::kAsinh: return "chlo.asinh";
    case Op::kAcosh: return "chlo.acosh";
    case Op::kAtanh: return "chlo.atanh";
    default: return std::string("stablehlo.") + ir::op_name(op);
  }
}

bool is_elementwise(Op op) {
  return (op >= Op::kNeg && op <= Op::kShiftRightLogical) || op == Op::kSelect ||
         op == Op::kClamp || op == Op::kConvert || op == Op::kBitcastConvert;
}

// "#stablehlo.<kind><name = [...], ..., index_vector_dim = N>": gather's and
// scatter's dimension numbers, the empty lists left out.
std::string index_dimension_numbers(
    const char* kind,
    std::initializer_list<std::pair<const char*, const std::vector<int64_t>*>> fields,
    int64_t index_vector_dim) {
  std::string dn = std::string("#stablehlo.") + kind + "<";
  for (const auto& [name, v] : fields) {
    if (!v->empty()) dn += std::string(name) + " = " + int_list(*v) + ", ";
  }
  return dn + "index_vector_dim = " + std::to_string(index_vector_dim) + ">";
}

// dot_general's dimension numbers from its four int attributes (lhs/rhs
// batching, lhs/rhs contracting), the empty lists left out.
std::string dot_dimension_numbers(const std::vector<std::vector<int64_t>>& ints) {
  static const char* names[] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                "lhs_contracting_dimensions", "rhs_contracting_dimensions"};
  std::string dn = "#stablehlo.dot<";
  std::string sep;
  for (int i = 0; i < 4; ++i) {
    if (ints[i].empty()) continue;
    dn += sep + names[i] + " = " + int_list(ints[i]);
    sep = ", ";
  }
  return dn + ">";
}

// convolution's attributes: [b, f, spatial...] layouts for input, kernel
// ([o, i, spatial...]) and output, group counts, and the window (node `id`'s
// ConvDims must have one entry per spatial dim).
std::string convolution_attrs(int32_t id, const ir::ConvDims& c, size_t spatial) {
  std::string s;
  for (size_t i = 0; i < spatial; ++i) s += ", " + std::to_string(i);
  std::string attrs = "dimension_numbers = #stablehlo.conv<[b, f" + s + "]x[o, i" + s + "]->[b, f" +
                      s + "]>, feature_group_count = " + std::to_string(c.feature_group_count) +
                      " : i64, batch_group_count = " + std::to_string(c.batch_group_count) +
                      " : i64";
  if (spatial == 0) return attrs;
  if (c.window_strides.size() != spatial || c.padding_low.size() != spatial ||
      c.padding_high.size() != spatial || c.lhs_dilation.size() != spatial ||
      c.rhs_dilation.size() != spatial) {
    throw IrError("stablehlo emit: convolution node " + std::to_string(id) +
                  " has ConvDims of the wrong length");
  }
  return attrs + ", window_strides = " + i64_array(c.window_strides) +
         ", padding = " + padding_attr(c.padding_low, c.padding_high) +
         ", lhs_dilation = " + i64_array(c.lhs_dilation) +
         ", rhs_dilation = " + i64_array(c.rhs_dilation);
}

// triangular_solve's attributes.
std::string triangular_solve_attrs(const ir::LinalgFlags& f) {
  auto flag = [](bool b) { return b ? "true" : "false"; };
  return std::string("left_side = ") + flag(f.left_side) + ", lower = " + flag(f.lower) +
         ", unit_diagonal = " + flag(f.unit_diagonal) + ", transpose_a = " +
         (f.transpose_a ? "#stablehlo<transpose TRANSPOSE>" : "#stablehlo<transpose NO_TRANSPOSE>");
}

class Emitter {
 public:
  Emitter(const ir::Graph& g, const EmitOptions& options)
      : g_(g), options_(options), names_(g.nodes().size()) {}

  std::string module(const std::string& module_name) {
    const auto& params = g_.parameters();
    std::string sig;
    for (size_t i = 0; i < params.size(); ++i) {
      const int32_t id = params[i];
      if (id < 0 || static_cast<size_t>(id) >= g_.nodes().size() ||
          g_.nodes()[id].op != Op::kParameter) {
        throw IrError("stablehlo emit: parameter list names node " + std::to_string(id) +
                      ", which is not a parameter");
      }
      names_[id] = "%arg" + std::to_string(i);
      sig += (i ? ", " : "") + names_[id] + ": " + g_.nodes()[id].results[0].mlir();
      // A donated argument: XLA may write output N into its memory, and PJRT
      // then treats the argument buffer as consumed (reads of it fail).
      if (i < g_.donations().size() && g_.donations()[i] >= 0) {
        sig += " {tf.aliasing_output = " + std::to_string(g_.donations()[i]) + " : i32}";
      }
    }
    plan_flat_outputs();
    for (size_t id = 0; id < g_.nodes().size(); ++id) emit_node(static_cast<int32_t>(id));

    std::string out_names, out_types;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value v = g_.outputs()[i];
      out_types += (i ? ", " : "") + g_.type(v).mlir();  // throws on a bad output
      out_names += (i ? ", " : "") + ref(v);
    }
    std::string s = "module " + symbol(module_name) + " {\n  func.func public @main(" + sig +
                    ") -> (" + out_types + ") {\n";
    s += body_;
    s += "    \"func.return\"(" + out_names + ") : (" + out_types + ") -> ()\n  }\n";
    // The user kernels called above, each once (their symbols carry the key).
    for (const auto& fn : kernels_) s += fn->funcs;
    return s + "}\n";
  }

 private:
  // The SSA name of `v`; throws IrError when v is not a value of the graph.
  std::string ref(Value v) const {
    g_.type(v);  // validates node and result index
    const Node& n = g_.nodes()[v.node];
    if (names_[v.node].empty()) {
      throw IrError("stablehlo emit: node " + std::to_string(v.node) + " (" + ir::op_name(n.op) +
                    ") is used before it is defined");
    }
    if (n.results.size() == 1) return names_[v.node];
    return names_[v.node] + "#" + std::to_string(v.index);
  }

  // `"<op>"(operands) <regions> {attrs} : (types) -> results`, assigned to node `id`.
  void line(int32_t id, const std::string& op, const std::vector<Value>& operands,
            const std::string& attrs, const std::string& regions = "") {
    const Node& n = g_.nodes()[id];
    std::string name = "%" + std::to_string(id);
    std::string s = "    " + name;
    if (n.results.size() != 1) s += ":" + std::to_string(n.results.size());
    s += " = \"" + op + "\"(";
    std::string types;
    for (size_t i = 0; i < operands.size(); ++i) {
      s += (i ? ", " : "") + ref(operands[i]);
      types += (i ? ", " : "") + g_.type(operands[i]).mlir();
    }
    s += ")";
    if (!regions.empty()) s += " (" + regions + ")";
    if (!attrs.empty()) s += " {" + attrs + "}";
    s += " : (" + types + ") -> ";
    if (n.results.size() == 1) {
      s += n.results[0].mlir();
    } else {
      s += "(";
      for (size_t i = 0; i < n.results.size(); ++i) s += (i ? ", " : "") + n.results[i].mlir();
      s += ")";
    }
    body_ += s + "\n";
    names_[id] = name;
  }

  std::string temp_constant(uint64_t bits, const TensorType& t) {
    const std::string name = "%c" + std::to_string(temp_++);
    body_ += "    " + name + " = \"stablehlo.constant\"() {value = dense<" +
             literal_text(bits, t.dtype) + "> : " + t.mlir() + "} : () -> " + t.mlir() + "\n";
    return name;
  }

  std::vector<DType> dtypes(const std::vector<Value>& vs) const {
    std::vector<DType> out;
    for (Value v : vs) out.push_back(g_.type(v).dtype);
    return out;
  }

  void emit_node(int32_t id);
  void emit_nan_propagating(int32_t id, const Node& n);
  // StableHLO has no atan: atan(x) = atan2(x, 1).
  void emit_atan(int32_t id, const Node& n);
  void emit_structured(int32_t id, const Node& n);

  bool emit_dot_with_rhs_transposed(int32_t id, const Node& n);
  bool emit_staged_sum(int32_t id, const Node& n);

  // Flat outputs: an output written into a donated input (tf.aliasing_output)
  // that is a 1-D reshape of an elementwise value (a whole storage written:
  // every fused step's parameter and optimizer-state updates) is computed in
  // that 1-D shape, with the elementwise values of
  // the same dims feeding it, so the program's result is the elementwise op
  // itself, not a reshape of it. With the reshape, XLA fuses the value into
  // both the output's reshape and its other users (AdamW's exp_avg: the
  // stored moment and the parameter update), the donated input is then read
  // by two unordered loops, and XLA copies it first (the MLP step: 7 of 10
  // copies, 4 MB each). Each element goes through the same ops; only XLA's
  // fusion changes (the update now reads the stored moment instead of
  // recomputing it), and with it where XLA:CPU contracts a multiply-add into
  // an FMA, so a fused step's values can move by an ulp, as fused and strict
  // mode's already differ (measured: the MLP loss at step 5 of 8).
  // flat_: the nodes computed 1-D; flat_names_: their names.
  bool flattenable(Value v) const;
  void plan_flat_outputs();
  std::string flat_operand(Value v, int64_t numel);
  void emit_flat(int32_t id, const Node& n);
  bool is_flat(Value v) const { return !flat_.empty() && flat_[v.node] != 0; }

  const ir::Graph& g_;
  const EmitOptions options_;
  std::vector<std::shared_ptr<const ir::UserFunction>> kernels_;
  std::vector<std::string> names_;
  std::vector<char> flat_;
  std::vector<std::string> flat_names_;
  std::string body_;
  int temp_ = 0;
  int region_counter_ = 0;
};

void Emitter::emit_node(int32_t id) {
  const Node& n = g_.nodes()[id];
  const auto& a = n.attrs;
  const auto& ints = a.ints;
  auto need_ints = [&](size_t count) {
    if (ints.size() != count) {
      throw IrError(std::string("stablehlo emit: ") + ir::op_name(n.op) + " node " +
                    std::to_string(id) + " has " + std::to_string(ints.size()) +
                    " int attributes, expected " + std::to_string(count));
    }
  };
  if (is_flat({id, 0})) {
    emit_flat(id, n);
    return;
  }
  switch (n.op) {
    case Op::kParameter:
      if (names_[id].empty()) {
        throw IrError("stablehlo emit: parameter node " + std::to_string(id) +
                      " is missing from graph.parameters()");
      }
      return;
    case Op::kConstant: {
      const TensorType& t = n.results[0];
      line(id, "stablehlo.constant", {},
           "value = dense<" + literal_text(a.literal, t.dtype) + "> : " + t.mlir());
      return;
    }
    case Op::kIota:
      line(id, "stablehlo.iota", {}, "iota_dimension = " + std::to_string(a.dim) + " : i64");
      return;
    case Op::kAtan: emit_atan(id, n); return;
    case Op::kMax:
    case Op::kMin:
      if (ir::is_float(n.results[0].dtype)) {
        emit_nan_propagating(id, n);
        return;
      }
      break;
    case Op::kCompare: {
      const DType t = g_.type(n.operands[0]).dtype;
      line(id, "stablehlo.compare", n.operands,
           "comparison_direction = " + comparison_direction(a.cmp) +
               ", compare_type = " + comparison_type(t));
      return;
    }
    case Op::kReshape:
      if (n.operands.size() == 1 && is_flat(n.operands[0]) && n.results[0].rank() == 1) {
        names_[id] = flat_names_[n.operands[0].node];  // the value, computed 1-D
        return;
      }
      line(id, "stablehlo.reshape", n.operands, "");
      return;
    case Op::kBroadcastInDim:
      need_ints(1);
      line(id, "stablehlo.broadcast_in_dim", n.operands,
           "broadcast_dimensions = " + i64_array(ints[0]));
      return;
    case Op::kTranspose:
      need_ints(1);
      line(id, "stablehlo.transpose", n.operands, "permutation = " + i64_array(ints[0]));
      return;
    case Op::kSlice:
      need_ints(3);
      line(id, "stablehlo.slice", n.operands,
           "start_indices = " + i64_array(ints[0]) + ", limit_indices = " + i64_array(ints[1]) +
               ", strides = " + i64_array(ints[2]));
      return;
    case Op::kConcatenate: {
      std::vector<std::pair<std::string, TensorType>> parts;
      for (Value v : n.operands) parts.emplace_back(ref(v), g_.type(v));
      names_[id] = "%" + std::to_string(id);
      body_ += concatenate_lines(parts, a.dim, names_[id], n.results[0], &temp_);
      return;
    }
    case Op::kPad:
      need_ints(3);
      line(id, "stablehlo.pad", n.operands,
           "edge_padding_low = " + i64_array(ints[0]) + ", edge_padding_high = " +
               i64_array(ints[1]) + ", interior_padding = " + i64_array(ints[2]));
      return;
    case Op::kReverse:
      need_ints(1);
      line(id, "stablehlo.reverse", n.operands, "dimensions = " + i64_array(ints[0]));
      return;
    case Op::kDynamicSlice:
      need_ints(1);
      line(id, "stablehlo.dynamic_slice", n.operands, "slice_sizes = " + i64_array(ints[0]));
      return;
    case Op::kDynamicUpdateSlice:
      line(id, "stablehlo.dynamic_update_slice", n.operands, "");
      return;
    case Op::kReal:
    case Op::kImag:
    case Op::kComplex:
      line(id, std::string("stablehlo.") + ir::op_name(n.op), n.operands, "");
      return;
    case Op::kFft: {
      need_ints(1);
      const char* types[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
      if (a.dim < 0 || a.dim > 3) throw IrError("stablehlo emit: unknown fft type");
      line(id, "stablehlo.fft", n.operands,
           std::string("fft_type = #stablehlo<fft_type ") + types[a.dim] +
               ">, fft_length = " + i64_array(ints[0]));
      return;
    }
    default: break;
  }
  if (is_elementwise(n.op)) {
    line(id, elementwise_op(n.op), n.operands, "");
    return;
  }
  emit_structured(id, n);
}

void Emitter::emit_atan(int32_t id, const Node& n) {
  const TensorType& t = n.results[0];
  const std::string one = temp_constant(ir::literal_bits(1.0, t.dtype), t);
  const std::string x = ref(n.operands[0]);
  const std::string name = "%" + std::to_string(id);
  body_ += "    " + name + " = \"stablehlo.atan2\"(" + x + ", " + one + ") : (" + t.mlir() + ", " +
           t.mlir() + ") -> " + t.mlir() + "\n";
  names_[id] = name;
}

// Float maximum/minimum that propagate NaN, as the StableHLO spec (IEEE 754
// maximum/minimum) and PyTorch (torch.maximum, amax) require. The xla-cpu-pjrt
// 0.81 plugin compiles stablehlo.maximum as a fast min/max (x > y ? x : y):
// maximum(1, NaN) gave 1 and a max-reduce dropped NaN (XLA's
// xla_cpu_enable_fast_min_max), so NaN is selected explicitly:
//   r = select(isnan(b), b, select(isnan(a), a, maximum(a, b)))
void Emitter::emit_nan_propagating(int32_t id, const Node& n) {
  const std::string t = n.results[0].mlir();
  const std::string i1 = TensorType{DType::kBool, n.results[0].dims}.mlir();
  const std::string a = ref(n.operands[0]);
  const std::string b = ref(n.operands[1]);
  const std::string p = "%n" + std::to_string(id) + "_";  // temps %n<id>_m, ...
  const std::string cmp = " {comparison_direction = " + comparison_direction(ir::Cmp::kNE) +
                          ", compare_type = " + comparison_type(n.results[0].dtype) + "}";
  body_ += "    " + p + "m = \"" + elementwise_op(n.op) + "\"(" + a + ", " + b + ") : (" + t +
           ", " + t + ") -> " + t + "\n";
  body_ += "    " + p + "an = \"stablehlo.compare\"(" + a + ", " + a + ")" + cmp + " : (" + t +
           ", " + t + ") -> " + i1 + "\n";
  body_ += "    " + p + "bn = \"stablehlo.compare\"(" + b + ", " + b + ")" + cmp + " : (" + t +
           ", " + t + ") -> " + i1 + "\n";
  body_ += "    " + p + "a = \"stablehlo.select\"(" + p + "an, " + a + ", " + p + "m) : (" + i1 +
           ", " + t + ", " + t + ") -> " + t + "\n";
  const std::string name = "%" + std::to_string(id);
  body_ += "    " + name + " = \"stablehlo.select\"(" + p + "bn, " + b + ", " + p + "a) : (" + i1 +
           ", " + t + ", " + t + ") -> " + t + "\n";
  names_[id] = name;
}

void Emitter::emit_structured(int32_t id, const Node& n) {
  const auto& a = n.attrs;
  const auto& ints = a.ints;
  auto need_ints = [&](size_t count) {
    if (ints.size() != count) {
      throw IrError(std::string("stablehlo emit: ") + ir::op_name(n.op) + " node " +
                    std::to_string(id) + " has " + std::to_string(ints.size()) +
                    " int attributes, expected " + std::to_string(count));
    }
  };
  int* rc = &region_counter_;
  switch (n.op) {
    case Op::kGather: {
      const auto& d = a.gather;
      const std::string dn =
          index_dimension_numbers("gather",
                                  {{"offset_dims", &d.offset_dims},
                                   {"collapsed_slice_dims", &d.collapsed_slice_dims},
                                   {"start_index_map", &d.start_index_map}},
                                  d.index_vector_dim);
      line(id, "stablehlo.gather", n.operands,
           "dimension_numbers = " + dn + ", slice_sizes = " + i64_array(d.slice_sizes) +
               ", indices_are_sorted = false");
      return;
    }
    case Op::kScatter: {
      const auto& d = a.scatter;
      const std::string dn = index_dimension_numbers(
          "scatter",
          {{"update_window_dims", &d.update_window_dims},
           {"inserted_window_dims", &d.inserted_window_dims},
           {"scatter_dims_to_operand_dims", &d.scatter_dims_to_operand_dims}},
          d.index_vector_dim);
      const DType t = n.results[0].dtype;
      line(id, "stablehlo.scatter", n.operands,
           "scatter_dimension_numbers = " + dn +
               ", indices_are_sorted = false, unique_indices = false",
           reducer_region(a.reducer, {t}, rc, kRegionIndent));
      return;
    }
    case Op::kReduce: {
      need_ints(1);
      if (emit_staged_sum(id, n)) return;
      const size_t half = n.operands.size() / 2;
      const std::vector<Value> operands(n.operands.begin(), n.operands.begin() + half);
      line(id, "stablehlo.reduce", n.operands, "dimensions = " + i64_array(ints[0]),
           reducer_region(a.reducer, dtypes(operands), rc, kRegionIndent));
      return;
    }
    case Op::kReduceWindow: {
      need_ints(6);
      std::string attrs =
          "window_dimensions = " + i64_array(ints[0]) + ", window_strides = " + i64_array(ints[1]) +
          ", base_dilations = " + i64_array(ints[2]) + ", window_dilations = " + i64_array(ints[3]);
      if (!ints[4].empty()) attrs += ", padding = " + padding_attr(ints[4], ints[5]);
      line(id, "stablehlo.reduce_window", n.operands, attrs,
           reducer_region(a.reducer, {n.results[0].dtype}, rc, kRegionIndent));
      return;
    }
    case Op::kSelectAndScatter: {
      need_ints(4);
      const DType t = n.results[0].dtype;
      std::string attrs =
          "window_dimensions = " + i64_array(ints[0]) + ", window_strides = " + i64_array(ints[1]);
      if (!ints[2].empty()) attrs += ", padding = " + padding_attr(ints[2], ints[3]);
      // Separate statements: both regions draw names from the same counter.
      const std::string select = select_region(a.cmp, t, rc, kRegionIndent);
      const std::string scatter = reducer_region(ir::Reducer::kAdd, {t}, rc, kRegionIndent);
      line(id, "stablehlo.select_and_scatter", n.operands, attrs, select + ", " + scatter);
      return;
    }
    case Op::kSort:
      line(id, "stablehlo.sort", n.operands,
           "dimension = " + std::to_string(a.dim) + " : i64, is_stable = true",
           sort_region(a.cmp, dtypes(n.operands), rc, kRegionIndent));
      return;
    case Op::kDotGeneral:
      need_ints(4);
      if (options_.materialize_transposed_rhs && emit_dot_with_rhs_transposed(id, n)) return;
      line(id, "stablehlo.dot_general", n.operands,
           "dot_dimension_numbers = " + dot_dimension_numbers(ints));
      return;
    case Op::kConvolution:
      line(id, "stablehlo.convolution", n.operands,
           convolution_attrs(id, a.conv, static_cast<size_t>(n.results[0].rank() - 2)));
      return;
    case Op::kCholesky:
      line(id, "stablehlo.cholesky", n.operands,
           std::string("lower = ") + (a.linalg.lower ? "true" : "false"));
      return;
    case Op::kTriangularSolve:
      line(id, "stablehlo.triangular_solve", n.operands, triangular_solve_attrs(a.linalg));
      return;
    case Op::kCustomCall:
      // api_version 1 (original): the targets XLA expands are matched by name
      // before any calling convention matters.
      line(id, "stablehlo.custom_call", n.operands,
           "call_target_name = " + string_literal(a.custom_call.target) + ", backend_config = " +
               string_literal(a.custom_call.backend_config) + ", api_version = 1 : i32");
      return;
    case Op::kCall: {
      if (!a.call)
        throw IrError("stablehlo emit: call node " + std::to_string(id) + " has no kernel");
      bool seen = false;
      for (const auto& fn : kernels_) seen = seen || fn->key == a.call->key;
      if (!seen) kernels_.push_back(a.call);
      line(id, "func.call", n.operands, "callee = @" + a.call->entry);
      return;
    }
    case Op::kRngBitGenerator:
      line(id, "stablehlo.rng_bit_generator", n.operands,
           "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
      return;
    default: throw IrError(std::string("stablehlo emit: no lowering for ") + ir::op_name(n.op));
  }
}

// Below this many right-operand elements the transposed dot is cheap either
// way and the extra lines are not worth it.
constexpr int64_t kMinTransposedRhsElements = 64 * 1024;

// lhs[M,K] x rhs[N,K] contracting lhs dim 1 with rhs dim 1 (x @ W.t()), no
// batch dims, written as transpose(dot(rhs, lhs^T)): rhs[N,K] x lhs^T[K,M]
// contracts rhs dim 0 of the second operand, the form XLA:CPU runs fast, and
// the two transposes move M*K + M*N elements. Only when that is at most the
// N*K a transposed weight would move (a 1024x1024 transpose alone costs
// about as much as the dot on this plugin). Barriers keep XLA from folding
// the transposes back into the slow dot. The products and their sums are
// the same, so the values are identical (checked bit for bit). False
// (nothing written) for any other dot.
bool Emitter::emit_dot_with_rhs_transposed(int32_t id, const Node& n) {
  const auto& ints = n.attrs.ints;
  if (n.operands.size() != 2 || !ints[0].empty() || !ints[1].empty() || ints[2].size() != 1 ||
      ints[2][0] != 1 || ints[3].size() != 1 || ints[3][0] != 1) {
    return false;
  }
  const TensorType& lhs = g_.type(n.operands[0]);
  const TensorType& rhs = g_.type(n.operands[1]);
  if (lhs.rank() != 2 || rhs.rank() != 2 || !ir::is_float(rhs.dtype)) return false;
  const int64_t m = lhs.dims[0], k = lhs.dims[1], nn = rhs.dims[0];
  if (rhs.numel() < kMinTransposedRhsElements || m * k + m * nn > nn * k) return false;
  TensorType lt = lhs, ot = n.results[0];
  lt.dims = {k, m};
  ot.dims = {nn, m};
  auto tmp = [&] { return "%t" + std::to_string(temp_++); };
  const std::string tr = tmp(), trb = tmp(), dot = tmp(), dotb = tmp();
  auto transpose = [&](const std::string& out, const std::string& in, const TensorType& from,
                       const TensorType& to) {
    body_ += "    " + out + " = \"stablehlo.transpose\"(" + in +
             ") {permutation = array<i64: 1, 0>} : (" + from.mlir() + ") -> " + to.mlir() + "\n";
  };
  auto barrier = [&](const std::string& out, const std::string& in, const TensorType& t) {
    body_ += "    " + out + " = \"stablehlo.optimization_barrier\"(" + in + ") : (" + t.mlir() +
             ") -> " + t.mlir() + "\n";
  };
  transpose(tr, ref(n.operands[0]), lhs, lt);
  barrier(trb, tr, lt);
  body_ += "    " + dot + " = \"stablehlo.dot_general\"(" + ref(n.operands[1]) + ", " + trb +
           ") {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
           "rhs_contracting_dimensions = [0]>} : (" +
           rhs.mlir() + ", " + lt.mlir() + ") -> " + ot.mlir() + "\n";
  barrier(dotb, dot, ot);
  const std::string name = "%" + std::to_string(id);
  transpose(name, dotb, ot, n.results[0]);
  names_[id] = name;
  return true;
}

// An elementwise value of rank 2 or more whose operands all have its dims (no
// implicit scalar), written as one stablehlo op (not atan or a NaN-propagating
// float max/min, which expand to several).
// A float sum over several dims. XLA:CPU sums one reduce over several dims in
// one sequential chain per output element, so its rounding error grows with
// the product of the reduced sizes (mean square error 13-27x that of CPU's
// cascade sum over 64x64 elements), while it sums a single reduced dim in
// vector lanes, as accurately as CPU. So each run of adjacent reduced dims is
// merged into one dim by a reshape, and the runs are reduced one at a time,
// innermost first, with an optimization barrier between (XLA merges a reduce
// of a reduce back into one). Measured by tests/ops/test_reduce.py::
// test_float32_sum_accuracy_equals_cpu.
bool Emitter::emit_staged_sum(int32_t id, const Node& n) {
  if (n.operands.size() != 2 || n.attrs.reducer != ir::Reducer::kAdd) return false;
  const TensorType& in = g_.type(n.operands[0]);
  std::vector<int64_t> rdims = n.attrs.ints[0];
  if (rdims.size() < 2 || !(ir::is_float(in.dtype) || ir::is_complex(in.dtype))) return false;
  std::sort(rdims.begin(), rdims.end());
  auto reduced = [&](int64_t d) { return std::binary_search(rdims.begin(), rdims.end(), d); };
  TensorType cur = in;  // `in` with each run of adjacent reduced dims merged
  cur.dims.clear();
  std::vector<int64_t> runs;  // the runs' positions in cur
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (reduced(d) && d > 0 && reduced(d - 1)) {
      cur.dims.back() *= in.dims[d];
      continue;
    }
    if (reduced(d)) runs.push_back(cur.rank());
    cur.dims.push_back(in.dims[d]);
  }
  std::string value = ref(n.operands[0]);
  if (cur.rank() != in.rank()) {
    const std::string merged = "%t" + std::to_string(temp_++);
    body_ += "    " + merged + " = \"stablehlo.reshape\"(" + value + ") : (" + in.mlir() + ") -> " +
             cur.mlir() + "\n";
    value = merged;
  }
  const std::string init = ref(n.operands[1]);
  const std::string init_type = g_.type(n.operands[1]).mlir();
  const std::string name = "%" + std::to_string(id);
  for (size_t k = runs.size(); k-- > 0;) {
    TensorType next = cur;
    next.dims.erase(next.dims.begin() + runs[k]);
    const std::string sum = k == 0 ? name : "%t" + std::to_string(temp_++);
    body_ += "    " + sum + " = \"stablehlo.reduce\"(" + value + ", " + init + ") (" +
             reducer_region(ir::Reducer::kAdd, {in.dtype}, &region_counter_, kRegionIndent) +
             ") {dimensions = " + i64_array({runs[k]}) + "} : (" + cur.mlir() + ", " + init_type +
             ") -> " + next.mlir() + "\n";
    value = sum;
    if (k > 0) {
      value = "%t" + std::to_string(temp_++);
      body_ += "    " + value + " = \"stablehlo.optimization_barrier\"(" + sum + ") : (" +
               next.mlir() + ") -> " + next.mlir() + "\n";
    }
    cur = next;
  }
  names_[id] = name;
  return true;
}

bool Emitter::flattenable(Value v) const {
  if (v.node < 0 || static_cast<size_t>(v.node) >= g_.nodes().size()) return false;
  const Node& n = g_.nodes()[v.node];
  if (n.results.size() != 1 || n.results[0].rank() < 2) return false;
  if (!is_elementwise(n.op) && n.op != Op::kCompare) return false;
  if (n.op == Op::kAtan) return false;
  if ((n.op == Op::kMax || n.op == Op::kMin) && ir::is_float(n.results[0].dtype)) return false;
  for (Value o : n.operands) {
    if (o.node < 0 || static_cast<size_t>(o.node) >= g_.nodes().size() ||
        g_.type(o).dims != n.results[0].dims) {
      return false;
    }
  }
  return true;
}

// Marks each output's elementwise value and, through operands of the same
// dims, the elementwise values it is computed from.
void Emitter::plan_flat_outputs() {
  const auto& nodes = g_.nodes();
  flat_.assign(nodes.size(), 0);
  flat_names_.assign(nodes.size(), std::string());
  // Only outputs written into a donated input's buffer: the copies are
  // there, and programs without donation (strict mode's per-op programs)
  // keep their form, and so XLA's loops and their roundings, exactly.
  std::vector<char> aliased(g_.outputs().size(), 0);
  for (int32_t out : g_.donations()) {
    if (out >= 0 && static_cast<size_t>(out) < aliased.size()) aliased[out] = 1;
  }
  bool any = false;
  for (size_t i = 0; i < g_.outputs().size(); ++i) {
    const Value o = g_.outputs()[i];
    if (!aliased[i] || o.node < 0 || static_cast<size_t>(o.node) >= nodes.size()) continue;
    const Node& r = nodes[o.node];
    if (r.op != Op::kReshape || r.operands.size() != 1 || r.results[0].rank() != 1) continue;
    if (flattenable(r.operands[0])) {
      flat_[r.operands[0].node] = 1;
      any = true;
    }
  }
  if (!any) {
    flat_.clear();
    return;
  }
  for (size_t id = nodes.size(); id-- > 0;) {
    if (!flat_[id]) continue;
    for (Value o : nodes[id].operands) {
      if (flattenable(o)) flat_[o.node] = 1;
    }
  }
}

// `v` (dims D, `numel` elements) as a 1-D value: its flat form, the 1-D value
// it is a reshape of, a scalar broadcast or splat constant made 1-D, else a
// reshape. Never a reshape of a reshape, which XLA would move back after the op.
std::string Emitter::flat_operand(Value v, int64_t numel) {
  if (is_flat(v)) return flat_names_[v.node];
  const Node& n = g_.nodes()[v.node];
  const TensorType& t = g_.type(v);
  const TensorType ft{t.dtype, {numel}};
  const std::string name = "%t" + std::to_string(temp_++);
  if (n.op == Op::kReshape && n.operands.size() == 1 && g_.type(n.operands[0]).dims == ft.dims) {
    return ref(n.operands[0]);
  }
  if (n.op == Op::kConstant) return temp_constant(n.attrs.literal, ft);
  if (n.op == Op::kBroadcastInDim && n.operands.size() == 1 && g_.type(n.operands[0]).rank() == 0) {
    body_ += "    " + name + " = \"stablehlo.broadcast_in_dim\"(" + ref(n.operands[0]) +
             ") {broadcast_dimensions = array<i64>} : (" + g_.type(n.operands[0]).mlir() + ") -> " +
             ft.mlir() + "\n";
    return name;
  }
  body_ += "    " + name + " = \"stablehlo.reshape\"(" + ref(v) + ") : (" + t.mlir() + ") -> " +
           ft.mlir() + "\n";
  return name;
}

// Node `id` computed 1-D (%f<id>), and its own dims as a reshape of that for
// any other user (XLA drops it when unused).
void Emitter::emit_flat(int32_t id, const Node& n) {
  const TensorType& t = n.results[0];
  const int64_t numel = t.numel();
  const TensorType ft{t.dtype, {numel}};
  std::string operands, types;
  for (size_t i = 0; i < n.operands.size(); ++i) {
    operands += (i ? ", " : "") + flat_operand(n.operands[i], numel);
    types += std::string(i ? ", " : "") + TensorType{g_.type(n.operands[i]).dtype, {numel}}.mlir();
  }
  std::string op = elementwise_op(n.op), attrs;
  if (n.op == Op::kCompare) {
    op = "stablehlo.compare";
    attrs = " {comparison_direction = " + comparison_direction(n.attrs.cmp) +
            ", compare_type = " + comparison_type(g_.type(n.operands[0]).dtype) + "}";
  }
  const std::string flat = "%f" + std::to_string(id);
  body_ += "    " + flat + " = \"" + op + "\"(" + operands + ")" + attrs + " : (" + types +
           ") -> " + ft.mlir() + "\n";
  flat_names_[id] = flat;
  const std::string name = "%" + std::to_string(id);
  body_ += "    " + name + " = \"stablehlo.reshape\"(" + flat + ") : (" + ft.mlir() + ") -> " +
           t.mlir() + "\n";
  names_[id] = name;
}

}  // namespace

std::string emit(const ir::Graph& graph, const std::string& module_name,
                 const EmitOptions& options) {
  return Emitter(graph, options).module(module_name);
}

}  // namespace ttpu::stablehlo
