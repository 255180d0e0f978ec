// Lowerings of the multi-class margin losses and their backward ops:
// multi_margin_loss(+_backward) and multilabel_margin_loss_forward(+_backward).
// Semantics, checks and messages from ATen's CPU kernels (LossMultiMargin.cpp,
// LossMultiLabelMargin.cpp) and LossMulti.h's shape checks. Inputs are
// [N, C] matrices, or a [C] vector / a scalar as one sample; the per-sample
// loops of the kernels become masked reductions over [N, C] (and over
// [N, K, C] for multilabel's K target slots).
#include <ATen/native/LossMulti.h>

#include "aten/deferred_check.h"
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Reducer;
using ir::Value;

// at::Reduction values (the reduction argument).

// The kernels are instantiated for float and double only.
void check_float(const at::Tensor& t, const char* kernel) {
  const auto st = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(st == at::kFloat || st == at::kDouble, "\"", kernel,
                              "\" not implemented for '", st, "'");
}

// data_ptr<int64_t>()'s check on the target.
void check_long(const at::Tensor& target) {
  TORCH_CHECK(target.scalar_type() == at::kLong, "expected scalar type Long but found ",
              target.scalar_type());
}

// RuntimeError `message` unless every target value lies in [lo, hi). The values
// live on the device: the check is reported at the next host read
// (aten/deferred_check.h), at once in debug mode.
void check_target_range(LoweringContext& ctx, const at::Tensor& target, int64_t lo, int64_t hi,
                        std::string message) {
  const int64_t n = target.numel();
  if (n == 0) return;
  LoweringContext probe(ctx.op() + " (target range check)", ctx.device());
  auto& g = probe.g();
  const ir::TensorType t{DType::kI64, {n}};
  Value v = g.reshape(probe.tensor(target), {n});
  Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGE, v, g.constant_int(lo, t)),
                          g.compare(Cmp::kLT, v, g.constant_int(hi, t)));
  Value ok = reduce(probe, inside, {0}, false, Reducer::kAnd);
  auto checked = probe.run({g.reshape(g.convert(ok, DType::kI64), {1}), ok});
  check_device_values(checked[0], checked[1], [message](const at::Tensor& host) {
    TORCH_CHECK(host[0].item<int64_t>() == 1, message);
  });
}

// v * s for a scalar value s.
Value scale(LoweringContext& ctx, Value v, Value s) {
  return ctx.g().binary(Op::kMul, v, ctx.g().broadcast_in_dim(s, dims(ctx, v), {}));
}

// The backward's last step: grad [N, C] times the output gradient, per sample
// for an unreduced loss with a batch, else by the one value.
Value times_grad_output(LoweringContext& ctx, Value grad, const at::Tensor& grad_output,
                        int64_t reduction) {
  auto& g = ctx.g();
  Value go = g.convert(ctx.tensor(grad_output), dtype(ctx, grad));
  if (reduction == at::Reduction::None && grad_output.dim() > 0) {
    const auto shape = dims(ctx, grad);
    return g.binary(Op::kMul, grad, g.broadcast_in_dim(g.reshape(go, {shape[0]}), shape, {0}));
  }
  return scale(ctx, grad, g.reshape(go, {}));
}

// ------------------------------------------------------------------ multi_margin

struct MultiMargin {
  int64_t nframe = 0, dim = 0;
  Value x, onehot, active, z, weight;  // [N, C] each (weight: w[target] broadcast)
};

