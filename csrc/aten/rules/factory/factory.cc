// Lowerings of the factory ops whose values are computed on the device: arange,
// linspace, eye. ATen reaches the backend only through their out= overloads
// (arange(...) is a composite that allocates and calls arange.start_out), so
// these are out-only rules: they size `out` themselves and write it.
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;

// The dtype values are computed in before the cast to `out`'s dtype: int64 for
// integers (ATen's accumulate type on CPU); f32 for f16/bf16 (also ATen's); the
// dtype itself for f32/f64. ATen's CPU kernel computes f32 ranges in double:
// staying in f32 keeps the program runnable on TPUs (no f64) at the cost of an
// ulp here and there.
DType compute_dtype(c10::ScalarType st) {
  if (c10::isIntegralType(st, /*includeBool=*/true)) return DType::kI64;
  if (st == at::kDouble) return DType::kF64;
  return DType::kF32;
}

// arange.start_out(start, end, step, *, out): start + step * i for i in
// [0, size), size = ceil((end - start) / step). Checks and size follow ATen's
// arange_out (aten/src/ATen/native/RangeFactories.cpp).
std::vector<ir::Value> arange_out(LoweringContext& ctx, const Args& a) {
  const c10::Scalar start = a.scalar(0), end = a.scalar(1), step = a.scalar(2);
  const at::Tensor& out = a.tensor(3);
  const c10::ScalarType st = out.scalar_type();
  TORCH_CHECK(st != at::kBool, "\"arange_cpu\" not implemented for 'Bool'");
  const DType acc = compute_dtype(st);
  int64_t size = 0;
  if (acc == DType::kI64) {
    // Integer outputs: the bounds and step are truncated to int64 first.
    const int64_t xstart = start.to<int64_t>(), xend = end.to<int64_t>();
    const int64_t xstep = step.to<int64_t>();
    TORCH_CHECK(xstep != 0, "step must be nonzero");
    TORCH_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart),
                "upper bound and lower bound inconsistent with step sign");
    const int64_t sgn = xstep > 0 ? 1 : -1;
    size = (xend - xstart + xstep - sgn) / xstep;
  } else {
    const double xstart = start.to<double>(), xend = end.to<double>(), xstep = step.to<double>();
    TORCH_CHECK(xstep > 0 || xstep < 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(xstart) && std::isfinite(xend), "unsupported range: ", xstart, " -> ",
                xend);
    TORCH_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart),
                "upper bound and lower bound inconsistent with step sign");
    const double size_d = std::ceil((xend - xstart) / xstep);
    TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
                "invalid size, possible overflow?");
    size = static_cast<int64_t>(size_d);
  }
  if (out.numel() != size && out.numel() > 0) {
    TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
               out.numel(), " which does not match the computed number of elements ", size,
               ". Note that this may occur as a result of rounding error. The out tensor will "
               "be resized to a tensor of shape (",
               size, ",).");
  }
  resize_range_out(out, size);
  if (size == 0) return {};
  auto& g = ctx.g();
  const ir::TensorType t{acc, {size}};
  ir::Value i = g.iota(t, 0);
  ir::Value vstep = broadcast_to(ctx, ctx.scalar(step, acc), {size});
  ir::Value v = g.binary(ir::Op::kAdd, broadcast_to(ctx, ctx.scalar(start, acc), {size}),
                         g.binary(ir::Op::kMul, i, vstep));
  write_range(ctx, out, v);
  return {};
}

// linspace.out(start, end, steps, *, out): ATen's CPU kernel
// (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp) computes the first half
// as start + step * i and the second half as end - step * (steps - 1 - i), so
// both ends are exact; the step is in double for integer outputs.
std::vector<ir::Value> linspace_out(LoweringContext& ctx, const Args& a) {
  const c10::Scalar start = a.scalar(0), end = a.scalar(1);
  const int64_t steps = a.integer(2);
  const at::Tensor& out = a.tensor(3);
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  resize_range_out(out, steps);
  if (steps == 0) return {};
  const c10::ScalarType st = out.scalar_type();
  const bool integral = c10::isIntegralType(st, /*includeBool=*/true);
  const DType acc = integral ? DType::kF64 : compute_dtype(st);
  auto& g = ctx.g();
  const ir::TensorType t{acc, {steps}};
  if (steps == 1) {
    write_range(ctx, out, broadcast_to(ctx, ctx.scalar(start, acc), {1}));
    return {};
  }
  double step = 0;
  if (integral) {
    step = (static_cast<double>(end.to<int64_t>()) - static_cast<double>(start.to<int64_t>())) /
           static_cast<double>(steps - 1);
  } else if (acc == DType::kF64) {
    step = (end.to<double>() - start.to<double>()) / static_cast<double>(steps - 1);
  } else {
    step = (end.to<float>() - start.to<float>()) / static_cast<float>(steps - 1);
  }
  // Integer outputs start from the truncated bounds, as the CPU kernel does.
  const c10::Scalar s0 = integral ? c10::Scalar(start.to<int64_t>()) : start;
  const c10::Scalar s1 = integral ? c10::Scalar(end.to<int64_t>()) : end;
  ir::Value i = g.iota(t, 0);
  ir::Value vstep = broadcast_to(ctx, ctx.scalar(c10::Scalar(step), acc), {steps});
  ir::Value from_start = g.binary(ir::Op::kAdd, broadcast_to(ctx, ctx.scalar(s0, acc), {steps}),
                                  g.binary(ir::Op::kMul, vstep, i));
  ir::Value back = g.binary(ir::Op::kSub, g.constant(static_cast<double>(steps - 1), t), i);
  ir::Value from_end = g.binary(ir::Op::kSub, broadcast_to(ctx, ctx.scalar(s1, acc), {steps}),
                                g.binary(ir::Op::kMul, vstep, back));
  ir::Value first_half = g.compare(ir::Cmp::kLT, i, g.constant(static_cast<double>(steps / 2), t));
  write_range(ctx, out, g.select(first_half, from_start, from_end));
  return {};
}

// eye.m_out(n, m, *, out): ones on the main diagonal of an n x m matrix.
std::vector<ir::Value> eye_out(LoweringContext& ctx, int64_t n, int64_t m, const at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  resize_out(out, {n, m});
  if (n == 0 || m == 0) return {};
  auto& g = ctx.g();
  const ir::TensorType t{DType::kI64, {n, m}};
  ctx.write(out, g.compare(ir::Cmp::kEQ, g.iota(t, 0), g.iota(t, 1)));
  return {};
}

RegisterOutOnly r_arange("arange.start_out", arange_out);
RegisterOutOnly r_linspace("linspace.out", linspace_out);
RegisterOutOnly r_eye("eye.out", [](LoweringContext& c, const Args& a) {
  return eye_out(c, a.integer(0), a.integer(0), a.tensor(1));
});
RegisterOutOnly r_eye_m("eye.m_out", [](LoweringContext& c, const Args& a) {
  return eye_out(c, a.integer(0), a.integer(1), a.tensor(2));
});

}  // namespace
}  // namespace ttpu::aten
