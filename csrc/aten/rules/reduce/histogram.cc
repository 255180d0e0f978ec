// Lowerings of histc and histogram (.bin_ct and .bins_tensor).
//
// histc: `bins` equal-width bins over [min, max], counted in the
// input's dtype. Semantics from ATen's Histogram.cpp and
// cpu/HistogramKernel.cpp: when min == max the range is the data's own
// [min, max] (read on the host, a sync, as CPU's aminmax().item() is), an empty
// range widens by 1 on both sides, and an element x in range goes to bin
// (int64)((x - left) * bins / (right - left)), the right edge into the last
// bin; NaN and out-of-range elements are not counted.
//
// histogram (histogramdd with one dimension): with a bin count the edges are
// the linspace over `range` (else the data's [min, max], an empty range widened
// by 0.5 each side) and an element's bin is the linear estimate corrected by a
// search of the neighbouring edges (LINEAR_INTERPOLATION_WITH_LOCAL_SEARCH);
// with given edges it is the last edge <= x (BINARY_SEARCH). Weights add
// instead of 1; density divides by the total and by each bin's width.
#include <cmath>
#include <limits>

#include "aten/copy.h"
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

// histc_select_outer_bin_edges.
std::pair<double, double> outer_edges(LoweringContext& ctx, const at::Tensor& self,
                                      const c10::Scalar& min, const c10::Scalar& max) {
  double left = min.to<double>(), right = max.to<double>();
  if (left == right && self.numel() > 0) {
    LoweringContext probe(ctx.op() + " (data range)", ctx.device());
    auto& g = probe.g();
    Value x = g.reshape(probe.tensor(self), {self.numel()});
    Value lo = g.reshape(reduce(probe, x, {0}, false, ir::Reducer::kMin), {1});
    Value hi = g.reshape(reduce(probe, x, {0}, false, ir::Reducer::kMax), {1});
    at::Tensor host = to_host(probe.run({g.concatenate({lo, hi}, 0)})[0]).to(at::kDouble);
    left = host[0].item<double>();
    right = host[1].item<double>();
  }
  if (left == right) {
    left -= 1;
    right += 1;
  }
  TORCH_CHECK(!(std::isinf(left) || std::isinf(right) || std::isnan(left) || std::isnan(right)),
              "torch.histc: range of [", left, ", ", right, "] is not finite");
  TORCH_CHECK(left < right, "torch.histc: max must be larger than min");
  return {left, right};
}

// histc(self, bins, min, max).
std::vector<Value> histc(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const int64_t bins = a.integer(1);
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  auto [left, right] = outer_edges(ctx, self, a.scalar(2), a.scalar(3));
  // Integer inputs as CUDA counts them (SummaryOps.cu; CPU refuses them, and
  // libraries such as transformers' MoE pass ints to any device but CPU/MPS).
  const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || integral,
                              "\"histogram_cpu\" not implemented for '", self.scalar_type(), "'");
  const DType dt = to_ir(self.scalar_type());
  const int64_t n = self.numel();
  if (n == 0) return {g.constant(0, {dt, {bins}})};
  // The edges are the linspace's first and last values: the bounds in dt; for
  // integers, CUDA's int64 arithmetic: bin = (x - min) * bins / (max - min).
  const DType ct = integral ? DType::kI64 : dt;
  if (integral) {
    left = static_cast<double>(static_cast<int64_t>(left));
    right = static_cast<double>(static_cast<int64_t>(right));
  }
  const ir::TensorType t{ct, {n}}, it{DType::kI64, {n}};
  Value lo = g.broadcast_in_dim(ctx.scalar(left, ct), {n}, {});
  Value hi = g.broadcast_in_dim(ctx.scalar(right, ct), {n}, {});
  Value x = g.convert(g.reshape(ctx.tensor(self), {n}), ct);
  Value scaled =
      g.binary(Op::kMul, g.binary(Op::kSub, x, lo), g.constant(static_cast<double>(bins), t));
  Value pos = g.convert(g.binary(Op::kDiv, scaled, g.binary(Op::kSub, hi, lo)), DType::kI64);
  pos = g.binary(Op::kMin, pos, g.constant_int(bins - 1, it));
  Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGE, x, lo), g.compare(Cmp::kLE, x, hi));
  // Elements not counted go to an extra last bucket, dropped after the scatter.
  pos = g.select(inside, pos, g.constant_int(bins, it));
  ir::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value counts = g.scatter(g.constant(0, {dt, {bins + 1}}), g.reshape(pos, {n, 1}),
                           g.constant(1, {dt, {n}}), sd, ir::Reducer::kAdd);
  return {g.slice(counts, {0}, {bins}, {1})};
}

