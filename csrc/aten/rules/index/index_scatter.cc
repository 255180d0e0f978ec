// Lowerings of the ATen ops that write or combine elements at index positions:
// scatter / scatter_add / scatter_reduce, index_add / index_copy / index_fill,
// index_put (x[indices] = v), embedding_dense_backward. Each is one StableHLO
// scatter over a copy of self (the generic kernel writes it back for the
// in-place forms); index values are checked on the host first (see
// check_index_range for the cost).
#include <ATen/ExpandUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/ScatterGatherChecks.h>

#include <limits>

#include "aten/rules/index/index_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Reducer;

// Bool has no add/mul/max/min: ATen's CPU kernels give or/and on bools.
Reducer for_dtype(Reducer r, DType dt) {
  if (dt != DType::kBool) return r;
  if (r == Reducer::kAdd || r == Reducer::kMax) return Reducer::kOr;
  if (r == Reducer::kMul || r == Reducer::kMin) return Reducer::kAnd;
  return r;
}

// The identity of reducer `r` (its start value when self is left out).
ir::Value identity(LoweringContext& ctx, Reducer r, const ir::TensorType& t) {
  auto& g = ctx.g();
  switch (for_dtype(r, t.dtype)) {
    case Reducer::kAdd:
    case Reducer::kOr: return g.constant(0, t);
    case Reducer::kMul:
    case Reducer::kAnd: return g.constant(1, t);
    case Reducer::kMax:
      if (ir::is_float(t.dtype)) return g.constant(-std::numeric_limits<double>::infinity(), t);
      // The smallest value of the dtype: 0 unsigned, else the sign bit alone.
      if (ir::is_unsigned(t.dtype)) return g.constant_int(0, t);
      return g.constant_int(int64_t{-1} << (8 * ir::byte_size(t.dtype) - 1), t);
    case Reducer::kMin:
      if (ir::is_float(t.dtype)) return g.constant(std::numeric_limits<double>::infinity(), t);
      if (ir::is_unsigned(t.dtype)) return g.constant_int(-1, t);  // all bits set
      return g.constant_int(~(int64_t{-1} << (8 * ir::byte_size(t.dtype) - 1)), t);
    default: break;
  }
  TORCH_CHECK(false, "tpu: no identity for this scatter reducer");
}

// Scatters `updates` (shaped like index) into `x` at `index` along `dim`
// (element-wise: the scatter of torch.scatter / scatter_add / scatter_reduce).
ir::Value scatter_along(LoweringContext& ctx, ir::Value x, int64_t dim, const at::Tensor& index,
                        ir::Value updates, Reducer r) {
  auto& g = ctx.g();
  const std::vector<int64_t> xs = dims(ctx, x);
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(xs.size()));
  std::vector<int64_t> ishape = index.dim() == 0 ? std::vector<int64_t>{1} : index.sizes().vec();
  ir::Value idx = g.reshape(read_index(ctx, index), ishape);
  ir::ScatterDims d;
  for (int64_t k = 0; k < rank; ++k) {
    d.inserted_window_dims.push_back(k);
    d.scatter_dims_to_operand_dims.push_back(k);
  }
  d.index_vector_dim = rank;
  ir::Value flat = g.reshape(x, xs.empty() ? std::vector<int64_t>{1} : xs);
  ir::Value out = g.scatter(flat, along_dim_coords(ctx, idx, dim), g.reshape(updates, ishape), d,
                            for_dtype(r, dtype(ctx, x)));
  return g.reshape(out, xs);
}

// The corner of src that scatter reads: src[:index.size(0), :index.size(1), ...].
ir::Value src_corner(LoweringContext& ctx, const at::Tensor& src, const at::Tensor& index) {
  auto& g = ctx.g();
  ir::Value v = ctx.tensor(src);
  if (src.dim() == 0 || index.dim() == 0) return g.reshape(v, index.sizes().vec());
  std::vector<int64_t> zeros(static_cast<size_t>(src.dim()), 0), ones(zeros.size(), 1);
  return g.slice(v, zeros, index.sizes().vec(), ones);
}

// The checks of ATen's scatter meta functions, then the index value check.
int64_t check_scatter(LoweringContext& ctx, const Args& a, const at::Tensor* src) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const int64_t dim = wrap_dim(a.integer(1), self.dim());
  std::optional<at::Tensor> src_opt;
  if (src != nullptr) src_opt = *src;
  at::native::scatter_gather_dtype_check("scatter", self, index, src_opt);
  at::native::scatter_shape_check(self, dim, index, src_opt);
  check_index_range(ctx, index, dim, at::native::ensure_nonempty_size(self, dim), false,
                    RangeError::kBoundsRuntime);
  return dim;
}

