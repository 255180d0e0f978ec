// Graph core: node bookkeeping, leaves, elementwise and movement builders, the
// fingerprint. Structured ops (gather/scatter, reductions, windows, sort,
// dot_general, convolution, rng) are in graph_structured.cc.
#include "ir/graph.h"

#include <algorithm>
#include <limits>

#include "ir/graph_check.h"

namespace ttpu::ir {

// ---------------------------------------------------------------- bookkeeping

Value Graph::add_node(Node node) {
  if (nodes_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw IrError(std::string(op_name(node.op)) + ": graph has too many nodes");
  }
  // A Node is large (Attrs): growing from 1 moved every node 3 times over
  // in a per-op program of 4 or 5 nodes.
  if (nodes_.capacity() == 0) nodes_.reserve(8);
  nodes_.push_back(std::move(node));
  return Value{static_cast<int32_t>(nodes_.size() - 1), 0};
}

const TensorType& Graph::type(Value v) const {
  if (v.node < 0 || static_cast<size_t>(v.node) >= nodes_.size()) {
    throw IrError("value %" + std::to_string(v.node) + " is not a node of this graph (" +
                  std::to_string(nodes_.size()) + " nodes)");
  }
  const Node& n = nodes_[v.node];
  if (v.index < 0 || static_cast<size_t>(v.index) >= n.results.size()) {
    throw IrError("value %" + std::to_string(v.node) + "#" + std::to_string(v.index) + ": " +
                  op_name(n.op) + " has " + std::to_string(n.results.size()) + " result(s)");
  }
  return n.results[v.index];
}

namespace detail {

void check_dims(const char* op, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0) fail(op, "negative dimension in " + ints_str(dims));
  }
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void check_axes(const char* op, const char* what, const std::vector<int64_t>& axes, int64_t rank,
                bool sorted) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i];
    if (a < 0 || a >= rank) {
      fail(op, std::string(what) + " " + ints_str(axes) + " out of range for rank " +
                   std::to_string(rank));
    }
    if (seen[a])
      fail(op, std::string(what) + " " + ints_str(axes) + " repeats " + std::to_string(a));
    if (sorted && i > 0 && axes[i - 1] > a) {
      fail(op, std::string(what) + " " + ints_str(axes) + " must be sorted");
    }
    seen[a] = true;
  }
}

}  // namespace detail

using detail::check_axes;
using detail::fail;
using detail::ints_str;

const TensorType& Graph::operand_type(const char* op, Value v) const {
  try {
    return type(v);
  } catch (const IrError& e) {
    fail(op, std::string("bad operand: ") + e.what());
  }
}

// ---------------------------------------------------------------- leaves

std::vector<Value> Graph::append(const Graph& sub, const std::vector<Value>& args,
                                 const std::vector<Value>& values) {
  return append_from(sub, nullptr, args, values);
}

std::vector<Value> Graph::append(Graph&& sub, const std::vector<Value>& args,
                                 const std::vector<Value>& values) {
  return append_from(sub, &sub, args, values);
}

