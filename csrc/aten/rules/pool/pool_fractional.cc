// Lowerings of fractional max pooling: fractional_max_pool2d / 3d and their
// backward ops. The randomness is an input (random_samples [N, C, K], drawn by
// the composite F.fractional_max_pool*d), so the ops themselves are
// deterministic.
//
// Per plane and spatial dim, window o starts at
// int((o + u) * alpha) - int(u * alpha) with alpha = (in - k) / (out - 1) in
// the input's dtype, the last window at in - k (ATen's generate_intervals,
// FractionalMaxPooling.h); u is the plane's sample for that dim: samples
// (W, H) for 2-D and (T, H, W) for 3-D (FractionalMaxPool2d.cpp / 3d.cpp).
// The windows are k wide and scanned in row-major order from max = -inf and
// the window's first element, taking `val > max || isnan(val)`; indices are
// flat over a plane. Starts differ per plane, so each window offset is one
// gather of every plane's elements. The backward is max pooling's
// (pool_util.h): gradients added at the indices.
#include <ATen/native/FractionalMaxPooling.h>

#include <limits>

#include "aten/ops_util.h"
#include "aten/rules/pool/pool_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

template <int64_t K>
const char* fn_name() {
  return K == 2 ? "fractional_max_pool2d()" : "fractional_max_pool3d_out()";
}

// The meta functions' checks; `pool` and `out` are the spatial sizes.
template <int64_t K>
void check(const at::Tensor& input, const std::vector<int64_t>& pool,
           const std::vector<int64_t>& out) {
  static const char* kNames3[] = {"time", "height", "width"};
  static const char* kNames2[] = {"height", "width"};
  const char* const* names = K == 2 ? kNames2 : kNames3;
  const int64_t ndim = input.dim();
  TORCH_CHECK(ndim == K + 1 || ndim == K + 2, fn_name<K>(), ": Expected ", K + 1, "D or ", K + 2,
              "D tensor, but got: ", input.sizes());
  for (int64_t i = 1; i < ndim; ++i) {
    TORCH_CHECK(input.size(i) > 0, fn_name<K>(),
                ": Expected input to have non-zero size for non-batch dimensions, "
                "but got",
                input.sizes(), " with dimension ", i, " being empty.");
  }
  for (int64_t d = 0; d < K; ++d) {
    const int64_t in = input.size(ndim - K + d);
    // The 3-D check is strict (FractionalMaxPool3d.cpp), the 2-D one not.
    TORCH_CHECK(K == 2 ? out[d] + pool[d] - 1 <= in : out[d] + pool[d] - 1 < in, fn_name<K>(),
                ": pool ", names[d], " ", pool[d], " too large relative to input ", names[d], " ",
                in);
  }
}

