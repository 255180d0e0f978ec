// Builders for the structured ops: gather/scatter, reductions and windows, sort,
// dot_general, convolution, rng_bit_generator. Result types follow the StableHLO
// spec (https://github.com/openxla/stablehlo/blob/main/docs/spec.md), section of
// the same op name.
#include <algorithm>

#include "ir/graph.h"
#include "ir/graph_check.h"

namespace ttpu::ir {

using detail::check_axes;
using detail::fail;
using detail::ints_str;

namespace {

// `v` with one entry per dimension; empty means every entry is `dflt`.
std::vector<int64_t> per_dim(const char* op, const char* what, const std::vector<int64_t>& v,
                             int64_t rank, int64_t dflt) {
  if (v.empty()) return std::vector<int64_t>(static_cast<size_t>(rank), dflt);
  if (static_cast<int64_t>(v.size()) != rank) {
    fail(op,
         std::string(what) + " " + ints_str(v) + " must have " + std::to_string(rank) + " entries");
  }
  return v;
}

void check_positive(const char* op, const char* what, const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x <= 0) fail(op, std::string(what) + " " + ints_str(v) + " must be positive");
  }
}

// Output size of one windowed dimension (spec: reduce_window, convolution):
// the base is dilated then padded, the window dilated, then strided.
int64_t window_output(int64_t in, int64_t window, int64_t stride, int64_t base_dilation,
                      int64_t window_dilation, int64_t lo, int64_t hi) {
  const int64_t dilated = in == 0 ? 0 : (in - 1) * base_dilation + 1;
  const int64_t padded = dilated + lo + hi;
  const int64_t dilated_window = (window - 1) * window_dilation + 1;
  if (padded < dilated_window) return 0;
  return (padded - dilated_window) / stride + 1;
}

bool simple_reducer(Reducer r) {
  switch (r) {
    case Reducer::kAdd:
    case Reducer::kMul:
    case Reducer::kMax:
    case Reducer::kMin:
    case Reducer::kAnd:
    case Reducer::kOr: return true;
    default: return false;
  }
}

void check_reducer_dtype(const char* op, Reducer r, const TensorType& t) {
  if ((r == Reducer::kAnd || r == Reducer::kOr) && is_float(t.dtype)) {
    fail(op, "and/or reducer needs an i1 or integer operand, not " + t.mlir());
  }
}

void check_scalar_init(const char* op, const TensorType& init, const TensorType& operand) {
  if (init.rank() != 0 || init.dtype != operand.dtype) {
    fail(op, "init " + init.mlir() + " must be a scalar of operand " + operand.mlir() + "'s dtype");
  }
}

}  // namespace

// ---------------------------------------------------------------- gather/scatter