std::vector<Value> Graph::append_from(const Graph& sub, Graph* movable,
                                      const std::vector<Value>& args,
                                      const std::vector<Value>& values) {
  if (args.size() != sub.parameters_.size()) {
    throw IrError("append: " + std::to_string(args.size()) + " arguments for " +
                  std::to_string(sub.parameters_.size()) + " parameters");
  }
  // For each node of `sub`: its copy here, or (for a parameter) its argument.
  // Reused per thread: fused recording appends one small graph per op, and
  // these were two of its allocations.
  thread_local std::vector<int32_t> copy;
  thread_local std::vector<Value> substitute;
  copy.assign(sub.nodes_.size(), -1);
  substitute.assign(sub.nodes_.size(), Value{});
  for (size_t k = 0; k < args.size(); ++k) {
    int32_t p = sub.parameters_[k];
    if (!(type(args[k]) == sub.nodes_[p].results[0])) {
      throw IrError("append: argument " + std::to_string(k) + " is " + type(args[k]).mlir() +
                    ", parameter is " + sub.nodes_[p].results[0].mlir());
    }
    substitute[p] = args[k];
  }
  auto map = [&](Value v) {
    return copy[v.node] >= 0 ? Value{copy[v.node], v.index} : substitute[v.node];
  };
  for (size_t i = 0; i < sub.nodes_.size(); ++i) {
    const Node& n = sub.nodes_[i];
    if (n.op == Op::kParameter) continue;
    // Already validated when `sub` was built. Mapping reads only copy[] and
    // substitute[], never sub's nodes, so a moved-from node is not read again.
    Node c = movable != nullptr ? std::move(movable->nodes_[i]) : n;
    for (auto& o : c.operands) o = map(o);
    copy[i] = add_node(std::move(c)).node;
  }
  std::vector<Value> out;
  out.reserve(values.size());
  for (Value v : values) out.push_back(map(v));
  if (copy.capacity() > 4096) {  // a large graph was appended: do not keep its size
    std::vector<int32_t>().swap(copy);
    std::vector<Value>().swap(substitute);
  }
  return out;
}

void Graph::donate(size_t parameter, size_t output) {
  if (parameter >= parameters_.size() || output >= outputs_.size()) {
    throw IrError("donate: parameter " + std::to_string(parameter) + " of " +
                  std::to_string(parameters_.size()) + " to output " + std::to_string(output) +
                  " of " + std::to_string(outputs_.size()));
  }
  const TensorType& p = nodes_[parameters_[parameter]].results[0];
  const TensorType& o = type(outputs_[output]);
  if (!(p == o)) {
    throw IrError("donate: parameter " + std::to_string(parameter) + " is " + p.mlir() +
                  ", output " + std::to_string(output) + " is " + o.mlir());
  }
  if (donations_.empty()) donations_.assign(parameters_.size(), -1);
  if (donations_[parameter] >= 0 || std::find(donations_.begin(), donations_.end(),
                                              static_cast<int32_t>(output)) != donations_.end()) {
    throw IrError("donate: parameter " + std::to_string(parameter) + " or output " +
                  std::to_string(output) + " is already donated");
  }
  donations_[parameter] = static_cast<int32_t>(output);
}

Value Graph::parameter(const TensorType& type) {
  detail::check_dims("parameter", type.dims);
  Value v = add_node(Node{Op::kParameter, {}, {type}, {}});
  parameters_.push_back(v.node);
  if (!donations_.empty()) donations_.push_back(-1);
  return v;
}

Value Graph::constant(double value, const TensorType& type) {
  detail::check_dims("constant", type.dims);
  Attrs a;
  a.literal = literal_bits(value, type.dtype);
  return add_node(Node{Op::kConstant, {}, {type}, std::move(a)});
}

Value Graph::constant_int(int64_t value, const TensorType& type) {
  detail::check_dims("constant", type.dims);
  Attrs a;
  a.literal = literal_bits_int(value, type.dtype);
  return add_node(Node{Op::kConstant, {}, {type}, std::move(a)});
}

Value Graph::iota(const TensorType& type, int64_t dim) {
  detail::check_dims("iota", type.dims);
  if (type.dtype == DType::kBool) fail("iota", "result " + type.mlir() + " must not be i1");
  if (dim < 0 || dim >= type.rank()) {
    fail("iota", "dimension " + std::to_string(dim) + " out of range for " + type.mlir());
  }
  Attrs a;
  a.dim = dim;
  return add_node(Node{Op::kIota, {}, {type}, std::move(a)});
}

// ---------------------------------------------------------------- elementwise

