// Lowerings of 3-D max and average pooling and of adaptive max pooling, with
// their backward ops: max_pool3d_with_indices(+_backward), avg_pool3d(+_backward),
// adaptive_max_pool2d / adaptive_max_pool3d (+_backward). adaptive_max_pool1d
// is CompositeImplicitAutograd and reaches adaptive_max_pool2d.
//
// The windowing is pool.cc's (pool_util.h), generic in the number of spatial
// dims; this file adds the 3-D argument parsing and the checks of the meta
// functions and CPU templates (DilatedMaxPool3d.cpp, AveragePool3d.cpp,
// AdaptiveMaxPooling2d.cpp, AdaptiveMaxPooling3d.cpp) through ATen's own
// Pool.h / AdaptivePooling.h helpers, so errors read as on CPU.
#include <ATen/TensorUtils.h>
#include <ATen/native/AdaptivePooling.h>
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

// A 1- or 3-element list as three values (empty: `fallback`).
std::vector<int64_t> triple(const std::vector<int64_t>& v, const std::vector<int64_t>& fallback) {
  if (v.empty()) return fallback;
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0], v[0]} : v;
}

// The window of a 3-D pool from kernel_size, stride, padding[, dilation] at
// `first`, with the sizes of `input` and the list-length messages of `name`
// ("max_pool3d: kernel_size must either be ..."; avg_pool3d words them alike
// without "either").
Window parse_window_3d(const Args& a, size_t first, bool is_max, const at::Tensor& input,
                       bool ceil_mode) {
  const auto kernel = a.ints(first), stride = a.ints(first + 1), padding = a.ints(first + 2);
  const char* must = is_max ? "must either be" : "must be";
  const char* name = is_max ? "max_pool3d" : "avg_pool3d";
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 3, name, ": kernel_size ", must,
              " a single int, or a tuple of three ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 3, name, ": stride ", must,
              " omitted, a single int, or a tuple of three ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 3, name, ": padding ", must,
              " a single int, or a tuple of three ints");
  Window w;
  w.kernel = triple(kernel, {});
  w.stride = triple(stride, w.kernel);
  w.padding = triple(padding, {});
  w.dilation = {1, 1, 1};
  if (is_max) {
    const auto dilation = a.ints(first + 3);
    TORCH_CHECK(dilation.size() == 1 || dilation.size() == 3,
                "max_pool3d: dilation must be either a single int, or a tuple of three ints");
    w.dilation = triple(dilation, {});
  }
  const auto memory_format = input.suggest_memory_format();
  if (is_max && memory_format == at::MemoryFormat::ChannelsLast3d) {
    TORCH_CHECK(input.dim() == 5,
                "non-empty 5D (batch mode) tensor expected for input with channels_last layout");
  } else {
    TORCH_CHECK(input.dim() == 4 || input.dim() == 5,
                "non-empty 4D or 5D (batch mode) tensor expected for input");
  }
  w.in = {input.size(-3), input.size(-2), input.size(-1)};
  for (int64_t d = 0; d < 3; ++d) {
    w.out.push_back(at::native::pooling_output_shape<int64_t>(
        w.in[d], w.kernel[d], w.padding[d], w.stride[d], w.dilation[d], ceil_mode));
  }
  return w;
}

// pool3d_shape_check with the window's values.
void check_pool3d(const at::Tensor& input, const Window& w, const char* fn, bool check_input_size) {
  at::native::pool3d_shape_check(
      input, input.size(-4), w.kernel[0], w.kernel[1], w.kernel[2], w.stride[0], w.stride[1],
      w.stride[2], w.padding[0], w.padding[1], w.padding[2], w.dilation[0], w.dilation[1],
      w.dilation[2], w.in[0], w.in[1], w.in[2], w.out[0], w.out[1], w.out[2], fn, check_input_size);
}

std::vector<int64_t> out_shape(const at::Tensor& input, const Window& w) {
  std::vector<int64_t> r(input.sizes().begin(), input.sizes().end() - 3);
  r.insert(r.end(), w.out.begin(), w.out.end());
  return r;
}

// max_pool3d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode).
std::vector<Value> max_pool3d(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const Window w = parse_window_3d(a, 1, true, input, a.boolean(5));
  check_pool3d(input, w, "max_pool3d_with_indices_out_cpu_template()", false);
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() != at::kBool,
                              "\"max_pool3d\" not implemented for 'Bool'");
  if (input.numel() == 0) {
    const auto shape = out_shape(input, w);
    return {ctx.g().constant(0, {to_ir(input.scalar_type()), shape}),
            ctx.g().constant(0, {DType::kI64, shape})};
  }
  auto [values, indices] = pool::max_pool(ctx, ctx.tensor(input), w);
  return {values, indices};
}

