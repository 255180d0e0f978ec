// Lowerings of indexing ops whose result shape depends on tensor values
// (nonzero, masked_select, repeat_interleave.Tensor, bincount) and of take,
// put, masked_scatter and index_reduce.
//
// nonzero, masked_select, repeat_interleave and bincount read a count or a
// maximum on the host before building the program: a sync, as CUDA's nonzero
// does (cudaMemcpyAsync + stream sync). take and put read their index's min
// and max on the host to raise CPU's IndexError (see index_util.h,
// check_index_range); masked_scatter counts the mask on the host only when the
// source could be too short for it.
// masked_select and index_reduce are lowered through the rules of index.Tensor
// and scatter_reduce.two, which they are on every backend up to broadcasting.
#include <ATen/ExpandUtils.h>
#include <ATen/native/ReduceOpsUtils.h>

#include "aten/copy.h"
#include "aten/rules/index/index_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ValueList = std::vector<ir::Value>;

// {min, max} of a non-empty tpu index, read on the host.
std::pair<int64_t, int64_t> extremes(LoweringContext& ctx, const at::Tensor& index) {
  LoweringContext probe(ctx.op() + " (index range check)", ctx.device());
  auto& g = probe.g();
  ir::Value v = g.reshape(read_index(probe, index), {index.numel()});
  ir::Value lo = g.reshape(reduce(probe, v, {0}, false, ir::Reducer::kMin), {1});
  ir::Value hi = g.reshape(reduce(probe, v, {0}, false, ir::Reducer::kMax), {1});
  at::Tensor host = to_host(probe.run({g.concatenate({lo, hi}, 0)})[0]);
  return {host[0].item<int64_t>(), host[1].item<int64_t>()};
}

// nonzero(Tensor self) -> i64 [count, self.dim()]: the coordinates of the
// non-zero elements (NaN counts as non-zero) in row-major order. After the
// count is read, sorting the keys "flat position if non-zero, else numel"
// brings the wanted positions first, in order.
ValueList nonzero(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  auto& g = ctx.g();
  const int64_t n = self.numel();
  const int64_t rank = self.dim();
  auto nonzero_flat = [&](LoweringContext& c) {
    ir::Value v = c.g().reshape(c.tensor(self), {n});
    return c.g().compare(ir::Cmp::kNE, v, full_like(c, v, 0));
  };
  int64_t count = 0;
  if (n > 0) {
    LoweringContext probe(ctx.op() + " (count)", ctx.device());
    ir::Value m = probe.g().convert(nonzero_flat(probe), DType::kI64);
    count =
        to_host(probe.run({reduce(probe, m, {0}, false, ir::Reducer::kAdd)})[0]).item<int64_t>();
  }
  // CPU's result is column-major (a [rank, count] buffer transposed), so a
  // view() of it fails and writes through it alias as they do there.
  ctx.set_result_strides(0, {1, count});
  if (count == 0 || rank == 0) return {g.constant_int(0, {DType::kI64, {count, rank}})};
  ir::TensorType flat{DType::kI64, {n}};
  ir::Value key = g.select(nonzero_flat(ctx), g.iota(flat, 0), g.constant_int(n, flat));
  ir::Value pos = g.slice(g.sort({key}, 0, ir::Cmp::kLT)[0], {0}, {count}, {1});
  ir::TensorType col{DType::kI64, {count}};
  std::vector<ir::Value> columns;
  int64_t stride = n;
  for (int64_t j = 0; j < rank; ++j) {
    stride /= self.size(j);
    ir::Value c = stride == 1 ? pos : g.binary(ir::Op::kDiv, pos, g.constant_int(stride, col));
    if (j > 0) c = g.binary(ir::Op::kRem, c, g.constant_int(self.size(j), col));
    columns.push_back(g.reshape(c, {count, 1}));
  }
  return {g.concatenate(columns, 1)};
}

// masked_select(Tensor self, Tensor mask): self and mask broadcast (as views),
// then self[mask], a 1-d result.
ValueList masked_select(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mask = a.tensor(1);
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  std::vector<int64_t> shape = at::infer_size(mask.sizes(), self.sizes());
  at::Tensor s = self.expand(shape);
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(mask.expand(shape));
  if (shape.empty()) {
    // A 0-d mask indexes a 0-d tensor as a 1-element one.
    s = s.reshape({1});
    indices.set(0, mask.expand(shape).reshape({1}));
  }
  std::vector<c10::IValue> args{s, indices};
  return lowering_table().at("index.Tensor")(ctx, Args(args));
}