Value Graph::gather(Value operand, Value indices, const GatherDims& dims,
                    const std::vector<int64_t>& result_dims) {
  const char* op = "gather";
  const TensorType t = operand_type(op, operand);
  const TensorType ti = operand_type(op, indices);
  if (!is_integral(ti.dtype)) fail(op, "indices " + ti.mlir() + " must be integers");
  const int64_t ivd = dims.index_vector_dim;
  if (ivd < 0 || ivd > ti.rank()) {
    fail(op, "index_vector_dim " + std::to_string(ivd) + " out of range for indices " + ti.mlir());
  }
  const int64_t index_size = ivd < ti.rank() ? ti.dims[ivd] : 1;
  if (static_cast<int64_t>(dims.start_index_map.size()) != index_size) {
    fail(op, "start_index_map " + ints_str(dims.start_index_map) + " must have " +
                 std::to_string(index_size) + " entries (index vector of " + ti.mlir() + ")");
  }
  check_axes(op, "start_index_map", dims.start_index_map, t.rank(), false);
  check_axes(op, "collapsed_slice_dims", dims.collapsed_slice_dims, t.rank(), true);
  if (static_cast<int64_t>(dims.slice_sizes.size()) != t.rank()) {
    fail(op, "slice_sizes " + ints_str(dims.slice_sizes) + " do not match operand " + t.mlir());
  }
  for (int64_t i = 0; i < t.rank(); ++i) {
    if (dims.slice_sizes[i] < 0 || dims.slice_sizes[i] > t.dims[i]) {
      fail(op, "slice_sizes " + ints_str(dims.slice_sizes) + " exceed operand " + t.mlir());
    }
  }
  for (int64_t d : dims.collapsed_slice_dims) {
    if (dims.slice_sizes[d] > 1) {
      fail(op, "collapsed dimension " + std::to_string(d) + " has slice size " +
                   std::to_string(dims.slice_sizes[d]) + " (must be 0 or 1)");
    }
  }
  std::vector<int64_t> batch;  // indices dims other than the index vector
  for (int64_t i = 0; i < ti.rank(); ++i) {
    if (i != ivd) batch.push_back(ti.dims[i]);
  }
  std::vector<int64_t> offsets;  // slice sizes of the dimensions not collapsed
  for (int64_t i = 0; i < t.rank(); ++i) {
    if (std::find(dims.collapsed_slice_dims.begin(), dims.collapsed_slice_dims.end(), i) ==
        dims.collapsed_slice_dims.end()) {
      offsets.push_back(dims.slice_sizes[i]);
    }
  }
  const int64_t rank = static_cast<int64_t>(batch.size() + dims.offset_dims.size());
  if (static_cast<int64_t>(result_dims.size()) != rank) {
    fail(op, "result_dims " + ints_str(result_dims) + " must have rank " + std::to_string(rank) +
                 " (" + std::to_string(batch.size()) + " batch + " +
                 std::to_string(dims.offset_dims.size()) + " offset dims)");
  }
  if (dims.offset_dims.size() != offsets.size()) {
    fail(op, "offset_dims " + ints_str(dims.offset_dims) + " must have " +
                 std::to_string(offsets.size()) + " entries (operand rank minus collapsed)");
  }
  check_axes(op, "offset_dims", dims.offset_dims, rank, true);
  std::vector<int64_t> expect;
  size_t next_offset = 0, next_batch = 0;
  for (int64_t i = 0; i < rank; ++i) {
    const bool is_offset =
        next_offset < dims.offset_dims.size() && dims.offset_dims[next_offset] == i;
    expect.push_back(is_offset ? offsets[next_offset++] : batch[next_batch++]);
  }
  if (expect != result_dims) {
    fail(op, "result_dims " + ints_str(result_dims) + " differ from the spec's " +
                 ints_str(expect) + " for operand " + t.mlir() + ", indices " + ti.mlir());
  }
  Attrs a;
  a.gather = dims;
  return add_node(
      Node{Op::kGather, {operand, indices}, {TensorType{t.dtype, result_dims}}, std::move(a)});
}

