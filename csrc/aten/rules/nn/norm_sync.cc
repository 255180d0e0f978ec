// Lowerings of the ops nn.SyncBatchNorm is built from (torch/nn/modules/
// _functions.py): per-rank statistics, their merge across ranks, the
// normalization, and the backward's per-rank sums and elementwise step. The
// collectives between them are the process group's (torch.distributed).
//
// Over the dims other than 1 (n elements per channel, input [N, C, *]):
//   batch_norm_stats:  mean = sum(x) / n, invstd = 1 / sqrt(var + eps), var biased
//   gather_stats:      the ranks' (count, mean, var) merged as Chan et al.'s
//                      parallel variance ("Updating formulae and a pairwise
//                      algorithm for computing sample variances", 1979):
//                      mean = sum(c_r m_r) / N, var = sum(c_r (v_r + (m_r - mean)^2)) / N,
//                      with v_r = 1 / invstd_r^2 - eps; running stats take
//                      momentum * (mean, var * N / (N - 1)) + (1 - momentum) * old
//   elemt:             y = (x - mean) * invstd * w + b
//   backward_reduce:   sum_dy = sum(dy), sum_dy_xmu = sum(dy (x - mean)),
//                      grad_weight = sum_dy_xmu * invstd, grad_bias = sum_dy
//   backward_elemt:    dx = (dy - sum_dy / N - (x - mean) invstd^2 sum_dy_xmu / N) invstd w,
//                      N = the sum of the ranks' counts
// CUDA's kernels (aten/src/ATen/native/cuda/Normalization.cuh) compute the
// same; statistics are in f32 for bf16/f16 inputs, as CUDA returns them.
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

// The reduction dims (all but the channel dim 1) and the per-channel layout.
struct Channels {
  std::vector<int64_t> shape, rdims;
  int64_t c = 0;
  DType out = DType::kF32, acc = DType::kF32;
};

Channels channels_of(const at::Tensor& input, const char* op) {
  TORCH_CHECK(input.dim() >= 2, op, ": expected an input with at least 2 dims (N, C, *), got ",
              input.dim());
  Channels ch;
  ch.shape = input.sizes().vec();
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != 1) ch.rdims.push_back(d);
  }
  ch.c = input.size(1);
  ch.out = to_ir(input.scalar_type());
  ch.acc = acc_dtype(ch.out);
  return ch;
}

ir::Value per_channel(LoweringContext& ctx, const Channels& ch, ir::Value v) {
  return ctx.g().broadcast_in_dim(v, ch.shape, {1});
}

// A [C] tensor (or 1 for an absent weight) in the compute dtype.
ir::Value vec(LoweringContext& ctx, const Channels& ch, const std::optional<at::Tensor>& t,
              double absent) {
  auto& g = ctx.g();
  if (!t.has_value() || !t->defined()) return g.constant(absent, {ch.acc, {ch.c}});
  return g.reshape(g.convert(ctx.tensor(*t), ch.acc), {ch.c});
}

ir::Value rsqrt_plus(LoweringContext& ctx, const Channels& ch, ir::Value var, double eps) {
  auto& g = ctx.g();
  return g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, g.constant(eps, {ch.acc, {ch.c}})));
}

// batch_norm_stats(input, eps) -> (mean [C], invstd [C])
ValueList batch_norm_stats(LoweringContext& ctx, const Args& a) {
  Channels ch = channels_of(a.tensor(0), "batch_norm_stats");
  auto& g = ctx.g();
  ir::Value x = g.convert(ctx.tensor(a.tensor(0)), ch.acc);
  ir::Value mean_b = mean_broadcast(ctx, x, ch.rdims);
  ir::Value dev = g.binary(Op::kSub, x, mean_b);
  const double n = static_cast<double>(reduced_numel(ch.shape, ch.rdims));
  ir::Value nc = g.constant(n, {ch.acc, {ch.c}});
  ir::Value mean = g.binary(Op::kDiv, reduce(ctx, x, ch.rdims, false, Reducer::kAdd), nc);
  ir::Value sq = reduce(ctx, g.binary(Op::kMul, dev, dev), ch.rdims, false, Reducer::kAdd);
  ir::Value var = g.binary(Op::kDiv, sq, nc);
  return {mean, rsqrt_plus(ctx, ch, var, a.real(1))};
}