namespace {

enum class Kinds { kAny, kNumeric, kSignedOrFloat, kFloat, kInt, kBoolOrInt, kFloatOrComplex };

bool accepts(Kinds k, DType t) {
  switch (k) {
    case Kinds::kAny: return true;
    case Kinds::kNumeric: return t != DType::kBool;
    case Kinds::kSignedOrFloat: return is_float(t) || (is_integral(t) && !is_unsigned(t));
    case Kinds::kFloat: return is_float(t);
    case Kinds::kInt: return is_integral(t);
    case Kinds::kBoolOrInt: return !is_float(t) && !is_complex(t);
    case Kinds::kFloatOrComplex: return is_float(t) || is_complex(t);
  }
  return false;
}

const char* kinds_name(Kinds k) {
  switch (k) {
    case Kinds::kAny: return "any element type";
    case Kinds::kNumeric: return "an integer or float element type";
    case Kinds::kSignedOrFloat: return "a signed integer or float element type";
    case Kinds::kFloat: return "a float element type";
    case Kinds::kInt: return "an integer element type";
    case Kinds::kBoolOrInt: return "an i1 or integer element type";
    case Kinds::kFloatOrComplex: return "a float or complex element type";
  }
  return "?";
}

// Which element types each elementwise op takes (StableHLO spec constraints).
bool unary_kinds(Op op, Kinds* k) {
  switch (op) {
    case Op::kNeg: *k = Kinds::kNumeric; return true;
    case Op::kAbs:
    case Op::kSign: *k = Kinds::kSignedOrFloat; return true;
    case Op::kNot: *k = Kinds::kBoolOrInt; return true;
    case Op::kPopcnt: *k = Kinds::kInt; return true;
    // StableHLO defines these on complex values too (the aten layer uses them
    // only where checked against CPU: rules/elementwise/complex.cc).
    case Op::kExp:
    case Op::kExpm1:
    case Op::kLog:
    case Op::kLog1p:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSin:
    case Op::kCos: *k = Kinds::kFloatOrComplex; return true;
    case Op::kCbrt:
    case Op::kLogistic:
    case Op::kTan:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kRoundNearestEven:
    case Op::kIsFinite:
    case Op::kErf:
    case Op::kAtan:
    case Op::kAsin:
    case Op::kAcos:
    case Op::kSinh:
    case Op::kCosh:
    case Op::kAsinh:
    case Op::kAcosh:
    case Op::kAtanh:
    case Op::kLgamma:
    case Op::kDigamma:
    case Op::kErfInv: *k = Kinds::kFloat; return true;
    default: return false;
  }
}

bool binary_kinds(Op op, Kinds* k) {
  switch (op) {
    case Op::kAdd:
    case Op::kMul:
    case Op::kMax:
    case Op::kMin: *k = Kinds::kAny; return true;
    case Op::kSub:
    case Op::kDiv:
    case Op::kRem:
    case Op::kPow: *k = Kinds::kNumeric; return true;
    case Op::kAnd:
    case Op::kOr:
    case Op::kXor: *k = Kinds::kBoolOrInt; return true;
    case Op::kAtan2: *k = Kinds::kFloat; return true;
    case Op::kShiftLeft:
    case Op::kShiftRightArithmetic:
    case Op::kShiftRightLogical: *k = Kinds::kInt; return true;
    default: return false;
  }
}

}  // namespace

Value Graph::unary(Op op, Value x) {
  Kinds k;
  if (!unary_kinds(op, &k)) fail("unary", std::string(op_name(op)) + " is not a unary op");
  const TensorType t = operand_type(op_name(op), x);
  if (!accepts(k, t.dtype)) {
    throw IrDtypeError(
        std::string(op_name(op)) + ": operand " + t.mlir() + " must have " + kinds_name(k),
        t.dtype);
  }
  TensorType r = t;
  if (op == Op::kIsFinite) r.dtype = DType::kBool;
  return add_node(Node{op, {x}, {r}, {}});
}

Value Graph::binary(Op op, Value a, Value b) {
  Kinds k;
  if (!binary_kinds(op, &k)) fail("binary", std::string(op_name(op)) + " is not a binary op");
  // References: the node's result type is copied from `ta` before add_node
  // can move nodes_.
  const TensorType& ta = operand_type(op_name(op), a);
  const TensorType& tb = operand_type(op_name(op), b);
  if (!(ta == tb)) {
    fail(op_name(op), "operand types differ: " + ta.mlir() + " vs " + tb.mlir() +
                          " (broadcast and convert first)");
  }
  if (!accepts(k, ta.dtype)) {
    throw IrDtypeError(
        std::string(op_name(op)) + ": operands " + ta.mlir() + " must have " + kinds_name(k),
        ta.dtype);
  }
  return add_node(Node{op, {a, b}, {ta}, {}});
}

