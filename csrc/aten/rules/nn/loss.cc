// Lowerings of ATen's loss ops and their backward ops: nll_loss (1-d/2-d and
// the spatial nll_loss2d; cross_entropy is CompositeImplicitAutograd and
// reaches _log_softmax + these), mse_loss, huber_loss, smooth_l1_loss,
// binary_cross_entropy (+ with_logits).
//
// `reduction` is ATen's enum: 0 none, 1 mean, 2 sum. Formulas follow ATen's
// CPU kernels (aten/src/ATen/native/{Loss.cpp,LossNLL.cpp,LossNLL2d.cpp}).
// The target range check needs the target's values: it runs on the device and
// is reported at the next host read (aten/deferred_check.h). BCE's check that
// the input lies in [0, 1] is not made.
#include "aten/deferred_check.h"
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

std::vector<int64_t> all_dims(LoweringContext& ctx, ir::Value v) {
  std::vector<int64_t> r;
  for (size_t d = 0; d < dims(ctx, v).size(); ++d) r.push_back(static_cast<int64_t>(d));
  return r;
}

// A per-element loss reduced as `reduction` asks; the mean divides by the
// element count (NaN for an empty input, as on CPU).
ir::Value apply_reduction(LoweringContext& ctx, ir::Value loss, int64_t reduction) {
  if (reduction == at::Reduction::None) return loss;
  auto rdims = all_dims(ctx, loss);
  double n = static_cast<double>(reduced_numel(dims(ctx, loss), rdims));
  ir::Value s = reduce(ctx, loss, rdims, false, Reducer::kAdd);
  if (reduction == at::Reduction::Mean) s = ctx.g().binary(Op::kDiv, s, full_like(ctx, s, n));
  return s;
}

// ---------------------------------------------------------------- nll_loss

// Where each target's class sits in the input: input [N, C, d...] (class dim
// 1) or [C] (class dim 0), target the input's shape without the class dim.
struct NllLayout {
  std::vector<int64_t> shape;  // input sizes
  int64_t class_dim;
  std::vector<int64_t> target_dims;  // input dims the target's dims map to
};

NllLayout nll_layout(const at::Tensor& self) {
  NllLayout l{self.sizes().vec(), self.dim() == 1 ? 0 : 1, {}};
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != l.class_dim) l.target_dims.push_back(d);
  }
  return l;
}

// True where the input element is its row's target class.
ir::Value target_mask(LoweringContext& ctx, const NllLayout& l, ir::Value target) {
  auto& g = ctx.g();
  ir::Value classes = g.iota({DType::kI64, l.shape}, l.class_dim);
  return g.compare(ir::Cmp::kEQ, classes, g.broadcast_in_dim(target, l.shape, l.target_dims));
}

// The weight of each target's class, 0 where the target is ignore_index
// (target shape, accumulate dtype).
ir::Value target_weights(LoweringContext& ctx, const NllLayout& l, ir::Value target, ir::Value mask,
                         ir::Value valid, const std::optional<at::Tensor>& weight, DType acc) {
  auto& g = ctx.g();
  std::vector<int64_t> tshape = dims(ctx, target);
  ir::Value w = g.constant(1, {acc, tshape});
  if (weight.has_value() && weight->defined()) {
    ir::Value wv = g.convert(ctx.tensor(*weight), acc);
    ir::Value wb = g.broadcast_in_dim(wv, l.shape, {l.class_dim});
    w = reduce(ctx, g.select(mask, wb, full_like(ctx, wb, 0)), {l.class_dim}, false, Reducer::kAdd);
  }
  return g.select(valid, w, full_like(ctx, w, 0));
}

void check_nll_target(const at::Tensor& target) {
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ",
              c10::toString(target.scalar_type()));
}

void check_nll_weight(const std::optional<at::Tensor>& weight, int64_t n_classes) {
  TORCH_CHECK(!weight.has_value() || !weight->defined() ||
                  (weight->dim() == 1 && weight->numel() == n_classes),
              "weight tensor should be defined either for all ", n_classes,
              " classes or no classes but got weight tensor of shape: ", weight->sizes());
}

