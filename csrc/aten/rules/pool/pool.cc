// Lowerings of 2-D max and average pooling and their backward ops:
// max_pool2d_with_indices(+_backward), avg_pool2d(+_backward). max_pool2d,
// max_pool1d, avg_pool1d... are CompositeImplicitAutograd and reach these.
//
// The windowing works on the trailing spatial dims of a [N, C, H, W] or [C, H, W]
// input, and repeats the CPU kernels' arithmetic (aten/src/ATen/native/cpu/
// MaxPoolKernel.cpp, AvgPoolKernel.cpp): which element a max picks (the first
// maximum, the last NaN), the divisor of each average window. Argument checks
// are the meta functions' (DilatedMaxPool2d.cpp, AveragePool2d.cpp) through
// ATen's own Pool.h helpers, so errors read as on CPU.
#include <ATen/native/Pool.h>

#include <limits>

#include "aten/ops_util.h"
#include "aten/rules/pool/pool_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

using pool::Window;

// The window lists of the 2-D pooling arguments from `first` on (kernel_size,
// stride, padding[, dilation]) with the meta functions' length checks; `name`
// prefixes their errors ("max_pool2d: kernel_size must either be ...").
Window parse_window_2d(const Args& a, size_t first, bool has_dilation, const char* name) {
  const auto kernel = a.ints(first), stride = a.ints(first + 1), padding = a.ints(first + 2);
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2, name,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, name,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, name,
              ": padding must either be a single int, or a tuple of two ints");
  Window w;
  w.kernel = {kernel[0], kernel.size() == 1 ? kernel[0] : kernel[1]};
  w.stride = stride.empty()
                 ? w.kernel
                 : std::vector<int64_t>{stride[0], stride.size() == 1 ? stride[0] : stride[1]};
  w.padding = {padding[0], padding.size() == 1 ? padding[0] : padding[1]};
  w.dilation = {1, 1};
  if (has_dilation) {
    const auto dilation = a.ints(first + 3);
    TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2, name,
                ": dilation must be either a single int, or a tuple of two ints");
    w.dilation = {dilation[0], dilation.size() == 1 ? dilation[0] : dilation[1]};
  }
  return w;
}

// Fills the input and output sizes (pooling_output_shape checks stride and padding).
void set_sizes_2d(Window& w, const at::Tensor& input, bool ceil_mode) {
  input.size(-3);  // the meta functions read the planes first: IndexError for 2-D input
  w.in = {input.size(-2), input.size(-1)};
  for (int64_t d = 0; d < 2; ++d) {
    w.out.push_back(at::native::pooling_output_shape<int64_t>(
        w.in[d], w.kernel[d], w.padding[d], w.stride[d], w.dilation[d], ceil_mode));
  }
}

// pool2d_shape_check for `input` under the meta functions' memory-format rule.
void check_pool2d(const at::Tensor& input, const Window& w) {
  const auto memory_format = input.suggest_memory_format();
  at::native::pool2d_shape_check(input, w.kernel[0], w.kernel[1], w.stride[0], w.stride[1],
                                 w.padding[0], w.padding[1], w.dilation[0], w.dilation[1],
                                 input.size(-3), w.in[0], w.in[1], w.out[0], w.out[1],
                                 memory_format);
}

// The max pool meta's rank check (its text differs from pool2d_shape_check's).
void check_max_pool_rank(const at::Tensor& input) {
  const auto memory_format = input.suggest_memory_format();
  if (memory_format == at::MemoryFormat::ChannelsLast) {
    TORCH_CHECK(input.dim() == 4,
                "non-empty 4D (batch mode) tensor expected for input with channels_last layout");
  } else {
    TORCH_CHECK(input.dim() == 3 || input.dim() == 4,
                "non-empty 3D or 4D (batch mode) tensor expected for input");
  }
}

// x's dims with the spatial ones replaced by `spatial`.
std::vector<int64_t> with_spatial(const std::vector<int64_t>& full,
                                  const std::vector<int64_t>& spatial) {
  std::vector<int64_t> r(full.begin(), full.end() - static_cast<int64_t>(spatial.size()));
  r.insert(r.end(), spatial.begin(), spatial.end());
  return r;
}

// Per spatial dim d, an i64 [out...] value of f(iota over out dim d) combined
// across dims by `combine` (kMul for window sizes, kAdd for flat indices).
// `per_dim(d, o)` gets o = the output positions along d as i64 [out...].
template <typename F>
Value spatial_map(LoweringContext& ctx, const Window& w, Op combine, F per_dim) {
  auto& g = ctx.g();
  Value acc;
  for (int64_t d = 0; d < w.spatial(); ++d) {
    Value o = g.iota({DType::kI64, w.out}, d);
    Value v = per_dim(d, o);
    acc = acc.valid() ? g.binary(combine, acc, v) : v;
  }
  return acc;
}