Value Graph::compare(Cmp cmp, Value a, Value b) {
  const TensorType ta = operand_type("compare", a);
  const TensorType tb = operand_type("compare", b);
  if (!(ta == tb)) fail("compare", "operand types differ: " + ta.mlir() + " vs " + tb.mlir());
  if (static_cast<int>(cmp) > static_cast<int>(Cmp::kGE)) fail("compare", "unknown direction");
  Attrs at;
  at.cmp = cmp;
  return add_node(Node{Op::kCompare, {a, b}, {TensorType{DType::kBool, ta.dims}}, std::move(at)});
}

Value Graph::select(Value pred, Value on_true, Value on_false) {
  const TensorType tp = operand_type("select", pred);
  const TensorType tt = operand_type("select", on_true);
  const TensorType tf = operand_type("select", on_false);
  if (!(tt == tf)) fail("select", "branch types differ: " + tt.mlir() + " vs " + tf.mlir());
  if (tp.dtype != DType::kBool) fail("select", "predicate " + tp.mlir() + " must be i1");
  if (tp.rank() != 0 && tp.dims != tt.dims) {
    fail("select", "predicate " + tp.mlir() + " must be a scalar or match " + tt.mlir());
  }
  if (is_float8(tt.dtype)) {
    // On the bit patterns: XLA:CPU computes a float8 select in a wider float
    // and converts back, which rewrites NaN codes (e5m2's 0x7F came back 0x7E).
    const Value t8 = bitcast_convert(on_true, DType::kU8);
    const Value f8 = bitcast_convert(on_false, DType::kU8);
    return bitcast_convert(
        add_node(Node{Op::kSelect, {pred, t8, f8}, {TensorType{DType::kU8, tt.dims}}, {}}),
        tt.dtype);
  }
  return add_node(Node{Op::kSelect, {pred, on_true, on_false}, {tt}, {}});
}

Value Graph::clamp(Value lo, Value x, Value hi) {
  const TensorType tl = operand_type("clamp", lo);
  const TensorType tx = operand_type("clamp", x);
  const TensorType th = operand_type("clamp", hi);
  for (const TensorType* b : {&tl, &th}) {
    if (b->dtype != tx.dtype || (b->rank() != 0 && b->dims != tx.dims)) {
      fail("clamp", "bound " + b->mlir() + " must be a scalar or match operand " + tx.mlir());
    }
  }
  const Value c = add_node(Node{Op::kClamp, {lo, x, hi}, {tx}, {}});
  if (!is_float(tx.dtype)) return c;
  // NaN stays NaN, as StableHLO's clamp (IEEE min/max) says; XLA:CPU's loop
  // emitters (strict mode's quick compiles) give the lower bound (measured).
  return select(compare(Cmp::kNE, x, x), x, c);
}

Value Graph::convert(Value x, DType to) {
  // Checked before copying the type: most calls (a rule's operand already of
  // the computation dtype) add no node.
  if (operand_type("convert", x).dtype == to) return x;
  const TensorType t = operand_type("convert", x);
  if (is_float8(t.dtype) || is_float8(to)) return convert_float8(x, to);
  if (t.dtype == DType::kBool && (is_float(to) || is_complex(to))) {
    // Through u8: XLA's algebraic simplifier rewrites convert(pred) * y as
    // select(pred, y, 0) (and x / broadcast(s) as a multiply first), which is
    // 0 instead of NaN where y is inf or NaN: False / False gave 0, not
    // PyTorch's nan. It does not look through the u8 step (measured with
    // jax 0.10.2's XLA:CPU).
    x = convert(x, DType::kU8);
  }
  if (to == DType::kBF16 && is_float(t.dtype)) {
    // c10::BFloat16's rounding gives every NaN as the one quiet NaN 0x7FC0
    // (sign and payload dropped); XLA's convert keeps the sign (-nan gave
    // 0xFFC0). Selected on the bit patterns, which a bf16 select might not keep.
    const TensorType u16{DType::kU16, t.dims};
    return bitcast_convert(select(compare(Cmp::kNE, x, x), constant_int(0x7FC0, u16),
                                  bitcast_convert(convert_node(x, to), DType::kU16)),
                           DType::kBF16);
  }
  return convert_node(x, to);
}