Reducer legacy_scatter_reducer(const std::string& reduce) {
  if (reduce == "add") return Reducer::kAdd;
  TORCH_CHECK(reduce == "multiply", "reduce argument must be either add or multiply.");
  return Reducer::kMul;
}

// scatter.src / scatter.reduce / scatter_add: src's corner combined into self.
std::vector<ir::Value> scatter_src(LoweringContext& ctx, const Args& a, Reducer r) {
  const at::Tensor& src = a.tensor(3);
  const int64_t dim = check_scatter(ctx, a, &src);
  ir::Value x = ctx.tensor(a.tensor(0));
  if (a.tensor(2).numel() == 0) return {x};
  return {scatter_along(ctx, x, dim, a.tensor(2), src_corner(ctx, src, a.tensor(2)), r)};
}

// scatter.value / scatter.value_reduce: a Python scalar at every index.
std::vector<ir::Value> scatter_value(LoweringContext& ctx, const Args& a, Reducer r) {
  const int64_t dim = check_scatter(ctx, a, nullptr);
  const at::Tensor& index = a.tensor(2);
  ir::Value x = ctx.tensor(a.tensor(0));
  if (index.numel() == 0) return {x};
  ir::Value v = broadcast_to(ctx, ctx.scalar(a.scalar(3), dtype(ctx, x)), index.sizes());
  return {scatter_along(ctx, x, dim, index, v, r)};
}

// floor(x / y) for integers with y > 0 (XLA's integer division truncates).
ir::Value floor_div_positive(LoweringContext& ctx, ir::Value x, ir::Value y) {
  auto& g = ctx.g();
  ir::Value q = g.binary(ir::Op::kDiv, x, y);
  ir::Value inexact_negative =
      g.binary(ir::Op::kAnd, g.compare(ir::Cmp::kLT, x, full_like(ctx, x, 0)),
               g.compare(ir::Cmp::kNE, g.binary(ir::Op::kRem, x, y), full_like(ctx, x, 0)));
  return g.select(inexact_negative, g.binary(ir::Op::kSub, q, full_like(ctx, q, 1)), q);
}

// scatter_reduce.two(self, dim, index, src, reduce, include_self), following
// ATen's CPU kernel: "mean" divides the sum by the number of contributions
// (self counting once when included), flooring for integers.
std::vector<ir::Value> scatter_reduce(LoweringContext& ctx, const Args& a) {
  const std::string reduce = a[4].toStringRef();
  const bool include_self = a.boolean(5);
  Reducer r = Reducer::kNone;
  if (reduce == "sum" || reduce == "mean") r = Reducer::kAdd;
  if (reduce == "prod") r = Reducer::kMul;
  // ATen also takes "max"/"min" (the legacy scatter names) for amax/amin.
  if (reduce == "amax" || reduce == "max") r = Reducer::kMax;
  if (reduce == "amin" || reduce == "min") r = Reducer::kMin;
  TORCH_CHECK(r != Reducer::kNone,
              "reduce argument must be either sum, prod, mean, amax or "
              "amin, got ",
              reduce);
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const at::Tensor& src = a.tensor(3);
  TORCH_CHECK_NOT_IMPLEMENTED(reduce != "mean" || self.scalar_type() != at::kBool,
                              "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for "
                              "'Bool'");
  const int64_t dim = check_scatter(ctx, a, &src);
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (index.numel() == 0) return {x};
  const ir::TensorType t = g.type(x);
  const ir::TensorType it{t.dtype, index.sizes().vec()};
  if (!include_self) {
    // Positions some index reaches start from the reducer's identity instead.
    ir::TensorType bt{DType::kBool, t.dims};
    ir::Value hit = scatter_along(ctx, g.constant(0, bt), dim, index,
                                  g.constant(1, {DType::kBool, it.dims}), Reducer::kReplace);
    x = g.select(hit, identity(ctx, r, t), x);
  }
  ir::Value out = scatter_along(ctx, x, dim, index, src_corner(ctx, src, index), r);
  if (reduce != "mean") return {out};
  ir::Value count = scatter_along(ctx, g.constant(include_self ? 1 : 0, t), dim, index,
                                  g.constant(1, it), Reducer::kAdd);
  count = g.select(g.compare(ir::Cmp::kEQ, count, full_like(ctx, count, 0)),
                   full_like(ctx, count, 1), count);
  if (ir::is_float(t.dtype)) return {g.binary(ir::Op::kDiv, out, count)};
  return {floor_div_positive(ctx, out, count)};
}