// max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride,
// padding, dilation, ceil_mode, indices).
std::vector<Value> max_pool3d_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const at::Tensor& indices = a.tensor(7);
  const Window w = parse_window_3d(a, 2, true, input, a.boolean(6));
  at::native::max_pool3d_backward_shape_check(
      input, grad_output, indices, input.size(-4), w.kernel[0], w.kernel[1], w.kernel[2],
      w.stride[0], w.stride[1], w.stride[2], w.padding[0], w.padding[1], w.padding[2],
      w.dilation[0], w.dilation[1], w.dilation[2], w.in[0], w.in[1], w.in[2], w.out[0], w.out[1],
      w.out[2], "max_pool3d_with_indices_backward_out_cpu_template()");
  pool::check_kernel_dtype(input, "max_pool3d_backward", false);
  return {pool::max_pool_backward(ctx, grad_output, input, indices, 3)};
}

// avg_pool3d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override).
std::vector<Value> avg_pool3d(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const auto divisor_override = a.opt_integer(6);
  const Window w = parse_window_3d(a, 1, false, input, a.boolean(4));
  TORCH_CHECK(!divisor_override.has_value() || divisor_override.value() != 0,
              "divisor must be not zero");
  check_pool3d(input, w, "avg_pool3d()", true);
  pool::check_kernel_dtype(input, "avg_pool3d_out_frame", true);
  if (input.numel() == 0)
    return {ctx.g().constant(0, {to_ir(input.scalar_type()), out_shape(input, w)})};
  return {pool::avg_pool(ctx, input, w, a.boolean(5), divisor_override)};
}

// avg_pool3d_backward(grad_output, self, kernel_size, stride, padding,
// ceil_mode, count_include_pad, divisor_override).
std::vector<Value> avg_pool3d_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const auto divisor_override = a.opt_integer(7);
  const Window w = parse_window_3d(a, 2, false, input, a.boolean(5));
  TORCH_CHECK(!divisor_override.has_value() || divisor_override.value() != 0,
              "divisor must be not zero");
  at::native::avg_pool3d_backward_shape_check(
      input, grad_output, input.size(-4), w.kernel[0], w.kernel[1], w.kernel[2], w.stride[0],
      w.stride[1], w.stride[2], w.padding[0], w.padding[1], w.padding[2], w.in[0], w.in[1], w.in[2],
      w.out[0], w.out[1], w.out[2], "avg_pool3d_backward()");
  pool::check_kernel_dtype(input, "avg_pool3d_backward_out_frame", true);
  if (input.numel() == 0)
    return {ctx.g().constant(0, {to_ir(input.scalar_type()), input.sizes().vec()})};
  return {pool::avg_pool_backward(ctx, grad_output, input, w, a.boolean(6), divisor_override)};
}

// ------------------------------------------------------------------ adaptive max

