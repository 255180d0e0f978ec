// Lowerings of layer norm and batch norm, forward and backward.
//
// layer_norm and batch_norm themselves are CompositeImplicitAutograd; on a
// PrivateUse1 device nn.LayerNorm reaches native_layer_norm and nn.BatchNorm*
// reaches native_batch_norm in both train and eval (checked on torch 2.13:
// batch_norm -> _batch_norm_impl_index -> native_batch_norm, as on CPU). The
// _native_batch_norm_legit* and _batch_norm_with/no_update ops are what
// torch.compile / export decompositions produce; they share the same code.
//
// Statistics use the biased variance with two passes (mean, then squared
// deviations) in f32 for bf16/f16 inputs. Formulas: ATen's
// aten/src/ATen/native/{layer_norm.cpp,Normalization.cpp} and the backward of
// y = (x - mean) * rstd * w + b, dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
// with g = dy * w and xhat = (x - mean) * rstd (Ioffe & Szegedy 2015, eq. in §3).
#include <sstream>

#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> r;
  for (int64_t d = from; d < to; ++d) r.push_back(d);
  return r;
}

// An optional per-feature tensor (weight, bias, running stats) in `dt`,
// broadcast to `shape` with its dims aligned from `first_dim` on.
ir::Value param_at(LoweringContext& ctx, const at::Tensor& p, DType dt,
                   const std::vector<int64_t>& shape, int64_t first_dim) {
  auto& g = ctx.g();
  ir::Value v = g.convert(ctx.tensor(p), dt);
  std::vector<int64_t> bdims;
  std::vector<int64_t> pshape;
  for (int64_t d = first_dim; d < first_dim + p.dim(); ++d) {
    bdims.push_back(d);
    pshape.push_back(shape[d]);
  }
  return g.broadcast_in_dim(g.reshape(v, pshape), shape, bdims);
}

