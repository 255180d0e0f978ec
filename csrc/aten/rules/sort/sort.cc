// Lowerings of the ATen ops built on sorting along one dim: sort, topk,
// kthvalue, median / nanmedian (whole tensor and along a dim), mode.
//
// All of them are one stablehlo.sort of (values, iota indices) with a stable
// comparator that orders NaN as the largest value (PyTorch's order, see
// stablehlo/emit_regions.cc), followed by a slice or a per-row pick. ATen's CPU
// sort is stable whatever `stable` says, so indices of equal values match it
// exactly. topk, kthvalue and median use std::nth_element / partial_sort on CPU,
// which leaves the index among EQUAL values unspecified; here it is always the
// first one in input order (the values always match).
#include <ATen/native/ReduceOpsUtils.h>

#include <limits>

#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ValueList = std::vector<ir::Value>;

// (sorted values, int64 source indices) of `v` along `dim`; rank >= 1.
std::pair<ir::Value, ir::Value> sort_with_indices(LoweringContext& ctx, ir::Value v, int64_t dim,
                                                  bool descending) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, v);
  ir::Value idx = g.iota({DType::kI64, shape}, dim);
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) return {v, idx};
  auto r = g.sort({v, idx}, dim, descending ? ir::Cmp::kGT : ir::Cmp::kLT);
  return {r[0], r[1]};
}

// `v` restricted to [start, start + size) along `dim`.
ir::Value slice_dim(LoweringContext& ctx, ir::Value v, int64_t dim, int64_t start, int64_t size) {
  std::vector<int64_t> shape = dims(ctx, v);
  std::vector<int64_t> lo(shape.size(), 0), strides(shape.size(), 1);
  lo[dim] = start;
  shape[dim] = start + size;
  return ctx.g().slice(v, lo, shape, strides);
}

// The element of each row along `dim` at position `pos` (i64, the shape of `v`
// with `dim` of size 1): keeps `dim` as size 1. A masked max picks the one
// element (every other entry is the dtype's lowest value), which is exact for
// every value, NaN and -0.0 included.
ir::Value pick(LoweringContext& ctx, ir::Value v, ir::Value pos, int64_t dim) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, v);
  DType dt = dtype(ctx, v);
  ir::Value hit =
      g.compare(ir::Cmp::kEQ, g.iota({DType::kI64, shape}, dim), broadcast_to(ctx, pos, shape));
  ir::Value lowest;
  if (ir::is_float(dt)) {
    lowest = ctx.constant(-std::numeric_limits<double>::infinity(), dt);
  } else if (dt == DType::kBool || ir::is_unsigned(dt)) {
    lowest = ctx.constant(0, dt);
  } else {
    int64_t bits = 8 * ir::byte_size(dt);
    int64_t min = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    lowest = g.constant_int(min, {dt, {}});
  }
  ir::Value masked = g.select(hit, v, broadcast_to(ctx, lowest, shape));
  return reduce(ctx, masked, {dim}, /*keepdim=*/true, ir::Reducer::kMax);
}

// Drops the size-1 `dim` unless keepdim.
ir::Value squeeze_unless(LoweringContext& ctx, ir::Value v, int64_t dim, bool keepdim) {
  if (keepdim) return v;
  std::vector<int64_t> shape = dims(ctx, v);
  shape.erase(shape.begin() + dim);
  return ctx.g().reshape(v, shape);
}

// sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False)
ValueList sort(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t dim = wrap_dim(a.integer(2), std::max<int64_t>(self.dim(), 1));
  bool descending = a.boolean(3);
  ir::Value v = ctx.tensor(self);
  if (self.dim() == 0) return {v, ctx.g().constant_int(0, {DType::kI64, {}})};
  auto [values, indices] = sort_with_indices(ctx, v, dim, descending);
  return {values, indices};
}

// topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True).
// `sorted=False` leaves the order unspecified; this returns it sorted.
ValueList topk(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t k = a.integer(1);
  int64_t dim = wrap_dim(a.integer(2), std::max<int64_t>(self.dim(), 1));
  bool largest = a.boolean(3);
  // ATen's checks and messages (TensorCompare.cpp / Sorting.cpp, topk_meta).
  int64_t size = self.dim() > 0 ? self.size(dim) : 1;
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  TORCH_CHECK(self.scalar_type() != at::kBool, "topk does not support bool dtypes on CPU");
  ir::Value v = ctx.tensor(self);
  // A 0-d self gives 0-d results for k = 0 too (CPU resizes to self's shape).
  if (self.dim() == 0) return {v, ctx.g().constant_int(0, {DType::kI64, {}})};
  auto [values, indices] = sort_with_indices(ctx, v, dim, largest);
  return {slice_dim(ctx, values, dim, 0, k), slice_dim(ctx, indices, dim, 0, k)};
}

// kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False): the k-th
// smallest (1-based) along dim.
ValueList kthvalue(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t k = a.integer(1);
  int64_t raw_dim = a.integer(2);
  int64_t dim = wrap_dim(raw_dim, std::max<int64_t>(self.dim(), 1));
  bool keepdim = a.boolean(3);
  at::native::zero_numel_check_dims(self, dim, "kthvalue()");
  int64_t size = self.dim() > 0 ? self.size(dim) : 1;
  TORCH_CHECK(k >= 1 && k <= size, "kthvalue(): selected number k out of range for dimension ",
              dim);
  ir::Value v = ctx.tensor(self);
  if (self.dim() == 0) return {v, ctx.g().constant_int(0, {DType::kI64, {}})};
  // CPU's kernel has no bool instance; its dim and k checks and its 0-d
  // shortcut come first.
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool,
                              "\"kthvalue_cpu\" not implemented for 'Bool'");
  auto [values, indices] = sort_with_indices(ctx, v, dim, false);
  return {squeeze_unless(ctx, slice_dim(ctx, values, dim, k - 1, 1), dim, keepdim),
          squeeze_unless(ctx, slice_dim(ctx, indices, dim, k - 1, 1), dim, keepdim)};
}

// The lower median's position in each sorted row (i64, `dim` of size 1) of
// `v` (sorted ascending along `dim`, NaN last, rows of length n >= 1).
// median: NaN wins, so a row holding NaN picks its first NaN (position
// count_not_nan), else (n - 1) / 2. nanmedian: (count_not_nan - 1) / 2, and
// position 0 (a NaN) when the row is all NaN, as ATen's median_impl does.
ir::Value median_position(LoweringContext& ctx, ir::Value sorted, int64_t dim, bool ignore_nan) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, sorted);
  int64_t n = shape[dim];
  std::vector<int64_t> kd = keepdim_shape(shape, {dim});
  ir::TensorType pos_type{DType::kI64, kd};
  if (!ir::is_float(dtype(ctx, sorted))) return g.constant_int((n - 1) / 2, pos_type);
  ir::Value not_nan = g.convert(g.compare(ir::Cmp::kEQ, sorted, sorted), DType::kI64);
  ir::Value count = reduce(ctx, not_nan, {dim}, /*keepdim=*/true, ir::Reducer::kAdd);
  if (ignore_nan) {
    ir::Value one = g.constant_int(1, pos_type);
    ir::Value zero = g.constant_int(0, pos_type);
    ir::Value p =
        g.binary(ir::Op::kDiv, g.binary(ir::Op::kSub, count, one), g.constant_int(2, pos_type));
    return g.select(g.compare(ir::Cmp::kGT, count, zero), p, zero);
  }
  ir::Value has_nan = g.compare(ir::Cmp::kLT, count, g.constant_int(n, pos_type));
  return g.select(has_nan, count, g.constant_int((n - 1) / 2, pos_type));
}

// median.dim / nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (values, indices)
ValueList median_dim(LoweringContext& ctx, const Args& a, bool ignore_nan) {
  const at::Tensor& self = a.tensor(0);
  const char* name = ignore_nan ? "nanmedian()" : "median()";
  int64_t dim = wrap_dim(a.integer(1), std::max<int64_t>(self.dim(), 1));
  bool keepdim = a.boolean(2);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"",
                              ignore_nan ? "nanmedian" : "median",
                              "_cpu\" not implemented for 'Bool'");
  at::native::zero_numel_check_dims(self, dim, name);
  ir::Value v = ctx.tensor(self);
  if (self.dim() == 0) return {v, ctx.g().constant_int(0, {DType::kI64, {}})};
  if (self.numel() == 0) {
    // Rows of a non-empty dim, but no rows: an empty result.
    std::vector<int64_t> out = keepdim_shape(self.sizes().vec(), {dim});
    if (!keepdim) out.erase(out.begin() + dim);
    return {ctx.g().constant(0, {to_ir(self.scalar_type()), out}),
            ctx.g().constant_int(0, {DType::kI64, out})};
  }
  auto [values, indices] = sort_with_indices(ctx, v, dim, false);
  ir::Value pos = median_position(ctx, values, dim, ignore_nan);
  return {squeeze_unless(ctx, pick(ctx, values, pos, dim), dim, keepdim),
          squeeze_unless(ctx, pick(ctx, indices, pos, dim), dim, keepdim)};
}

// median / nanmedian(Tensor self): over all elements; an empty input gives NaN
// (as CPU: for integral dtypes NaN cast, i.e. the dtype's lowest value).
ValueList median_all(LoweringContext& ctx, const Args& a, bool ignore_nan) {
  const at::Tensor& self = a.tensor(0);
  DType dt = to_ir(self.scalar_type());
  auto& g = ctx.g();
  // CPU answers an empty input before its dtype dispatch: an empty bool gives
  // NaN cast to bool, true; a non-empty one is refused.
  if (self.numel() == 0 && dt == DType::kBool) return {g.constant_int(1, {dt, {}})};
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"",
                              ignore_nan ? "nanmedian" : "median",
                              "_cpu\" not implemented for 'Bool'");
  if (self.numel() == 0) {
    if (ir::is_float(dt)) return {ctx.constant(std::numeric_limits<double>::quiet_NaN(), dt)};
    int64_t bits = 8 * ir::byte_size(dt);
    int64_t min = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    return {g.constant_int(ir::is_unsigned(dt) ? 0 : min, {dt, {}})};
  }
  ir::Value v = g.reshape(ctx.tensor(self), {self.numel()});
  ir::Value values = sort_with_indices(ctx, v, 0, false).first;
  ir::Value pos = median_position(ctx, values, 0, ignore_nan);
  return {g.reshape(pick(ctx, values, pos, 0), {})};
}