// Adaptive max pooling over the last k dims. Output cell o of a dim reads input
// [start, end) with start = floor(o * in / out), end = ceil((o + 1) * in / out)
// (AdaptivePooling.h start_index / end_index), so windows differ in size. The
// CPU kernel scans a window in row-major order (AdaptiveMaxPoolKernel.cpp):
// start from -inf and the window's first element, take an element when
// `val > max || isnan(val)`. So the result is the window's first maximum, or
// its last NaN. Here every window is gathered at once, padded to the largest
// window (positions past a window's end masked to the lowest value), and
// reduced along one window axis: the first maximum by the argmax reducer (the
// flat input index grows along a window, so its smallest index is its first
// position), the last NaN by the largest index of a NaN. (An unrolled scan
// over the window's offsets took XLA:CPU 8 s to compile for a 20 x 20 global
// pool.)
std::pair<Value, Value> adaptive_max(LoweringContext& ctx, Value x, const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& out) {
  auto& g = ctx.g();
  const int64_t k = static_cast<int64_t>(in.size());
  const auto full = dims(ctx, x);
  const int64_t rank = static_cast<int64_t>(full.size()), lead = rank - k;
  const DType dt = dtype(ctx, x);
  // Per dim d: the clamped input position of (cell o, offset w), whether it
  // lies inside the window, both [out[d], window[d]].
  std::vector<Value> position(k), inside(k);
  std::vector<int64_t> window(k), stride_of(k);
  int64_t inner = 1;
  for (int64_t d = k - 1; d >= 0; --d) {
    stride_of[d] = inner;
    inner *= in[d];
    int64_t widest = 0;
    for (int64_t i = 0; i < out[d]; ++i) {
      widest = std::max(widest, at::native::end_index(i, out[d], in[d]) -
                                    at::native::start_index(i, out[d], in[d]));
    }
    window[d] = widest;
    const ir::TensorType t{DType::kI64, {out[d], widest}};
    auto splat = [&](int64_t v) { return g.constant_int(v, t); };
    Value o = g.iota(t, 0);
    Value start = g.binary(Op::kDiv, g.binary(Op::kMul, o, splat(in[d])), splat(out[d]));
    Value next = g.binary(Op::kMul, g.binary(Op::kAdd, o, splat(1)), splat(in[d]));
    Value end = g.binary(Op::kDiv, g.binary(Op::kAdd, next, splat(out[d] - 1)), splat(out[d]));
    Value pos = g.binary(Op::kAdd, start, g.iota(t, 1));
    inside[d] = g.compare(Cmp::kLT, pos, end);
    position[d] = g.binary(Op::kMin, pos, splat(in[d] - 1));
  }
  // Gather dim by dim: [lead..., o0, w0, o1, w1, ...], then the window axes
  // moved last and flattened: [lead..., o0, o1, ..., W].
  Value v = x;
  for (int64_t d = 0; d < k; ++d) {
    const int64_t axis = lead + 2 * d;
    v = take_along_dim(ctx, v, axis, g.reshape(position[d], {out[d] * window[d]}));
    std::vector<int64_t> split = dims(ctx, v);
    split[axis] = out[d];
    split.insert(split.begin() + axis + 1, window[d]);
    v = g.reshape(v, split);
  }
  std::vector<int64_t> perm(lead), cells(k), offsets(k);
  for (int64_t i = 0; i < lead; ++i) perm[i] = i;
  for (int64_t d = 0; d < k; ++d) {
    perm.push_back(lead + 2 * d);
    cells[d] = 2 * d;
    offsets[d] = 2 * d + 1;
  }
  for (int64_t d = 0; d < k; ++d) perm.push_back(lead + 2 * d + 1);
  int64_t wide = 1;
  for (int64_t w : window) wide *= w;
  std::vector<int64_t> flat_shape(full.begin(), full.begin() + lead), cell_window;
  flat_shape.insert(flat_shape.end(), out.begin(), out.end());
  const std::vector<int64_t> out_full = flat_shape;
  flat_shape.push_back(wide);
  v = g.reshape(g.transpose(v, perm), flat_shape);
  // The flat input index and the inside mask over [o0, w0, o1, w1, ...].
  std::vector<int64_t> pairs;
  for (int64_t d = 0; d < k; ++d) {
    pairs.push_back(out[d]);
    pairs.push_back(window[d]);
  }
  Value idx, valid;
  for (int64_t d = 0; d < k; ++d) {
    Value term = g.binary(Op::kMul, position[d],
                          g.constant_int(stride_of[d], {DType::kI64, {out[d], window[d]}}));
    term = g.broadcast_in_dim(term, pairs, {2 * d, 2 * d + 1});
    Value ok = g.broadcast_in_dim(inside[d], pairs, {2 * d, 2 * d + 1});
    idx = idx.valid() ? g.binary(Op::kAdd, idx, term) : term;
    valid = valid.valid() ? g.binary(Op::kAnd, valid, ok) : ok;
  }
  std::vector<int64_t> pair_perm(cells);
  pair_perm.insert(pair_perm.end(), offsets.begin(), offsets.end());
  cell_window.assign(out.begin(), out.end());
  cell_window.push_back(wide);
  std::vector<int64_t> keep(k + 1);
  for (int64_t i = 0; i <= k; ++i) keep[i] = lead + i;
  auto spread = [&](Value pair_value) {
    return g.broadcast_in_dim(g.reshape(g.transpose(pair_value, pair_perm), cell_window),
                              flat_shape, keep);
  };
  idx = spread(idx);
  valid = spread(valid);
  const bool is_float = ir::is_float(dt);
  Value lowest =
      is_float ? ctx.constant(-std::numeric_limits<double>::infinity(), dt)
               : g.constant_int(dt == DType::kI64 ? std::numeric_limits<int64_t>::min()
                                                  : -(int64_t{1} << (8 * ir::byte_size(dt) - 1)),
                                {dt, {}});
  const int64_t axis = static_cast<int64_t>(flat_shape.size()) - 1;
  Value masked = g.select(valid, v, g.broadcast_in_dim(lowest, flat_shape, {}));
  const Value no_index = g.constant_int(std::numeric_limits<int64_t>::max(), {DType::kI64, {}});
  auto r = g.reduce({masked, idx}, {lowest, no_index}, {axis}, ir::Reducer::kArgMax);
  Value best = r[0], arg = r[1];
  if (is_float) {
    Value is_nan = g.binary(Op::kAnd, valid, g.compare(Cmp::kNE, v, v));
    Value none = g.constant_int(-1, {DType::kI64, flat_shape});
    Value last_nan = reduce(ctx, g.select(is_nan, idx, none), {axis}, false, ir::Reducer::kMax);
    Value has_nan = g.compare(Cmp::kGE, last_nan, g.constant_int(0, {DType::kI64, out_full}));
    arg = g.select(has_nan, last_nan, arg);
  }
  return {best, arg};
}