// The per-element terms of multi_margin_loss: z = margin - x[target] + x, active
// where z > 0 off the target column.
MultiMargin multi_margin_terms(LoweringContext& ctx, const at::Tensor& self,
                               const at::Tensor& target, const c10::Scalar& margin,
                               const std::optional<at::Tensor>& weight, int64_t nframe,
                               int64_t dim) {
  auto& g = ctx.g();
  const DType dt = to_ir(self.scalar_type());
  const std::vector<int64_t> shape{nframe, dim};
  MultiMargin m;
  m.nframe = nframe;
  m.dim = dim;
  m.x = g.reshape(ctx.tensor(self), shape);
  Value t = g.reshape(ctx.tensor(target), {nframe});
  m.onehot =
      g.compare(Cmp::kEQ, g.iota({DType::kI64, shape}, 1), g.broadcast_in_dim(t, shape, {0}));
  Value zeros = g.constant(0, {dt, shape});
  Value xt = reduce(ctx, g.select(m.onehot, m.x, zeros), {1}, false, Reducer::kAdd);
  Value base = g.binary(Op::kSub, g.broadcast_in_dim(ctx.scalar(margin, dt), {nframe}, {}), xt);
  m.z = g.binary(Op::kAdd, g.broadcast_in_dim(base, shape, {0}), m.x);
  m.active = g.binary(Op::kAnd, g.compare(Cmp::kGT, m.z, zeros), g.unary(Op::kNot, m.onehot));
  if (weight.has_value() && weight->defined()) {
    Value w = g.broadcast_in_dim(g.reshape(ctx.tensor(*weight), {dim}), shape, {1});
    Value wt = reduce(ctx, g.select(m.onehot, w, zeros), {1}, false, Reducer::kAdd);
    m.weight = g.broadcast_in_dim(wt, shape, {0});
  }
  return m;
}

// multi_margin_loss's checks (multi_margin_loss_cpu): {nframe, dim}.
std::pair<int64_t, int64_t> check_multi_margin(LoweringContext& ctx, const at::Tensor& self,
                                               const at::Tensor& target, const c10::Scalar& p,
                                               const std::optional<at::Tensor>& weight,
                                               const char* kernel) {
  const double pv = p.toDouble();
  TORCH_CHECK(pv == 1 || pv == 2, "only p == 1 and p == 2 supported");
  int64_t nframe = 0, dim = 0;
  at::native::multi_margin_loss_shape_check(nframe, dim, self.dim(), self, target, weight);
  if (self.numel() == 0) return {nframe, dim};
  check_float(self, kernel);
  check_long(target);
  check_target_range(ctx, target, 0, dim, "target out of range");
  return {nframe, dim};
}