// Raises CPU's IndexError for take/put when some index lies outside [-n, n),
// naming the first bad one.
void check_flat_range(LoweringContext& ctx, const at::Tensor& index, int64_t n) {
  auto [lo, hi] = extremes(ctx, index);
  if (lo >= -n && hi < n) return;
  at::Tensor host = to_host(index).reshape({-1});
  for (int64_t i = 0; i < host.numel(); ++i) {
    int64_t v = host[i].item<int64_t>();
    TORCH_CHECK_INDEX(v >= -n && v < n, "out of range: tried to access index ", v,
                      " on a tensor of ", n, " elements.");
  }
}

// `index` (any shape, values in [-n, n)) as wrapped flat positions, i64 [m, 1].
ir::Value flat_positions(LoweringContext& ctx, const at::Tensor& index, int64_t n) {
  auto& g = ctx.g();
  const int64_t m = index.numel();
  ir::Value idx = g.reshape(read_index(ctx, index), {m, 1});
  ir::Value size = g.constant_int(n, {DType::kI64, {m, 1}});
  return g.select(g.compare(ir::Cmp::kLT, idx, full_like(ctx, idx, 0)),
                  g.binary(ir::Op::kAdd, idx, size), idx);
}

// Inclusive prefix sum of a 1-d i64 value.
ir::Value prefix_sum(LoweringContext& ctx, ir::Value v) {
  int64_t n = dims(ctx, v)[0];
  return ctx.g().reduce_window(v, ctx.g().constant_int(0, {DType::kI64, {}}), {n}, {1}, {1}, {1},
                               {n - 1}, {0}, ir::Reducer::kAdd);
}

// put(self, index, source, accumulate=False): source's elements written (or
// added) at the flat positions `index` of self.
ValueList put(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(1);
  const at::Tensor& source = a.tensor(2);
  const bool accumulate = a.boolean(3);
  // Duplicate indices without accumulate leave which value lands unspecified:
  // ATen alerts under use_deterministic_algorithms on every device.
  if (!accumulate) at::globalContext().alertNotDeterministic("put_");
  // ATen's checks and messages (TensorAdvancedIndexing.cpp, put_).
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "put_(): Expected a long tensor for index, but "
              "got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to "
              "have the same dtype, but got self.dtype = ",
              self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(source.numel() == index.numel(),
                    "put_(): Expected source and index to have "
                    "the same number of elements, but got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (index.numel() == 0) return {x};
  const int64_t n = self.numel();
  TORCH_CHECK_INDEX(n > 0, "put_(): Tried to put elements into an empty tensor");
  check_flat_range(ctx, index, n);
  const int64_t m = index.numel();
  ir::ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  ir::Value updates = g.reshape(ctx.tensor(source), {m});
  ir::Reducer r = accumulate
                      ? (dtype(ctx, x) == DType::kBool ? ir::Reducer::kOr : ir::Reducer::kAdd)
                      : ir::Reducer::kReplace;
  ir::Value out = g.scatter(g.reshape(x, {n}), flat_positions(ctx, index, n), updates, d, r);
  return {g.reshape(out, self.sizes().vec())};
}

// masked_scatter(self, mask, source): the k-th true element of the (broadcast)
// mask takes source.flatten()[k]; k is the mask's prefix count.
ValueList masked_scatter(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mask = a.tensor(1);
  const at::Tensor& source = a.tensor(2);
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, "
              "but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter: expected self and "
              "source to have same dtypes but got",
              self.scalar_type(), " and ", source.scalar_type());
  std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const int64_t n = c10::multiply_integers(shape);
  auto& g = ctx.g();
  ir::Value x = broadcast_to(ctx, ctx.tensor(self), shape);
  if (n == 0) return {x};
  auto flat_mask = [&](LoweringContext& c) {
    return c.g().reshape(broadcast_to(c, c.tensor(mask), shape), {n});
  };
  const int64_t k = source.numel();
  if (k < n) {
    LoweringContext probe(ctx.op() + " (mask count)", ctx.device());
    ir::Value m = probe.g().convert(flat_mask(probe), DType::kI64);
    int64_t count =
        to_host(probe.run({reduce(probe, m, {0}, false, ir::Reducer::kAdd)})[0]).item<int64_t>();
    TORCH_CHECK(count <= k, "Number of elements of source < number of ones in mask");
    if (count == 0) return {x};
  }
  ir::Value m = flat_mask(ctx);
  ir::Value rank = g.binary(ir::Op::kSub, prefix_sum(ctx, g.convert(m, DType::kI64)),
                            g.constant_int(1, {DType::kI64, {n}}));
  ir::Value pos = g.clamp(g.constant_int(0, {DType::kI64, {n}}), rank,
                          g.constant_int(k - 1, {DType::kI64, {n}}));
  ir::GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.slice_sizes = {1};
  d.index_vector_dim = 1;
  ir::Value src = g.reshape(ctx.tensor(source), {k});
  ir::Value picked = g.gather(src, g.reshape(pos, {n, 1}), d, {n});
  return {g.reshape(g.select(m, picked, g.reshape(x, {n})), shape)};
}

