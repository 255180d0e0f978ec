// Depthwise convolutions as sums over kernel taps (see conv_depthwise.h).
//
// With T = prod(k) taps and a channel multiplier m (weight [C*m, 1, k...],
// output channel c*m + j reads input channel c):
//   y[n, c*m+j, o]   = sum_t xp[n, c, t*dil + s*o] * w[c*m+j, 0, t]
//   dx[n, c, i]      = sum_j sum_t dyp[n, c*m+j, t*dil + i] * w[c*m+j, 0, k-1-t]
//   dw[c*m+j, 0, t]  = sum_{n,o} xp[n, c, t*dil + s*o] * dy[n, c*m+j, o]
// where xp is x zero-padded by `padding` and dyp is dy dilated by the stride
// and padded as the input gradient of any convolution (conv.cc's
// conv_input_grad). Each tap is one strided slice times a broadcast weight
// column; XLA fuses the slices, products and sum into one loop. The weight
// gradient's T sums are one variadic reduce (one loop too).
#include "aten/rules/nn/conv_depthwise.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>

#include "runtime/runtime.h"
#include "settings/settings.h"

namespace ttpu::aten {
namespace {

using ir::Op;
using ir::Value;

int64_t taps_product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The multi-index of flat tap `t` over kernel sizes `k` (row-major, as the
// weight's trailing dims are laid out).
std::vector<int64_t> tap_index(int64_t t, const std::vector<int64_t>& k) {
  std::vector<int64_t> idx(k.size());
  for (size_t d = k.size(); d-- > 0;) {
    idx[d] = t % k[d];
    t /= k[d];
  }
  return idx;
}

// The widened compute type: half types accumulate in float32 as CPU's kernels.
ir::DType acc_type(ir::DType dt) {
  return dt == ir::DType::kBF16 || dt == ir::DType::kF16 ? ir::DType::kF32 : dt;
}

// w [C*m, 1, k...] -> T columns [C*m] (column t holds tap t of every channel).
std::vector<Value> weight_columns(LoweringContext& ctx, Value w) {
  auto& g = ctx.g();
  const auto wd = dims(ctx, w);
  const int64_t o = wd[0];
  const int64_t taps = taps_product(std::vector<int64_t>(wd.begin() + 2, wd.end()));
  const Value flat = g.reshape(w, {o, taps});
  std::vector<Value> cols;
  for (int64_t t = 0; t < taps; ++t) {
    cols.push_back(g.reshape(g.slice(flat, {0, t}, {o, t + 1}, {1, 1}), {o}));
  }
  return cols;
}

// x zero-padded by `padding` in its spatial dims (no node without padding).
Value pad_spatial(LoweringContext& ctx, Value x, const std::vector<int64_t>& padding) {
  auto& g = ctx.g();
  const size_t rank = dims(ctx, x).size();
  std::vector<int64_t> low(rank, 0), interior(rank, 0);
  bool any = false;
  for (size_t d = 0; d < padding.size(); ++d) {
    low[2 + d] = padding[d];
    any = any || padding[d] != 0;
  }
  if (!any) return x;
  return g.pad(x, g.constant(0, {dtype(ctx, x), {}}), low, low, interior);
}

// The slice of xp [N, C, ...] read by tap `t`: start t*dil, `count` elements
// every `step` in each spatial dim.
Value tap_slice(LoweringContext& ctx, Value xp, const std::vector<int64_t>& t,
                const std::vector<int64_t>& dil, const std::vector<int64_t>& count,
                const std::vector<int64_t>& step) {
  auto limit = dims(ctx, xp);
  std::vector<int64_t> start(limit.size(), 0), strides(limit.size(), 1);
  for (size_t d = 0; d < t.size(); ++d) {
    start[2 + d] = t[d] * dil[d];
    limit[2 + d] = start[2 + d] + dilate(count[d], step[d]);
    strides[2 + d] = step[d];
  }
  return ctx.g().slice(xp, start, limit, strides);
}

// v [N, C, sp...] -> [N, C, m, sp...] (each channel repeated m times), or v when m == 1.
Value spread(LoweringContext& ctx, Value v, int64_t m) {
  if (m == 1) return v;
  auto d = dims(ctx, v);
  std::vector<int64_t> to{d[0], d[1], m}, bdims{0, 1};
  for (size_t i = 2; i < d.size(); ++i) {
    to.push_back(d[i]);
    bdims.push_back(static_cast<int64_t>(i) + 1);
  }
  return ctx.g().broadcast_in_dim(v, to, bdims);
}

// A weight column [C*m] broadcast over `shape` ([N, C*m, sp...], or
// [N, C, m, sp...] when m > 1).
Value column_over(LoweringContext& ctx, Value col, const std::vector<int64_t>& shape, int64_t m) {
  auto& g = ctx.g();
  if (m == 1) return g.broadcast_in_dim(col, shape, {1});
  return g.broadcast_in_dim(g.reshape(col, {shape[1], m}), shape, {1, 2});
}

// [N, C, m, sp...] -> [N, C*m, sp...] (or unchanged for m == 1).
Value merge_multiplier(LoweringContext& ctx, Value v, int64_t m) {
  if (m == 1) return v;
  auto d = dims(ctx, v);
  std::vector<int64_t> to{d[0], d[1] * d[2]};
  to.insert(to.end(), d.begin() + 3, d.end());
  return ctx.g().reshape(v, to);
}

// The sum of `terms` added pairwise (a tree, not a chain): XLA:CPU's fused
// loop ran about 1.2x faster that way at efficientnet_b0's shapes.
Value balanced_sum(LoweringContext& ctx, std::vector<Value> terms) {
  while (terms.size() > 1) {
    std::vector<Value> next;
    for (size_t i = 0; i + 1 < terms.size(); i += 2) {
      next.push_back(ctx.g().binary(Op::kAdd, terms[i], terms[i + 1]));
    }
    if (terms.size() % 2 == 1) next.push_back(terms.back());
    terms = std::move(next);
  }
  return terms[0];
}

// The input gradient for stride 1: dy padded so that reversed-kernel tap t
// reads [t*dil, t*dil + in). dy: [N, O, out...] (acc type).
Value input_grad_stride1(LoweringContext& ctx, Value dy, const std::vector<Value>& cols,
                         const std::vector<int64_t>& k, const DepthwiseParams& p,
                         const std::vector<int64_t>& in) {
  auto& g = ctx.g();
  const auto dyd = dims(ctx, dy);
  const size_t n = k.size();
  std::vector<int64_t> low(n + 2, 0), high(n + 2, 0);
  for (size_t d = 0; d < n; ++d) {
    const int64_t kd = dilate(k[d], p.dilation[d]);
    low[2 + d] = kd - 1 - p.padding[d];
    high[2 + d] = in[d] + kd - 1 - dyd[2 + d] - low[2 + d];
  }
  const Value dyp =
      g.pad(dy, g.constant(0, {dtype(ctx, dy), {}}), low, high, std::vector<int64_t>(n + 2, 0));
  const int64_t taps = static_cast<int64_t>(cols.size());
  const std::vector<int64_t> ones(n, 1);
  std::vector<Value> terms;
  for (int64_t t = 0; t < taps; ++t) {
    // Tap t of the spatially reversed kernel is the weight's tap taps-1-t.
    const Value s = tap_slice(ctx, dyp, tap_index(t, k), p.dilation, in, ones);
    terms.push_back(g.binary(Op::kMul, s, column_over(ctx, cols[taps - 1 - t], dims(ctx, s), 1)));
  }
  return balanced_sum(ctx, terms);
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The input gradient for a stride above 1, one output phase at a time: dx at
// i = q*s + r (q = 0..Q-1) reads only the reversed-kernel taps t with
// t*dil + r - L divisible by s, at dy[q + (t*dil + r - L) / s], L being the
// low padding of the stride-dilated dy. Reading dy itself instead of its
// dilation skips the zeros (3-20x faster on XLA:CPU at efficientnet_b0's
// stride-2 shapes). The phases are interleaved as [N, O, Q0, s0, Q1, s1, ...]
// -> [N, O, Q0*s0, ...] and cropped to `in`. dy: [N, O, out...] (acc type).
Value input_grad_by_phase(LoweringContext& ctx, Value dy, const std::vector<Value>& cols,
                          const std::vector<int64_t>& k, const DepthwiseParams& p,
                          const std::vector<int64_t>& in) {
  auto& g = ctx.g();
  const auto dyd = dims(ctx, dy);
  const size_t n = k.size();
  const int64_t taps = static_cast<int64_t>(cols.size());
  // reach[d][r]: the (reversed tap, dy offset) pairs that reach phase r of dim d.
  std::vector<std::vector<std::vector<std::pair<int64_t, int64_t>>>> reach(n);
  std::vector<int64_t> q(n), lo(n + 2, 0), hi(n + 2, 0);
  for (size_t d = 0; d < n; ++d) {
    const int64_t s = p.stride[d];
    const int64_t low = dilate(k[d], p.dilation[d]) - 1 - p.padding[d];
    q[d] = (in[d] + s - 1) / s;
    reach[d].resize(static_cast<size_t>(s));
    int64_t min_off = 0, max_end = dyd[2 + d];
    for (int64_t r = 0; r < s; ++r) {
      for (int64_t t = 0; t < k[d]; ++t) {
        const int64_t v = t * p.dilation[d] + r - low;
        if (v - floor_div(v, s) * s != 0) continue;
        const int64_t off = floor_div(v, s);
        reach[d][static_cast<size_t>(r)].push_back({t, off});
        min_off = std::min(min_off, off);
        max_end = std::max(max_end, off + q[d]);
      }
    }
    lo[2 + d] = -min_off;
    hi[2 + d] = max_end - dyd[2 + d];
  }
  const Value dyp =
      g.pad(dy, g.constant(0, {dtype(ctx, dy), {}}), lo, hi, std::vector<int64_t>(n + 2, 0));
  std::vector<int64_t> unit{dyd[0], dyd[1]};
  for (size_t d = 0; d < n; ++d) {
    unit.push_back(q[d]);
    unit.push_back(1);
  }
  // Phase r: the sum over every combination of its dims' reaching taps.
  auto phase = [&](const std::vector<int64_t>& r) -> Value {
    for (size_t d = 0; d < n; ++d) {
      if (reach[d][static_cast<size_t>(r[d])].empty()) return g.constant(0, {dtype(ctx, dy), unit});
    }
    std::vector<size_t> idx(n, 0);
    std::vector<Value> terms;
    for (;;) {
      auto limit = dyd;
      std::vector<int64_t> start(n + 2, 0), strides(n + 2, 1);
      int64_t flat = 0;
      for (size_t d = 0; d < n; ++d) {
        const auto& [t, off] = reach[d][static_cast<size_t>(r[d])][idx[d]];
        start[2 + d] = off + lo[2 + d];
        limit[2 + d] = start[2 + d] + q[d];
        flat = flat * k[d] + t;
      }
      const Value s = g.slice(dyp, start, limit, strides);
      const Value col = column_over(ctx, cols[taps - 1 - flat], dims(ctx, s), 1);
      terms.push_back(g.binary(Op::kMul, s, col));
      size_t d = n;  // the next combination, last dim fastest
      while (d > 0 && ++idx[d - 1] == reach[d - 1][static_cast<size_t>(r[d - 1])].size()) {
        idx[d - 1] = 0;
        --d;
      }
      if (d == 0) break;
    }
    return g.reshape(balanced_sum(ctx, terms), unit);
  };
  std::vector<int64_t> r;
  std::function<Value(size_t)> interleave = [&](size_t d) -> Value {
    if (d == n) return phase(r);
    std::vector<Value> parts;
    for (int64_t ri = 0; ri < p.stride[d]; ++ri) {
      r.push_back(ri);
      parts.push_back(interleave(d + 1));
      r.pop_back();
    }
    return g.concatenate(parts, static_cast<int64_t>(3 + 2 * d));
  };
  std::vector<int64_t> merged{dyd[0], dyd[1]}, start(n + 2, 0), limit{dyd[0], dyd[1]};
  for (size_t d = 0; d < n; ++d) {
    merged.push_back(q[d] * p.stride[d]);
    limit.push_back(in[d]);
  }
  const Value full = g.reshape(interleave(0), merged);
  return g.slice(full, start, limit, std::vector<int64_t>(n + 2, 1));
}

}  // namespace

bool depthwise_taps_enabled() {
  static const bool cpu = runtime::Runtime::get().client().platform_name() == "cpu";
  // Read at each lowering (a getenv is cheap next to a convolution) so that a
  // comparison can switch it within one process.
  return cpu && settings::flag("TORCHTPU_CPU_DEPTHWISE_TAPS", true);
}

// 7x7 (ConvNeXt) is the largest depthwise kernel in common models; beyond 81
// taps the unrolled sum grows the program more than it is known to save.
constexpr int64_t kMaxDepthwiseTaps = 81;

bool use_depthwise_taps(const std::vector<int64_t>& input_dims,
                        const std::vector<int64_t>& weight_dims, int64_t groups, bool transposed,
                        ir::DType dtype) {
  if (transposed || groups <= 1 || input_dims.size() < 3 ||
      input_dims.size() != weight_dims.size()) {
    return false;
  }
  if (input_dims[1] != groups || weight_dims[1] != 1 || weight_dims[0] % groups != 0) return false;
  if (!ir::is_float(dtype)) return false;
  if (taps_product(input_dims) == 0 || taps_product(weight_dims) == 0) return false;
  const std::vector<int64_t> kernel(weight_dims.begin() + 2, weight_dims.end());
  if (taps_product(kernel) > kMaxDepthwiseTaps) return false;
  return depthwise_taps_enabled();
}

Value depthwise_forward(LoweringContext& ctx, Value x, Value w, const DepthwiseParams& p) {
  auto& g = ctx.g();
  const auto xd = dims(ctx, x), wd = dims(ctx, w);
  const size_t n = xd.size() - 2;
  const int64_t m = wd[0] / xd[1];
  std::vector<int64_t> k(wd.begin() + 2, wd.end()), out;
  for (size_t d = 0; d < n; ++d) {
    out.push_back((xd[2 + d] + 2 * p.padding[d] - dilate(k[d], p.dilation[d])) / p.stride[d] + 1);
  }
  const Value xp = pad_spatial(ctx, x, p.padding);
  const auto cols = weight_columns(ctx, w);
  std::vector<Value> terms;
  for (int64_t t = 0; t < static_cast<int64_t>(cols.size()); ++t) {
    const Value s = spread(ctx, tap_slice(ctx, xp, tap_index(t, k), p.dilation, out, p.stride), m);
    terms.push_back(g.binary(Op::kMul, s, column_over(ctx, cols[t], dims(ctx, s), m)));
  }
  return merge_multiplier(ctx, balanced_sum(ctx, terms), m);
}

Value depthwise_input_grad(LoweringContext& ctx, Value dy, Value w, const DepthwiseParams& p,
                           const std::vector<int64_t>& input_dims) {
  auto& g = ctx.g();
  const ir::DType dt = dtype(ctx, dy), acc_t = acc_type(dt);
  dy = g.convert(dy, acc_t);
  w = g.convert(w, acc_t);
  const auto wd = dims(ctx, w);
  const int64_t c = input_dims[1], m = wd[0] / c;
  const std::vector<int64_t> in(input_dims.begin() + 2, input_dims.end());
  std::vector<int64_t> k(wd.begin() + 2, wd.end());
  const auto cols = weight_columns(ctx, w);
  Value acc;
  if (std::any_of(p.stride.begin(), p.stride.end(), [](int64_t s) { return s > 1; })) {
    acc = input_grad_by_phase(ctx, dy, cols, k, p, in);
  } else {
    acc = input_grad_stride1(ctx, dy, cols, k, p, in);
  }
  if (m > 1) {
    // [N, C*m, in...] -> [N, C, m, in...]: the m output channels of each
    // input channel add up.
    std::vector<int64_t> split{input_dims[0], c, m};
    split.insert(split.end(), in.begin(), in.end());
    acc = reduce(ctx, g.reshape(acc, split), {2}, false, ir::Reducer::kAdd);
  }
  return g.convert(acc, dt);
}

Value depthwise_weight_grad(LoweringContext& ctx, Value x, Value dy, const DepthwiseParams& p,
                            const std::vector<int64_t>& k) {
  auto& g = ctx.g();
  const ir::DType dt = dtype(ctx, x), acc_t = acc_type(dt);
  x = g.convert(x, acc_t);
  dy = g.convert(dy, acc_t);
  const auto xd = dims(ctx, x), dyd = dims(ctx, dy);
  const int64_t o = dyd[1], m = o / xd[1];
  const std::vector<int64_t> out(dyd.begin() + 2, dyd.end());
  const Value xp = pad_spatial(ctx, x, p.padding);
  const Value dym = m == 1 ? dy : g.reshape(dy, [&] {
    std::vector<int64_t> s{dyd[0], xd[1], m};
    s.insert(s.end(), out.begin(), out.end());
    return s;
  }());
  // Every dim but the channel (and multiplier) ones is summed.
  std::vector<int64_t> rdims{0};
  const int64_t first_spatial = m == 1 ? 2 : 3;
  for (size_t d = 0; d < out.size(); ++d) rdims.push_back(first_spatial + static_cast<int64_t>(d));
  // One variadic reduce of the T products: XLA makes it one loop over x and
  // dy (T separate reduces re-read them T times, compile T kernels and were
  // 5-20x slower and 4x longer to compile at efficientnet_b0's shapes).
  std::vector<Value> products, inits;
  for (int64_t t = 0; t < taps_product(k); ++t) {
    const Value s = spread(ctx, tap_slice(ctx, xp, tap_index(t, k), p.dilation, out, p.stride), m);
    products.push_back(g.binary(Op::kMul, s, dym));
    inits.push_back(g.constant(0, {acc_t, {}}));
  }
  std::vector<Value> cols;
  for (const Value& sum : g.reduce(products, inits, rdims, ir::Reducer::kAdd)) {
    cols.push_back(g.reshape(sum, {o, 1}));
  }
  std::vector<int64_t> wshape{o, 1};
  wshape.insert(wshape.end(), k.begin(), k.end());
  return g.convert(g.reshape(g.concatenate(cols, 1), wshape), dt);
}

}  // namespace ttpu::aten