// fractional_max_pool{2,3}d(self, kernel_size, output_size, random_samples).
template <int64_t K>
std::vector<Value> fractional_max_pool(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& input = a.tensor(0);
  const auto pool = a.ints(1), out = a.ints(2);
  const at::Tensor& samples = a.tensor(3);
  const char* name = K == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
  TORCH_CHECK(static_cast<int64_t>(pool.size()) == K, name,
              ": kernel_size must either be a single Int or tuple of Ints");
  TORCH_CHECK(static_cast<int64_t>(out.size()) == K, name,
              ": output_size must either be a single Int or tuple of Ints");
  check<K>(input, pool, out);
  at::native::fractional_max_pool_check_shape<K>(input, samples);
  const auto st = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"", name,
                              "_out_frame\" not implemented for '", st, "'");
  const DType dt = to_ir(st);
  const int64_t ndim = input.dim();
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - K),
      in(input.sizes().end() - K, input.sizes().end());
  const int64_t planes = c10::multiply_integers(shape);
  const int64_t batch = ndim == K + 2 ? input.size(0) : 1,
                channels = planes / std::max<int64_t>(batch, 1);
  shape.insert(shape.end(), out.begin(), out.end());
  if (input.numel() == 0) return {g.constant(0, {dt, shape}), g.constant(0, {DType::kI64, shape})};
  const int64_t volume = c10::multiply_integers(in), m = c10::multiply_integers(out);
  Value x = g.reshape(ctx.tensor(input), {planes, volume});
  // The first `batch` rows of the samples, one row of K per plane.
  Value u = g.slice(ctx.tensor(samples), {0, 0, 0}, {batch, channels, K}, {1, 1, 1});
  u = g.reshape(u, {planes, K});
  // Window starts per spatial dim d, as i64 [planes, out...] flat offsets.
  std::vector<Value> starts(K);
  std::vector<int64_t> stride(K, 1);
  for (int64_t d = K - 2; d >= 0; --d) stride[d] = stride[d + 1] * in[d + 1];
  std::vector<int64_t> full{planes};
  full.insert(full.end(), out.begin(), out.end());
  for (int64_t d = 0; d < K; ++d) {
    const int64_t column = K == 2 ? 1 - d : d;  // 2-D samples are (W, H)
    const int64_t o = out[d];
    const ir::TensorType ft{dt, {planes, o}}, it{DType::kI64, {planes, o}};
    Value ud = g.broadcast_in_dim(
        g.reshape(g.slice(u, {0, column}, {planes, column + 1}, {1, 1}), {planes}), {planes, o},
        {0});
    Value last = g.constant_int(in[d] - pool[d], it);
    Value start = last;
    if (o > 1) {
      // alpha in the input's dtype, as the kernel's scalar_t.
      const double alpha = dt == DType::kF64
                               ? static_cast<double>(in[d] - pool[d]) / static_cast<double>(o - 1)
                               : static_cast<double>(static_cast<float>(in[d] - pool[d]) /
                                                     static_cast<float>(o - 1));
      Value idx = g.iota(it, 1);
      Value a1 =
          g.binary(Op::kMul, g.binary(Op::kAdd, g.convert(idx, dt), ud), g.constant(alpha, ft));
      Value a0 = g.binary(Op::kMul, ud, g.constant(alpha, ft));
      // static_cast<int>: truncation toward zero (the values are >= 0).
      start = g.binary(Op::kSub, g.convert(a1, DType::kI64), g.convert(a0, DType::kI64));
      start = g.select(g.compare(Cmp::kEQ, idx, g.constant_int(o - 1, it)), last, start);
    }
    std::vector<int64_t> bdims{0, 1 + d};
    starts[d] =
        g.broadcast_in_dim(g.binary(Op::kMul, start, g.constant_int(stride[d], it)), full, bdims);
  }
  Value first;
  for (int64_t d = 0; d < K; ++d)
    first = first.valid() ? g.binary(Op::kAdd, first, starts[d]) : starts[d];
  first = g.reshape(first, {planes, m});
  Value plane = g.reshape(g.iota({DType::kI64, {planes, m}}, 0), {planes, m, 1});
  ir::GatherDims gd;
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  gd.slice_sizes = {1, 1};
  const ir::TensorType pm{DType::kI64, {planes, m}};
  Value best = g.constant(-std::numeric_limits<double>::infinity(), {dt, {planes, m}});
  Value arg = first;
  std::vector<int64_t> offset(K, 0);
  while (true) {
    int64_t delta = 0;
    for (int64_t d = 0; d < K; ++d) delta += offset[d] * stride[d];
    Value idx = g.binary(Op::kAdd, first, g.constant_int(delta, pm));
    Value v =
        g.gather(x, g.concatenate({plane, g.reshape(idx, {planes, m, 1})}, 2), gd, {planes, m});
    Value take = g.binary(Op::kOr, g.compare(Cmp::kGT, v, best), g.compare(Cmp::kNE, v, v));
    best = g.select(take, v, best);
    arg = g.select(take, idx, arg);
    int64_t d = K - 1;
    while (d >= 0 && ++offset[d] == pool[d]) offset[d--] = 0;
    if (d < 0) break;
  }
  return {g.reshape(best, shape), g.reshape(arg, shape)};
}

// fractional_max_pool{2,3}d_backward(grad_output, self, kernel_size, output_size, indices).
template <int64_t K>
std::vector<Value> fractional_max_pool_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const auto out = a.ints(3);
  const at::Tensor& indices = a.tensor(4);
  const int64_t ndim = input.dim();
  TORCH_CHECK(static_cast<int64_t>(out.size()) == K && grad_output.dim() == ndim,
              K == 2 ? "fractional_max_pool2d_backward(): gradOutput sizes unexpected"
                     : "fractional_max_pool3d_backward_out(): gradOutput sizes unexpected");
  if (K == 2) {
    bool ok = true;
    for (int64_t d = 0; d < K; ++d) ok = ok && grad_output.size(ndim - K + d) == out[d];
    TORCH_CHECK(ok, "fractional_max_pool2d_backward(): gradOutput sizes unexpected");
  } else {
    static const char* kNames[] = {"time", "height", "width"};
    for (int64_t d = 0; d < K; ++d) {
      TORCH_CHECK(grad_output.size(ndim - K + d) == out[d],
                  "fractional_max_pool3d_backward_out(): gradOutput ", kNames[d], " unexpected");
    }
  }
  TORCH_CHECK(indices.sizes() == grad_output.sizes(), "tpu: fractional max pool indices of size ",
              indices.sizes(), " do not match grad_output's ", grad_output.sizes());
  const auto st = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"fractional_max_pool", K,
                              "d_backward_out_frame\" not "
                              "implemented for '",
                              st, "'");
  if (input.numel() == 0) return {ctx.g().constant(0, {to_ir(st), input.sizes().vec()})};
  return {pool::max_pool_backward(ctx, grad_output, input, indices, K)};
}

RegisterLowering kPoolFractionalRules[] = {
    {"fractional_max_pool2d", fractional_max_pool<2>},
    {"fractional_max_pool3d", fractional_max_pool<3>},
    {"fractional_max_pool2d_backward", fractional_max_pool_backward<2>},
    {"fractional_max_pool3d_backward", fractional_max_pool_backward<3>},
};

}  // namespace
}  // namespace ttpu::aten
