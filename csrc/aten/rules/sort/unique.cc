// Lowerings of unique (_unique2) and unique_consecutive.
//
// Both mark where a run of equal values starts (after a stable sort for
// _unique2, in input order for unique_consecutive), read the number of runs on
// the host (it fixes the result shape: a sync, as CUDA's unique does), and then
// compact the run starts with the sort trick of nonzero. Inverse indices are
// each element's run number; counts are a scatter-add of ones by run number.
// NaNs never equal each other, so each NaN is its own value, as on CPU.
// _unique2 always returns sorted values (sorted=False leaves the order
// unspecified; CPU sorts too).
#include "aten/copy.h"
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ValueList = std::vector<ir::Value>;

// Inclusive prefix sum of a 1-d i64 value (a reduce_window over the prefix).
ir::Value unique_prefix_sum(LoweringContext& ctx, ir::Value v) {
  int64_t n = dims(ctx, v)[0];
  return ctx.g().reduce_window(v, ctx.g().constant_int(0, {DType::kI64, {}}), {n}, {1}, {1}, {1},
                               {n - 1}, {0}, ir::Reducer::kAdd);
}

// The number of true elements of a 1-d bool value produced by `make` in a
// probe program, read on the host.
template <typename Make>
int64_t host_count(LoweringContext& ctx, Make make) {
  LoweringContext probe(ctx.op() + " (count)", ctx.device());
  ir::Value m = probe.g().convert(make(probe), DType::kI64);
  return to_host(probe.run({reduce(probe, m, {0}, false, ir::Reducer::kAdd)})[0]).item<int64_t>();
}

// Positions (i64 [count]) of the true elements of the 1-d bool `mask`, ascending.
ir::Value compact(LoweringContext& ctx, ir::Value mask, int64_t count) {
  auto& g = ctx.g();
  int64_t n = dims(ctx, mask)[0];
  ir::TensorType flat{DType::kI64, {n}};
  ir::Value key = g.select(mask, g.iota(flat, 0), g.constant_int(n, flat));
  return g.slice(g.sort({key}, 0, Cmp::kLT)[0], {0}, {count}, {1});
}

// Rows of `x` ([n, ...]) at `pos` (i64 [k]): [k, ...].
ir::Value take_rows(LoweringContext& ctx, ir::Value x, ir::Value pos) {
  std::vector<int64_t> shape = dims(ctx, x);
  int64_t k = dims(ctx, pos)[0];
  ir::GatherDims d;
  for (size_t i = 1; i < shape.size(); ++i) d.offset_dims.push_back(static_cast<int64_t>(i));
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.slice_sizes = shape;
  d.slice_sizes[0] = 1;
  d.index_vector_dim = 1;
  std::vector<int64_t> out = shape;
  out[0] = k;
  return ctx.g().gather(x, ctx.g().reshape(pos, {k, 1}), d, out);
}

// 1 where row i of `x` ([n, ...]) differs from row i - 1 (and at row 0).
ir::Value run_starts(LoweringContext& ctx, ir::Value x) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, x);
  const int64_t n = shape[0];
  const size_t rank = shape.size();
  ir::Value first = g.constant(1, {DType::kBool, {1}});
  if (n == 1) return first;
  std::vector<int64_t> zeros(rank, 0), strides(rank, 1), lo(rank, 0), hi = shape;
  lo[0] = 1;
  hi[0] = n - 1;
  ir::Value ne =
      g.compare(Cmp::kNE, g.slice(x, lo, shape, strides), g.slice(x, zeros, hi, strides));
  if (rank > 1) {
    std::vector<int64_t> rest;
    for (size_t i = 1; i < rank; ++i) rest.push_back(static_cast<int64_t>(i));
    ne = reduce(ctx, ne, rest, false, ir::Reducer::kOr);
  }
  return g.concatenate({first, ne}, 0);
}