// ---------------------------------------------------------------- layer norm

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd);
// mean and rstd have the input's leading dims and size 1 for each normalized
// dim, in the input's dtype (as ATen's CPU kernel returns them).
ValueList layer_norm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  std::vector<int64_t> ns = a.ints(1);
  auto weight = a.opt_tensor(2);
  auto bias = a.opt_tensor(3);
  const int64_t rank = input.dim();
  const int64_t axis = rank - static_cast<int64_t>(ns.size());
  // ATen's _check_layer_norm_inputs messages.
  TORCH_CHECK(!ns.empty(),
              "Expected normalized_shape to be at least 1-dimensional, i.e., "
              "containing at least one element, but got normalized_shape = ",
              c10::IntArrayRef(ns));
  TORCH_CHECK(!weight.has_value() || !weight->defined() || weight->sizes() == c10::IntArrayRef(ns),
              "Expected weight to be of same shape as normalized_shape, but got weight of shape ",
              weight->sizes(), " and normalized_shape = ", c10::IntArrayRef(ns));
  TORCH_CHECK(!bias.has_value() || !bias->defined() || bias->sizes() == c10::IntArrayRef(ns),
              "Expected bias to be of same shape as normalized_shape, but got bias of shape ",
              bias->sizes(), " and normalized_shape = ", c10::IntArrayRef(ns));
  bool matches = axis >= 0;
  for (size_t i = 0; matches && i < ns.size(); ++i) matches = input.size(axis + i) == ns[i];
  if (!matches) {
    std::ostringstream ss;
    ss << "Given normalized_shape=" << c10::IntArrayRef(ns) << ", expected input with shape [*";
    for (int64_t s : ns) ss << ", " << s;
    ss << "], but got input of size" << input.sizes();
    TORCH_CHECK(false, ss.str());
  }
  auto& g = ctx.g();
  DType out = to_ir(input.scalar_type());
  DType acc = acc_dtype(out);
  std::vector<int64_t> shape = input.sizes().vec();
  auto rdims = range(axis, rank);
  const double n = static_cast<double>(reduced_numel(shape, rdims));
  ir::Value x = g.convert(ctx.tensor(input), acc);
  // Statistics in the keepdim shape (what is returned), broadcast to use.
  auto mean_of = [&](ir::Value v) {
    ir::Value s = reduce(ctx, v, rdims, /*keepdim=*/true, Reducer::kAdd);
    return g.binary(Op::kDiv, s, full_like(ctx, s, n));
  };
  ir::Value mean = mean_of(x);
  ir::Value dev = g.binary(Op::kSub, x, broadcast_to(ctx, mean, shape));
  ir::Value var = mean_of(g.binary(Op::kMul, dev, dev));
  ir::Value eps = broadcast_to(ctx, ctx.scalar(a.scalar(4), acc), dims(ctx, var));
  ir::Value rstd = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, eps));
  ir::Value y = g.binary(Op::kMul, dev, broadcast_to(ctx, rstd, shape));
  if (weight.has_value() && weight->defined()) {
    y = g.binary(Op::kMul, y, param_at(ctx, *weight, acc, shape, axis));
  }
  if (bias.has_value() && bias->defined()) {
    y = g.binary(Op::kAdd, y, param_at(ctx, *bias, acc, shape, axis));
  }
  return {g.convert(y, out), g.convert(mean, out), g.convert(rstd, out)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
// weight?, bias?, output_mask) -> (grad_input, grad_weight, grad_bias).
ValueList layer_norm_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_out = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  std::vector<int64_t> ns = a.ints(2);
  auto weight = a.opt_tensor(5);
  auto bias = a.opt_tensor(6);
  std::vector<bool> mask;
  for (const auto& b : a[7].toBoolList()) mask.push_back(b);
  const bool has_weight = weight.has_value() && weight->defined();
  auto& g = ctx.g();
  DType out = to_ir(input.scalar_type());
  DType acc = acc_dtype(out);
  const int64_t rank = input.dim();
  const int64_t axis = rank - static_cast<int64_t>(ns.size());
  std::vector<int64_t> shape = input.sizes().vec();
  auto norm_dims = range(axis, rank);
  auto batch_dims = range(0, axis);
  ir::Value x = g.convert(ctx.tensor(input), acc);
  ir::Value dy = g.convert(ctx.tensor(grad_out), acc);
  ir::Value mean = broadcast_to(ctx, g.convert(ctx.tensor(a.tensor(3)), acc), shape);
  ir::Value rstd = broadcast_to(ctx, g.convert(ctx.tensor(a.tensor(4)), acc), shape);
  ir::Value xhat = g.binary(Op::kMul, g.binary(Op::kSub, x, mean), rstd);
  // Parameter gradients take the weight's dtype (f32 weights of a bf16 model stay f32).
  DType param_dt = has_weight                            ? to_ir(weight->scalar_type())
                   : bias.has_value() && bias->defined() ? to_ir(bias->scalar_type())
                                                         : out;
  ValueList r;
  if (mask[0]) {
    ir::Value gw =
        has_weight ? g.binary(Op::kMul, dy, param_at(ctx, *weight, acc, shape, axis)) : dy;
    ir::Value mean_g = mean_broadcast(ctx, gw, norm_dims);
    ir::Value mean_gx = mean_broadcast(ctx, g.binary(Op::kMul, gw, xhat), norm_dims);
    ir::Value inner =
        g.binary(Op::kSub, g.binary(Op::kSub, gw, mean_g), g.binary(Op::kMul, xhat, mean_gx));
    r.push_back(g.convert(g.binary(Op::kMul, rstd, inner), out));
  } else {
    r.push_back(empty_output(ctx, out));
  }
  if (mask[1]) {
    ir::Value gw = reduce(ctx, g.binary(Op::kMul, dy, xhat), batch_dims, false, Reducer::kAdd);
    r.push_back(g.convert(g.reshape(gw, ns), param_dt));
  } else {
    r.push_back(empty_output(ctx, param_dt));
  }
  if (mask[2]) {
    ir::Value gb = reduce(ctx, dy, batch_dims, false, Reducer::kAdd);
    r.push_back(g.convert(g.reshape(gb, ns), param_dt));
  } else {
    r.push_back(empty_output(ctx, param_dt));
  }
  return r;
}

// ---------------------------------------------------------------- batch norm

// The optional tensors of a batch norm call.
struct BatchNormParams {
  std::optional<at::Tensor> weight, bias, running_mean, running_var;
};

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// The dtype of save_mean/save_invstd: the parameters' dtype when they are
// wider than a bf16/f16 input (ATen's mixed-type batch norm), else the input's.
DType save_dtype(const at::Tensor& input, const BatchNormParams& p) {
  for (const auto* t : {&p.weight, &p.bias, &p.running_mean, &p.running_var}) {
    if (defined(*t)) return to_ir(t->value().scalar_type());
  }
  return to_ir(input.scalar_type());
}