// repeat_interleave.Tensor(repeats, *, output_size=None): i repeated
// repeats[i] times. Output position j takes the number of cumulative counts
// <= j, a [total, n] comparison.
ValueList repeat_interleave(LoweringContext& ctx, const Args& a) {
  const at::Tensor& repeats = a.tensor(0);
  std::optional<int64_t> output_size = a.opt_integer(1);
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK_NOT_IMPLEMENTED(
      repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
      "\"repeat_interleave_cpu\" not implemented for '", c10::toString(repeats.scalar_type()), "'");
  auto& g = ctx.g();
  const int64_t n = repeats.numel();
  const DType out = to_ir(repeats.scalar_type());  // the result has repeats' dtype
  if (n == 0) return {g.constant_int(0, {out, {0}})};
  auto [lo, hi] = extremes(ctx, repeats);
  TORCH_CHECK(lo >= 0, "repeats can not be negative");
  (void)hi;
  ir::Value counts = prefix_sum(ctx, g.reshape(read_index(ctx, repeats), {n}));
  int64_t total;
  if (output_size.has_value()) {
    total = *output_size;
  } else {
    LoweringContext probe(ctx.op() + " (total)", ctx.device());
    ir::Value r = probe.g().reshape(read_index(probe, repeats), {n});
    total =
        to_host(probe.run({reduce(probe, r, {0}, false, ir::Reducer::kAdd)})[0]).item<int64_t>();
  }
  if (total == 0) return {g.constant_int(0, {out, {0}})};
  ir::TensorType pair{DType::kI64, {total, n}};
  ir::Value j = g.iota(pair, 0);
  ir::Value c = g.broadcast_in_dim(counts, {total, n}, {1});
  ir::Value le = g.convert(g.compare(ir::Cmp::kLE, c, j), DType::kI64);
  return {g.convert(reduce(ctx, le, {1}, false, ir::Reducer::kAdd), out)};
}

// bincount(self, weights=None, minlength=0): counts (or summed weights) of
// each value of a 1-d non-negative integer tensor; the length max(self) + 1
// (at least minlength) is read on the host.
ValueList bincount(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  std::optional<at::Tensor> weights = a.opt_tensor(1);
  const int64_t minlength = a.integer(2);
  // ATen's checks and messages (SummaryOps.cpp, _bincount_cpu).
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  if (self.dim() == 1 && self.numel() == 0) {
    DType out = !weights.has_value()                   ? DType::kI64
                : weights->scalar_type() == at::kFloat ? DType::kF32
                                                       : DType::kF64;
    return {ctx.g().constant(0, {out, {minlength}})};
  }
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  auto [lo, hi] = extremes(ctx, self);
  TORCH_CHECK(lo >= 0, "bincount only supports 1-d non-negative integral inputs.");
  const int64_t n = self.numel();
  TORCH_CHECK(!weights.has_value() || (weights->dim() == 1 && weights->numel() == n),
              "weights should be 1-d and have the same length as input");
  const int64_t length = std::max(hi + 1, minlength);
  auto& g = ctx.g();
  DType out = !weights.has_value()                   ? DType::kI64
              : weights->scalar_type() == at::kFloat ? DType::kF32
                                                     : DType::kF64;
  ir::Value updates = weights.has_value() ? g.convert(ctx.tensor(*weights), out)
                                          : g.constant_int(1, {DType::kI64, {n}});
  ir::ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  ir::Value idx = g.reshape(read_index(ctx, self), {n, 1});
  return {g.scatter(g.constant(0, {out, {length}}), idx, updates, d, ir::Reducer::kAdd)};
}