Value Graph::convert_node(Value x, DType to) {
  Attrs a;
  a.dtype = to;
  return add_node(
      Node{Op::kConvert, {x}, {TensorType{to, operand_type("convert", x).dims}}, std::move(a)});
}

Value Graph::bitcast_convert(Value x, DType to) {
  const TensorType t = operand_type("bitcast_convert", x);
  if (t.dtype == to) return x;
  if (t.dtype == DType::kBool || to == DType::kBool || byte_size(t.dtype) != byte_size(to)) {
    fail("bitcast_convert", "cannot reinterpret " + t.mlir() + " as " + std::string(mlir_name(to)) +
                                " (widths must match, no i1)");
  }
  Attrs a;
  a.dtype = to;
  return add_node(Node{Op::kBitcastConvert, {x}, {TensorType{to, t.dims}}, std::move(a)});
}

// ---------------------------------------------------------------- movement

Value Graph::reshape(Value x, const std::vector<int64_t>& dims) {
  // A reference (no copy): nothing is added to nodes_ before the last use.
  const TensorType& t = operand_type("reshape", x);
  if (dims == t.dims) return x;  // valid dims, same count: the common no-op
  detail::check_dims("reshape", dims);
  TensorType r{t.dtype, dims};
  if (r.numel() != t.numel()) {
    fail("reshape", "cannot reshape " + t.mlir() + " to " + r.mlir() + " (element counts differ)");
  }
  return add_node(Node{Op::kReshape, {x}, {std::move(r)}, {}});
}

Value Graph::broadcast_in_dim(Value x, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& broadcast_dimensions) {
  const char* op = "broadcast_in_dim";
  const TensorType t = operand_type(op, x);
  detail::check_dims(op, dims);
  const TensorType r{t.dtype, dims};
  if (static_cast<int64_t>(broadcast_dimensions.size()) != t.rank()) {
    fail(op, "broadcast_dimensions " + ints_str(broadcast_dimensions) +
                 " must have one entry per "
                 "dimension of " +
                 t.mlir());
  }
  check_axes(op, "broadcast_dimensions", broadcast_dimensions, r.rank(), false);
  for (int64_t i = 0; i < t.rank(); ++i) {
    const int64_t d = t.dims[i];
    if (d != 1 && d != dims[broadcast_dimensions[i]]) {
      fail(op, "operand " + t.mlir() + " dimension " + std::to_string(i) + " does not fit result " +
                   r.mlir() + " dimension " + std::to_string(broadcast_dimensions[i]));
    }
  }
  Attrs a;
  a.ints = {broadcast_dimensions};
  return add_node(Node{Op::kBroadcastInDim, {x}, {r}, std::move(a)});
}

Value Graph::transpose(Value x, const std::vector<int64_t>& permutation) {
  const TensorType t = operand_type("transpose", x);
  if (static_cast<int64_t>(permutation.size()) != t.rank()) {
    fail("transpose", "permutation " + ints_str(permutation) + " does not match " + t.mlir());
  }
  check_axes("transpose", "permutation", permutation, t.rank(), false);
  TensorType r{t.dtype, {}};
  for (int64_t p : permutation) r.dims.push_back(t.dims[p]);
  Attrs a;
  a.ints = {permutation};
  return add_node(Node{Op::kTranspose, {x}, {r}, std::move(a)});
}

