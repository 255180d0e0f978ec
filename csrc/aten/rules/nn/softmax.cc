// Lowerings of softmax and log_softmax along one dim, and their backward ops.
// softmax.int / log_softmax.int are CompositeImplicitAutograd and reach these
// through _softmax / _log_softmax; autograd calls the _backward_data ops.
//
// Max-shifted (x - max(x)) so exp never overflows; bf16/f16 compute in f32.
// A row of all -inf gives NaN, as on CPU.
#include "aten/rules/reduce/reduce_util.h"

#include <limits>

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

// The output dtype of _softmax/_log_softmax(self, dim, half_to_float): f32
// for a half input with half_to_float (CUDA's fused cast; ATen's CPU kernel
// refuses it, a device may offer it), else the input's dtype.
DType softmax_dtype(const at::Tensor& self, int64_t dim, bool half_to_float, const char* name) {
  // ATen's dispatch error names the CPU kernel, which differs for the last dim.
  const bool last = self.dim() == 0 || dim == self.dim() - 1;
  // The CPU op returns an empty input before its dtype dispatch, so an empty
  // integer tensor passes (its empty result keeps the input's dtype).
  TORCH_CHECK_NOT_IMPLEMENTED(self.numel() == 0 || at::isFloatingType(self.scalar_type()), "\"",
                              name, last ? "_lastdim" : "", "_kernel_impl\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == at::kHalf, "conversion is supported for Half type only");
    return DType::kF32;
  }
  return to_ir(self.scalar_type());
}

// x - max(x) along `dim` (broadcast back), in the accumulate dtype.
ir::Value shifted(LoweringContext& ctx, const at::Tensor& self, int64_t dim) {
  auto& g = ctx.g();
  ir::Value x = g.convert(ctx.tensor(self), acc_dtype(to_ir(self.scalar_type())));
  ir::Value m = reduce(ctx, x, {dim}, /*keepdim=*/true, Reducer::kMax);
  return g.binary(Op::kSub, x, broadcast_to(ctx, m, dims(ctx, x)));
}

int64_t softmax_dim(const at::Tensor& t, int64_t dim) {
  return wrap_dim(dim, std::max<int64_t>(t.dim(), 1));
}

// The reduce helper leaves a 0-d value alone, so rank 0 reduces nothing.
std::vector<int64_t> dim_list(const at::Tensor& t, int64_t d) {
  return t.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d};
}

// _softmax(Tensor self, int dim, bool half_to_float)
ValueList softmax(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t dim = softmax_dim(self, a.integer(1));
  DType out = softmax_dtype(self, dim, a.boolean(2), "softmax");
  if (self.numel() == 0) return {ctx.g().convert(ctx.tensor(self), out)};
  auto& g = ctx.g();
  ir::Value e = g.unary(Op::kExp, shifted(ctx, self, dim));
  ir::Value s = sum_broadcast(ctx, e, dim_list(self, dim));
  return {g.convert(g.binary(Op::kDiv, e, s), out)};
}

// _safe_softmax(Tensor self, int dim, ScalarType? dtype): softmax, except
// that a row of all -inf gives zeros instead of NaN. Scaled dot-product
// attention's math path calls it on masked scores; ATen composes it of
// softmax, isneginf, all and where, four programs per shape in strict mode
// (per token, on a growing KV cache). One program here, ATen's result:
// self converted to `dtype` first (softmax.int), the -inf test on self.
ValueList safe_softmax(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t dim = softmax_dim(self, a.integer(1));
  const std::optional<c10::ScalarType> dtype = a.opt_dtype(2);
  const c10::ScalarType as = dtype.value_or(self.scalar_type());
  const bool last = self.dim() == 0 || dim == self.dim() - 1;
  TORCH_CHECK_NOT_IMPLEMENTED(self.numel() == 0 || at::isFloatingType(as), "\"softmax",
                              last ? "_lastdim" : "", "_kernel_impl\" not implemented for '",
                              c10::toString(as), "'");
  auto& g = ctx.g();
  const DType out = to_ir(as);
  ir::Value input = ctx.tensor(self);
  if (self.numel() == 0) return {g.convert(input, out)};
  const std::vector<int64_t> rdims = dim_list(self, dim);
  ir::Value x = g.convert(g.convert(input, out), acc_dtype(out));
  ir::Value m = reduce(ctx, x, rdims, /*keepdim=*/true, Reducer::kMax);
  ir::Value e = g.unary(Op::kExp, g.binary(Op::kSub, x, broadcast_to(ctx, m, dims(ctx, x))));
  ir::Value y = g.convert(g.binary(Op::kDiv, e, sum_broadcast(ctx, e, rdims)), out);
  if (!at::isFloatingType(self.scalar_type())) return {y};  // no -inf to test
  // All -inf along dim <=> max along dim is -inf (a NaN makes the max NaN,
  // and isneginf(NaN) is false).
  ir::Value self_max =
      self.scalar_type() == as ? m : reduce(ctx, input, rdims, true, Reducer::kMax);
  const ir::TensorType max_type = g.type(self_max);
  ir::Value masked = g.compare(ir::Cmp::kEQ, self_max,
                               g.constant(-std::numeric_limits<double>::infinity(), max_type));
  const std::vector<int64_t> shape = dims(ctx, y);
  return {g.select(broadcast_to(ctx, masked, shape), g.constant(0, {out, shape}), y)};
}