Value Graph::scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                     Reducer reducer) {
  const char* op = "scatter";
  const TensorType t = operand_type(op, operand);
  const TensorType ti = operand_type(op, indices);
  const TensorType tu = operand_type(op, updates);
  if (is_float8(t.dtype) && tu.dtype == t.dtype && reducer == Reducer::kReplace) {
    // A replacing scatter moves bits: on the bit patterns, as select.
    return bitcast_convert(scatter(bitcast_convert(operand, DType::kU8), indices,
                                   bitcast_convert(updates, DType::kU8), dims, reducer),
                           t.dtype);
  }
  if (!simple_reducer(reducer) && reducer != Reducer::kReplace) {
    fail(op, "reducer must be add/mul/max/min/and/or/replace");
  }
  check_reducer_dtype(op, reducer, t);
  if (tu.dtype != t.dtype) fail(op, "updates " + tu.mlir() + " differ in dtype from " + t.mlir());
  if (!is_integral(ti.dtype)) fail(op, "indices " + ti.mlir() + " must be integers");
  const int64_t ivd = dims.index_vector_dim;
  if (ivd < 0 || ivd > ti.rank()) {
    fail(op, "index_vector_dim " + std::to_string(ivd) + " out of range for indices " + ti.mlir());
  }
  const int64_t index_size = ivd < ti.rank() ? ti.dims[ivd] : 1;
  if (static_cast<int64_t>(dims.scatter_dims_to_operand_dims.size()) != index_size) {
    fail(op, "scatter_dims_to_operand_dims " + ints_str(dims.scatter_dims_to_operand_dims) +
                 " must have " + std::to_string(index_size) + " entries");
  }
  check_axes(op, "scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims, t.rank(),
             false);
  check_axes(op, "update_window_dims", dims.update_window_dims, tu.rank(), true);
  check_axes(op, "inserted_window_dims", dims.inserted_window_dims, t.rank(), true);
  if (static_cast<int64_t>(dims.update_window_dims.size() + dims.inserted_window_dims.size()) !=
      t.rank()) {
    fail(op, "update_window_dims " + ints_str(dims.update_window_dims) +
                 " plus inserted_window_dims " + ints_str(dims.inserted_window_dims) +
                 " must cover operand " + t.mlir());
  }
  std::vector<int64_t> batch;
  for (int64_t i = 0; i < ti.rank(); ++i) {
    if (i != ivd) batch.push_back(ti.dims[i]);
  }
  std::vector<int64_t> update_batch;
  for (int64_t i = 0; i < tu.rank(); ++i) {
    if (std::find(dims.update_window_dims.begin(), dims.update_window_dims.end(), i) ==
        dims.update_window_dims.end()) {
      update_batch.push_back(tu.dims[i]);
    }
  }
  if (update_batch != batch) {
    fail(op, "updates " + tu.mlir() + " scatter dims " + ints_str(update_batch) +
                 " must equal the indices' batch dims " + ints_str(batch));
  }
  size_t w = 0;
  for (int64_t i = 0; i < t.rank(); ++i) {
    if (std::find(dims.inserted_window_dims.begin(), dims.inserted_window_dims.end(), i) !=
        dims.inserted_window_dims.end()) {
      continue;
    }
    if (tu.dims[dims.update_window_dims[w++]] > t.dims[i]) {
      fail(op, "update window of " + tu.mlir() + " exceeds operand " + t.mlir() + " dimension " +
                   std::to_string(i));
    }
  }
  Attrs a;
  a.scatter = dims;
  a.reducer = reducer;
  return add_node(Node{Op::kScatter, {operand, indices, updates}, {t}, std::move(a)});
}

// ---------------------------------------------------------------- reductions

std::vector<Value> Graph::reduce(const std::vector<Value>& operands,
                                 const std::vector<Value>& inits,
                                 const std::vector<int64_t>& dimensions, Reducer reducer) {
  const char* op = "reduce";
  if (operands.empty() || operands.size() != inits.size()) {
    fail(op, std::to_string(operands.size()) + " operands and " + std::to_string(inits.size()) +
                 " inits (need one init per operand, at least one)");
  }
  const bool arg = reducer == Reducer::kArgMax || reducer == Reducer::kArgMin;
  if (!arg && !simple_reducer(reducer))
    fail(op, "reducer must be add/mul/max/min/and/or/argmax/argmin");
  const TensorType t0 = operand_type(op, operands[0]);
  check_axes(op, "dimensions", dimensions, t0.rank(), false);
  std::vector<TensorType> results;
  for (size_t i = 0; i < operands.size(); ++i) {
    const TensorType t = operand_type(op, operands[i]);
    if (t.dims != t0.dims) fail(op, "operand " + t.mlir() + " differs in shape from " + t0.mlir());
    check_scalar_init(op, operand_type(op, inits[i]), t);
    if (!arg) check_reducer_dtype(op, reducer, t);
    TensorType r{t.dtype, {}};
    for (int64_t d = 0; d < t.rank(); ++d) {
      if (std::find(dimensions.begin(), dimensions.end(), d) == dimensions.end()) {
        r.dims.push_back(t.dims[d]);
      }
    }
    results.push_back(std::move(r));
  }
  if (arg && (operands.size() != 2 || !is_integral(results[1].dtype))) {
    fail(op,
         "argmax/argmin reduce (values, indices): needs exactly 2 operands, the second "
         "integer");
  }
  std::vector<Value> node_operands = operands;
  node_operands.insert(node_operands.end(), inits.begin(), inits.end());
  Attrs a;
  a.ints = {dimensions};
  a.reducer = reducer;
  Value v = add_node(Node{Op::kReduce, std::move(node_operands), std::move(results), std::move(a)});
  std::vector<Value> out;
  for (size_t i = 0; i < operands.size(); ++i)
    out.push_back(Value{v.node, static_cast<int32_t>(i)});
  return out;
}