Value i64_splat(LoweringContext& ctx, const Window& w, int64_t v) {
  return ctx.g().constant_int(v, {DType::kI64, w.out});
}

// The smallest value of dt: max pool's padding and initial maximum.
Value lowest(LoweringContext& ctx, DType dt) {
  if (ir::is_float(dt)) return ctx.constant(-std::numeric_limits<double>::infinity(), dt);
  if (ir::is_unsigned(dt)) return ctx.g().constant_int(0, {dt, {}});
  return ctx.g().constant_int(dt == DType::kI64 ? std::numeric_limits<int64_t>::min()
                                                : -(int64_t{1} << (8 * ir::byte_size(dt) - 1)),
                              {dt, {}});
}

// The dtypes the CPU kernel is instantiated for: floats, plus int64 for the
// average pool ones; others raise its NotImplementedError.
void check_pool_kernel_dtype(const at::Tensor& t, const char* kernel, bool allow_long) {
  const auto st = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st) || (allow_long && st == at::kLong), "\"",
                              kernel, "\" not implemented for '", st, "'");
}

// -------------------------------------------------------------------------- max pool

// Max pooling with indices. The CPU kernel scans each window's in-bounds elements
// in row-major order, starting from max = -inf and index = the first in-bounds
// element, and takes an element when `val > max || isnan(val)`. The window
// offsets are visited in that order here, each as one strided slice of the
// (-inf padded) input, so ties, -inf windows and NaNs pick the same element.
// Indices are flat over the spatial dims of one plane (h * W + w).
std::pair<Value, Value> max_pool_values(LoweringContext& ctx, Value x, const Window& w) {
  auto& g = ctx.g();
  const auto full = dims(ctx, x);
  const int64_t rank = static_cast<int64_t>(full.size()), lead = rank - w.spatial();
  const DType dt = dtype(ctx, x);
  const auto out_full = with_spatial(full, w.out);
  std::vector<int64_t> lo(rank, 0), hi(rank, 0), inner(w.spatial(), 1);
  for (int64_t d = w.spatial() - 1; d >= 0; --d) {
    lo[lead + d] = w.padding[d];
    const int64_t need = (w.out[d] - 1) * w.stride[d] + (w.kernel[d] - 1) * w.dilation[d] + 1;
    hi[lead + d] = std::max<int64_t>(0, need - w.in[d] - w.padding[d]);
    if (d > 0) inner[d - 1] = inner[d] * w.in[d];
  }
  Value padded = g.pad(x, lowest(ctx, dt), lo, hi, std::vector<int64_t>(rank, 0));
  std::vector<int64_t> spatial_dims(w.spatial());
  for (int64_t d = 0; d < w.spatial(); ++d) spatial_dims[d] = lead + d;
  auto spread = [&](Value v) { return g.broadcast_in_dim(v, out_full, spatial_dims); };

  // The first in-bounds element of each window: start = o * s - p, raised by
  // whole dilations until it is >= 0.
  Value first = spatial_map(ctx, w, Op::kAdd, [&](int64_t d, Value o) {
    Value start = g.binary(Op::kSub, g.binary(Op::kMul, o, i64_splat(ctx, w, w.stride[d])),
                           i64_splat(ctx, w, w.padding[d]));
    Value below = g.binary(Op::kMax, g.unary(Op::kNeg, start), i64_splat(ctx, w, 0));
    Value steps =
        g.binary(Op::kDiv, g.binary(Op::kAdd, below, i64_splat(ctx, w, w.dilation[d] - 1)),
                 i64_splat(ctx, w, w.dilation[d]));
    start = g.binary(Op::kAdd, start, g.binary(Op::kMul, steps, i64_splat(ctx, w, w.dilation[d])));
    return g.binary(Op::kMul, start, i64_splat(ctx, w, inner[d]));
  });
  Value best = g.broadcast_in_dim(lowest(ctx, dt), out_full, {});
  Value arg = spread(first);

  std::vector<int64_t> offset(w.spatial(), 0);
  while (true) {
    std::vector<int64_t> start(rank, 0), limit = dims(ctx, padded), strides(rank, 1);
    for (int64_t d = 0; d < w.spatial(); ++d) {
      start[lead + d] = offset[d] * w.dilation[d];
      limit[lead + d] = start[lead + d] + (w.out[d] - 1) * w.stride[d] + 1;
      strides[lead + d] = w.stride[d];
    }
    Value v = g.slice(padded, start, limit, strides);
    Value idx = spread(spatial_map(ctx, w, Op::kAdd, [&](int64_t d, Value o) {
      Value pos = g.binary(Op::kAdd, g.binary(Op::kMul, o, i64_splat(ctx, w, w.stride[d])),
                           i64_splat(ctx, w, offset[d] * w.dilation[d] - w.padding[d]));
      return g.binary(Op::kMul, pos, i64_splat(ctx, w, inner[d]));
    }));
    Value take = g.compare(Cmp::kGT, v, best);
    if (ir::is_float(dt)) take = g.binary(Op::kOr, take, g.compare(Cmp::kNE, v, v));
    best = g.select(take, v, best);
    arg = g.select(take, idx, arg);
    // Next offset in row-major order.
    int64_t d = w.spatial() - 1;
    while (d >= 0 && ++offset[d] == w.kernel[d]) offset[d--] = 0;
    if (d < 0) break;
  }
  return {best, arg};
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode).
std::vector<Value> max_pool2d(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  // The meta function checks the list lengths, then the rank, then the sizes.
  Window w = parse_window_2d(a, 1, true, "max_pool2d");
  check_max_pool_rank(input);
  set_sizes_2d(w, input, a.boolean(5));
  check_pool2d(input, w);
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() != at::kBool,
                              "\"max_pool2d\" not implemented for 'Bool'");
  auto [values, indices] = max_pool_values(ctx, ctx.tensor(input), w);
  return {values, indices};
}