// index_add / index_copy: whole slices of `source` along `dim` into self at
// `index` (one index per source slice).
ir::Value index_combine(LoweringContext& ctx, ir::Value x, int64_t dim, const at::Tensor& index,
                        ir::Value source, Reducer r) {
  auto& g = ctx.g();
  const std::vector<int64_t> xs = dims(ctx, x);
  if (xs.empty()) {
    x = g.reshape(x, {1});
    source = g.reshape(source, {1});
  }
  const int64_t rank = dims(ctx, x).size();
  const int64_t n = index.numel();
  ir::ScatterDims d;
  for (int64_t k = 0; k < rank; ++k) {
    if (k != dim) d.update_window_dims.push_back(k);
  }
  d.inserted_window_dims = {dim};
  d.scatter_dims_to_operand_dims = {dim};
  d.index_vector_dim = 1;
  ir::Value idx = g.reshape(read_index(ctx, index), {n, 1});
  return g.reshape(g.scatter(x, idx, source, d, for_dtype(r, dtype(ctx, x))), xs);
}

// source has self's shape but along dim (a 0-d self takes a 1-element source).
bool same_slices(const at::Tensor& self, const at::Tensor& source, int64_t dim) {
  if (self.dim() == 0) return source.numel() == 1;
  if (self.dim() != source.dim()) return false;
  for (int64_t k = 0; k < self.dim(); ++k) {
    if (k != dim && self.size(k) != source.size(k)) return false;
  }
  return true;
}

// index_copy's rule, as CPU's: the sizes without `dim` (a 0-d tensor has no
// dim to drop) are equal, so a (1,) self takes a 0-d source and the reverse.
bool same_copy_slices(const at::Tensor& self, const at::Tensor& source, int64_t dim) {
  std::vector<int64_t> a = self.sizes().vec(), b = source.sizes().vec();
  if (!a.empty()) a.erase(a.begin() + dim);
  if (!b.empty()) b.erase(b.begin() + std::min<int64_t>(dim, static_cast<int64_t>(b.size()) - 1));
  return a == b;
}