Value Graph::reduce_window(Value x, Value init, const std::vector<int64_t>& window,
                           const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& base_dilations,
                           const std::vector<int64_t>& window_dilations,
                           const std::vector<int64_t>& pad_low,
                           const std::vector<int64_t>& pad_high, Reducer reducer) {
  const char* op = "reduce_window";
  const TensorType t = operand_type(op, x);
  check_scalar_init(op, operand_type(op, init), t);
  if (!simple_reducer(reducer)) fail(op, "reducer must be add/mul/max/min/and/or");
  check_reducer_dtype(op, reducer, t);
  const int64_t n = t.rank();
  if (static_cast<int64_t>(window.size()) != n) {
    fail(op, "window " + ints_str(window) + " does not match operand " + t.mlir());
  }
  std::vector<std::vector<int64_t>> ints{window,
                                         per_dim(op, "strides", strides, n, 1),
                                         per_dim(op, "base_dilations", base_dilations, n, 1),
                                         per_dim(op, "window_dilations", window_dilations, n, 1),
                                         per_dim(op, "pad_low", pad_low, n, 0),
                                         per_dim(op, "pad_high", pad_high, n, 0)};
  for (int i = 0; i < 4; ++i) check_positive(op, "window attribute", ints[i]);
  TensorType r{t.dtype, {}};
  for (int64_t d = 0; d < n; ++d) {
    r.dims.push_back(window_output(t.dims[d], ints[0][d], ints[1][d], ints[2][d], ints[3][d],
                                   ints[4][d], ints[5][d]));
  }
  Attrs a;
  a.ints = std::move(ints);
  a.reducer = reducer;
  return add_node(Node{Op::kReduceWindow, {x, init}, {r}, std::move(a)});
}

Value Graph::select_and_scatter(Value operand, Value source, Value init,
                                const std::vector<int64_t>& window,
                                const std::vector<int64_t>& strides,
                                const std::vector<int64_t>& pad_low,
                                const std::vector<int64_t>& pad_high, Cmp select) {
  const char* op = "select_and_scatter";
  const TensorType t = operand_type(op, operand);
  const TensorType ts = operand_type(op, source);
  check_scalar_init(op, operand_type(op, init), t);
  if (select == Cmp::kEQ || select == Cmp::kNE) fail(op, "select must be GE, GT, LE or LT");
  const int64_t n = t.rank();
  if (static_cast<int64_t>(window.size()) != n) {
    fail(op, "window " + ints_str(window) + " does not match operand " + t.mlir());
  }
  std::vector<std::vector<int64_t>> ints{window, per_dim(op, "strides", strides, n, 1),
                                         per_dim(op, "pad_low", pad_low, n, 0),
                                         per_dim(op, "pad_high", pad_high, n, 0)};
  check_positive(op, "window", ints[0]);
  check_positive(op, "strides", ints[1]);
  TensorType expect{t.dtype, {}};
  for (int64_t d = 0; d < n; ++d) {
    expect.dims.push_back(
        window_output(t.dims[d], ints[0][d], ints[1][d], 1, 1, ints[2][d], ints[3][d]));
  }
  if (!(ts == expect)) {
    fail(op, "source " + ts.mlir() + " must be the windowed shape " + expect.mlir() + " of " +
                 t.mlir());
  }
  Attrs a;
  a.ints = std::move(ints);
  a.cmp = select;
  return add_node(Node{Op::kSelectAndScatter, {operand, source, init}, {t}, std::move(a)});
}