// ATen's target check: every target that is not ignore_index lies in
// [0, n_classes), else IndexError "Target t is out of bounds." naming the first
// bad one in order. The values live on the device: the check is reported at
// the next host read (aten/deferred_check.h).
void check_nll_target_values(LoweringContext& ctx, const at::Tensor& target, int64_t n_classes,
                             const c10::Scalar& ignore_index) {
  const int64_t n = target.numel();
  if (n == 0) return;
  LoweringContext probe(ctx.op() + " (target range check)", ctx.device());
  auto& g = probe.g();
  const ir::TensorType t{DType::kI64, {n}};
  ir::Value v = g.reshape(g.convert(probe.tensor(target), DType::kI64), {n});
  ir::Value ignored =
      g.compare(ir::Cmp::kEQ, v, broadcast_to(probe, probe.scalar(ignore_index, DType::kI64), {n}));
  ir::Value out = g.binary(Op::kOr, g.compare(ir::Cmp::kLT, v, g.constant_int(0, t)),
                           g.compare(ir::Cmp::kGE, v, g.constant_int(n_classes, t)));
  ir::Value bad = g.binary(Op::kAnd, out, g.unary(Op::kNot, ignored));
  ir::Value iota = g.iota(t, 0);
  ir::Value first =
      reduce(probe, g.select(bad, iota, g.constant_int(n, t)), {0}, false, Reducer::kMin);
  ir::Value at_first = g.compare(ir::Cmp::kEQ, iota, g.broadcast_in_dim(first, {n}, {}));
  ir::Value value =
      reduce(probe, g.select(at_first, v, g.constant_int(0, t)), {0}, false, Reducer::kAdd);
  ir::Value found =
      g.convert(g.compare(ir::Cmp::kLT, first, g.constant_int(n, {DType::kI64, {}})), DType::kI64);
  ir::Value flags = g.concatenate({g.reshape(found, {1}), g.reshape(value, {1})}, 0);
  ir::Value ok = g.compare(ir::Cmp::kEQ, first, g.constant_int(n, {DType::kI64, {}}));
  auto checked = probe.run({flags, ok});
  check_device_values(checked[0], checked[1], [](const at::Tensor& host) {
    TORCH_CHECK_INDEX(host[0].item<int64_t>() == 0, "Target ", host[1].item<int64_t>(),
                      " is out of bounds.");
  });
}