// batch_norm_gather_stats_with_counts(input, mean [R, C], invstd [R, C],
//   running_mean(a!)?, running_var(b!)?, momentum, eps, counts [R]) -> (mean [C], invstd [C])
ValueList gather_stats(LoweringContext& ctx, const Args& a) {
  Channels ch = channels_of(a.tensor(0), "batch_norm_gather_stats_with_counts");
  const at::Tensor& means_t = a.tensor(1);
  TORCH_CHECK(means_t.dim() == 2 && means_t.size(1) == ch.c,
              "batch_norm_gather_stats_with_counts: expected mean of shape [world, ", ch.c,
              "], got ", means_t.sizes());
  auto& g = ctx.g();
  const DType st = to_ir(means_t.scalar_type());
  const DType acc = acc_dtype(st);
  const int64_t r = means_t.size(0);
  const std::vector<int64_t> rc{r, ch.c};
  ir::Value means = g.convert(ctx.tensor(means_t), acc);
  ir::Value invstd = g.convert(ctx.tensor(a.tensor(2)), acc);
  ir::Value counts =
      g.broadcast_in_dim(g.reshape(g.convert(ctx.tensor(a.tensor(7)), acc), {r}), rc, {0});
  const double eps = a.real(6);
  ir::Value total = reduce(ctx, counts, {0}, false, Reducer::kAdd);  // [C], all equal
  ir::Value mean = g.binary(
      Op::kDiv, reduce(ctx, g.binary(Op::kMul, counts, means), {0}, false, Reducer::kAdd), total);
  ir::Value var_r = g.binary(
      Op::kSub, g.binary(Op::kDiv, g.constant(1, {acc, rc}), g.binary(Op::kMul, invstd, invstd)),
      g.constant(eps, {acc, rc}));
  ir::Value d = g.binary(Op::kSub, means, g.broadcast_in_dim(mean, rc, {1}));
  ir::Value m2 =
      reduce(ctx, g.binary(Op::kMul, counts, g.binary(Op::kAdd, var_r, g.binary(Op::kMul, d, d))),
             {0}, false, Reducer::kAdd);
  ir::Value var = g.binary(Op::kDiv, m2, total);
  const double momentum = a.real(5);
  auto update = [&](const std::optional<at::Tensor>& running, ir::Value batch) {
    if (!running.has_value() || !running->defined()) return;
    ir::Value old = g.reshape(g.convert(ctx.tensor(*running), acc), {ch.c});
    ir::Value v = g.binary(Op::kAdd, g.binary(Op::kMul, g.constant(momentum, {acc, {ch.c}}), batch),
                           g.binary(Op::kMul, g.constant(1 - momentum, {acc, {ch.c}}), old));
    ctx.write(*running, g.reshape(v, running->sizes().vec()));
  };
  update(a.opt_tensor(3), mean);
  ir::Value unbiased = g.binary(Op::kDiv, g.binary(Op::kMul, var, total),
                                g.binary(Op::kSub, total, g.constant(1, {acc, {ch.c}})));
  update(a.opt_tensor(4), unbiased);
  ir::Value inv = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, g.constant(eps, {acc, {ch.c}})));
  return {g.convert(mean, st), g.convert(inv, st)};
}

// batch_norm_elemt(input, weight?, bias?, mean [C], invstd [C], eps) -> out
ValueList batch_norm_elemt(LoweringContext& ctx, const Args& a) {
  Channels ch = channels_of(a.tensor(0), "batch_norm_elemt");
  auto& g = ctx.g();
  ir::Value x = g.convert(ctx.tensor(a.tensor(0)), ch.acc);
  ir::Value scale =
      g.binary(Op::kMul, vec(ctx, ch, a.tensor(4), 1), vec(ctx, ch, a.opt_tensor(1), 1));
  ir::Value mean = per_channel(ctx, ch, vec(ctx, ch, a.tensor(3), 0));
  ir::Value y = g.binary(Op::kMul, g.binary(Op::kSub, x, mean), per_channel(ctx, ch, scale));
  y = g.binary(Op::kAdd, y, per_channel(ctx, ch, vec(ctx, ch, a.opt_tensor(2), 0)));
  return {g.convert(y, ch.out)};
}