void check_batch_norm(const at::Tensor& input, const BatchNormParams& p) {
  TORCH_CHECK_INDEX(input.dim() >= 2,
                    "Dimension out of range (expected to be in range of [-1, 0], "
                    "but got 1)");
  const int64_t c = input.size(1);
  const std::pair<const std::optional<at::Tensor>*, const char*> named[] = {
      {&p.weight, "weight"},
      {&p.bias, "bias"},
      {&p.running_mean, "running_mean"},
      {&p.running_var, "running_var"}};
  for (const auto& [t, name] : named) {
    TORCH_CHECK(!defined(*t) || (*t)->numel() == c, name, " should contain ", c, " elements not ",
                (*t)->numel());
  }
}

// Batch norm forward: (out, save_mean, save_invstd). Training normalises by
// the batch statistics over every dim but 1 and, when running stats are given,
// updates them in place as ATen does (batch_norm_cpu_update_stats_template):
//   running_mean = momentum * mean + (1 - momentum) * running_mean
//   running_var  = momentum * var * n / (n - 1) + (1 - momentum) * running_var
// Eval normalises by the running stats and returns empty save tensors.
// With `new_stats` (the functional variant) the updated running stats are
// returned there, in their own dtype and shape, instead of written.
ValueList batch_norm(LoweringContext& ctx, const at::Tensor& input, const BatchNormParams& p,
                     bool training, const c10::Scalar& momentum, const c10::Scalar& eps,
                     ValueList* new_stats = nullptr) {
  check_batch_norm(input, p);
  TORCH_CHECK(training || (defined(p.running_mean) && defined(p.running_var)),
              "running_mean and running_var must be defined in evaluation mode");
  auto& g = ctx.g();
  DType out = to_ir(input.scalar_type());
  DType sdt = save_dtype(input, p);
  DType acc = acc_dtype(out);
  std::vector<int64_t> shape = input.sizes().vec();
  std::vector<int64_t> rdims = range(0, input.dim());
  rdims.erase(rdims.begin() + 1);
  const int64_t c = input.size(1);
  ir::Value x = g.convert(ctx.tensor(input), acc);
  ir::Value eps_v = ctx.scalar(eps, acc);
  ir::Value mean, invstd;  // [C]
  if (training) {
    const double n = static_cast<double>(reduced_numel(shape, rdims));
    ir::Value mean_b = mean_broadcast(ctx, x, rdims);
    ir::Value dev = g.binary(Op::kSub, x, mean_b);
    ir::Value var_sum = reduce(ctx, g.binary(Op::kMul, dev, dev), rdims, false, Reducer::kAdd);
    ir::Value sum = reduce(ctx, x, rdims, false, Reducer::kAdd);
    mean = g.binary(Op::kDiv, sum, g.constant(n, {acc, {c}}));
    ir::Value var = g.binary(Op::kDiv, var_sum, g.constant(n, {acc, {c}}));
    invstd = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, broadcast_to(ctx, eps_v, {c})));
    if (defined(p.running_mean) && defined(p.running_var)) {
      ir::Value m = broadcast_to(ctx, ctx.scalar(momentum, acc), {c});
      ir::Value keep = g.binary(Op::kSub, g.constant(1, {acc, {c}}), m);
      auto update = [&](const at::Tensor& running, ir::Value batch) {
        ir::Value old = g.reshape(g.convert(ctx.tensor(running), acc), {c});
        ir::Value v =
            g.binary(Op::kAdd, g.binary(Op::kMul, m, batch), g.binary(Op::kMul, keep, old));
        v = g.reshape(v, running.sizes().vec());
        if (new_stats != nullptr) {
          new_stats->push_back(g.convert(v, to_ir(running.scalar_type())));
        } else {
          ctx.write(running, v);
        }
      };
      ir::Value unbiased = g.binary(Op::kDiv, var_sum, g.constant(n - 1, {acc, {c}}));
      update(*p.running_mean, mean);
      update(*p.running_var, unbiased);
    }
  } else {
    mean = g.reshape(g.convert(ctx.tensor(*p.running_mean), acc), {c});
    ir::Value var = g.reshape(g.convert(ctx.tensor(*p.running_var), acc), {c});
    invstd = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, broadcast_to(ctx, eps_v, {c})));
    if (new_stats != nullptr) {
      new_stats->push_back(ctx.tensor(*p.running_mean));
      new_stats->push_back(ctx.tensor(*p.running_var));
    }
  }
  auto per_channel = [&](ir::Value v) { return g.broadcast_in_dim(v, shape, {1}); };
  ir::Value y = g.binary(Op::kMul, g.binary(Op::kSub, x, per_channel(mean)), per_channel(invstd));
  if (defined(p.weight)) y = g.binary(Op::kMul, y, param_at(ctx, *p.weight, acc, shape, 1));
  if (defined(p.bias)) y = g.binary(Op::kAdd, y, param_at(ctx, *p.bias, acc, shape, 1));
  if (!training) return {g.convert(y, out), empty_output(ctx, sdt), empty_output(ctx, sdt)};
  return {g.convert(y, out), g.convert(mean, sdt), g.convert(invstd, sdt)};
}