// adaptive_max_pool{2,3}d(self, output_size) -> (values, indices).
template <int64_t K>
std::vector<Value> adaptive_max_pool(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const auto output_size = a.ints(1);
  const int64_t ndim = input.dim();
  const char* name = K == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  TORCH_CHECK(ndim == K + 1 || ndim == K + 2, name, "(): Expected ", K + 1, "D or ", K + 2,
              "D tensor, but got: ", input.sizes());
  for (int64_t i = 1; i < ndim; ++i) {
    TORCH_CHECK(input.size(i) > 0, name,
                "(): Expected input to have non-zero size for non-batch dimensions, "
                "but input has sizes ",
                input.sizes(), " with dimension ", i, " being empty");
  }
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == K, name,
              "(): internal error: output_size.size() must be ", K);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()), "\"",
                              K == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d_cpu",
                              "\" not implemented for '", input.scalar_type(), "'");
  std::vector<int64_t> in(input.sizes().end() - K, input.sizes().end());
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - K);
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  bool empty = input.numel() == 0;
  for (int64_t o : output_size) empty = empty || o == 0;
  if (empty) {
    return {ctx.g().constant(0, {to_ir(input.scalar_type()), shape}),
            ctx.g().constant(0, {DType::kI64, shape})};
  }
  auto [values, indices] = adaptive_max(ctx, ctx.tensor(input), in, output_size);
  return {values, indices};
}

// adaptive_max_pool{2,3}d_backward(grad_output, self, indices).
template <int64_t K>
std::vector<Value> adaptive_max_pool_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const at::Tensor& indices = a.tensor(2);
  const int64_t ndim = grad_output.dim();
  TORCH_CHECK(ndim == K + 1 || ndim == K + 2, "adaptive_max_pooling", K, "d_backward(): Expected ",
              K + 1, "D or ", K + 2, "D grad_output, but got: ", grad_output.sizes());
  at::native::adaptive_pool_empty_output_check(
      grad_output, K == 2 ? "adaptive_max_pool2d_backward" : "adaptive_max_pool3d_backward");
  TORCH_CHECK(input.dtype() == grad_output.dtype(), "expected dtype ", input.dtype(),
              " for `grad_output` but got dtype ", grad_output.dtype());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()), "\"", "adaptive_max_pool", K,
                              "d_backward\" not implemented for '", input.scalar_type(), "'");
  if (input.numel() == 0)
    return {ctx.g().constant(0, {to_ir(input.scalar_type()), input.sizes().vec()})};
  return {pool::max_pool_backward(ctx, grad_output, input, indices, K)};
}

RegisterLowering kPool3dRules[] = {
    {"max_pool3d_with_indices", max_pool3d},
    {"max_pool3d_with_indices_backward", max_pool3d_backward},
    {"avg_pool3d", avg_pool3d},
    {"avg_pool3d_backward", avg_pool3d_backward},
    {"adaptive_max_pool2d", adaptive_max_pool<2>},
    {"adaptive_max_pool3d", adaptive_max_pool<3>},
    {"adaptive_max_pool2d_backward", adaptive_max_pool_backward<2>},
    {"adaptive_max_pool3d_backward", adaptive_max_pool_backward<3>},
};

}  // namespace
}  // namespace ttpu::aten