std::vector<ir::Value> index_add(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const at::Tensor& source = a.tensor(3);
  const int64_t dim = wrap_dim(a.integer(1), self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1,
                    "index_add_(): Index is supposed to be a vector, but got "
                    "dim: ",
                    index.dim(), " with type: ", index.scalar_type(), " and size: ", index.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (",
              self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  const int64_t source_n = at::native::ensure_nonempty_size(source, dim);
  TORCH_CHECK(index.numel() == source_n, "index_add_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim): (", source_n, "), for dim: ", dim);
  TORCH_CHECK(same_slices(self, source, dim),
              "source tensor shape must match self tensor "
              "shape, excluding the specified dimension. Got self.shape = ",
              self.sizes(), " source.shape = ", source.sizes());
  // As CPU: a self of rank <= 1 reports IndexError "index out of range in
  // self"; a higher-rank self RuntimeError, and none at all when it is empty.
  if (self.dim() <= 1) {
    check_index_range(ctx, index, dim, at::native::ensure_nonempty_size(self, dim), false,
                      RangeError::kInSelf);
  } else if (self.numel() > 0) {
    check_index_range(ctx, index, dim, self.size(dim), false, RangeError::kBoundsRuntime);
  }
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (index.numel() == 0 || self.numel() == 0) return {x};
  ir::Value src = ctx.tensor(source);
  c10::Scalar alpha = a.scalar(4);
  if (!scalar_equals(alpha, 1)) {
    src = g.binary(dtype(ctx, src) == DType::kBool ? ir::Op::kAnd : ir::Op::kMul, src,
                   broadcast_to(ctx, ctx.scalar(alpha, dtype(ctx, src)), source.sizes()));
  }
  return {index_combine(ctx, x, dim, index, src, Reducer::kAdd)};
}

std::vector<ir::Value> index_copy(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const at::Tensor& source = a.tensor(3);
  const int64_t dim = wrap_dim(a.integer(1), self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ",
                    index.dim(), ")");
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "index_copy_(): Expected a long tensor for "
              "index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "index_copy_(): self and source "
              "expected to have the same dtype, but got (self) ",
              self.scalar_type(), " and (source) ", source.scalar_type());
  const int64_t source_n = at::native::ensure_nonempty_size(source, dim);
  TORCH_CHECK_INDEX(index.numel() == source_n, "index_copy_(): Number of indices (", index.numel(),
                    ") should be equal to source.size(dim) (", source_n, ")");
  TORCH_CHECK(same_copy_slices(self, source, dim),
              "index_copy_(): Source/destination tensor must "
              "have same slice shapes. Destination shape: ",
              self.sizes(), ", source shape: ", source.sizes(), ", dim: ", dim);
  check_index_range(ctx, index, dim, at::native::ensure_nonempty_size(self, dim), false,
                    RangeError::kBoundsIndex, "index_copy_(): ");
  ir::Value x = ctx.tensor(self);
  if (index.numel() == 0 || self.numel() == 0) return {x};
  // 0-d self, index or source (each allowed where the others have one element):
  // the combine works on self's shape with dim sized by the index count.
  std::vector<int64_t> want = self.sizes().vec();
  if (!want.empty()) want[dim] = index.numel();
  ir::Value src = ctx.g().reshape(ctx.tensor(source), want);
  return {index_combine(ctx, x, dim, index, src, Reducer::kReplace)};
}

// index_fill(self, dim, index, value): every slice along dim named by index
// (negative indices wrap) set to the 0-d value.
std::vector<ir::Value> index_fill(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const int64_t dim = wrap_dim(a.integer(1), self.dim());
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong,
                    "index_fill_(): Expected dtype int64 for "
                    "index.");
  TORCH_CHECK(index.dim() <= 1, "Index has to be a vector/scalar");
  if (a[3].isTensor()) {
    TORCH_CHECK(a.tensor(3).dim() == 0,
                "index_fill_ only supports a 0-dimensional value "
                "tensor, but got tensor with ",
                a.tensor(3).dim(), " dimension(s).");
  } else {
    TORCH_CHECK(self.is_complex() || !a.scalar(3).isComplex(),
                "index_fill_(): Converting "
                "complex Scalar to non-complex type is not supported");
  }
  const int64_t size = at::native::ensure_nonempty_size(self, dim);
  check_index_range(ctx, index, dim, size, true, RangeError::kBoundsIndex);
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (index.numel() == 0 || self.numel() == 0) return {x};
  const DType dt = dtype(ctx, x);
  ir::Value value =
      a[3].isTensor() ? g.convert(ctx.tensor(a.tensor(3)), dt) : ctx.scalar(a.scalar(3), dt);
  // A bool per slice along dim, true where some index names it.
  const int64_t n = index.numel();
  ir::TensorType it{DType::kI64, {n}};
  ir::Value idx = g.reshape(read_index(ctx, index), {n});
  idx = g.select(g.compare(ir::Cmp::kLT, idx, g.constant(0, it)),
                 g.binary(ir::Op::kAdd, idx, g.constant_int(size, it)), idx);
  ir::ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  ir::Value hit = g.scatter(g.constant(0, {DType::kBool, {size}}), g.reshape(idx, {n, 1}),
                            g.constant(1, {DType::kBool, {n}}), d, Reducer::kReplace);
  const std::vector<int64_t> xs = dims(ctx, x);
  if (!xs.empty())
    hit = g.broadcast_in_dim(hit, xs, {dim});
  else
    hit = g.reshape(hit, {});
  return {g.select(hit, broadcast_to(ctx, value, xs), x)};
}