// ATen's shape checks of nll_loss_forward (LossNLL.cpp meta) and
// nll_loss2d_forward (LossNLL2d.cpp check_inputs_nll_loss2d).
void check_nll_shapes(const at::Tensor& self, const at::Tensor& target, bool spatial) {
  if (spatial) {
    TORCH_CHECK(target.dim() == 3,
                "only batches of spatial targets supported (3D tensors) but "
                "got targets of dimension: ",
                target.dim());
    TORCH_CHECK(self.dim() == 4,
                "only batches of spatial inputs supported (4D tensors), but got "
                "input of dimension: ",
                self.dim());
    TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
                    self.size(3) == target.size(2),
                "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes());
    return;
  }
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  bool no_batch_dim = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch_dim || self.size(0) == target.size(0),
              "size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction,
// ignore_index) -> (output, total_weight). output = -w[t] * self[.., t, ..];
// total_weight = sum of w[t] over non-ignored targets (0 for reduction none).
ValueList nll_forward(LoweringContext& ctx, const Args& a, bool spatial) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& target = a.tensor(1);
  auto weight = a.opt_tensor(2);
  const int64_t reduction = a.integer(3);
  check_nll_shapes(self, target, spatial);
  check_nll_weight(weight, self.size(self.dim() == 1 ? 0 : 1));
  check_nll_target(target);
  check_nll_target_values(ctx, target, self.size(self.dim() == 1 ? 0 : 1), a.scalar(4));
  auto& g = ctx.g();
  DType out = to_ir(self.scalar_type());
  DType acc = acc_dtype(out);
  NllLayout l = nll_layout(self);
  ir::Value x = g.convert(ctx.tensor(self), acc);
  ir::Value t = g.convert(ctx.tensor(target), DType::kI64);
  ir::Value mask = target_mask(ctx, l, t);
  ir::Value ignore = broadcast_to(ctx, ctx.scalar(a.scalar(4), DType::kI64), dims(ctx, t));
  ir::Value valid = g.compare(ir::Cmp::kNE, t, ignore);
  ir::Value w = target_weights(ctx, l, t, mask, valid, weight, acc);
  ir::Value picked =
      reduce(ctx, g.select(mask, x, full_like(ctx, x, 0)), {l.class_dim}, false, Reducer::kAdd);
  // select, not multiply: an ignored -inf input must give 0, not NaN.
  ir::Value loss =
      g.select(valid, g.binary(Op::kMul, g.unary(Op::kNeg, picked), w), full_like(ctx, w, 0));
  if (reduction == at::Reduction::None) return {g.convert(loss, out), g.constant(0, {out, {}})};
  auto tdims = all_dims(ctx, loss);
  ir::Value total = reduce(ctx, w, tdims, false, Reducer::kAdd);
  ir::Value r = reduce(ctx, loss, tdims, false, Reducer::kAdd);
  // All targets ignored: 0 / 0 = NaN, as on CPU.
  if (reduction == at::Reduction::Mean) r = g.binary(Op::kDiv, r, total);
  return {g.convert(r, out), g.convert(total, out)};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?,
// reduction, ignore_index, total_weight) -> grad_input (self's shape):
// -w[t] * grad (/ total_weight for mean) at each target's class, 0 elsewhere.
ValueList nll_backward(LoweringContext& ctx, const Args& a, bool spatial) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  const at::Tensor& target = a.tensor(2);
  auto weight = a.opt_tensor(3);
  const int64_t reduction = a.integer(4);
  check_nll_shapes(self, target, spatial);
  check_nll_weight(weight, self.size(self.dim() == 1 ? 0 : 1));
  check_nll_target(target);
  if (reduction == at::Reduction::None) {
    TORCH_CHECK(grad_output.sizes() == target.sizes(), "Expected a tensor of shape ",
                target.sizes(), " but got: ", grad_output.sizes());
  } else {
    TORCH_CHECK(grad_output.numel() == 1,
                "Expected a single element grad_output tensor, but got: ", grad_output.sizes());
  }
  auto& g = ctx.g();
  DType out = to_ir(self.scalar_type());
  DType acc = acc_dtype(out);
  NllLayout l = nll_layout(self);
  ir::Value t = g.convert(ctx.tensor(target), DType::kI64);
  std::vector<int64_t> tshape = dims(ctx, t);
  ir::Value mask = target_mask(ctx, l, t);
  ir::Value ignore = broadcast_to(ctx, ctx.scalar(a.scalar(5), DType::kI64), tshape);
  ir::Value valid = g.compare(ir::Cmp::kNE, t, ignore);
  ir::Value w = target_weights(ctx, l, t, mask, valid, weight, acc);
  ir::Value gy = g.convert(ctx.tensor(grad_output), acc);
  gy = g.reshape(gy, reduction == at::Reduction::None ? tshape : std::vector<int64_t>{});
  gy = broadcast_to(ctx, gy, tshape);
  if (reduction == at::Reduction::Mean) {
    ir::Value total = g.reshape(g.convert(ctx.tensor(a.tensor(6)), acc), {});
    gy = g.binary(Op::kDiv, gy, broadcast_to(ctx, total, tshape));
  }
  ir::Value coef =
      g.select(valid, g.unary(Op::kNeg, g.binary(Op::kMul, w, gy)), full_like(ctx, w, 0));
  ir::Value spread = g.broadcast_in_dim(coef, l.shape, l.target_dims);
  return {g.convert(g.select(mask, spread, full_like(ctx, spread, 0)), out)};
}

// ---------------------------------------------------------------- pointwise losses

// self and target promoted to one floating dtype and broadcast; `name` is the
// CPU kernel's name in ATen's dtype error.
std::pair<ir::Value, ir::Value> loss_operands(LoweringContext& ctx, const Args& a, size_t first,
                                              const char* name, DType* out) {
  c10::ScalarType st = result_type(a[first], a[first + 1]);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"", name, "\" not implemented for '",
                              c10::toString(st), "'");
  *out = to_ir(st);
  DType acc = acc_dtype(*out);
  return broadcast_pair(ctx, operand(ctx, a[first], acc), operand(ctx, a[first + 1], acc));
}