// multi_margin_loss(self, target, p, margin, weight, reduction).
std::vector<Value> multi_margin_loss(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& target = a.tensor(1);
  const auto weight = a.opt_tensor(4);
  const int64_t reduction = a.integer(5);
  auto [nframe, dim] =
      check_multi_margin(ctx, self, target, a.scalar(2), weight, "multi_margin_loss_cpu_kernel");
  const DType dt = to_ir(self.scalar_type());
  std::vector<int64_t> out_shape;
  if (reduction == at::Reduction::None && target.dim() > 0) out_shape = {nframe};
  if (self.numel() == 0)
    return {g.constant(reduction == at::Reduction::Mean ? NAN : 0, {dt, out_shape})};
  MultiMargin m = multi_margin_terms(ctx, self, target, a.scalar(3), weight, nframe, dim);
  Value h = a.scalar(2).toDouble() == 1 ? m.z : g.binary(Op::kMul, m.z, m.z);
  if (m.weight.valid()) h = g.binary(Op::kMul, h, m.weight);
  h = g.select(m.active, h, g.constant(0, {dt, {nframe, dim}}));
  Value per = reduce(ctx, h, {1}, false, Reducer::kAdd);
  per = g.binary(Op::kDiv, per, g.constant(static_cast<double>(dim), {dt, {nframe}}));
  if (reduction == at::Reduction::None) return {g.reshape(per, out_shape)};
  Value sum = reduce(ctx, per, {0}, false, Reducer::kAdd);
  if (reduction == at::Reduction::Mean)
    sum = g.binary(Op::kDiv, sum, ctx.constant(static_cast<double>(nframe), dt));
  return {sum};
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight,
// reduction): d/dx[d] = h (p = 1: g, p = 2: 2 g z, times weight[target]) on
// the active elements, minus their sum at the target column, with g = 1 / dim
// (1 / (nframe * dim) for a mean).
std::vector<Value> multi_margin_loss_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  const at::Tensor& target = a.tensor(2);
  const auto weight = a.opt_tensor(5);
  const int64_t reduction = a.integer(6);
  auto [nframe, dim] = check_multi_margin(ctx, self, target, a.scalar(3), weight,
                                          "multi_margin_loss_backward_cpu_kernel");
  const DType dt = to_ir(self.scalar_type());
  if (self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  MultiMargin m = multi_margin_terms(ctx, self, target, a.scalar(4), weight, nframe, dim);
  const std::vector<int64_t> shape{nframe, dim};
  const double gv = reduction == at::Reduction::Mean ? 1. / static_cast<double>(nframe * dim)
                                                     : 1. / static_cast<double>(dim);
  Value gs = g.constant(gv, {dt, shape});
  Value h = gs;
  if (a.scalar(3).toDouble() != 1)
    h = g.binary(Op::kMul, g.binary(Op::kMul, g.constant(2, {dt, shape}), gs), m.z);
  if (m.weight.valid()) h = g.binary(Op::kMul, h, m.weight);
  Value zeros = g.constant(0, {dt, shape});
  h = g.select(m.active, h, zeros);
  Value total = g.broadcast_in_dim(reduce(ctx, h, {1}, false, Reducer::kAdd), shape, {0});
  Value grad = g.select(m.onehot, g.unary(Op::kNeg, total), h);
  grad = times_grad_output(ctx, grad, grad_output, reduction);
  return {g.reshape(grad, self.sizes().vec())};
}

// ------------------------------------------------------------- multilabel_margin

// The multilabel terms over [N, K, C]: slot k of a sample's target is valid
// until its first negative entry; is_target[n, d] marks the classes named by a
// valid slot; z = 1 - x[target_k] + x[d]; active where z > 0, the slot is
// valid and d is no target. `is_target` given: the backward's saved one.
struct Multilabel {
  Value onehot;     // [N, K, C]: valid slot k names class d
  Value is_target;  // [N, C] bool
  Value active, z;  // [N, K, C]
};

Multilabel multilabel_terms(LoweringContext& ctx, Value x, Value t, int64_t nframe, int64_t dim,
                            std::optional<Value> is_target) {
  auto& g = ctx.g();
  const DType dt = dtype(ctx, x);
  const std::vector<int64_t> nk{nframe, dim}, nkc{nframe, dim, dim};
  Value slot = g.iota({DType::kI64, nk}, 1);
  Value first_neg = reduce(ctx,
                           g.select(g.compare(Cmp::kLT, t, g.constant_int(0, {DType::kI64, nk})),
                                    slot, g.constant_int(dim, {DType::kI64, nk})),
                           {1}, false, Reducer::kMin);
  Value valid = g.compare(Cmp::kLT, slot, g.broadcast_in_dim(first_neg, nk, {0}));
  Multilabel m;
  m.onehot = g.binary(
      Op::kAnd,
      g.compare(Cmp::kEQ, g.broadcast_in_dim(t, nkc, {0, 1}), g.iota({DType::kI64, nkc}, 2)),
      g.broadcast_in_dim(valid, nkc, {0, 1}));
  m.is_target = is_target ? *is_target : reduce(ctx, m.onehot, {1}, false, Reducer::kOr);
  Value xc = g.broadcast_in_dim(x, nkc, {0, 2});
  Value zeros = g.constant(0, {dt, nkc});
  Value xt = reduce(ctx, g.select(m.onehot, xc, zeros), {2}, false, Reducer::kAdd);  // [N, K]
  Value base = g.binary(Op::kSub, g.constant(1, {dt, nk}), xt);
  m.z = g.binary(Op::kAdd, g.broadcast_in_dim(base, nkc, {0, 1}), xc);
  Value free = g.broadcast_in_dim(g.unary(Op::kNot, m.is_target), nkc, {0, 2});
  m.active = g.binary(Op::kAnd, g.binary(Op::kAnd, g.compare(Cmp::kGT, m.z, zeros), free),
                      g.broadcast_in_dim(valid, nkc, {0, 1}));
  return m;
}

// The forward template's checks: {nframe, dim}.
std::pair<int64_t, int64_t> check_multilabel(LoweringContext& ctx, const at::Tensor& self,
                                             const at::Tensor& target, const char* kernel) {
  int64_t nframe = 0, dim = 0;
  at::native::multilabel_margin_loss_shape_check(nframe, dim, self.dim(), self, target);
  if (self.numel() == 0) return {nframe, dim};
  check_long(target);
  check_target_range(ctx, target, -1, dim, "argument #2 'target' is out of range");
  check_float(self, kernel);
  return {nframe, dim};
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target).
std::vector<Value> multilabel_margin_loss(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& target = a.tensor(1);
  const int64_t reduction = a.integer(2);
  auto [nframe, dim] =
      check_multilabel(ctx, self, target, "multilabel_margin_loss_forward_out_frame");
  const DType dt = to_ir(self.scalar_type());
  std::vector<int64_t> out_shape;
  if (reduction == at::Reduction::None && self.dim() > 1) out_shape = {nframe};
  if (self.numel() == 0) {
    return {g.constant(reduction == at::Reduction::Mean ? NAN : 0, {dt, out_shape}),
            g.constant(0, {dt, target.sizes().vec()})};
  }
  Value x = g.reshape(ctx.tensor(self), {nframe, dim});
  Value t = g.reshape(ctx.tensor(target), {nframe, dim});
  Multilabel m = multilabel_terms(ctx, x, t, nframe, dim, std::nullopt);
  Value h = g.select(m.active, m.z, g.constant(0, {dt, {nframe, dim, dim}}));
  Value per = reduce(ctx, h, {1, 2}, false, Reducer::kAdd);
  per = g.binary(Op::kDiv, per, g.constant(static_cast<double>(dim), {dt, {nframe}}));
  Value is_target = g.reshape(g.convert(m.is_target, dt), target.sizes().vec());
  if (reduction == at::Reduction::None) return {g.reshape(per, out_shape), is_target};
  Value sum = reduce(ctx, per, {0}, false, Reducer::kAdd);
  if (reduction == at::Reduction::Mean)
    sum = g.binary(Op::kDiv, sum, ctx.constant(static_cast<double>(nframe), dt));
  return {sum, is_target};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction,
// is_target): each active (k, d) adds g at d and takes g from the target class
// of slot k, g = 1 / dim (1 / (nframe * dim) for a mean).
std::vector<Value> multilabel_margin_loss_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  const at::Tensor& target = a.tensor(2);
  const int64_t reduction = a.integer(3);
  const at::Tensor& is_target = a.tensor(4);
  auto [nframe, dim] =
      check_multilabel(ctx, self, target, "multilabel_margin_loss_backward_out_frame");
  TORCH_CHECK(is_target.sizes() == target.sizes(),
              "inconsistent is_target size: ", is_target.sizes(),
              " for target of size: ", target.sizes());
  const DType dt = to_ir(self.scalar_type());
  if (self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  Value x = g.reshape(ctx.tensor(self), {nframe, dim});
  Value t = g.reshape(ctx.tensor(target), {nframe, dim});
  Value saved = g.reshape(ctx.tensor(is_target), {nframe, dim});
  saved = g.compare(Cmp::kNE, saved, g.constant(0, {dtype(ctx, saved), {nframe, dim}}));
  Multilabel m = multilabel_terms(ctx, x, t, nframe, dim, saved);
  const double gv = reduction == at::Reduction::Mean ? 1. / static_cast<double>(nframe * dim)
                                                     : 1. / static_cast<double>(dim);
  const std::vector<int64_t> nkc{nframe, dim, dim};
  Value ones = g.select(m.active, g.constant(1, {dt, nkc}), g.constant(0, {dt, nkc}));
  Value plus = reduce(ctx, ones, {1}, false, Reducer::kAdd);  // [N, C]
  Value count =
      g.broadcast_in_dim(reduce(ctx, ones, {2}, false, Reducer::kAdd), nkc, {0, 1});  // per slot
  Value minus =
      reduce(ctx, g.select(m.onehot, count, g.constant(0, {dt, nkc})), {1}, false, Reducer::kAdd);
  Value grad =
      g.binary(Op::kMul, g.binary(Op::kSub, plus, minus), g.constant(gv, {dt, {nframe, dim}}));
  grad = times_grad_output(ctx, grad, grad_output, reduction);
  return {g.reshape(grad, self.sizes().vec())};
}

RegisterLowering kLossMarginRules[] = {
    {"multi_margin_loss", multi_margin_loss},
    {"multi_margin_loss_backward", multi_margin_loss_backward},
    {"multilabel_margin_loss_forward", multilabel_margin_loss},
    {"multilabel_margin_loss_backward", multilabel_margin_loss_backward},
};

}  // namespace
}  // namespace ttpu::aten