std::vector<Value> Graph::sort(const std::vector<Value>& operands, int64_t dim, Cmp cmp) {
  const char* op = "sort";
  if (operands.empty()) fail(op, "needs at least one operand");
  if (cmp != Cmp::kLT && cmp != Cmp::kGT) fail(op, "comparison must be LT (ascending) or GT");
  const TensorType t0 = operand_type(op, operands[0]);
  if (dim < 0 || dim >= t0.rank()) {
    fail(op, "dimension " + std::to_string(dim) + " out of range for " + t0.mlir());
  }
  std::vector<TensorType> results;
  for (Value v : operands) {
    const TensorType t = operand_type(op, v);
    if (t.dims != t0.dims) fail(op, "operand " + t.mlir() + " differs in shape from " + t0.mlir());
    results.push_back(t);
  }
  Attrs a;
  a.dim = dim;
  a.cmp = cmp;
  Value v = add_node(Node{Op::kSort, operands, std::move(results), std::move(a)});
  std::vector<Value> out;
  for (size_t i = 0; i < operands.size(); ++i)
    out.push_back(Value{v.node, static_cast<int32_t>(i)});
  return out;
}

// ---------------------------------------------------------------- linear algebra

Value Graph::dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                         const std::vector<int64_t>& rhs_batch,
                         const std::vector<int64_t>& lhs_contract,
                         const std::vector<int64_t>& rhs_contract) {
  const char* op = "dot_general";
  const TensorType tl = operand_type(op, lhs);
  const TensorType tr = operand_type(op, rhs);
  if (tl.dtype != tr.dtype) fail(op, "operand dtypes differ: " + tl.mlir() + " vs " + tr.mlir());
  if (lhs_batch.size() != rhs_batch.size() || lhs_contract.size() != rhs_contract.size()) {
    fail(op, "batch " + ints_str(lhs_batch) + "/" + ints_str(rhs_batch) + " or contracting " +
                 ints_str(lhs_contract) + "/" + ints_str(rhs_contract) + " lists differ in length");
  }
  std::vector<int64_t> lhs_used = lhs_batch, rhs_used = rhs_batch;
  lhs_used.insert(lhs_used.end(), lhs_contract.begin(), lhs_contract.end());
  rhs_used.insert(rhs_used.end(), rhs_contract.begin(), rhs_contract.end());
  check_axes(op, "lhs batch+contracting dims", lhs_used, tl.rank(), false);
  check_axes(op, "rhs batch+contracting dims", rhs_used, tr.rank(), false);
  for (size_t i = 0; i < lhs_used.size(); ++i) {
    if (tl.dims[lhs_used[i]] != tr.dims[rhs_used[i]]) {
      fail(op, "lhs " + tl.mlir() + " dimension " + std::to_string(lhs_used[i]) +
                   " does not match rhs " + tr.mlir() + " dimension " +
                   std::to_string(rhs_used[i]));
    }
  }
  TensorType r{tl.dtype, {}};
  for (int64_t d : lhs_batch) r.dims.push_back(tl.dims[d]);
  for (int64_t d = 0; d < tl.rank(); ++d) {
    if (std::find(lhs_used.begin(), lhs_used.end(), d) == lhs_used.end())
      r.dims.push_back(tl.dims[d]);
  }
  for (int64_t d = 0; d < tr.rank(); ++d) {
    if (std::find(rhs_used.begin(), rhs_used.end(), d) == rhs_used.end())
      r.dims.push_back(tr.dims[d]);
  }
  Attrs a;
  a.ints = {lhs_batch, rhs_batch, lhs_contract, rhs_contract};
  return add_node(Node{Op::kDotGeneral, {lhs, rhs}, {r}, std::move(a)});
}