// The gradient's scale: grad_output broadcast to the input's shape, divided
// by the element count for the mean reduction.
ir::Value grad_scale(LoweringContext& ctx, const at::Tensor& grad_output, int64_t reduction,
                     const std::vector<int64_t>& shape, DType acc, int64_t numel) {
  auto& g = ctx.g();
  ir::Value gy = broadcast_to(ctx, g.convert(ctx.tensor(grad_output), acc), shape);
  if (reduction == at::Reduction::Mean) {
    gy = g.binary(Op::kDiv, gy, full_like(ctx, gy, static_cast<double>(numel)));
  }
  return gy;
}

// mse_loss(self, target, reduction): (self - target)^2.
ValueList mse_loss(LoweringContext& ctx, const Args& a) {
  DType out;
  auto [x, t] = loss_operands(ctx, a, 0, "mse_cpu", &out);
  auto& g = ctx.g();
  ir::Value d = g.binary(Op::kSub, x, t);
  return {g.convert(apply_reduction(ctx, g.binary(Op::kMul, d, d), a.integer(2)), out)};
}

// mse_loss_backward(grad_output, self, target, reduction): 2 * (self - target) * grad
// (/ self.numel() for mean, ATen's mse_loss_backward_out).
ValueList mse_loss_backward(LoweringContext& ctx, const Args& a) {
  DType out;
  auto [x, t] = loss_operands(ctx, a, 1, "mse_backward_cpu", &out);
  auto& g = ctx.g();
  ir::Value d = g.binary(Op::kSub, x, t);
  ir::Value gy =
      grad_scale(ctx, a.tensor(0), a.integer(3), dims(ctx, d), dtype(ctx, d), a.tensor(1).numel());
  return {g.convert(g.binary(Op::kMul, g.binary(Op::kMul, d, full_like(ctx, d, 2)), gy), out)};
}

// huber_loss(self, target, reduction, delta) and smooth_l1_loss(self, target,
// reduction, beta) with d = self - target:
//   huber:     |d| < delta ? 0.5 d^2 : delta (|d| - 0.5 delta)
//   smooth_l1: |d| < beta  ? 0.5 d^2 / beta : |d| - 0.5 beta   (beta 0: |d|)
ValueList huber_like(LoweringContext& ctx, const Args& a, bool huber) {
  double k = a.real(3);
  if (huber) {
    TORCH_CHECK(k > 0, "huber_loss does not support non-positive values for delta.");
  } else {
    TORCH_CHECK(k >= 0, "smooth_l1_loss does not support negative values for beta.");
  }
  DType out;
  auto [x, t] = loss_operands(ctx, a, 0, huber ? "huber_cpu" : "smooth_l1_cpu", &out);
  auto& g = ctx.g();
  ir::Value d = g.binary(Op::kSub, x, t);
  ir::Value ad = g.unary(Op::kAbs, d);
  ir::Value kv = broadcast_to(ctx, ctx.scalar(c10::Scalar(k), dtype(ctx, d)), dims(ctx, d));
  ir::Value half = full_like(ctx, d, 0.5);
  ir::Value quad = g.binary(Op::kMul, half, g.binary(Op::kMul, d, d));
  ir::Value lin = g.binary(Op::kSub, ad, g.binary(Op::kMul, half, kv));
  if (huber) {
    lin = g.binary(Op::kMul, kv, lin);
  } else {
    quad = g.binary(Op::kDiv, quad, kv);
  }
  // |d| < 0 never holds, so beta = 0 takes the linear branch (no 0/0 chosen).
  ir::Value loss = g.select(g.compare(ir::Cmp::kLT, ad, kv), quad, lin);
  return {g.convert(apply_reduction(ctx, loss, a.integer(2)), out)};
}