// x[mask] = v (or +=) with one mask and a v that does not depend on how many
// elements the mask selects: an element-wise select, no count, no sync. Returns
// an invalid value when the call does not have that form.
ir::Value masked_put(LoweringContext& ctx, const at::Tensor& self,
                     const std::vector<at::Tensor>& indices, const at::Tensor& values,
                     bool accumulate) {
  const at::Tensor* mask = nullptr;
  int64_t p = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i].defined()) continue;
    if (mask != nullptr) return {};
    mask = &indices[i];
    p = static_cast<int64_t>(i);
  }
  if (mask == nullptr || mask->scalar_type() != at::kBool || mask->dim() == 0) return {};
  const int64_t k = mask->dim();
  if (p + k > self.dim()) return {};
  for (int64_t j = 0; j < k; ++j) {
    if (mask->size(j) != self.size(p + j)) return {};
  }
  // v broadcasts to self[:p] + [count] + self[p+k:]; it must have size 1 (or
  // no dim) where the count goes.
  std::vector<int64_t> head(self.sizes().begin(), self.sizes().begin() + p);
  std::vector<int64_t> tail(self.sizes().begin() + p + k, self.sizes().end());
  const int64_t rank = p + 1 + static_cast<int64_t>(tail.size());
  if (values.dim() > rank) return {};
  std::vector<int64_t> padded(static_cast<size_t>(rank - values.dim()), 1);
  padded.insert(padded.end(), values.sizes().begin(), values.sizes().end());
  if (padded[p] != 1) return {};
  std::vector<int64_t> target = head;
  target.push_back(1);
  target.insert(target.end(), tail.begin(), tail.end());
  if (!at::is_expandable_to(padded, target)) return {};

  auto& g = ctx.g();
  const std::vector<int64_t> xs = self.sizes().vec();
  ir::Value x = ctx.tensor(self);
  ir::Value v = broadcast_to(ctx, g.reshape(ctx.tensor(values), padded), target);
  std::vector<int64_t> kept = head, kept_dims;
  kept.insert(kept.end(), tail.begin(), tail.end());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d < p || d >= p + k) kept_dims.push_back(d);
  }
  v = g.broadcast_in_dim(g.reshape(v, kept), xs, kept_dims);
  std::vector<int64_t> mask_dims;
  for (int64_t j = 0; j < k; ++j) mask_dims.push_back(p + j);
  // A CPU mask (x[cpu_mask] = v, as CUDA allows) is uploaded: index tensors
  // may live on the host, only 0-d ones are read as scalars.
  at::Tensor dev_mask = *mask;
  if (dev_mask.device().is_cpu()) {
    dev_mask = dev_mask.to(
        at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(ctx.device())));
  }
  ir::Value m = g.broadcast_in_dim(ctx.tensor(dev_mask), xs, mask_dims);
  if (!accumulate) return g.select(m, v, x);
  const bool is_bool = dtype(ctx, x) == DType::kBool;
  ir::Value add = g.select(m, v, full_like(ctx, v, 0));
  return g.binary(is_bool ? ir::Op::kOr : ir::Op::kAdd, x, add);
}