// The data's {min, max} read on the host (a sync, as CPU's aminmax().item()).
std::pair<double, double> data_range(LoweringContext& ctx, const at::Tensor& self) {
  LoweringContext probe(ctx.op() + " (data range)", ctx.device());
  auto& g = probe.g();
  Value x = g.reshape(probe.tensor(self), {self.numel()});
  Value lo = g.reshape(reduce(probe, x, {0}, false, ir::Reducer::kMin), {1});
  Value hi = g.reshape(reduce(probe, x, {0}, false, ir::Reducer::kMax), {1});
  at::Tensor host = to_host(probe.run({g.concatenate({lo, hi}, 0)})[0]).to(at::kDouble);
  return {host[0].item<double>(), host[1].item<double>()};
}

// histogramdd_check_inputs for one dimension (weight and dtype).
void check_histogram(const at::Tensor& self, const std::optional<at::Tensor>& weight) {
  const auto st = self.scalar_type();
  if (weight && weight->defined()) {
    TORCH_CHECK(weight->scalar_type() == st,
                "torch.histogramdd: if weight tensor is provided, input tensor and "
                "weight tensor should have the same dtype, but got input(",
                c10::toString(st), "), and weight(", c10::toString(weight->scalar_type()), ")");
    TORCH_CHECK(weight->sizes() == self.sizes(),
                "torch.histogramdd: if weight tensor is provided it should have the "
                "same shape as the input tensor excluding its innermost dimension, but got input "
                "with shape ",
                c10::IntArrayRef({self.numel(), 1}), " and weight with shape ", weight->sizes());
  }
}

// The linspace(left, right, steps) of ATen's CPU kernel, in dt: start + step * i
// for the first half, end - step * (steps - 1 - i) for the rest.
Value linspace(LoweringContext& ctx, double left, double right, int64_t steps, DType dt) {
  auto& g = ctx.g();
  const ir::TensorType t{dt, {steps}};
  const double start = dt == DType::kF64 ? left : static_cast<float>(left);
  const double end = dt == DType::kF64 ? right : static_cast<float>(right);
  const double step =
      dt == DType::kF64 ? (end - start) / static_cast<double>(steps - 1)
                        : static_cast<float>((static_cast<float>(end) - static_cast<float>(start)) /
                                             static_cast<float>(steps - 1));
  Value i = g.iota({DType::kI64, {steps}}, 0);
  Value first = g.binary(Op::kAdd, g.constant(start, t),
                         g.binary(Op::kMul, g.constant(step, t), g.convert(i, dt)));
  Value back =
      g.convert(g.binary(Op::kSub, g.constant_int(steps - 1, {DType::kI64, {steps}}), i), dt);
  Value second =
      g.binary(Op::kSub, g.constant(end, t), g.binary(Op::kMul, g.constant(step, t), back));
  return g.select(g.compare(Cmp::kLT, i, g.constant_int(steps / 2, {DType::kI64, {steps}})), first,
                  second);
}

// Edge k of `edges` [e] at positions k [n] (clamped into range).
Value edge_at(LoweringContext& ctx, Value edges, int64_t e, Value k) {
  auto& g = ctx.g();
  const int64_t n = dims(ctx, k)[0];
  return take_along_dim(
      ctx, edges, 0,
      g.clamp(g.constant_int(0, {DType::kI64, {n}}), k, g.constant_int(e - 1, {DType::kI64, {n}})));
}

// hist [e - 1] of x [n] over `edges` [e]; `linear`: the bin-count algorithm.
Value count_bins(LoweringContext& ctx, Value x, std::optional<Value> weight, Value edges, int64_t e,
                 bool linear, bool density) {
  auto& g = ctx.g();
  const int64_t n = dims(ctx, x)[0];
  const DType dt = dtype(ctx, x);
  const ir::TensorType t{dt, {n}}, it{DType::kI64, {n}};
  Value lo = g.broadcast_in_dim(g.reshape(g.slice(edges, {0}, {1}, {1}), {}), {n}, {});
  Value hi = g.broadcast_in_dim(g.reshape(g.slice(edges, {e - 1}, {e}, {1}), {}), {n}, {});
  Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGE, x, lo), g.compare(Cmp::kLE, x, hi));
  auto count_le = [&](Value k, Value valid) {  // [k valid and edges[k] <= x] as i64
    Value le = g.binary(Op::kAnd, valid, g.compare(Cmp::kLE, edge_at(ctx, edges, e, k), x));
    return g.convert(le, DType::kI64);
  };
  Value pos;
  if (linear) {
    Value scaled =
        g.binary(Op::kMul, g.binary(Op::kSub, x, lo), g.constant(static_cast<double>(e - 1), t));
    Value guess = g.convert(g.binary(Op::kDiv, scaled, g.binary(Op::kSub, hi, lo)), DType::kI64);
    guess = g.clamp(g.constant_int(0, it), guess, g.constant_int(e - 1, it));
    Value pos_min =
        g.binary(Op::kMax, g.constant_int(0, it), g.binary(Op::kSub, guess, g.constant_int(1, it)));
    Value pos_max =
        g.binary(Op::kMin, g.binary(Op::kAdd, guess, g.constant_int(2, it)), g.constant_int(e, it));
    // upper_bound over [pos_min, pos_max): pos_min + #(edges <= x there) - 1.
    Value count = g.constant_int(0, it);
    for (int64_t d = -1; d <= 1; ++d) {
      Value k = g.binary(Op::kAdd, guess, g.constant_int(d, it));
      Value valid =
          g.binary(Op::kAnd, g.compare(Cmp::kGE, k, pos_min), g.compare(Cmp::kLT, k, pos_max));
      count = g.binary(Op::kAdd, count, count_le(k, valid));
    }
    pos = g.binary(Op::kSub, g.binary(Op::kAdd, pos_min, count), g.constant_int(1, it));
  } else {
    Value le = g.compare(Cmp::kLE, g.broadcast_in_dim(edges, {n, e}, {1}),
                         g.broadcast_in_dim(x, {n, e}, {0}));
    pos = g.binary(Op::kSub, reduce(ctx, g.convert(le, DType::kI64), {1}, false, ir::Reducer::kAdd),
                   g.constant_int(1, it));
  }
  // The last bin includes its right edge; uncounted elements go to an extra bucket.
  pos = g.binary(Op::kMin, pos, g.constant_int(e - 2, it));
  pos = g.select(inside, pos, g.constant_int(e - 1, it));
  ir::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value updates = weight ? *weight : g.constant(1, t);
  Value hist =
      g.scatter(g.constant(0, {dt, {e}}), g.reshape(pos, {n, 1}), updates, sd, ir::Reducer::kAdd);
  hist = g.slice(hist, {0}, {e - 1}, {1});
  if (density) {
    Value total = reduce(ctx, hist, {0}, false, ir::Reducer::kAdd);
    hist = g.binary(Op::kDiv, hist, g.broadcast_in_dim(total, {e - 1}, {}));
    Value widths =
        g.binary(Op::kSub, g.slice(edges, {1}, {e}, {1}), g.slice(edges, {0}, {e - 1}, {1}));
    hist = g.binary(Op::kDiv, hist, widths);
  }
  return hist;
}