Value Graph::convolution(Value input, Value kernel, const ConvDims& dims) {
  const char* op = "convolution";
  const TensorType ti = operand_type(op, input);
  const TensorType tk = operand_type(op, kernel);
  if (ti.dtype != tk.dtype)
    fail(op, "input " + ti.mlir() + " and kernel " + tk.mlir() + " differ in dtype");
  if (ti.rank() < 2 || ti.rank() != tk.rank()) {
    fail(op, "input " + ti.mlir() + " [N, C, spatial...] and kernel " + tk.mlir() +
                 " [O, I, spatial...] need the same rank >= 2");
  }
  const int64_t n = ti.rank() - 2;
  ConvDims c;
  c.window_strides = per_dim(op, "window_strides", dims.window_strides, n, 1);
  c.padding_low = per_dim(op, "padding_low", dims.padding_low, n, 0);
  c.padding_high = per_dim(op, "padding_high", dims.padding_high, n, 0);
  c.lhs_dilation = per_dim(op, "lhs_dilation", dims.lhs_dilation, n, 1);
  c.rhs_dilation = per_dim(op, "rhs_dilation", dims.rhs_dilation, n, 1);
  c.feature_group_count = dims.feature_group_count;
  c.batch_group_count = dims.batch_group_count;
  check_positive(op, "window_strides", c.window_strides);
  check_positive(op, "lhs_dilation", c.lhs_dilation);
  check_positive(op, "rhs_dilation", c.rhs_dilation);
  const int64_t fg = c.feature_group_count, bg = c.batch_group_count;
  if (fg < 1 || bg < 1 || (fg > 1 && bg > 1)) {
    fail(op, "feature_group_count " + std::to_string(fg) + " and batch_group_count " +
                 std::to_string(bg) + " must be >= 1 and not both > 1");
  }
  const int64_t batch = ti.dims[0], in_features = ti.dims[1];
  const int64_t out_features = tk.dims[0], kernel_in = tk.dims[1];
  if (in_features % fg != 0 || in_features / fg != kernel_in || out_features % fg != 0 ||
      out_features % bg != 0 || batch % bg != 0) {
    fail(op, "input " + ti.mlir() + " and kernel " + tk.mlir() +
                 " do not fit feature_group_count " + std::to_string(fg) + ", batch_group_count " +
                 std::to_string(bg));
  }
  TensorType r{ti.dtype, {batch / bg, out_features}};
  for (int64_t d = 0; d < n; ++d) {
    r.dims.push_back(window_output(ti.dims[d + 2], tk.dims[d + 2], c.window_strides[d],
                                   c.lhs_dilation[d], c.rhs_dilation[d], c.padding_low[d],
                                   c.padding_high[d]));
  }
  Attrs a;
  a.conv = std::move(c);
  return add_node(Node{Op::kConvolution, {input, kernel}, {r}, std::move(a)});
}

// ---------------------------------------------------------------- random

std::pair<Value, Value> Graph::rng_bit_generator(Value state, const TensorType& type) {
  const char* op = "rng_bit_generator";
  const TensorType ts = operand_type(op, state);
  if (!(ts == TensorType{DType::kU64, {2}})) {
    fail(op, "state " + ts.mlir() + " must be tensor<2xui64> (THREE_FRY)");
  }
  if (type.dtype != DType::kU32 && type.dtype != DType::kU64) {
    fail(op, "result " + type.mlir() + " must be ui32 or ui64");
  }
  detail::check_dims(op, type.dims);
  Value v = add_node(Node{Op::kRngBitGenerator, {state}, {ts, type}, {}});
  return {Value{v.node, 0}, Value{v.node, 1}};
}

}  // namespace ttpu::ir
