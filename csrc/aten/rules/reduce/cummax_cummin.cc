// Lowerings of cummax / cummin, through ATen's helpers
// _cummax_helper / _cummin_helper(self, values!, indices!, dim) -> (), which the
// CompositeExplicit cummax/cummin call after sizing values and indices like
// self (and only for non-empty inputs of rank >= 1).
//
// ATen's CPU helper (ReduceOps.cpp, cummax_cummin_helper) walks the dim keeping
// (best, index) and replaces it by the current element when that is NaN or,
// while best is not NaN, when current >= best (cummax; <= for cummin): ties go
// to the latest index and the first NaN sticks, later NaNs taking its index.
// That is "the latest element of the greatest key" with NaN as the greatest
// key, an associative combine, so here it is an inclusive scan by doubling
// (Hillis-Steele: log2(n) steps of combining each element with the one s
// before it).
#include <limits>

#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// The value every element beats (the scan's padding): -inf / +inf, or the
// dtype's lowest / highest.
ir::Value loser(LoweringContext& ctx, DType dt, bool is_max) {
  if (ir::is_float(dt)) {
    return ctx.constant(
        is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(),
        dt);
  }
  if (dt == DType::kBool) return ctx.constant(is_max ? 0 : 1, dt);
  int64_t bits = 8 * ir::byte_size(dt);
  if (ir::is_unsigned(dt)) {
    return ctx.g().constant_int(is_max ? 0 : (bits == 64 ? -1 : (int64_t{1} << bits) - 1),
                                {dt, {}});
  }
  int64_t hi = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
  return ctx.g().constant_int(is_max ? -hi - 1 : hi, {dt, {}});
}

ValueList cum_extremum(LoweringContext& ctx, const Args& a, bool is_max) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& values = a.tensor(1);
  const at::Tensor& indices = a.tensor(2);
  int64_t dim = wrap_dim(a.integer(3), std::max<int64_t>(self.dim(), 1));
  resize_out(values, self.sizes());
  resize_out(indices, self.sizes());
  if (self.numel() == 0) return {};
  auto& g = ctx.g();
  ir::Value v = ctx.tensor(self);
  if (self.dim() == 0) {
    ctx.write(values, v);
    ctx.write(indices, g.constant_int(0, {DType::kI64, {}}));
    return {};
  }
  std::vector<int64_t> shape = dims(ctx, v);
  DType dt = dtype(ctx, v);
  const size_t rank = shape.size();
  const int64_t n = shape[dim];
  ir::Value idx = g.iota({DType::kI64, shape}, dim);
  ir::Value v_pad = loser(ctx, dt, is_max);
  ir::Value i_pad = g.constant_int(-1, {DType::kI64, {}});
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<int64_t> lo(rank, 0), hi(rank, 0), interior(rank, 0), zeros(rank, 0);
    std::vector<int64_t> limit = shape, strides(rank, 1);
    limit[dim] = n - s;
    lo[dim] = s;
    // (ev, ei): the element s before (earlier); (v, idx): the current one.
    ir::Value ev = g.pad(g.slice(v, zeros, limit, strides), v_pad, lo, hi, interior);
    ir::Value ei = g.pad(g.slice(idx, zeros, limit, strides), i_pad, lo, hi, interior);
    ir::Value take_current = g.compare(is_max ? Cmp::kGE : Cmp::kLE, v, ev);
    if (ir::is_float(dt)) {
      ir::Value cur_nan = g.compare(Cmp::kNE, v, v);
      ir::Value earlier_nan = g.compare(Cmp::kNE, ev, ev);
      take_current = g.binary(Op::kOr, cur_nan,
                              g.binary(Op::kAnd, g.unary(Op::kNot, earlier_nan), take_current));
    }
    v = g.select(take_current, v, ev);
    idx = g.select(take_current, idx, ei);
  }
  ctx.write(values, v);
  ctx.write(indices, idx);
  return {};
}

RegisterOutOnly r_cummax("_cummax_helper", [](LoweringContext& c, const Args& a) {
  return cum_extremum(c, a, true);
});
RegisterOutOnly r_cummin("_cummin_helper", [](LoweringContext& c, const Args& a) {
  return cum_extremum(c, a, false);
});

}  // namespace
}  // namespace ttpu::aten