// histogram.bin_ct(self, bins, *, range, weight, density) and
// histogram.bins_tensor(self, bins, *, weight, density) -> (hist, bin_edges).
std::vector<Value> histogram(LoweringContext& ctx, const Args& a, bool bin_ct) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const size_t wpos = bin_ct ? 3 : 2;
  std::optional<at::Tensor> weight = a.opt_tensor(wpos);
  if (weight && !weight->defined()) weight.reset();
  const bool density = a.boolean(wpos + 1);
  check_histogram(self, weight);
  const DType dt = to_ir(self.scalar_type());
  Value edges;
  int64_t e = 0;
  if (bin_ct) {
    const int64_t bins = a.integer(1);
    TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins,
                " for dimension 0");
    double left = 0, right = 1;
    if (!a.is_none(2)) {
      const auto range = a[2].toDoubleVector();
      TORCH_CHECK(range.size() == 2,
                  "torch.histogramdd: for a 1-dimensional histogram range should have 2 elements, "
                  "but got ",
                  range.size());
      left = range[0];
      right = range[1];
    } else if (self.numel() > 0) {
      std::tie(left, right) = data_range(ctx, self);
    }
    TORCH_CHECK(std::isfinite(left) && std::isfinite(right),
                "torch.histogramdd: dimension 0's range [", left, ", ", right, "] is not finite");
    TORCH_CHECK(left <= right, "torch.histogramdd: min should not exceed max, but got min ", left,
                " max ", right, " for dimension 0");
    if (left == right) {
      left -= 0.5;
      right += 0.5;
    }
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                                "\"histogramdd\" not implemented for '", self.scalar_type(), "'");
    e = bins + 1;
    edges = linspace(ctx, left, right, e, dt);
  } else {
    const at::Tensor& bins = a.tensor(1);
    TORCH_CHECK(bins.dim() == 1,
                "torch.histogramdd: bins tensor should have one dimension, but got ", bins.dim(),
                " dimensions in the bins tensor for dimension 0");
    e = bins.numel();
    TORCH_CHECK(e > 1, "torch.histogram(): bins must be > 0, but got ", e - 1, " for dimension 0");
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                                "\"histogramdd\" not implemented for '", self.scalar_type(), "'");
    edges = g.convert(ctx.tensor(bins), dt);
  }
  const int64_t n = self.numel();
  if (n == 0) {
    Value hist = g.constant(0, {dt, {e - 1}});
    if (density) hist = g.constant(std::numeric_limits<double>::quiet_NaN(), {dt, {e - 1}});
    return {hist, edges};
  }
  Value x = g.reshape(ctx.tensor(self), {n});
  std::optional<Value> w;
  if (weight) w = g.reshape(ctx.tensor(*weight), {n});
  return {count_bins(ctx, x, w, edges, e, bin_ct, density), edges};
}

RegisterLowering kHistogramRules[] = {
    {"histc", histc},
    {"histogram.bin_ct", [](LoweringContext& c, const Args& a) { return histogram(c, a, true); }},
    {"histogram.bins_tensor",
     [](LoweringContext& c, const Args& a) { return histogram(c, a, false); }},
};

}  // namespace
}  // namespace ttpu::aten