// (values, inverse, counts) for the rows of `x` ([n >= 1, ...]), given the
// permutation `perm` that ordered them (nullopt: identity), with inverse
// shaped `inverse_shape`.
ValueList runs(LoweringContext& ctx, ir::Value x, std::optional<ir::Value> perm, bool inverse,
               bool counts, const std::vector<int64_t>& inverse_shape,
               const std::function<ir::Value(LoweringContext&)>& probe_starts) {
  auto& g = ctx.g();
  const int64_t n = dims(ctx, x)[0];
  const int64_t count = host_count(ctx, probe_starts);
  ir::Value starts = run_starts(ctx, x);
  ir::Value values = take_rows(ctx, x, compact(ctx, starts, count));
  ir::Value inv = g.constant_int(0, {DType::kI64, {0}});
  ir::Value cnt = g.constant_int(0, {DType::kI64, {0}});
  if (inverse || counts) {
    ir::Value run = g.binary(ir::Op::kSub, unique_prefix_sum(ctx, g.convert(starts, DType::kI64)),
                             g.constant_int(1, {DType::kI64, {n}}));
    if (inverse) {
      // run numbers back in input order: sort (perm, run) by perm.
      inv = perm.has_value() ? g.sort({*perm, run}, 0, Cmp::kLT)[1] : run;
      inv = g.reshape(inv, inverse_shape);
    }
    if (counts) {
      ir::ScatterDims d;
      d.inserted_window_dims = {0};
      d.scatter_dims_to_operand_dims = {0};
      d.index_vector_dim = 1;
      cnt = g.scatter(g.constant_int(0, {DType::kI64, {count}}), g.reshape(run, {n, 1}),
                      g.constant_int(1, {DType::kI64, {n}}), d, ir::Reducer::kAdd);
    }
  }
  return {values, inv, cnt};
}

// _unique2(self, sorted=True, return_inverse=False, return_counts=False)
ValueList unique2(LoweringContext& ctx, const at::Tensor& self, bool inverse, bool counts) {
  auto& g = ctx.g();
  const int64_t n = self.numel();
  DType dt = to_ir(self.scalar_type());
  if (n == 0) {
    return {
        g.constant(0, {dt, {0}}),
        g.constant_int(0, {DType::kI64, inverse ? self.sizes().vec() : std::vector<int64_t>{0}}),
        g.constant_int(0, {DType::kI64, {0}})};
  }
  auto sorted = [&](LoweringContext& c) {
    ir::Value flat = c.g().reshape(c.tensor(self), {n});
    return c.g().sort({flat, c.g().iota({DType::kI64, {n}}, 0)}, 0, Cmp::kLT);
  };
  std::vector<ir::Value> s = sorted(ctx);
  return runs(ctx, s[0], s[1], inverse, counts, self.sizes().vec(),
              [&](LoweringContext& c) { return run_starts(c, sorted(c)[0]); });
}

// unique_consecutive(self, return_inverse=False, return_counts=False, int? dim=None):
// runs of equal elements (dim None: of the flattened tensor) or of equal
// slices along dim.
ValueList unique_consecutive(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const bool inverse = a.boolean(1), counts = a.boolean(2);
  std::optional<int64_t> dim = a.opt_integer(3);
  auto& g = ctx.g();
  DType dt = to_ir(self.scalar_type());
  if (!dim.has_value() || self.dim() == 0) {
    const int64_t n = self.numel();
    if (n == 0) {
      return {
          g.constant(0, {dt, {0}}),
          g.constant_int(0, {DType::kI64, inverse ? self.sizes().vec() : std::vector<int64_t>{0}}),
          g.constant_int(0, {DType::kI64, {0}})};
    }
    auto flat = [&](LoweringContext& c) { return c.g().reshape(c.tensor(self), {n}); };
    return runs(ctx, flat(ctx), std::nullopt, inverse, counts, self.sizes().vec(),
                [&](LoweringContext& c) { return run_starts(c, flat(c)); });
  }
  const int64_t d = wrap_dim(*dim, self.dim());
  TORCH_CHECK(self.numel() > 0 || self.size(d) == 0,
              "Number of zero sized dimensions is more "
              "than one, so unique cannot be applied");
  std::vector<int64_t> perm{d};
  for (int64_t k = 0; k < self.dim(); ++k) {
    if (k != d) perm.push_back(k);
  }
  std::vector<int64_t> inv_perm(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv_perm[perm[k]] = static_cast<int64_t>(k);
  if (self.size(d) == 0) {
    return {ctx.tensor(self), g.constant_int(0, {DType::kI64, {0}}),
            g.constant_int(0, {DType::kI64, {0}})};
  }
  auto rows = [&](LoweringContext& c) { return c.g().transpose(c.tensor(self), perm); };
  ValueList r = runs(ctx, rows(ctx), std::nullopt, inverse, counts, {self.size(d)},
                     [&](LoweringContext& c) { return run_starts(c, rows(c)); });
  r[0] = g.transpose(r[0], inv_perm);
  return r;
}

// _unique(self, sorted=True, return_inverse=False): _unique2 without counts
// (index_fill's backward reaches it).
RegisterLowering r_unique("_unique", [](LoweringContext& c, const Args& a) {
  ValueList v = unique2(c, a.tensor(0), a.boolean(2), false);
  v.pop_back();
  return v;
});
RegisterLowering r_unique2("_unique2", [](LoweringContext& c, const Args& a) {
  return unique2(c, a.tensor(0), a.boolean(2), a.boolean(3));
});
RegisterLowering r_unique_consecutive("unique_consecutive", unique_consecutive);

}  // namespace
}  // namespace ttpu::aten