Value Graph::slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                   const std::vector<int64_t>& strides) {
  const TensorType t = operand_type("slice", x);
  const size_t n = static_cast<size_t>(t.rank());
  if (start.size() != n || limit.size() != n || strides.size() != n) {
    fail("slice", "start " + ints_str(start) + ", limit " + ints_str(limit) + ", strides " +
                      ints_str(strides) + " must each have one entry per dimension of " + t.mlir());
  }
  TensorType r{t.dtype, {}};
  for (size_t i = 0; i < n; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > t.dims[i] || strides[i] <= 0) {
      fail("slice", "dimension " + std::to_string(i) + ": start " + std::to_string(start[i]) +
                        ", limit " + std::to_string(limit[i]) + ", stride " +
                        std::to_string(strides[i]) + " invalid for " + t.mlir());
    }
    r.dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  Attrs a;
  a.ints = {start, limit, strides};
  return add_node(Node{Op::kSlice, {x}, {r}, std::move(a)});
}

Value Graph::concatenate(const std::vector<Value>& xs, int64_t dim) {
  if (xs.empty()) fail("concatenate", "needs at least one operand");
  TensorType r = operand_type("concatenate", xs[0]);
  if (is_float8(r.dtype)) {
    // On the bit patterns, as select (XLA:CPU rewrote e5m2 NaN codes).
    std::vector<Value> bits;
    for (Value x : xs) bits.push_back(bitcast_convert(x, DType::kU8));
    return bitcast_convert(concatenate(bits, dim), r.dtype);
  }
  if (dim < 0 || dim >= r.rank()) {
    fail("concatenate", "dimension " + std::to_string(dim) + " out of range for " + r.mlir());
  }
  for (size_t i = 1; i < xs.size(); ++i) {
    const TensorType t = operand_type("concatenate", xs[i]);
    bool ok = t.dtype == r.dtype && t.rank() == r.rank();
    for (int64_t d = 0; ok && d < t.rank(); ++d) ok = d == dim || t.dims[d] == r.dims[d];
    if (!ok) {
      fail("concatenate", "operand " + std::to_string(i) + " " + t.mlir() + " does not match " +
                              operand_type("concatenate", xs[0]).mlir() + " outside dimension " +
                              std::to_string(dim));
    }
    r.dims[dim] += t.dims[dim];
  }
  Attrs a;
  a.dim = dim;
  return add_node(Node{Op::kConcatenate, xs, {r}, std::move(a)});
}

Value Graph::pad(Value x, Value pad_value, const std::vector<int64_t>& low,
                 const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  const TensorType t = operand_type("pad", x);
  const TensorType tv = operand_type("pad", pad_value);
  if (is_float8(t.dtype) && tv.dtype == t.dtype) {  // on the bit patterns, as select
    return bitcast_convert(pad(bitcast_convert(x, DType::kU8),
                               bitcast_convert(pad_value, DType::kU8), low, high, interior),
                           t.dtype);
  }
  if (tv.rank() != 0 || tv.dtype != t.dtype) {
    fail("pad", "padding value " + tv.mlir() + " must be a scalar of " + t.mlir() + "'s dtype");
  }
  const size_t n = static_cast<size_t>(t.rank());
  if (low.size() != n || high.size() != n || interior.size() != n) {
    fail("pad", "low " + ints_str(low) + ", high " + ints_str(high) + ", interior " +
                    ints_str(interior) + " must each have one entry per dimension of " + t.mlir());
  }
  TensorType r{t.dtype, {}};
  for (size_t i = 0; i < n; ++i) {
    const int64_t d = t.dims[i];
    const int64_t size = low[i] + high[i] + d + std::max<int64_t>(d - 1, 0) * interior[i];
    if (interior[i] < 0 || size < 0) {
      fail("pad", "dimension " + std::to_string(i) + " of " + t.mlir() + ": low " +
                      std::to_string(low[i]) + ", high " + std::to_string(high[i]) + ", interior " +
                      std::to_string(interior[i]) + " give a negative size");
    }
    r.dims.push_back(size);
  }
  Attrs a;
  a.ints = {low, high, interior};
  return add_node(Node{Op::kPad, {x, pad_value}, {r}, std::move(a)});
}