// Each output gradient added at the input element its index names, as one
// scatter-add over the flattened planes (the last `spatial` dims are a plane).
Value max_pool_scatter(LoweringContext& ctx, const at::Tensor& grad_output, const at::Tensor& input,
                       const at::Tensor& indices, int64_t spatial) {
  auto& g = ctx.g();
  const DType dt = to_ir(input.scalar_type());
  int64_t plane = 1, per_plane = 1;
  for (int64_t d = input.dim() - spatial; d < input.dim(); ++d) plane *= input.size(d);
  for (int64_t d = grad_output.dim() - spatial; d < grad_output.dim(); ++d)
    per_plane *= grad_output.size(d);
  const int64_t planes = plane == 0 ? 0 : input.numel() / plane;
  // Index of each gradient element in the flattened input: plane * H * W + index.
  Value idx = g.reshape(g.convert(ctx.tensor(indices), DType::kI64), {planes, per_plane});
  Value base = g.binary(Op::kMul, g.iota({DType::kI64, {planes, per_plane}}, 0),
                        g.constant_int(plane, {DType::kI64, {planes, per_plane}}));
  idx = g.reshape(g.binary(Op::kAdd, idx, base), {planes * per_plane, 1});
  Value updates = g.reshape(ctx.tensor(grad_output), {planes * per_plane});
  ir::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value zeros = g.constant(0, {dt, {input.numel()}});
  Value grad = g.scatter(zeros, idx, updates, sd, ir::Reducer::kAdd);
  return g.reshape(grad, input.sizes().vec());
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride,
// padding, dilation, ceil_mode, indices): each output gradient is added at the
// input element its index names (CPU: max_pool2d_backward_kernel), as one
// scatter-add over the flattened planes.
std::vector<Value> max_pool2d_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const at::Tensor& indices = a.tensor(7);
  Window w = parse_window_2d(a, 2, true, "max_pool2d");
  TORCH_CHECK(input.dtype() == grad_output.dtype(), "expected dtype ", input.dtype(),
              " for `gradOutput` but got dtype ", grad_output.dtype());
  check_max_pool_rank(input);
  set_sizes_2d(w, input, a.boolean(6));
  at::native::max_pool2d_backward_shape_check(
      input, grad_output, indices, w.kernel[0], w.kernel[1], w.stride[0], w.stride[1], w.padding[0],
      w.padding[1], w.dilation[0], w.dilation[1], input.size(-3), w.in[0], w.in[1], w.out[0],
      w.out[1], input.suggest_memory_format());
  check_pool_kernel_dtype(input, "max_pool2d_backward", false);
  return {max_pool_scatter(ctx, grad_output, input, indices, 2)};
}

// -------------------------------------------------------------------------- avg pool

// The dtype an average is computed in: CPU accumulates 16-bit floats in f32 and
// integers in i64 (at::acc_type).
DType accumulate_dtype(DType dt) {
  if (dt == DType::kF16 || dt == DType::kBF16) return DType::kF32;
  if (ir::is_integral(dt)) return DType::kI64;
  return dt;
}

