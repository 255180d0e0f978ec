// Lowerings of segment_reduce and _segment_reduce_backward (lengths or
// offsets; indices are unsupported on CPU too). Semantics, checks and messages
// from ATen's SegmentReduce.cpp.
//
// data is [outer..., L, inner...] with the reduced axis after the dims that
// lengths / offsets share with it; lengths is [outer..., S] (offsets
// [outer..., S + 1]). Segment s covers [start_s, end_s) along the axis. Each
// segment is a masked reduction over a [outer, S, L, inner] broadcast, so the
// segment bounds may stay device values. CPU's order: start from `initial`
// (else -inf / inf / 0 / 1), fold the segment in (NaN wins for max / min),
// then a mean divides by the length (an empty mean without initial is NaN).
#include <limits>

#include "aten/deferred_check.h"
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Reducer;
using ir::Value;

enum class Kind { kSum, kMean, kMax, kMin, kProd };

// ATen's get_reduction_enum.
Kind parse_reduce(const std::string& r) {
  if (r == "max" || r == "amax") return Kind::kMax;
  if (r == "mean") return Kind::kMean;
  if (r == "min" || r == "amin") return Kind::kMin;
  if (r == "sum") return Kind::kSum;
  TORCH_CHECK(r == "prod", "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
  return Kind::kProd;
}

// An optional tensor argument; autograd passes an absent one as undefined.
std::optional<at::Tensor> opt_tensor(const Args& a, size_t i) {
  auto t = a.opt_tensor(i);
  if (t && !t->defined()) return std::nullopt;
  return t;
}

// The segment_layout: data viewed as [outer, L, inner], segments as [outer, S].
struct SegmentLayout {
  int64_t outer = 1, length = 0, inner = 1, segments = 0;
  std::vector<int64_t> data_shape, out_shape;
};

SegmentLayout segment_layout(const at::Tensor& data, int64_t axis, int64_t segments) {
  SegmentLayout l;
  l.data_shape = data.sizes().vec();
  for (int64_t d = 0; d < axis; ++d) l.outer *= data.size(d);
  for (int64_t d = axis + 1; d < data.dim(); ++d) l.inner *= data.size(d);
  l.length = data.size(axis);
  l.segments = segments;
  l.out_shape = l.data_shape;
  l.out_shape[axis] = segments;
  return l;
}

// {start, end} i64 [outer, S] of every segment, ends clipped to L.
std::pair<Value, Value> bounds(LoweringContext& ctx, const SegmentLayout& l,
                               const std::optional<at::Tensor>& lengths,
                               const std::optional<at::Tensor>& offsets) {
  auto& g = ctx.g();
  const std::vector<int64_t> os{l.outer, l.segments};
  const ir::TensorType t{DType::kI64, os};
  Value start, end;
  if (offsets) {
    Value off = g.reshape(g.convert(ctx.tensor(*offsets), DType::kI64), {l.outer, l.segments + 1});
    start = g.slice(off, {0, 0}, {l.outer, l.segments}, {1, 1});
    end = g.slice(off, {0, 1}, {l.outer, l.segments + 1}, {1, 1});
  } else {
    Value len = g.reshape(g.convert(ctx.tensor(*lengths), DType::kI64), os);
    // Inclusive prefix sums along the segments, then shifted: the starts.
    end = g.reduce_window(len, g.constant_int(0, {DType::kI64, {}}), {1, l.segments}, {1, 1}, {},
                          {}, {0, l.segments - 1}, {0, 0}, Reducer::kAdd);
    start = g.binary(Op::kSub, end, len);
  }
  return {start, g.binary(Op::kMin, end, g.constant_int(l.length, t))};
}

// [outer, S, L] bool: position j lies in segment s.
Value membership(LoweringContext& ctx, const SegmentLayout& l, Value start, Value end) {
  auto& g = ctx.g();
  const std::vector<int64_t> sh{l.outer, l.segments, l.length};
  Value j = g.iota({DType::kI64, sh}, 2);
  return g.binary(Op::kAnd, g.compare(Cmp::kGE, j, g.broadcast_in_dim(start, sh, {0, 1})),
                  g.compare(Cmp::kLT, j, g.broadcast_in_dim(end, sh, {0, 1})));
}

// The checks shared by both ops; returns the wrapped axis.
int64_t check_args(const at::Tensor& data, const std::optional<at::Tensor>& lengths,
                   const std::optional<at::Tensor>& offsets, int64_t axis) {
  axis = wrap_dim(axis, data.dim());
  TORCH_CHECK(lengths.has_value() || offsets.has_value(),
              "segment_reduce(): Either lengths or offsets must be defined.");
  const at::Tensor& bound = offsets ? *offsets : *lengths;
  TORCH_CHECK(data.dim() >= bound.dim());
  TORCH_CHECK(axis == bound.dim() - 1,
              "segment_reduce(): Expected axis to be the last dimension of ",
              offsets ? "offsets" : "lengths", " but got ", axis, ".");
  const auto st = data.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st),
                              "\"_segment_reduce_cpu\" not implemented for '", st, "'");
  const auto bt = bound.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(bt == at::kLong || bt == at::kInt, "\"_segment_reduce_",
                              offsets ? "offsets" : "lengths",
                              "_cpu_kernel1\" not implemented for '", bt, "'");
  return axis;
}