// batch_norm_backward_reduce(grad_out, input, mean, invstd, weight?, input_g,
//   weight_g, bias_g) -> (sum_dy, sum_dy_xmu, grad_weight, grad_bias)
ValueList backward_reduce(LoweringContext& ctx, const Args& a) {
  Channels ch = channels_of(a.tensor(1), "batch_norm_backward_reduce");
  auto& g = ctx.g();
  ir::Value dy = g.convert(ctx.tensor(a.tensor(0)), ch.acc);
  ir::Value x = g.convert(ctx.tensor(a.tensor(1)), ch.acc);
  ir::Value xmu = g.binary(Op::kSub, x, per_channel(ctx, ch, vec(ctx, ch, a.tensor(2), 0)));
  ir::Value sum_dy = reduce(ctx, dy, ch.rdims, false, Reducer::kAdd);
  ir::Value sum_dy_xmu = reduce(ctx, g.binary(Op::kMul, dy, xmu), ch.rdims, false, Reducer::kAdd);
  auto weight = a.opt_tensor(4);
  const DType param =
      weight.has_value() && weight->defined() ? to_ir(weight->scalar_type()) : ch.out;
  const bool input_g = a.boolean(5), weight_g = a.boolean(6), bias_g = a.boolean(7);
  ir::Value grad_w = g.binary(Op::kMul, sum_dy_xmu, vec(ctx, ch, a.tensor(3), 1));
  return {input_g ? sum_dy : empty_output(ctx, ch.acc),
          input_g ? sum_dy_xmu : empty_output(ctx, ch.acc),
          weight_g ? g.convert(grad_w, param) : empty_output(ctx, param),
          bias_g ? g.convert(sum_dy, param) : empty_output(ctx, param)};
}

// batch_norm_backward_elemt(grad_out, input, mean, invstd, weight?, sum_dy,
//   sum_dy_xmu, count [R]) -> grad_input
ValueList backward_elemt(LoweringContext& ctx, const Args& a) {
  Channels ch = channels_of(a.tensor(1), "batch_norm_backward_elemt");
  auto& g = ctx.g();
  ir::Value dy = g.convert(ctx.tensor(a.tensor(0)), ch.acc);
  ir::Value x = g.convert(ctx.tensor(a.tensor(1)), ch.acc);
  ir::Value invstd = vec(ctx, ch, a.tensor(3), 1);
  const at::Tensor& count = a.tensor(7);
  ir::Value total = reduce(ctx, g.reshape(g.convert(ctx.tensor(count), ch.acc), {count.numel()}),
                           {0}, false, Reducer::kAdd);
  ir::Value n = g.broadcast_in_dim(total, {ch.c}, {});
  ir::Value dy_mean = g.binary(Op::kDiv, vec(ctx, ch, a.tensor(5), 0), n);
  ir::Value proj = g.binary(Op::kMul, g.binary(Op::kDiv, vec(ctx, ch, a.tensor(6), 0), n),
                            g.binary(Op::kMul, invstd, invstd));
  ir::Value xmu = g.binary(Op::kSub, x, per_channel(ctx, ch, vec(ctx, ch, a.tensor(2), 0)));
  ir::Value dx = g.binary(Op::kSub, g.binary(Op::kSub, dy, per_channel(ctx, ch, dy_mean)),
                          g.binary(Op::kMul, xmu, per_channel(ctx, ch, proj)));
  ir::Value scale = g.binary(Op::kMul, invstd, vec(ctx, ch, a.opt_tensor(4), 1));
  return {g.convert(g.binary(Op::kMul, dx, per_channel(ctx, ch, scale)), ch.out)};
}

RegisterLowering r_stats("batch_norm_stats", batch_norm_stats);
RegisterLowering r_gather_stats("batch_norm_gather_stats_with_counts", gather_stats);
RegisterLowering r_elemt("batch_norm_elemt", batch_norm_elemt);
RegisterLowering r_bwd_reduce("batch_norm_backward_reduce", backward_reduce);
RegisterLowering r_bwd_elemt("batch_norm_backward_elemt", backward_elemt);

}  // namespace
}  // namespace ttpu::aten