// The divisor of each average window as i64 [out...] (AvgPoolKernel.cpp):
// divisor_override, else the window clipped to the padded input
// (count_include_pad), else the number of input elements in it. An empty window
// (possible in ceil mode) gets 1: its sum is 0 and CPU writes 0.
Value avg_divisor(LoweringContext& ctx, const Window& w, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  auto& g = ctx.g();
  Value pool = i64_splat(ctx, w, 1), count = i64_splat(ctx, w, 1);
  for (int64_t d = 0; d < w.spatial(); ++d) {
    Value o = g.iota({DType::kI64, w.out}, d);
    Value start = g.binary(Op::kSub, g.binary(Op::kMul, o, i64_splat(ctx, w, w.stride[d])),
                           i64_splat(ctx, w, w.padding[d]));
    Value end = g.binary(Op::kMin, g.binary(Op::kAdd, start, i64_splat(ctx, w, w.kernel[d])),
                         i64_splat(ctx, w, w.in[d] + w.padding[d]));
    pool = g.binary(Op::kMul, pool, g.binary(Op::kSub, end, start));
    Value in_start = g.binary(Op::kMax, start, i64_splat(ctx, w, 0));
    Value in_end = g.binary(Op::kMin, end, i64_splat(ctx, w, w.in[d]));
    Value n = g.binary(Op::kMax, g.binary(Op::kSub, in_end, in_start), i64_splat(ctx, w, 0));
    count = g.binary(Op::kMul, count, n);
  }
  Value divisor = divisor_override    ? i64_splat(ctx, w, *divisor_override)
                  : count_include_pad ? pool
                                      : count;
  Value empty = g.compare(Cmp::kEQ, count, i64_splat(ctx, w, 0));
  return g.select(empty, i64_splat(ctx, w, 1), divisor);
}

// The avg_pool2d meta function's checks; returns the window.
Window check_avg_pool2d(const at::Tensor& input, const Args& a, size_t first, bool ceil_mode,
                        std::optional<int64_t> divisor_override) {
  Window w = parse_window_2d(a, first, false, "avg_pool2d");
  TORCH_CHECK(!divisor_override.has_value() || divisor_override.value() != 0,
              "divisor must be not zero");
  set_sizes_2d(w, input, ceil_mode);
  return w;
}

// The windowed sum of `input` divided per window.
Value avg_pool_values(LoweringContext& ctx, const at::Tensor& input, const Window& w,
                      bool count_include_pad, std::optional<int64_t> divisor_override) {
  auto& g = ctx.g();
  const DType dt = to_ir(input.scalar_type()), acc = accumulate_dtype(dt);
  Value x = g.convert(ctx.tensor(input), acc);
  const auto full = dims(ctx, x);
  const int64_t rank = static_cast<int64_t>(full.size()), lead = rank - w.spatial();
  std::vector<int64_t> window(rank, 1), strides(rank, 1), lo(rank, 0), hi(rank, 0);
  for (int64_t d = 0; d < w.spatial(); ++d) {
    window[lead + d] = w.kernel[d];
    strides[lead + d] = w.stride[d];
    lo[lead + d] = w.padding[d];
    // Enough high padding for the last (ceil mode) window; any extra output is cropped.
    hi[lead + d] =
        std::max<int64_t>(0, (w.out[d] - 1) * w.stride[d] + w.kernel[d] - w.in[d] - w.padding[d]);
  }
  Value sum =
      g.reduce_window(x, ctx.constant(0, acc), window, strides, {}, {}, lo, hi, ir::Reducer::kAdd);
  const auto out_full = with_spatial(full, w.out);
  if (dims(ctx, sum) != out_full) {
    sum = g.slice(sum, std::vector<int64_t>(rank, 0), out_full, std::vector<int64_t>(rank, 1));
  }
  std::vector<int64_t> spatial_dims(w.spatial());
  for (int64_t d = 0; d < w.spatial(); ++d) spatial_dims[d] = lead + d;
  Value divisor =
      g.broadcast_in_dim(g.convert(avg_divisor(ctx, w, count_include_pad, divisor_override), acc),
                         out_full, spatial_dims);
  return g.convert(g.binary(Op::kDiv, sum, divisor), dt);
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override): a windowed sum divided per window.
std::vector<Value> avg_pool2d(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const auto divisor_override = a.opt_integer(6);
  const Window w = check_avg_pool2d(input, a, 1, a.boolean(4), divisor_override);
  check_pool2d(input, w);
  check_pool_kernel_dtype(input, "avg_pool2d", true);
  return {avg_pool_values(ctx, input, w, a.boolean(5), divisor_override)};
}