// The !unsafe checks on lengths: none negative, every row summing to L. The
// values live on the device: reported at the next host read
// (aten/deferred_check.h).
void check_lengths(LoweringContext& ctx, const at::Tensor& lengths, const SegmentLayout& l) {
  if (lengths.numel() == 0) return;
  LoweringContext probe(ctx.op() + " (lengths check)", ctx.device());
  auto& g = probe.g();
  Value len = g.reshape(g.convert(probe.tensor(lengths), DType::kI64), {l.outer, l.segments});
  Value lo = reduce(probe, len, {0, 1}, false, Reducer::kMin);
  Value sums = reduce(probe, len, {1}, false, Reducer::kAdd);
  Value rows_ok =
      reduce(probe, g.compare(Cmp::kEQ, sums, g.constant_int(l.length, {DType::kI64, {l.outer}})),
             {0}, false, Reducer::kAnd);
  Value non_negative = g.compare(Cmp::kGE, lo, g.constant_int(0, {DType::kI64, {}}));
  Value flags = g.concatenate({g.reshape(g.convert(non_negative, DType::kI64), {1}),
                               g.reshape(g.convert(rows_ok, DType::kI64), {1})},
                              0);
  auto checked = probe.run({flags, g.binary(Op::kAnd, non_negative, rows_ok)});
  check_device_values(checked[0], checked[1], [](const at::Tensor& host) {
    TORCH_CHECK(host[0].item<int64_t>() == 1, "lengths contains negative value!");
    TORCH_CHECK(host[1].item<int64_t>() == 1,
                "segment_reduce(): Expected all rows of lengths along axis ",
                "to sum to data.size(lengths.dim()-1) when !unsafe.");
  });
}

// segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe, initial).
std::vector<Value> segment_reduce(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& data = a.tensor(0);
  const auto lengths = opt_tensor(a, 2), indices = opt_tensor(a, 3), offsets = opt_tensor(a, 4);
  TORCH_CHECK(!indices.has_value(),
              "segment_reduce(): indices based reduction is not supported yet.");
  int64_t axis = a.integer(5);
  const bool unsafe = a.boolean(6);
  const Kind kind = parse_reduce(a[1].toStringRef());
  axis = check_args(data, lengths, offsets, axis);
  const int64_t segments = offsets ? offsets->size(-1) - 1 : lengths->size(-1);
  const SegmentLayout l = segment_layout(data, axis, segments);
  if (!offsets && !unsafe) check_lengths(ctx, *lengths, l);
  const DType dt = to_ir(data.scalar_type());
  const std::vector<int64_t> big{l.outer, l.segments, l.length, l.inner},
      os{l.outer, l.segments, l.inner};
  if (c10::multiply_integers(os) == 0) return {g.constant(0, {dt, l.out_shape})};
  auto [start, end] = bounds(ctx, l, lengths, offsets);
  Value member = g.broadcast_in_dim(membership(ctx, l, start, end), big, {0, 1, 2});
  Value x = l.length == 0
                ? g.constant(0, {dt, big})
                : g.broadcast_in_dim(g.reshape(ctx.tensor(data), {l.outer, l.length, l.inner}), big,
                                     {0, 2, 3});
  const std::optional<c10::Scalar> initial =
      a.is_none(7) ? std::nullopt : std::optional(a.scalar(7));
  const double inf = std::numeric_limits<double>::infinity();
  double identity = 0;
  Reducer r = Reducer::kAdd;
  if (kind == Kind::kMax) {
    identity = -inf;
    r = Reducer::kMax;
  } else if (kind == Kind::kMin) {
    identity = inf;
    r = Reducer::kMin;
  } else if (kind == Kind::kProd) {
    identity = 1;
    r = Reducer::kMul;
  }
  Value folded = reduce(ctx, g.select(member, x, g.constant(identity, {dt, big})), {2}, false, r);
  Value init = initial ? g.broadcast_in_dim(ctx.scalar(*initial, dt), os, {})
                       : g.constant(identity, {dt, os});
  Op combine = kind == Kind::kMax    ? Op::kMax
               : kind == Kind::kMin  ? Op::kMin
               : kind == Kind::kProd ? Op::kMul
                                     : Op::kAdd;
  Value out = g.binary(combine, init, folded);
  if (kind == Kind::kMean) {
    Value len = g.broadcast_in_dim(g.binary(Op::kSub, end, start), os, {0, 1});
    Value empty = g.compare(Cmp::kLE, len, g.constant_int(0, {DType::kI64, os}));
    Value mean = g.binary(Op::kDiv, out, g.convert(len, dt));
    Value if_empty = initial ? out : g.constant(std::numeric_limits<double>::quiet_NaN(), {dt, os});
    out = g.select(empty, if_empty, mean);
  }
  return {g.reshape(out, l.out_shape)};
}