// Batch norm backward: (grad_input, grad_weight, grad_bias). In training the
// statistics are the saved batch ones and flow into grad_input; in eval they
// are the running ones and constant.
ValueList batch_norm_backward(LoweringContext& ctx, const at::Tensor& grad_out,
                              const at::Tensor& input, const BatchNormParams& p,
                              const std::optional<at::Tensor>& save_mean,
                              const std::optional<at::Tensor>& save_invstd, bool training,
                              const c10::Scalar& eps, const std::vector<bool>& mask) {
  check_batch_norm(input, p);
  auto& g = ctx.g();
  DType out = to_ir(input.scalar_type());
  DType acc = acc_dtype(out);
  DType param_dt = defined(p.weight) ? to_ir(p.weight->scalar_type()) : save_dtype(input, p);
  std::vector<int64_t> shape = input.sizes().vec();
  std::vector<int64_t> rdims = range(0, input.dim());
  rdims.erase(rdims.begin() + 1);
  const int64_t c = input.size(1);
  ir::Value mean, invstd;  // [C]
  if (training) {
    TORCH_CHECK(defined(save_mean) && defined(save_invstd),
                "batch norm backward in training mode needs save_mean and save_invstd");
    mean = g.reshape(g.convert(ctx.tensor(*save_mean), acc), {c});
    invstd = g.reshape(g.convert(ctx.tensor(*save_invstd), acc), {c});
  } else {
    TORCH_CHECK(defined(p.running_mean) && defined(p.running_var),
                "batch norm backward in evaluation mode needs running_mean and running_var");
    mean = g.reshape(g.convert(ctx.tensor(*p.running_mean), acc), {c});
    ir::Value var = g.reshape(g.convert(ctx.tensor(*p.running_var), acc), {c});
    ir::Value eps_v = broadcast_to(ctx, ctx.scalar(eps, acc), {c});
    invstd = g.unary(Op::kRsqrt, g.binary(Op::kAdd, var, eps_v));
  }
  auto per_channel = [&](ir::Value v) { return g.broadcast_in_dim(v, shape, {1}); };
  ir::Value x = g.convert(ctx.tensor(input), acc);
  ir::Value dy = g.convert(ctx.tensor(grad_out), acc);
  ir::Value dev = g.binary(Op::kSub, x, per_channel(mean));
  ir::Value sum_dy = reduce(ctx, dy, rdims, false, Reducer::kAdd);                        // [C]
  ir::Value dot = reduce(ctx, g.binary(Op::kMul, dy, dev), rdims, false, Reducer::kAdd);  // [C]
  ValueList r;
  if (mask[0]) {
    ir::Value w = defined(p.weight) ? g.reshape(g.convert(ctx.tensor(*p.weight), acc), {c})
                                    : g.constant(1, {acc, {c}});
    ir::Value scale = per_channel(g.binary(Op::kMul, invstd, w));
    ir::Value dx;
    if (training) {
      // dx = (dy - mean(dy) - dev * invstd^2 * mean(dy * dev)) * invstd * w
      const double n = static_cast<double>(reduced_numel(shape, rdims));
      ir::Value nc = g.constant(n, {acc, {c}});
      ir::Value mean_dy = g.binary(Op::kDiv, sum_dy, nc);
      ir::Value proj =
          g.binary(Op::kMul, g.binary(Op::kDiv, dot, nc), g.binary(Op::kMul, invstd, invstd));
      dx = g.binary(Op::kSub, g.binary(Op::kSub, dy, per_channel(mean_dy)),
                    g.binary(Op::kMul, dev, per_channel(proj)));
      dx = g.binary(Op::kMul, dx, scale);
    } else {
      dx = g.binary(Op::kMul, dy, scale);
    }
    r.push_back(g.convert(dx, out));
  } else {
    r.push_back(empty_output(ctx, out));
  }
  r.push_back(mask[1] ? g.convert(g.binary(Op::kMul, dot, invstd), param_dt)
                      : empty_output(ctx, param_dt));
  r.push_back(mask[2] ? g.convert(sum_dy, param_dt) : empty_output(ctx, param_dt));
  return r;
}