Value Graph::reverse(Value x, const std::vector<int64_t>& dims) {
  const TensorType t = operand_type("reverse", x);
  check_axes("reverse", "dimensions", dims, t.rank(), false);
  Attrs a;
  a.ints = {dims};
  return add_node(Node{Op::kReverse, {x}, {t}, std::move(a)});
}

void Graph::check_start_indices(const char* op, const TensorType& t,
                                const std::vector<Value>& start_indices) const {
  if (static_cast<int64_t>(start_indices.size()) != t.rank()) {
    fail(op, std::to_string(start_indices.size()) + " start indices for " + t.mlir());
  }
  for (size_t i = 0; i < start_indices.size(); ++i) {
    const TensorType ti = operand_type(op, start_indices[i]);
    const TensorType t0 = operand_type(op, start_indices[0]);
    if (ti.rank() != 0 || !is_integral(ti.dtype) || ti.dtype != t0.dtype) {
      fail(op, "start index " + std::to_string(i) + " " + ti.mlir() +
                   " must be an integer scalar like index 0 " + t0.mlir());
    }
  }
}

Value Graph::dynamic_slice(Value x, const std::vector<Value>& start_indices,
                           const std::vector<int64_t>& slice_sizes) {
  const TensorType t = operand_type("dynamic_slice", x);
  check_start_indices("dynamic_slice", t, start_indices);
  if (static_cast<int64_t>(slice_sizes.size()) != t.rank()) {
    fail("dynamic_slice", "slice_sizes " + ints_str(slice_sizes) + " do not match " + t.mlir());
  }
  for (int64_t i = 0; i < t.rank(); ++i) {
    if (slice_sizes[i] < 0 || slice_sizes[i] > t.dims[i]) {
      fail("dynamic_slice", "slice_sizes " + ints_str(slice_sizes) + " exceed " + t.mlir());
    }
  }
  std::vector<Value> operands{x};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  Attrs a;
  a.ints = {slice_sizes};
  return add_node(Node{
      Op::kDynamicSlice, std::move(operands), {TensorType{t.dtype, slice_sizes}}, std::move(a)});
}

Value Graph::dynamic_update_slice(Value x, Value update, const std::vector<Value>& start_indices) {
  const char* op = "dynamic_update_slice";
  const TensorType t = operand_type(op, x);
  const TensorType tu = operand_type(op, update);
  if (is_float8(t.dtype) && tu.dtype == t.dtype) {  // on the bit patterns, as select
    return bitcast_convert(dynamic_update_slice(bitcast_convert(x, DType::kU8),
                                                bitcast_convert(update, DType::kU8), start_indices),
                           t.dtype);
  }
  bool ok = tu.dtype == t.dtype && tu.rank() == t.rank();
  for (int64_t i = 0; ok && i < t.rank(); ++i) ok = tu.dims[i] <= t.dims[i];
  if (!ok) fail(op, "update " + tu.mlir() + " does not fit in operand " + t.mlir());
  check_start_indices(op, t, start_indices);
  std::vector<Value> operands{x, update};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return add_node(Node{Op::kDynamicUpdateSlice, std::move(operands), {t}, {}});
}

// ---------------------------------------------------------------- fingerprint

