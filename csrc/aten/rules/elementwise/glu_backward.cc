// Lowering of glu_backward (the forward, glu, is in binary_math.cc). With
// glu(x) = a * sigmoid(b) for the halves a, b of x along dim, the gradient is
// sigmoid(b) * g for a and (1 - sigmoid(b)) * sigmoid(b) * a * g for b, the CPU
// kernel's formula (aten/src/ATen/native/cpu/GluKernel.cpp), computed in f32
// for 16-bit floats as its opmath type is.
#include <ATen/ExpandUtils.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;

// glu_backward(grad_output, self, dim).
std::vector<Value> glu_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  TORCH_CHECK(self.dim() > 0, "glu does not support 0-dimensional tensors");
  const int64_t dim = wrap_dim(a.integer(2), self.dim());
  const int64_t n = self.size(dim);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", dim, " is size ", n);
  std::vector<int64_t> half = self.sizes().vec();
  half[dim] = n / 2;
  // CPU's TensorIterator broadcasts grad_output against a half.
  const auto common = at::infer_size(half, grad_output.sizes());
  TORCH_CHECK(common == half, "glu_backward: grad_output of size ", grad_output.sizes(),
              " broadcasts beyond the halves' size ", c10::IntArrayRef(half));
  const auto st = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(st), "result type Float can't be cast to the desired output type ",
              st);
  const DType dt = to_ir(st), acc = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  if (self.numel() == 0) return {g.constant(0, {dt, self.sizes().vec()})};
  Value x = g.convert(ctx.tensor(self), acc);
  Value go = broadcast_to(ctx, g.convert(ctx.tensor(grad_output), acc), half);
  const auto shape = self.sizes().vec();
  std::vector<int64_t> zeros(shape.size(), 0), strides(shape.size(), 1), start(shape.size(), 0);
  start[dim] = n / 2;
  Value first = g.slice(x, zeros, half, strides);
  Value second = g.slice(x, start, shape, strides);
  Value sig = g.unary(Op::kLogistic, second);
  Value grad_a = g.binary(Op::kMul, sig, go);
  Value one = g.constant(1, {acc, half});
  Value grad_b = g.binary(
      Op::kMul, g.binary(Op::kMul, g.binary(Op::kMul, g.binary(Op::kSub, one, sig), sig), first),
      go);
  return {g.convert(g.concatenate({grad_a, grad_b}, dim), dt)};
}

RegisterLowering kGluBackwardRules[] = {
    {"glu_backward", glu_backward},
};

}  // namespace
}  // namespace ttpu::aten