// take(Tensor self, Tensor index): self.flatten()[index], negative indices
// wrapped, in index's shape.
ValueList take_rule(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(1);
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "take(): Expected a long tensor for index, but "
              "got ",
              index.scalar_type());
  const int64_t n = self.numel();
  auto& g = ctx.g();
  std::vector<int64_t> out = index.sizes().vec();
  if (index.numel() == 0) return {g.constant(0, {to_ir(self.scalar_type()), out})};
  TORCH_CHECK_INDEX(n > 0, "take(): tried to take from an empty tensor");
  check_flat_range(ctx, index, n);
  const int64_t m = index.numel();
  ir::Value idx = flat_positions(ctx, index, n);
  ir::GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.slice_sizes = {1};
  d.index_vector_dim = 1;
  ir::Value flat = g.reshape(ctx.tensor(self), {n});
  return {g.reshape(g.gather(flat, idx, d, {m}), out)};
}

// index_reduce(self, dim, index, source, str reduce, *, include_self=True):
// scatter_reduce.two with the index vector broadcast over source's shape.
ValueList index_reduce(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& index = a.tensor(2);
  const at::Tensor& source = a.tensor(3);
  const std::string reduce_name = a[4].toStringRef();
  const int64_t dim = wrap_dim(a.integer(1), std::max<int64_t>(self.dim(), 1));
  // ATen's checks and messages (TensorAdvancedIndexing.cpp, index_reduce_func_impl
  // and index_func_meta_impl).
  TORCH_CHECK(reduce_name == "prod" || reduce_name == "mean" || reduce_name == "amax" ||
                  reduce_name == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ",
              reduce_name, ".");
  TORCH_CHECK_INDEX(index.dim() <= 1,
                    "index_reduce_(): Index is supposed to be a vector, but "
                    "got dim: ",
                    index.dim(), " with type: ", index.scalar_type(), " and size: ", index.sizes());
  TORCH_CHECK(
      index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
      "index_reduce_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (",
              self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  const int64_t source_n = at::native::ensure_nonempty_size(source, dim);
  TORCH_CHECK(index.numel() == source_n, "index_reduce_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim): (", source_n, "), for dim: ", dim);
  check_index_range(ctx, index, dim, at::native::ensure_nonempty_size(self, dim), false,
                    RangeError::kInSelf);
  if (index.numel() == 0 || self.numel() == 0) return {ctx.tensor(self)};
  // index viewed as [1, .., n, .., 1] and expanded to source's shape.
  std::vector<int64_t> view(std::max<int64_t>(source.dim(), 1), 1);
  view[dim] = index.numel();
  at::Tensor full_index = index.to(at::kLong).reshape(view);
  at::Tensor src = source;
  if (source.dim() == 0) src = source.reshape({1});
  full_index = full_index.expand(src.sizes());
  std::vector<c10::IValue> args{
      self.dim() == 0 ? self.reshape({1}) : self, dim, full_index, src, a[4], a[5]};
  ValueList r = lowering_table().at("scatter_reduce.two")(ctx, Args(args));
  if (self.dim() == 0) r[0] = ctx.g().reshape(r[0], {});
  return r;
}

RegisterLowering kNonzeroMaskedTakePutRules[] = {
    {"nonzero", nonzero},
    {"masked_select", masked_select},
    {"take", take_rule},
    {"index_reduce", index_reduce},
    {"put", put},
    {"masked_scatter", masked_scatter},
    {"repeat_interleave.Tensor", repeat_interleave},
    {"bincount", bincount},
};

}  // namespace
}  // namespace ttpu::aten
