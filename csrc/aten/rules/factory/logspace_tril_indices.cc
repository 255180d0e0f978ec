// Lowerings of the factories beyond factory.cc: logspace (out-only, as
// arange/linspace) and tril_indices / triu_indices.
#include <cmath>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ValueList = std::vector<ir::Value>;

// logspace.out(start, end, steps, base=10., *, out): base ** linspace, with
// ATen's CPU kernel's halves (RangeFactoriesKernel.cpp): the first half
// counts up from start, the second down from end, so both ends are exact.
// Integer outputs truncate the bounds first and compute in double, as that
// kernel does (f64, like linspace's integer case in factory.cc); float
// outputs compute in f32 (f64 for double).
std::vector<ir::Value> logspace_out(LoweringContext& ctx, const Args& a) {
  const c10::Scalar start = a.scalar(0), end = a.scalar(1);
  const int64_t steps = a.integer(2);
  const double base = a.real(3);
  const at::Tensor& out = a.tensor(4);
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  resize_range_out(out, steps);
  if (steps == 0) return {};
  const c10::ScalarType st = out.scalar_type();
  const bool integral = c10::isIntegralType(st, /*includeBool=*/true);
  const DType acc = integral || st == at::kDouble ? DType::kF64 : DType::kF32;
  const double s0 = integral ? static_cast<double>(start.to<int64_t>()) : start.to<double>();
  const double s1 = integral ? static_cast<double>(end.to<int64_t>()) : end.to<double>();
  auto& g = ctx.g();
  const ir::TensorType t{acc, {steps}};
  ir::Value exponent;
  if (steps == 1) {
    exponent = broadcast_to(ctx, ctx.scalar(c10::Scalar(s0), acc), {1});
  } else {
    const double step = (s1 - s0) / static_cast<double>(steps - 1);
    ir::Value i = g.iota(t, 0);
    ir::Value vstep = broadcast_to(ctx, ctx.scalar(c10::Scalar(step), acc), {steps});
    ir::Value up =
        g.binary(ir::Op::kAdd, broadcast_to(ctx, ctx.scalar(c10::Scalar(s0), acc), {steps}),
                 g.binary(ir::Op::kMul, vstep, i));
    ir::Value back = g.binary(ir::Op::kSub, g.constant(static_cast<double>(steps - 1), t), i);
    ir::Value down =
        g.binary(ir::Op::kSub, broadcast_to(ctx, ctx.scalar(c10::Scalar(s1), acc), {steps}),
                 g.binary(ir::Op::kMul, vstep, back));
    ir::Value first = g.compare(ir::Cmp::kLT, i, g.constant(static_cast<double>(steps / 2), t));
    exponent = g.select(first, up, down);
  }
  ir::Value b = broadcast_to(ctx, ctx.scalar(c10::Scalar(base), acc), {steps});
  write_range(ctx, out, g.binary(ir::Op::kPow, b, exponent));
  return {};
}

// tril_indices / triu_indices(row, col, offset=0, *, dtype=long, ...): the
// coordinates of the lower / upper triangle in row-major order, [2, count].
// The count is a function of the arguments (no sync); the positions are the
// first `count` keys after sorting "flat position if inside, else row*col".
ValueList tri_indices(LoweringContext& ctx, const Args& a, bool lower) {
  const int64_t row = a.integer(0), col = a.integer(1), offset = a.integer(2);
  const char* name = lower ? "tril_indices" : "triu_indices";
  auto opt_dtype = a.opt_dtype(3);
  const c10::ScalarType st = opt_dtype.value_or(at::kLong);
  TORCH_CHECK_NOT_IMPLEMENTED(st == at::kLong || st == at::kInt, "\"", name,
                              "\" not implemented for '", c10::toString(st), "'");
  TORCH_CHECK(row >= 0, "row must be non-negative, got", row);
  TORCH_CHECK(col >= 0, "col must be non-negative, got", col);
  int64_t count = 0;
  for (int64_t r = 0; r < row; ++r) {
    // Columns c with c <= r + offset (lower) or c >= r + offset (upper).
    int64_t below = std::min(std::max<int64_t>(r + offset + 1, 0), col);
    int64_t from = std::min(std::max<int64_t>(r + offset, 0), col);
    count += lower ? below : col - from;
  }
  auto& g = ctx.g();
  DType out = to_ir(st);
  if (count == 0) return {g.constant(0, {out, {2, 0}})};
  const int64_t n = row * col;
  ir::TensorType grid{DType::kI64, {row, col}};
  ir::Value r = g.iota(grid, 0);
  ir::Value c = g.iota(grid, 1);
  ir::Value diag = g.binary(ir::Op::kAdd, r, g.constant_int(offset, grid));
  ir::Value inside = g.compare(lower ? ir::Cmp::kLE : ir::Cmp::kGE, c, diag);
  ir::TensorType flat{DType::kI64, {n}};
  ir::Value key = g.select(g.reshape(inside, {n}), g.iota(flat, 0), g.constant_int(n, flat));
  ir::Value pos = g.slice(g.sort({key}, 0, ir::Cmp::kLT)[0], {0}, {count}, {1});
  ir::TensorType ct{DType::kI64, {count}};
  ir::Value rows = g.binary(ir::Op::kDiv, pos, g.constant_int(col, ct));
  ir::Value cols = g.binary(ir::Op::kRem, pos, g.constant_int(col, ct));
  ir::Value both = g.concatenate({g.reshape(rows, {1, count}), g.reshape(cols, {1, count})}, 0);
  return {g.convert(both, out)};
}

RegisterOutOnly r_logspace("logspace.out", logspace_out);
// _efficientzerotensor(size, dtype, ...): CPU makes an immutable ZeroTensor
// (autograd's zero gradients, e.g. sgn's for real input); a dense zero tensor
// has the same values.
RegisterLowering r_efficientzerotensor("_efficientzerotensor", [](LoweringContext& c,
                                                                  const Args& a) {
  const c10::ScalarType st =
      a.opt_dtype(1).value_or(c10::typeMetaToScalarType(c10::get_default_dtype()));
  return ValueList{c.g().constant(0, {to_ir(st), a.ints(0)})};
});
RegisterLowering r_tril_indices("tril_indices", [](LoweringContext& c, const Args& a) {
  return tri_indices(c, a, true);
});
RegisterLowering r_triu_indices("triu_indices", [](LoweringContext& c, const Args& a) {
  return tri_indices(c, a, false);
});

}  // namespace
}  // namespace ttpu::aten
