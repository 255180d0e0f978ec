#include "aten/ops_util.h"

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <limits>

namespace ttpu::aten {

std::vector<int64_t> dims(LoweringContext& ctx, ir::Value v) { return ctx.g().type(v).dims; }

ir::DType dtype(LoweringContext& ctx, ir::Value v) { return ctx.g().type(v).dtype; }

ir::Value broadcast_to(LoweringContext& ctx, ir::Value v, c10::IntArrayRef sizes) {
  // Already that shape (most calls): no copies.
  if (c10::IntArrayRef(ctx.g().type(v).dims) == sizes) return v;
  const auto in = dims(ctx, v);
  std::vector<int64_t> target(sizes.begin(), sizes.end());
  if (in == target) return v;
  TORCH_CHECK(in.size() <= target.size() && at::is_expandable_to(in, sizes),
              "The expanded size of the tensor (", sizes, ") must match the existing size (",
              c10::IntArrayRef(in), ")");
  // Size-1 dims that grow are dropped first: broadcast_in_dim needs equal sizes
  // or a size-1 operand dim, and dropping keeps the program explicit.
  size_t lead = target.size() - in.size();
  std::vector<int64_t> kept_dims, kept_sizes;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == 1 && target[lead + i] != 1) continue;
    kept_dims.push_back(static_cast<int64_t>(lead + i));
    kept_sizes.push_back(in[i]);
  }
  v = ctx.g().reshape(v, kept_sizes);
  return ctx.g().broadcast_in_dim(v, target, kept_dims);
}

std::vector<int64_t> broadcast_shape(LoweringContext& ctx, ir::Value a, ir::Value b) {
  const std::vector<int64_t>& da = ctx.g().type(a).dims;
  const std::vector<int64_t>& db = ctx.g().type(b).dims;
  if (da == db) return da;  // what infer_size returns, without its checks' cost
  return at::infer_size(da, db);
}

std::pair<ir::Value, ir::Value> broadcast_pair(LoweringContext& ctx, ir::Value a, ir::Value b) {
  auto shape = broadcast_shape(ctx, a, b);
  return {broadcast_to(ctx, a, shape), broadcast_to(ctx, b, shape)};
}

ir::Value operand(LoweringContext& ctx, const c10::IValue& v, ir::DType dt) {
  if (v.isTensor()) return ctx.g().convert(ctx.tensor(v.toTensor()), dt);
  return ctx.scalar(v.toScalar(), dt);
}

bool scalar_equals(const c10::Scalar& s, double v) {
  if (s.isComplex()) return s.toComplexDouble() == c10::complex<double>(v, 0);
  if (s.isIntegral(/*includeBool=*/true)) return static_cast<double>(s.toLong()) == v;
  return s.toDouble() == v;
}

c10::ScalarType result_type(const c10::IValue& a, const c10::IValue& b) {
  at::native::ResultTypeState state{};
  for (const auto* v : {&a, &b}) {
    state = v->isTensor() ? at::native::update_result_type_state(v->toTensor(), state)
                          : at::native::update_result_type_state(v->toScalar(), state);
  }
  return at::native::result_type(state);
}

ir::Value binary(LoweringContext& ctx, ir::Op op, ir::Value a, ir::Value b) {
  auto [x, y] = broadcast_pair(ctx, a, b);
  return ctx.g().binary(op, x, y);
}

ir::Value compare(LoweringContext& ctx, ir::Cmp cmp, ir::Value a, ir::Value b) {
  auto [x, y] = broadcast_pair(ctx, a, b);
  return ctx.g().compare(cmp, x, y);
}

int64_t wrap_dim(int64_t d, int64_t rank) { return c10::maybe_wrap_dim(d, rank); }

ir::Value full_like(LoweringContext& ctx, ir::Value like, double value) {
  return ctx.g().constant(value, ctx.g().type(like));
}