// _log_softmax(Tensor self, int dim, bool half_to_float): (x - m) - log(sum(exp(x - m))).
ValueList log_softmax(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  int64_t dim = softmax_dim(self, a.integer(1));
  DType out = softmax_dtype(self, dim, a.boolean(2), "log_softmax");
  if (self.numel() == 0) return {ctx.g().convert(ctx.tensor(self), out)};
  auto& g = ctx.g();
  ir::Value z = shifted(ctx, self, dim);
  ir::Value s = sum_broadcast(ctx, g.unary(Op::kExp, z), dim_list(self, dim));
  return {g.convert(g.binary(Op::kSub, z, g.unary(Op::kLog, s)), out)};
}

// The grad_input dtype of the _backward_data ops (ATen's meta function): the
// grad's dtype, except Half when a float grad flows back to a half input
// (the half_to_float forward).
DType backward_dtype(const at::Tensor& grad, c10::ScalarType input_dtype) {
  if (grad.scalar_type() == at::kFloat && input_dtype == at::kHalf) return DType::kF16;
  return to_ir(grad.scalar_type());
}

// The operands both softmax backwards share: grad_output and the forward's
// output in the accumulation dtype, the reduced dim, and the result dtype.
struct BackwardOperands {
  ir::Value grad, output;
  std::vector<int64_t> dims;
  DType out;
};

BackwardOperands backward_operands(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  int64_t dim = softmax_dim(grad, a.integer(2));
  DType acc = acc_dtype(to_ir(grad.scalar_type()));
  return {ctx.g().convert(ctx.tensor(grad), acc), ctx.g().convert(ctx.tensor(a.tensor(1)), acc),
          dim_list(grad, dim), backward_dtype(grad, a[3].toScalarType())};
}

// _softmax_backward_data(grad_output, output, dim, input_dtype):
// y * (g - sum(g * y)) along dim (the Jacobian-vector product of softmax).
ValueList softmax_backward(LoweringContext& ctx, const Args& a) {
  auto [gy, y, dims, out] = backward_operands(ctx, a);
  auto& g = ctx.g();
  ir::Value s = sum_broadcast(ctx, g.binary(Op::kMul, gy, y), dims);
  return {g.convert(g.binary(Op::kMul, y, g.binary(Op::kSub, gy, s)), out)};
}

// _log_softmax_backward_data(grad_output, output, dim, input_dtype):
// g - exp(y) * sum(g) along dim, y being log_softmax's output.
ValueList log_softmax_backward(LoweringContext& ctx, const Args& a) {
  auto [gy, y, dims, out] = backward_operands(ctx, a);
  auto& g = ctx.g();
  ir::Value s = sum_broadcast(ctx, gy, dims);
  return {g.convert(g.binary(Op::kSub, gy, g.binary(Op::kMul, g.unary(Op::kExp, y), s)), out)};
}

RegisterLowering r_softmax("_softmax", softmax);
RegisterLowering r_log_softmax("_log_softmax", log_softmax);
RegisterLowering r_safe_softmax("_safe_softmax", safe_softmax);
RegisterLowering r_softmax_bwd("_softmax_backward_data", softmax_backward);
RegisterLowering r_log_softmax_bwd("_log_softmax_backward_data", log_softmax_backward);

}  // namespace
}  // namespace ttpu::aten
