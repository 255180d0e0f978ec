// Lowerings of adaptive average pooling: _adaptive_avg_pool2d,
// _adaptive_avg_pool3d and their backward ops. adaptive_avg_pool2d is CompositeImplicitAutograd: output size 1x1
// becomes a mean (not lowered here), anything else _adaptive_avg_pool2d.
//
// Output cell o of a dim of input size `in` and output size `out` averages input
// [floor(o * in / out), ceil((o + 1) * in / out)) (AdaptivePooling.h start_index /
// end_index). When out divides in these windows tile the input: a windowed sum.
// Otherwise they overlap and vary in size, and the average is a product with a
// [out, in] matrix of 1 / window size entries per dim (two dot_generals), which
// also gives the backward for every case as the transposed products.
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

// 16-bit floats are averaged in f32, as CPU's kernels accumulate them (acc_type).
DType adaptive_compute_dtype(DType dt) {
  return dt == DType::kF16 || dt == DType::kBF16 ? DType::kF32 : dt;
}

// [out, in] averaging matrix of one dim: A[o, i] = 1 / (end - start) for i in the
// window [start, end) of output o, else 0.
Value averaging_matrix(LoweringContext& ctx, int64_t out, int64_t in, DType dt) {
  auto& g = ctx.g();
  const ir::TensorType t{DType::kI64, {out, in}};
  auto splat = [&](int64_t v) { return g.constant_int(v, t); };
  Value o = g.iota(t, 0), i = g.iota(t, 1);
  Value start = g.binary(Op::kDiv, g.binary(Op::kMul, o, splat(in)), splat(out));
  // ceil((o + 1) * in / out) as ((o + 1) * in + out - 1) / out
  Value next = g.binary(Op::kMul, g.binary(Op::kAdd, o, splat(1)), splat(in));
  Value end = g.binary(Op::kDiv, g.binary(Op::kAdd, next, splat(out - 1)), splat(out));
  Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGE, i, start), g.compare(Cmp::kLT, i, end));
  Value size = g.convert(g.binary(Op::kSub, end, start), dt);
  Value weight = g.binary(Op::kDiv, g.constant(1, {dt, {out, in}}), size);
  return g.select(inside, weight, g.constant(0, {dt, {out, in}}));
}

// Contracts x's dim `d` (of size in) with `m` [out, in] (or [in, out] when
// `transposed`), keeping the other dims in order and putting the new one at d.
Value adaptive_contract_dim(LoweringContext& ctx, Value x, int64_t d, Value m, bool transposed) {
  return contract_dim(ctx, x, d, m, transposed ? 0 : 1);
}

// _adaptive_avg_pool2d's checks (adaptive_avg_pool2d_out_cpu_template).
void check_adaptive(const at::Tensor& input, c10::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  const int64_t ndim = input.dim();
  TORCH_CHECK(ndim == 3 || ndim == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ",
              input.sizes());
  for (const int64_t i : {-2, -1}) {
    TORCH_CHECK(
        input.size(i) > 0,
        "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
        "but input has sizes ",
        input.sizes(), " with dimension ", i + ndim, " being empty");
  }
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but "
              "received {",
              output_size[0], ", ", output_size[1], "}");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()),
                              "\"adaptive_avg_pool2d\" not implemented for '", input.scalar_type(),
                              "'");
}

// _adaptive_avg_pool2d(self, output_size).
std::vector<Value> adaptive_avg_pool2d(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& input = a.tensor(0);
  const auto output_size = a.ints(1);
  check_adaptive(input, output_size);
  const DType dt = to_ir(input.scalar_type()), acc = adaptive_compute_dtype(dt);
  Value x = g.convert(ctx.tensor(input), acc);
  const auto full = dims(ctx, x);
  const int64_t rank = static_cast<int64_t>(full.size());
  const int64_t h = full[rank - 2], w = full[rank - 1], oh = output_size[0], ow = output_size[1];
  if (oh == 0 || ow == 0) {
    std::vector<int64_t> shape(full.begin(), full.end() - 2);
    shape.push_back(oh);
    shape.push_back(ow);
    return {g.constant(0, {dt, shape})};
  }
  if (h % oh == 0 && w % ow == 0) {
    // Tiling windows: sum / kh / kw, the CPU kernel's arithmetic.
    const int64_t kh = h / oh, kw = w / ow;
    std::vector<int64_t> window(rank, 1);
    window[rank - 2] = kh;
    window[rank - 1] = kw;
    Value sum =
        g.reduce_window(x, ctx.constant(0, acc), window, window, {}, {}, {}, {}, ir::Reducer::kAdd);
    const auto out_shape = dims(ctx, sum);
    Value mean = g.binary(Op::kDiv, sum, g.constant(static_cast<double>(kh), {acc, out_shape}));
    mean = g.binary(Op::kDiv, mean, g.constant(static_cast<double>(kw), {acc, out_shape}));
    return {g.convert(mean, dt)};
  }
  Value y = adaptive_contract_dim(ctx, x, rank - 2, averaging_matrix(ctx, oh, h, acc), false);
  y = adaptive_contract_dim(ctx, y, rank - 1, averaging_matrix(ctx, ow, w, acc), false);
  return {g.convert(y, dt)};
}