// _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets,
// axis, initial): each element of a non-empty segment gets the segment's
// gradient: as is (sum), over the length (mean), times the product of the
// others (prod: output / x, or the exclusive product where x is 0 or NaN), or,
// for max / min, where x equals the output or is NaN, divided by the number of
// such elements when there are two or more and the gradient is positive (the
// CPU kernel divides only positive values).
std::vector<Value> segment_reduce_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& output = a.tensor(1);
  const at::Tensor& data = a.tensor(2);
  const Kind kind = parse_reduce(a[3].toStringRef());
  const auto lengths = opt_tensor(a, 4), offsets = opt_tensor(a, 5);
  const int64_t axis = check_args(data, lengths, offsets, a.integer(6));
  const int64_t segments = offsets ? offsets->size(-1) - 1 : lengths->size(-1);
  const SegmentLayout l = segment_layout(data, axis, segments);
  const DType dt = to_ir(data.scalar_type());
  const std::vector<int64_t> big{l.outer, l.segments, l.length, l.inner},
      os{l.outer, l.segments, l.inner};
  if (data.numel() == 0 || c10::multiply_integers(os) == 0)
    return {g.constant(0, {dt, l.data_shape})};
  auto [start, end] = bounds(ctx, l, lengths, offsets);
  Value member = g.broadcast_in_dim(membership(ctx, l, start, end), big, {0, 1, 2});
  Value x =
      g.broadcast_in_dim(g.reshape(ctx.tensor(data), {l.outer, l.length, l.inner}), big, {0, 2, 3});
  auto spread = [&](Value v) { return g.broadcast_in_dim(v, big, {0, 1, 3}); };
  Value gs = g.reshape(ctx.tensor(grad), os), out = g.reshape(ctx.tensor(output), os);
  Value zeros = g.constant(0, {dt, big});
  Value per;
  if (kind == Kind::kSum) {
    per = spread(gs);
  } else if (kind == Kind::kMean) {
    Value len = g.convert(g.broadcast_in_dim(g.binary(Op::kSub, end, start), os, {0, 1}), dt);
    per = spread(g.binary(Op::kDiv, gs, len));
  } else if (kind == Kind::kMax || kind == Kind::kMin) {
    Value hit =
        g.binary(Op::kAnd, member,
                 g.binary(Op::kOr, g.compare(Cmp::kNE, x, x), g.compare(Cmp::kEQ, x, spread(out))));
    Value one = g.select(hit, g.constant(1, {dt, big}), zeros);
    Value count = spread(reduce(ctx, one, {2}, false, Reducer::kAdd));
    per = g.select(hit, spread(gs), zeros);
    Value divide = g.binary(Op::kAnd, g.compare(Cmp::kGE, count, g.constant(2, {dt, big})),
                            g.compare(Cmp::kGT, per, zeros));
    per = g.select(divide, g.binary(Op::kDiv, per, count), per);
  } else {
    // Exclusive products from prefix and suffix products within the segment.
    const std::optional<c10::Scalar> initial =
        a.is_none(7) ? std::nullopt : std::optional(a.scalar(7));
    Value ones = g.constant(1, {dt, big});
    Value m = g.select(member, x, ones);
    Value one = ctx.constant(1, dt);
    const int64_t n = l.length;
    // Inclusive prefix / suffix products along L, shifted by one for the
    // exclusive ones (1 at the ends).
    Value prefix = g.reduce_window(m, one, {1, 1, n, 1}, {1, 1, 1, 1}, {}, {}, {0, 0, n - 1, 0},
                                   {0, 0, 0, 0}, Reducer::kMul);
    Value suffix = g.reduce_window(m, one, {1, 1, n, 1}, {1, 1, 1, 1}, {}, {}, {0, 0, 0, 0},
                                   {0, 0, n - 1, 0}, Reducer::kMul);
    const std::vector<int64_t> edge{l.outer, l.segments, 1, l.inner};
    Value unit = g.constant(1, {dt, edge});
    Value before = g.concatenate(
        {unit, g.slice(prefix, {0, 0, 0, 0}, {l.outer, l.segments, n - 1, l.inner}, {1, 1, 1, 1})},
        2);
    Value after = g.concatenate({g.slice(suffix, {0, 0, 1, 0}, big, {1, 1, 1, 1}), unit}, 2);
    Value exclusive =
        g.binary(Op::kMul, g.binary(Op::kMul, before, after),
                 initial ? g.broadcast_in_dim(ctx.scalar(*initial, dt), big, {}) : ones);
    Value special = g.binary(Op::kOr, g.compare(Cmp::kNE, x, x), g.compare(Cmp::kEQ, x, zeros));
    Value plain = g.binary(Op::kDiv, spread(g.binary(Op::kMul, gs, out)), x);
    per = g.select(special, g.binary(Op::kMul, spread(gs), exclusive), plain);
  }
  // Each element is in one segment at most: the sum over segments picks it.
  Value grad_x = reduce(ctx, g.select(member, per, zeros), {1}, false, Reducer::kAdd);
  return {g.reshape(grad_x, l.data_shape)};
}

RegisterLowering kSegmentReduceRules[] = {
    {"segment_reduce", segment_reduce},
    {"_segment_reduce_backward", segment_reduce_backward},
};

}  // namespace
}  // namespace ttpu::aten