std::vector<bool> bool_list(const c10::IValue& v) {
  std::vector<bool> r;
  for (const auto& b : v.toBoolList()) r.push_back(b);
  return r;
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
RegisterLowering r_native_batch_norm("native_batch_norm", [](LoweringContext& c, const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), a.opt_tensor(3), a.opt_tensor(4)};
  return batch_norm(c, a.tensor(0), p, a.boolean(5), a.scalar(6), a.scalar(7));
});
// _native_batch_norm_legit(input, weight?, bias?, running_mean!, running_var!, training,
//   momentum, eps)
RegisterLowering r_bn_legit("_native_batch_norm_legit", [](LoweringContext& c, const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), a.tensor(3), a.tensor(4)};
  return batch_norm(c, a.tensor(0), p, a.boolean(5), a.scalar(6), a.scalar(7));
});
// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)
RegisterLowering r_bn_legit_ns("_native_batch_norm_legit.no_stats", [](LoweringContext& c,
                                                                       const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), std::nullopt, std::nullopt};
  return batch_norm(c, a.tensor(0), p, a.boolean(3), a.scalar(4), a.scalar(5));
});
// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var,
//   momentum, eps)
RegisterLowering r_bn_legit_nt("_native_batch_norm_legit_no_training", [](LoweringContext& c,
                                                                          const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), a.tensor(3), a.tensor(4)};
  return batch_norm(c, a.tensor(0), p, false, a.scalar(5), a.scalar(6));
});
// _native_batch_norm_legit_functional(input, weight?, bias?, running_mean, running_var,
//   training, momentum, eps) -> (out, save_mean, save_invstd, running_mean_out, running_var_out):
// what functionalization (torch.compile) turns the in-place update into.
RegisterLowering r_bn_legit_fn("_native_batch_norm_legit_functional", [](LoweringContext& c,
                                                                         const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), a.tensor(3), a.tensor(4)};
  ValueList stats;
  auto r = batch_norm(c, a.tensor(0), p, a.boolean(5), a.scalar(6), a.scalar(7), &stats);
  r.insert(r.end(), stats.begin(), stats.end());
  return r;
});
// _batch_norm_with_update(input, weight?, bias?, running_mean!, running_var!, momentum, eps)
// -> (out, save_mean, save_invstd, reserve): reserve is an empty uint8 tensor
// off cuDNN/MIOpen.
RegisterLowering r_bn_update("_batch_norm_with_update", [](LoweringContext& c, const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), a.tensor(3), a.tensor(4)};
  auto r = batch_norm(c, a.tensor(0), p, true, a.scalar(5), a.scalar(6));
  r.push_back(empty_output(c, DType::kU8));
  return r;
});
// _batch_norm_no_update(input, weight?, bias?, running_mean?, running_var?, momentum, eps)
RegisterLowering r_bn_no_update("_batch_norm_no_update", [](LoweringContext& c, const Args& a) {
  BatchNormParams p{a.opt_tensor(1), a.opt_tensor(2), a.opt_tensor(3), a.opt_tensor(4)};
  auto r = batch_norm(c, a.tensor(0), p, false, a.scalar(5), a.scalar(6));
  r.push_back(empty_output(c, DType::kU8));
  return r;
});
// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?,
//   save_mean?, save_invstd?, train, eps, output_mask)
RegisterLowering r_bn_backward("native_batch_norm_backward", [](LoweringContext& c, const Args& a) {
  BatchNormParams p{a.opt_tensor(2), std::nullopt, a.opt_tensor(3), a.opt_tensor(4)};
  return batch_norm_backward(c, a.tensor(0), a.tensor(1), p, a.opt_tensor(5), a.opt_tensor(6),
                             a.boolean(7), a.scalar(8), bool_list(a[9]));
});
// batch_norm_backward(grad_out, input, weight, running_mean?, running_var?, save_mean?,
//   save_var?, update, eps, output_mask, reserve): `update` is training; save_var
// holds the inverse std, as _batch_norm_with_update returns it.
RegisterLowering r_bn_backward2("batch_norm_backward", [](LoweringContext& c, const Args& a) {
  BatchNormParams p{a.opt_tensor(2), std::nullopt, a.opt_tensor(3), a.opt_tensor(4)};
  return batch_norm_backward(c, a.tensor(0), a.tensor(1), p, a.opt_tensor(5), a.opt_tensor(6),
                             a.boolean(7), a.scalar(8), bool_list(a[9]));
});
RegisterLowering r_layer_norm("native_layer_norm", layer_norm);
RegisterLowering r_layer_norm_bwd("native_layer_norm_backward", layer_norm_backward);

}  // namespace
}  // namespace ttpu::aten