namespace {

// Appends unsigned LEB128 varints; signed values zigzag first. Every field is
// written (defaults too) except the large attribute groups, which a presence
// byte marks, so equal strings mean equal structures.
class Writer {
 public:
  explicit Writer(size_t expected) { out_.reserve(expected); }
  void u(uint64_t v) {
    if (v < 0x80) {  // most fields: one byte
      out_.push_back(static_cast<char>(v));
      return;
    }
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void s(int64_t v) { u((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void ints(const std::vector<int64_t>& v) {
    u(v.size());
    for (int64_t x : v) s(x);
  }
  void type(const TensorType& t) {
    u(static_cast<uint64_t>(t.dtype));
    ints(t.dims);
  }
  void str(const std::string& v) {
    u(v.size());
    out_ += v;
  }
  void value(Value v) {
    u(static_cast<uint32_t>(v.node));
    u(static_cast<uint32_t>(v.index));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

bool is_default(const GatherDims& g) {
  return g.offset_dims.empty() && g.collapsed_slice_dims.empty() && g.start_index_map.empty() &&
         g.slice_sizes.empty() && g.index_vector_dim == 0;
}
bool is_default(const ScatterDims& s) {
  return s.update_window_dims.empty() && s.inserted_window_dims.empty() &&
         s.scatter_dims_to_operand_dims.empty() && s.index_vector_dim == 0;
}
bool is_default(const LinalgFlags& f) {
  return !f.lower && !f.left_side && !f.unit_diagonal && !f.transpose_a;
}
bool is_default(const CustomCall& c) { return c.target.empty() && c.backend_config.empty(); }
bool is_default(const ConvDims& c) {
  return c.window_strides.empty() && c.padding_low.empty() && c.padding_high.empty() &&
         c.lhs_dilation.empty() && c.rhs_dilation.empty() && c.feature_group_count == 1 &&
         c.batch_group_count == 1;
}

}  // namespace

std::string Graph::fingerprint() const {
  Writer w(32 + 24 * nodes_.size());  // about what a node takes: one allocation
  w.u(nodes_.size());
  for (const Node& n : nodes_) {
    w.u(static_cast<uint64_t>(n.op));
    w.u(n.operands.size());
    for (Value v : n.operands) w.value(v);
    w.u(n.results.size());
    for (const TensorType& t : n.results) w.type(t);
    const Attrs& a = n.attrs;
    w.u(a.ints.size());
    for (const auto& v : a.ints) w.ints(v);
    w.s(a.dim);
    w.u(static_cast<uint64_t>(a.dtype));
    w.u(static_cast<uint64_t>(a.cmp));
    w.u(static_cast<uint64_t>(a.reducer));
    w.u(a.literal);
    const bool g = !is_default(a.gather), s = !is_default(a.scatter), c = !is_default(a.conv);
    const bool l = !is_default(a.linalg), cc = !is_default(a.custom_call);
    w.u((g ? 1 : 0) | (s ? 2 : 0) | (c ? 4 : 0) | (l ? 8 : 0) | (cc ? 16 : 0));
    if (g) {
      w.ints(a.gather.offset_dims);
      w.ints(a.gather.collapsed_slice_dims);
      w.ints(a.gather.start_index_map);
      w.ints(a.gather.slice_sizes);
      w.s(a.gather.index_vector_dim);
    }
    if (s) {
      w.ints(a.scatter.update_window_dims);
      w.ints(a.scatter.inserted_window_dims);
      w.ints(a.scatter.scatter_dims_to_operand_dims);
      w.s(a.scatter.index_vector_dim);
    }
    if (c) {
      w.ints(a.conv.window_strides);
      w.ints(a.conv.padding_low);
      w.ints(a.conv.padding_high);
      w.ints(a.conv.lhs_dilation);
      w.ints(a.conv.rhs_dilation);
      w.s(a.conv.feature_group_count);
      w.s(a.conv.batch_group_count);
    }
    if (l) {
      w.u((a.linalg.lower ? 1 : 0) | (a.linalg.left_side ? 2 : 0) |
          (a.linalg.unit_diagonal ? 4 : 0) | (a.linalg.transpose_a ? 8 : 0));
    }
    if (cc) {
      w.str(a.custom_call.target);
      w.str(a.custom_call.backend_config);
    }
    // A user kernel is identified by its content hash (its text would make
    // every fused graph's key as long as the kernel).
    if (n.op == Op::kCall) w.str(a.call ? a.call->key : std::string());
  }
  w.u(parameters_.size());
  for (int32_t p : parameters_) w.u(static_cast<uint32_t>(p));
  w.u(outputs_.size());
  for (Value v : outputs_) w.value(v);
  // Donation changes the compiled program (XLA plans the output into the
  // argument's memory), so it is part of the key.
  w.u(donations_.size());
  for (int32_t d : donations_) w.s(d);
  return w.take();
}

}  // namespace ttpu::ir