// The gradient of avg_pool_values for `input` (see avg_pool2d_backward).
Value avg_pool_grad(LoweringContext& ctx, const at::Tensor& grad_output, const at::Tensor& input,
                    const Window& w, bool count_include_pad,
                    std::optional<int64_t> divisor_override) {
  auto& g = ctx.g();
  const DType dt = to_ir(input.scalar_type()), acc = accumulate_dtype(dt);
  Value dy = g.convert(ctx.tensor(grad_output), acc);
  const auto full = dims(ctx, dy);
  const int64_t rank = static_cast<int64_t>(full.size()), lead = rank - w.spatial();
  std::vector<int64_t> spatial_dims(w.spatial());
  for (int64_t d = 0; d < w.spatial(); ++d) spatial_dims[d] = lead + d;
  Value divisor = g.broadcast_in_dim(
      g.convert(avg_divisor(ctx, w, count_include_pad, divisor_override), acc), full, spatial_dims);
  Value scaled = g.binary(Op::kDiv, dy, divisor);
  std::vector<int64_t> lo(rank, 0), hi(rank, 0), interior(rank, 0), window(rank, 1);
  for (int64_t d = 0; d < w.spatial(); ++d) {
    lo[lead + d] = w.kernel[d] - 1 - w.padding[d];
    hi[lead + d] = w.in[d] - (w.out[d] - 1) * w.stride[d] - 1 + w.padding[d];
    interior[lead + d] = w.stride[d] - 1;
    window[lead + d] = w.kernel[d];
  }
  Value padded = g.pad(scaled, ctx.constant(0, acc), lo, hi, interior);
  Value grad =
      g.reduce_window(padded, ctx.constant(0, acc), window, {}, {}, {}, {}, {}, ir::Reducer::kAdd);
  return g.convert(grad, dt);
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override): every input element receives the sum of
// grad / divisor over the windows that cover it. That is the transpose of the
// windowed sum: pad the scaled gradient (stride - 1 zeros between elements,
// k - 1 - p before, the rest after) and sum windows of the kernel's size with
// stride 1 (JAX's _reduce_window_sum_transpose_rule with
// _conv_general_vjp_lhs_padding).
std::vector<Value> avg_pool2d_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const auto divisor_override = a.opt_integer(7);
  const Window w = check_avg_pool2d(input, a, 2, a.boolean(5), divisor_override);
  at::native::avg_pool2d_backward_shape_check(input, grad_output, 0, w.kernel[0], w.kernel[1],
                                              w.stride[0], w.stride[1], w.padding[0], w.padding[1],
                                              input.size(-3), w.in[0], w.in[1], w.out[0], w.out[1],
                                              input.suggest_memory_format());
  TORCH_CHECK(input.dtype() == grad_output.dtype(), "expected dtype ", input.dtype(),
              " for `gradOutput` but got dtype ", grad_output.dtype());
  check_pool_kernel_dtype(input, "avg_pool2d_backward", true);
  return {avg_pool_grad(ctx, grad_output, input, w, a.boolean(6), divisor_override)};
}

RegisterLowering r_max_pool2d("max_pool2d_with_indices", max_pool2d);
RegisterLowering r_max_pool2d_bwd("max_pool2d_with_indices_backward", max_pool2d_backward);
RegisterLowering r_avg_pool2d("avg_pool2d", avg_pool2d);
RegisterLowering r_avg_pool2d_bwd("avg_pool2d_backward", avg_pool2d_backward);

}  // namespace

namespace pool {

std::pair<Value, Value> max_pool(LoweringContext& ctx, Value x, const Window& w) {
  return max_pool_values(ctx, x, w);
}
Value max_pool_backward(LoweringContext& ctx, const at::Tensor& grad_output,
                        const at::Tensor& input, const at::Tensor& indices, int64_t spatial) {
  return max_pool_scatter(ctx, grad_output, input, indices, spatial);
}
Value avg_pool(LoweringContext& ctx, const at::Tensor& input, const Window& w,
               bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_values(ctx, input, w, count_include_pad, divisor_override);
}
Value avg_pool_backward(LoweringContext& ctx, const at::Tensor& grad_output,
                        const at::Tensor& input, const Window& w, bool count_include_pad,
                        std::optional<int64_t> divisor_override) {
  return avg_pool_grad(ctx, grad_output, input, w, count_include_pad, divisor_override);
}
void check_kernel_dtype(const at::Tensor& t, const char* kernel, bool allow_long) {
  check_pool_kernel_dtype(t, kernel, allow_long);
}

}  // namespace pool
}  // namespace ttpu::aten