// mode(Tensor self, int dim=-1, bool keepdim=False) -> (values, indices): the
// most frequent value (the smallest one on a tie of counts) and the index of
// its last occurrence, which is what ATen's CPU kernel returns (it scans runs
// of the sorted row and keeps the last element of the longest run; its
// std::sort is an insertion sort, hence stable, for rows of up to 16
// elements). Counts compare every pair of a row: O(n^2) per row.
ValueList mode(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t dim = wrap_dim(a.integer(1), std::max<int64_t>(self.dim(), 1));
  bool keepdim = a.boolean(2);
  at::native::zero_numel_check_dims(self, dim, "mode()");
  auto& g = ctx.g();
  ir::Value v = ctx.tensor(self);
  if (self.dim() == 0) return {v, g.constant_int(0, {DType::kI64, {}})};
  if (self.numel() == 0) {
    std::vector<int64_t> out = keepdim_shape(self.sizes().vec(), {dim});
    if (!keepdim) out.erase(out.begin() + dim);
    return {g.constant(0, {to_ir(self.scalar_type()), out}), g.constant_int(0, {DType::kI64, out})};
  }
  // The row dim last: [rows..., n].
  const int64_t rank = self.dim();
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < rank; ++k)
    if (k != dim) perm.push_back(k);
  perm.push_back(dim);
  ir::Value t = g.transpose(v, perm);
  auto [values, indices] = sort_with_indices(ctx, t, rank - 1, false);
  std::vector<int64_t> shape = dims(ctx, values);
  const int64_t n = shape.back();
  // eq[..., i, j] = sorted[i] == sorted[j] (or i == j, so a NaN counts once).
  std::vector<int64_t> pair = shape;
  pair.push_back(n);
  std::vector<int64_t> lhs_dims, rhs_dims;
  for (int64_t k = 0; k < rank; ++k) {
    lhs_dims.push_back(k);
    rhs_dims.push_back(k == rank - 1 ? rank : k);
  }
  ir::Value vi = g.broadcast_in_dim(values, pair, lhs_dims);
  ir::Value vj = g.broadcast_in_dim(values, pair, rhs_dims);
  ir::Value same = g.binary(ir::Op::kOr, g.compare(ir::Cmp::kEQ, vi, vj),
                            g.compare(ir::Cmp::kEQ, g.iota({DType::kI64, pair}, rank - 1),
                                      g.iota({DType::kI64, pair}, rank)));
  ir::Value freq = reduce(ctx, g.convert(same, DType::kI64), {rank}, false, ir::Reducer::kAdd);
  // The first position of the highest count (sorted ascending: the smallest
  // value), then the last position of its run.
  ir::TensorType it{DType::kI64, shape};
  auto best = g.reduce({freq, g.iota(it, rank - 1)},
                       {g.constant_int(-1, {DType::kI64, {}}),
                        g.constant_int(std::numeric_limits<int64_t>::max(), {DType::kI64, {}})},
                       {rank - 1}, ir::Reducer::kArgMax);
  std::vector<int64_t> kd = shape;
  kd.back() = 1;
  ir::Value last = g.reshape(g.binary(ir::Op::kSub, g.binary(ir::Op::kAdd, best[1], best[0]),
                                      g.constant_int(1, {DType::kI64, dims(ctx, best[0])})),
                             kd);
  ir::Value value = pick(ctx, values, last, rank - 1);
  ir::Value index = pick(ctx, indices, last, rank - 1);
  // Back to self's dim order, dim of size 1.
  std::vector<int64_t> inv(rank);
  for (int64_t k = 0; k < rank; ++k) inv[perm[k]] = k;
  value = squeeze_unless(ctx, g.transpose(value, inv), dim, keepdim);
  index = squeeze_unless(ctx, g.transpose(index, inv), dim, keepdim);
  return {value, index};
}

RegisterLowering r_sort("sort.stable", sort);
RegisterLowering r_mode("mode", mode);
RegisterLowering r_topk("topk", topk);
RegisterLowering r_kthvalue("kthvalue", kthvalue);
RegisterLowering r_median("median", [](LoweringContext& c, const Args& a) {
  return median_all(c, a, false);
});
RegisterLowering r_nanmedian("nanmedian", [](LoweringContext& c, const Args& a) {
  return median_all(c, a, true);
});
RegisterLowering r_median_dim("median.dim", [](LoweringContext& c, const Args& a) {
  return median_dim(c, a, false);
});
RegisterLowering r_nanmedian_dim("nanmedian.dim", [](LoweringContext& c, const Args& a) {
  return median_dim(c, a, true);
});

}  // namespace
}  // namespace ttpu::aten