// index_put(self, indices, values, accumulate): self[indices] = values (or +=).
std::vector<ir::Value> index_put(LoweringContext& ctx, const Args& a, bool check_bounds) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& values = a.tensor(2);
  const bool accumulate = a.boolean(3);
  if (self.scalar_type() != values.scalar_type()) {
    // CPU checks that the values broadcast to the indexing result before it
    // compares dtypes (a[a > 0] = torch.tensor([]) is a shape mismatch).
    AdvancedIndex ai = advanced_index(ctx, self, a[1], false);
    TORCH_CHECK(ai.dims.empty() || at::is_expandable_to(values.sizes(), ai.result_sizes),
                "shape mismatch: value tensor of shape ", values.sizes(),
                " cannot be broadcast "
                "to indexing result of shape ",
                c10::IntArrayRef(ai.result_sizes));
    TORCH_CHECK(false, "Index put requires the source and destination dtypes match, got ",
                self.scalar_type(), " for the destination and ", values.scalar_type(),
                " for the source.");
  }
  auto& g = ctx.g();
  if (ir::Value fast = masked_put(ctx, self, optional_tensors(a[1]), values, accumulate);
      fast.valid()) {
    return {fast};
  }
  AdvancedIndex ai = advanced_index(ctx, self, a[1], check_bounds);
  ir::Value x = ctx.tensor(self);
  const Reducer r = for_dtype(accumulate ? Reducer::kAdd : Reducer::kReplace, dtype(ctx, x));
  if (ai.dims.empty()) {
    ir::Value v = broadcast_to(ctx, ctx.tensor(values), self.sizes());
    if (!accumulate) return {v};
    return {g.binary(r == Reducer::kOr ? ir::Op::kOr : ir::Op::kAdd, x, v)};
  }
  TORCH_CHECK(at::is_expandable_to(values.sizes(), ai.result_sizes),
              "shape mismatch: value "
              "tensor of shape ",
              values.sizes(),
              " cannot be broadcast to indexing result of "
              "shape ",
              c10::IntArrayRef(ai.result_sizes));
  if (ai.result_numel() == 0) return {x};
  ir::Value v = broadcast_to(ctx, ctx.tensor(values), ai.result_sizes);
  return {g.scatter(x, ai.coords, v, ai.scatter_dims(), r)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
// scale_grad_by_freq): each index's gradient row summed into its weight row;
// padding_idx rows get none; with scale_grad_by_freq each row is divided by how
// often its index occurs (ATen's embedding_dense_backward_cpu).
std::vector<ir::Value> embedding_dense_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& indices = a.tensor(1);
  const int64_t num_weights = a.integer(2);
  const int64_t padding_idx = a.integer(3);
  const bool scale = a.boolean(4);
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_dense_backward(): Expected dtype int32/int64 for indices");
  auto& g = ctx.g();
  const int64_t n = indices.numel();
  const int64_t width = grad.dim() == 0 ? 1 : grad.size(-1);
  const DType dt = to_ir(grad.scalar_type());
  const ir::TensorType out{dt, {num_weights, width}};
  if (n == 0 || width == 0 || num_weights == 0) return {g.constant(0, out)};
  ir::Value rows = g.reshape(ctx.tensor(grad), {n, width});
  ir::Value idx = g.reshape(read_index(ctx, indices), {n});
  ir::Value keep = g.compare(ir::Cmp::kNE, idx, g.constant_int(padding_idx, {DType::kI64, {n}}));
  rows = g.select(g.broadcast_in_dim(keep, {n, width}, {0}), rows, full_like(ctx, rows, 0));
  ir::Value idx2 = g.reshape(idx, {n, 1});
  if (scale) {
    ir::ScatterDims sd;
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 1;
    ir::Value counts = g.scatter(g.constant(0, {dt, {num_weights}}), idx2, g.constant(1, {dt, {n}}),
                                 sd, Reducer::kAdd);
    ir::GatherDims gd;
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.slice_sizes = {1};
    gd.index_vector_dim = 1;
    ir::Value freq = g.gather(counts, idx2, gd, {n});
    rows = g.binary(ir::Op::kDiv, rows, g.broadcast_in_dim(freq, {n, width}, {0}));
  }
  ir::ScatterDims d;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  return {g.scatter(g.constant(0, out), idx2, rows, d, Reducer::kAdd)};
}

RegisterLowering r_scatter_src("scatter.src", [](LoweringContext& c, const Args& a) {
  return scatter_src(c, a, Reducer::kReplace);
});
RegisterLowering r_scatter_value("scatter.value", [](LoweringContext& c, const Args& a) {
  return scatter_value(c, a, Reducer::kReplace);
});
RegisterLowering r_scatter_reduce("scatter.reduce", [](LoweringContext& c, const Args& a) {
  return scatter_src(c, a, legacy_scatter_reducer(a[4].toStringRef()));
});
RegisterLowering r_scatter_value_reduce("scatter.value_reduce", [](LoweringContext& c,
                                                                   const Args& a) {
  return scatter_value(c, a, legacy_scatter_reducer(a[4].toStringRef()));
});
RegisterLowering r_scatter_add("scatter_add", [](LoweringContext& c, const Args& a) {
  return scatter_src(c, a, Reducer::kAdd);
});
RegisterLowering r_scatter_reduce_two("scatter_reduce.two", scatter_reduce);
RegisterLowering r_index_add("index_add", index_add);
RegisterLowering r_index_copy("index_copy", index_copy);
RegisterLowering r_index_fill_s("index_fill.int_Scalar", index_fill);
RegisterLowering r_index_fill_t("index_fill.int_Tensor", index_fill);
RegisterLowering r_index_put("index_put", [](LoweringContext& c, const Args& a) {
  return index_put(c, a, /*check_bounds=*/true);
});
RegisterLowering r_index_put_impl("_index_put_impl", [](LoweringContext& c, const Args& a) {
  return index_put(c, a, /*check_bounds=*/true);
});
// The "unsafe" variant promises in-range indices, so it skips the host check.
RegisterLowering r_unsafe_index_put("_unsafe_index_put", [](LoweringContext& c, const Args& a) {
  return index_put(c, a, /*check_bounds=*/false);
});
RegisterLowering r_embedding_bw("embedding_dense_backward", embedding_dense_backward);

}  // namespace
}  // namespace ttpu::aten