// huber_loss_backward / smooth_l1_loss_backward(grad_output, self, target, reduction, k):
// the derivative clamped to [-delta, delta] (huber) or d / beta clamped to [-1, 1].
ValueList huber_like_backward(LoweringContext& ctx, const Args& a, bool huber) {
  double k = a.real(4);
  DType out;
  auto [x, t] =
      loss_operands(ctx, a, 1, huber ? "huber_backward_cpu" : "smooth_l1_backward_cpu", &out);
  auto& g = ctx.g();
  ir::Value d = g.binary(Op::kSub, x, t);
  ir::Value kv = broadcast_to(ctx, ctx.scalar(c10::Scalar(k), dtype(ctx, d)), dims(ctx, d));
  ir::Value one = full_like(ctx, d, 1);
  ir::Value hi = huber ? kv : one;
  ir::Value lo = g.unary(Op::kNeg, hi);
  ir::Value mid = huber ? d : g.binary(Op::kDiv, d, kv);
  ir::Value deriv = g.select(g.compare(ir::Cmp::kLT, d, g.unary(Op::kNeg, kv)), lo,
                             g.select(g.compare(ir::Cmp::kGT, d, kv), hi, mid));
  if (!huber) {
    // beta = 0 is the L1 loss: sign(d) (ATen's smooth_l1_backward_cpu_kernel).
    ir::Value zero_beta = g.compare(ir::Cmp::kEQ, kv, full_like(ctx, kv, 0));
    deriv = g.select(zero_beta, g.unary(Op::kSign, d), deriv);
  }
  ir::Value gy =
      grad_scale(ctx, a.tensor(0), a.integer(3), dims(ctx, d), dtype(ctx, d), a.tensor(1).numel());
  return {g.convert(g.binary(Op::kMul, deriv, gy), out)};
}

// binary_cross_entropy(self, target, weight?, reduction):
// -w (t log(x) + (1 - t) log(1 - x)), each log clamped at -100 (ATen's choice,
// so x = 0 or 1 gives a finite loss).
ValueList bce(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"binary_cross_entropy\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(a.tensor(1).scalar_type() == self.scalar_type(), "Found dtype ",
              a.tensor(1).scalar_type(), " but expected ", self.scalar_type());
  auto& g = ctx.g();
  DType out = to_ir(self.scalar_type());
  DType acc = acc_dtype(out);
  std::vector<int64_t> shape = self.sizes().vec();
  ir::Value x = g.convert(ctx.tensor(self), acc);
  ir::Value t = broadcast_to(ctx, g.convert(ctx.tensor(a.tensor(1)), acc), shape);
  ir::Value floor = full_like(ctx, x, -100);
  ir::Value one = full_like(ctx, x, 1);
  ir::Value log_x = g.binary(Op::kMax, g.unary(Op::kLog, x), floor);
  ir::Value log_1mx = g.binary(Op::kMax, g.unary(Op::kLog, g.binary(Op::kSub, one, x)), floor);
  ir::Value loss = g.binary(Op::kAdd, g.binary(Op::kMul, t, log_x),
                            g.binary(Op::kMul, g.binary(Op::kSub, one, t), log_1mx));
  loss = g.unary(Op::kNeg, loss);
  if (auto w = a.opt_tensor(2); w.has_value() && w->defined()) {
    loss = g.binary(Op::kMul, loss, broadcast_to(ctx, g.convert(ctx.tensor(*w), acc), shape));
  }
  return {g.convert(apply_reduction(ctx, loss, a.integer(3)), out)};
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction):
// w (x - t) / max(x (1 - x), 1e-12) * grad (ATen's EPSILON keeps x = 0, 1 finite).
ValueList bce_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(1);
  auto& g = ctx.g();
  DType out = to_ir(self.scalar_type());
  DType acc = acc_dtype(out);
  std::vector<int64_t> shape = self.sizes().vec();
  ir::Value x = g.convert(ctx.tensor(self), acc);
  ir::Value t = broadcast_to(ctx, g.convert(ctx.tensor(a.tensor(2)), acc), shape);
  ir::Value denom = g.binary(Op::kMul, x, g.binary(Op::kSub, full_like(ctx, x, 1), x));
  denom = g.binary(Op::kMax, denom, full_like(ctx, x, 1e-12));
  ir::Value grad = g.binary(Op::kDiv, g.binary(Op::kSub, x, t), denom);
  if (auto w = a.opt_tensor(3); w.has_value() && w->defined()) {
    grad = g.binary(Op::kMul, grad, broadcast_to(ctx, g.convert(ctx.tensor(*w), acc), shape));
  }
  ir::Value gy = grad_scale(ctx, a.tensor(0), a.integer(4), shape, acc, self.numel());
  return {g.convert(g.binary(Op::kMul, grad, gy), out)};
}

// binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction):
// (1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0)), ATen's stable
// form of -[pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))].
ValueList bce_with_logits(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  // ATen's error names the log_sigmoid kernel its formula calls.
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"log_sigmoid_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  auto& g = ctx.g();
  DType out = to_ir(self.scalar_type());
  DType acc = acc_dtype(out);
  ir::Value x = g.convert(ctx.tensor(self), acc);
  ir::Value t = g.convert(ctx.tensor(a.tensor(1)), acc);
  std::tie(x, t) = broadcast_pair(ctx, x, t);
  std::vector<int64_t> shape = dims(ctx, x);
  ir::Value one = full_like(ctx, x, 1);
  ir::Value neg_x = g.unary(Op::kNeg, x);
  // softplus(-x) = log(1 + exp(-x)), written so exp never overflows.
  ir::Value tail = g.unary(Op::kLog1p, g.unary(Op::kExp, g.unary(Op::kNeg, g.unary(Op::kAbs, x))));
  ir::Value softplus = g.binary(Op::kAdd, tail, g.binary(Op::kMax, neg_x, full_like(ctx, x, 0)));
  ir::Value coef = one;
  if (auto pw = a.opt_tensor(3); pw.has_value() && pw->defined()) {
    ir::Value p = broadcast_to(ctx, g.convert(ctx.tensor(*pw), acc), shape);
    coef = g.binary(Op::kAdd, one, g.binary(Op::kMul, g.binary(Op::kSub, p, one), t));
  }
  ir::Value loss = g.binary(Op::kAdd, g.binary(Op::kMul, g.binary(Op::kSub, one, t), x),
                            g.binary(Op::kMul, coef, softplus));
  if (auto w = a.opt_tensor(2); w.has_value() && w->defined()) {
    loss = g.binary(Op::kMul, loss, broadcast_to(ctx, g.convert(ctx.tensor(*w), acc), shape));
  }
  return {g.convert(apply_reduction(ctx, loss, a.integer(4)), out)};
}

RegisterLowering r_nll("nll_loss_forward",
                       [](LoweringContext& c, const Args& a) { return nll_forward(c, a, false); });
RegisterLowering r_nll_bwd("nll_loss_backward", [](LoweringContext& c, const Args& a) {
  return nll_backward(c, a, false);
});
RegisterLowering r_nll2d("nll_loss2d_forward",
                         [](LoweringContext& c, const Args& a) { return nll_forward(c, a, true); });
RegisterLowering r_nll2d_bwd("nll_loss2d_backward", [](LoweringContext& c, const Args& a) {
  return nll_backward(c, a, true);
});
RegisterLowering r_mse("mse_loss", mse_loss);
RegisterLowering r_mse_bwd("mse_loss_backward", mse_loss_backward);
RegisterLowering r_huber("huber_loss",
                         [](LoweringContext& c, const Args& a) { return huber_like(c, a, true); });
RegisterLowering r_huber_bwd("huber_loss_backward", [](LoweringContext& c, const Args& a) {
  return huber_like_backward(c, a, true);
});
RegisterLowering r_smooth_l1("smooth_l1_loss", [](LoweringContext& c, const Args& a) {
  return huber_like(c, a, false);
});
RegisterLowering r_smooth_l1_bwd("smooth_l1_loss_backward", [](LoweringContext& c, const Args& a) {
  return huber_like_backward(c, a, false);
});
RegisterLowering r_bce("binary_cross_entropy", bce);
RegisterLowering r_bce_bwd("binary_cross_entropy_backward", bce_backward);
RegisterLowering r_bce_logits("binary_cross_entropy_with_logits", bce_with_logits);

}  // namespace
}  // namespace ttpu::aten