namespace {

double init_value(ir::Reducer r, ir::DType dt) {
  const bool fp = ir::is_float(dt);
  switch (r) {
    case ir::Reducer::kAdd:
    case ir::Reducer::kOr: return 0;
    case ir::Reducer::kMul:
    case ir::Reducer::kAnd: return 1;
    case ir::Reducer::kMax:
      if (dt == ir::DType::kBool) return 0;
      if (fp) return -std::numeric_limits<double>::infinity();
      return ir::is_unsigned(dt) ? 0 : -std::pow(2.0, 8 * ir::byte_size(dt) - 1);
    case ir::Reducer::kMin:
      if (dt == ir::DType::kBool) return 1;
      if (fp) return std::numeric_limits<double>::infinity();
      return std::pow(2.0, 8 * ir::byte_size(dt) - (ir::is_unsigned(dt) ? 0 : 1)) - 1;
    default: break;
  }
  TORCH_CHECK(false, "no init value for this reducer");
}

}  // namespace

ir::Value contract_dim(LoweringContext& ctx, ir::Value x, int64_t d, ir::Value matrix,
                       int64_t matrix_dim) {
  auto& g = ctx.g();
  const int64_t rank = static_cast<int64_t>(dims(ctx, x).size());
  ir::Value r = g.dot_general(x, matrix, {}, {}, {d}, {matrix_dim});  // free dims of x, then n
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < rank - 1; ++k) {
    if (k == d) perm.push_back(rank - 1);
    perm.push_back(k);
  }
  if (d == rank - 1) perm.push_back(rank - 1);
  return g.transpose(r, perm);
}

ir::Value take_along_dim(LoweringContext& ctx, ir::Value x, int64_t dim, ir::Value index) {
  std::vector<int64_t> shape = dims(ctx, x);
  const int64_t m = dims(ctx, index)[0];
  ir::GatherDims d;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    if (k != dim) d.offset_dims.push_back(k);
  }
  d.collapsed_slice_dims = {dim};
  d.start_index_map = {dim};
  d.slice_sizes = shape;
  d.slice_sizes[dim] = 1;
  d.index_vector_dim = 1;
  std::vector<int64_t> out = shape;
  out[dim] = m;
  return ctx.g().gather(x, ctx.g().reshape(index, {m, 1}), d, out);
}

ir::Value reduce(LoweringContext& ctx, ir::Value v, std::vector<int64_t> rdims, bool keepdim,
                 ir::Reducer reducer) {
  auto in = dims(ctx, v);
  int64_t rank = static_cast<int64_t>(in.size());
  for (auto& d : rdims) d = wrap_dim(d, std::max<int64_t>(rank, 1));
  if (rank == 0) return v;
  std::sort(rdims.begin(), rdims.end());
  rdims.erase(std::unique(rdims.begin(), rdims.end()), rdims.end());
  ir::DType dt = dtype(ctx, v);
  ir::Value init;
  if (ir::is_integral(dt) && (reducer == ir::Reducer::kMax || reducer == ir::Reducer::kMin)) {
    // 64-bit extremes are not exact in a double.
    int64_t lim = reducer == ir::Reducer::kMax ? std::numeric_limits<int64_t>::min()
                                               : std::numeric_limits<int64_t>::max();
    if (dt != ir::DType::kI64) lim = static_cast<int64_t>(init_value(reducer, dt));
    if (dt == ir::DType::kU64) lim = reducer == ir::Reducer::kMax ? 0 : -1;
    init = ctx.g().constant_int(lim, {dt, {}});
  } else {
    init = ctx.g().constant(init_value(reducer, dt), {dt, {}});
  }
  ir::Value out = ctx.g().reduce({v}, {init}, rdims, reducer)[0];
  if (keepdim) {
    std::vector<int64_t> kd = in;
    for (int64_t d : rdims) kd[d] = 1;
    out = ctx.g().reshape(out, kd);
  }
  return out;
}

ir::Value loop_count(LoweringContext& ctx, ir::Value need, int64_t lo, int64_t hi) {
  auto& g = ctx.g();
  std::vector<int64_t> all(dims(ctx, need).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const ir::TensorType scalar{ir::DType::kI64, {}};
  ir::Value most = reduce(ctx, need, all, false, ir::Reducer::kMax);
  return g.binary(ir::Op::kMin, g.binary(ir::Op::kMax, most, g.constant_int(lo, scalar)),
                  g.constant_int(hi, scalar));
}

void resize_range_out(const at::Tensor& out, int64_t n) {
  if (out.numel() != n) out.resize_({n});
}

void write_range(LoweringContext& ctx, const at::Tensor& out, ir::Value values) {
  ctx.write(out, ctx.g().reshape(values, out.sizes().vec()));
}

}  // namespace ttpu::aten