// _adaptive_avg_pool2d_backward(grad_output, self): grad_input is grad_output
// multiplied by the transposed averaging matrices.
std::vector<Value> adaptive_avg_pool2d_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const int64_t ndim = grad_output.dim();
  for (int64_t i = 1; i < ndim; ++i) {
    TORCH_CHECK(
        grad_output.size(i) > 0,
        "adaptive_avg_pool2d_backward(): Expected grad_output to have non-zero size for non-batch "
        "dimensions, but grad_output has sizes ",
        grad_output.sizes(), " with dimension ", i, " being empty");
  }
  TORCH_CHECK(ndim == 3 || ndim == 4,
              "adaptive_avg_pool2d_backward(): Expected 3D or 4D tensor, but got ", input.sizes());
  TORCH_CHECK(input.dtype() == grad_output.dtype(), "expected dtype ", input.dtype(),
              " for `grad_output` but got dtype ", grad_output.dtype());
  TORCH_CHECK(input.dim() == ndim, "adaptive_avg_pool2d_backward(): grad_output ",
              grad_output.sizes(), " and input ", input.sizes(), " differ in rank");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()),
                              "\"adaptive_avg_pool2d_backward\" not implemented for '",
                              input.scalar_type(), "'");
  const DType dt = to_ir(input.scalar_type()), acc = adaptive_compute_dtype(dt);
  const int64_t h = input.size(-2), w = input.size(-1);
  const int64_t oh = grad_output.size(-2), ow = grad_output.size(-1);
  Value dy = g.convert(ctx.tensor(grad_output), acc);
  Value dx = adaptive_contract_dim(ctx, dy, ndim - 2, averaging_matrix(ctx, oh, h, acc), true);
  dx = adaptive_contract_dim(ctx, dx, ndim - 1, averaging_matrix(ctx, ow, w, acc), true);
  return {g.convert(dx, dt)};
}

// _adaptive_avg_pool3d(self, output_size): the averaging matrices of the three
// dims applied in turn (the CPU kernel divides each window's sum by its size).
std::vector<Value> adaptive_avg_pool3d(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& input = a.tensor(0);
  const auto output_size = a.ints(1);
  // adaptive_avg_pool3d_out_cpu_template's checks.
  TORCH_CHECK(output_size.size() == 3, "adaptive_avg_pool3d: output_size must be 3");
  for (int64_t i = 1; i < input.dim(); ++i) {
    TORCH_CHECK(input.size(i) > 0,
                "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ",
                input.sizes(), " with dimension ", i, " being empty");
  }
  TORCH_CHECK(input.dim() == 4 || input.dim() == 5,
              "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got ", input.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()),
                              "\"adaptive_avg_pool3d_cpu\" not implemented for '",
                              input.scalar_type(), "'");
  const DType dt = to_ir(input.scalar_type()), acc = adaptive_compute_dtype(dt);
  const int64_t rank = input.dim();
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - 3);
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  if (input.numel() == 0 || c10::multiply_integers(output_size) == 0)
    return {g.constant(0, {dt, shape})};
  Value y = g.convert(ctx.tensor(input), acc);
  for (int64_t j = 0; j < 3; ++j) {
    const int64_t d = rank - 3 + j;
    y = adaptive_contract_dim(ctx, y, d, averaging_matrix(ctx, output_size[j], input.size(d), acc),
                              false);
  }
  return {g.convert(y, dt)};
}

// _adaptive_avg_pool3d_backward(grad_output, self): the transposed products.
std::vector<Value> adaptive_avg_pool3d_backward(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  for (int64_t i = 1; i < grad_output.dim(); ++i) {
    TORCH_CHECK(grad_output.size(i) > 0,
                "adaptive_avg_pool3d_backward(): Expected grad_output to have non-zero "
                "size for non-batch dimensions, but grad_output has sizes ",
                grad_output.sizes(), " with dimension ", i, " being empty");
  }
  TORCH_CHECK(input.dim() == grad_output.dim() && (input.dim() == 4 || input.dim() == 5),
              "adaptive_avg_pool3d_backward(): grad_output ", grad_output.sizes(), " and input ",
              input.sizes(), " differ in rank");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()),
                              "\"adaptive_avg_pool3d_backward_cpu\" not implemented for '",
                              input.scalar_type(), "'");
  const DType dt = to_ir(input.scalar_type()), acc = adaptive_compute_dtype(dt);
  if (input.numel() == 0) return {g.constant(0, {dt, input.sizes().vec()})};
  const int64_t rank = input.dim();
  Value dx = g.convert(ctx.tensor(grad_output), acc);
  for (int64_t j = 0; j < 3; ++j) {
    const int64_t d = rank - 3 + j;
    dx = adaptive_contract_dim(
        ctx, dx, d, averaging_matrix(ctx, grad_output.size(d), input.size(d), acc), true);
  }
  return {g.convert(dx, dt)};
}

RegisterLowering r_adaptive_avg_pool2d("_adaptive_avg_pool2d", adaptive_avg_pool2d);
RegisterLowering r_adaptive_avg_pool2d_bwd("_adaptive_avg_pool2d_backward",
                                           adaptive_avg_pool2d_backward);
RegisterLowering r_adaptive_avg_pool3d("_adaptive_avg_pool3d", adaptive_avg_pool3d);
RegisterLowering r_adaptive_avg_pool3d_bwd("_adaptive_avg_pool3d_backward",
                                           adaptive_avg_pool3d_backward);

}  // namespace
}  // namespace ttpu::aten
