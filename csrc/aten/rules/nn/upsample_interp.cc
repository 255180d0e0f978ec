// Lowerings of the interpolating upsamplings and of every upsampling's backward:
// upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d,
// upsample_bicubic2d, _upsample_nearest_exact{1,2,3}d, _upsample_{bilinear,bicubic}2d_aa,
// and the *_backward op of each of these and of upsample_nearest{1,2,3}d
// (forward in upsample_nearest.cc).
//
// Each resized dim is described by "taps": for every output position o, K input
// positions index_k[o] and weights weight_k[o], both computed from an iota with
// the CPU kernels' float arithmetic (aten/src/ATen/native/UpSample.h and
// cpu/UpSampleKernel.cpp, HelperInterpLinear / HelperInterpCubic):
//   linear  K=2: compute_source_index_and_lambda (a copy when sizes are equal)
//   cubic   K=4: guard_index_and_lambda, get_cubic_upsample_coefficients with
//                A = -0.75, positions clamped to [0, n) (upsample_get_value_bounded)
//   nearest K=1: nearest_idx (shortcuts for m == n and m == 2n) or
//                nearest_exact_idx (floorf((o + 0.5) * scale)), weight 1.
// The forward gathers each tap along the dim and sums weight * value in tap
// order, innermost dim first: that is the order of upsample_generic_Nd_kernel's
// recursive Interpolate (outer weight times the inner interpolation). The
// backward contracts the output gradient with the dense [m, n] matrix
// W[o, i] = sum_k weight_k[o] * (index_k[o] == i), the transpose of the forward.
// The antialiased bilinear resize has a support that grows with the scale, so
// it is built as that dense matrix directly (see aa_matrix) and applied as a
// product both ways.
#include <ATen/TensorUtils.h>
#include <ATen/native/UpSample.h>

#include <cmath>

#include "aten/fallback.h"
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

enum class Mode { kNearest, kNearestExact, kLinear, kCubic, kLinearAA, kCubicAA };

bool antialiased(Mode mode) { return mode == Mode::kLinearAA || mode == Mode::kCubicAA; }

// The positions and weights of one resized dim: each value is [m].
struct Taps {
  std::vector<Value> index;   // i64
  std::vector<Value> weight;  // compute dtype
};

// 16-bit floats are interpolated in f32 (the kernels' opmath_t); f64 stays f64.
DType interp_compute_dtype(DType dt) { return dt == DType::kF64 ? DType::kF64 : DType::kF32; }

// area_pixel_compute_scale in the kernel's opmath type.
double pixel_scale(int64_t n, int64_t m, bool align_corners, std::optional<double> scale,
                   DType ct) {
  if (ct == DType::kF64)
    return at::native::area_pixel_compute_scale<double>(n, m, align_corners, scale);
  return at::native::area_pixel_compute_scale<float>(n, m, align_corners, scale);
}

class TapBuilder {
 public:
  TapBuilder(LoweringContext& ctx, int64_t n, int64_t m, DType ct)
      : g_(ctx.g()), n_(n), m_(m), ct_(ct) {}

  Value i64(int64_t v) { return g_.constant_int(v, {DType::kI64, {m_}}); }
  Value real(double v) { return g_.constant(v, {ct_, {m_}}); }
  Value iota() { return g_.iota({DType::kI64, {m_}}, 0); }

  // area_pixel_compute_source_index over every output position.
  Value source_index(double ratio, bool align_corners, bool cubic) {
    Value j = g_.convert(iota(), ct_);
    if (align_corners) return g_.binary(Op::kMul, real(ratio), j);
    Value r = g_.binary(
        Op::kSub, g_.binary(Op::kMul, real(ratio), g_.binary(Op::kAdd, j, real(0.5))), real(0.5));
    if (cubic) return r;
    return g_.select(g_.compare(Cmp::kLT, r, real(0)), real(0), r);
  }

  // guard_index_and_lambda: {min(floor(r), n - 1), clamp(r - index, 0, 1)}.
  std::pair<Value, Value> guard(Value r) {
    Value index =
        g_.binary(Op::kMin, g_.convert(g_.unary(Op::kFloor, r), DType::kI64), i64(n_ - 1));
    Value lambda = g_.binary(Op::kSub, r, g_.convert(index, ct_));
    return {index, g_.clamp(real(0), lambda, real(1))};
  }

  Taps linear(bool align_corners, std::optional<double> scale) {
    if (m_ == n_) return {{iota(), iota()}, {real(1), real(0)}};
    auto [i0, lambda1] =
        guard(source_index(pixel_scale(n_, m_, align_corners, scale, ct_), align_corners, false));
    Value step = g_.convert(g_.compare(Cmp::kLT, i0, i64(n_ - 1)), DType::kI64);
    return {{i0, g_.binary(Op::kAdd, i0, step)}, {g_.binary(Op::kSub, real(1), lambda1), lambda1}};
  }

  Taps cubic(bool align_corners, std::optional<double> scale) {
    auto [i, t] =
        guard(source_index(pixel_scale(n_, m_, align_corners, scale, ct_), align_corners, true));
    constexpr double A = -0.75;
    // cubic_convolution1 / cubic_convolution2 of UpSample.h, in its evaluation order.
    auto conv1 = [&](Value x) {
      Value p = g_.binary(Op::kSub, g_.binary(Op::kMul, real(A + 2), x), real(A + 3));
      return g_.binary(Op::kAdd, g_.binary(Op::kMul, g_.binary(Op::kMul, p, x), x), real(1));
    };
    auto conv2 = [&](Value x) {
      Value p = g_.binary(Op::kSub, g_.binary(Op::kMul, real(A), x), real(5 * A));
      p = g_.binary(Op::kAdd, g_.binary(Op::kMul, p, x), real(8 * A));
      return g_.binary(Op::kSub, g_.binary(Op::kMul, p, x), real(4 * A));
    };
    Value x2 = g_.binary(Op::kSub, real(1), t);
    Taps taps;
    taps.weight = {conv2(g_.binary(Op::kAdd, t, real(1))), conv1(t), conv1(x2),
                   conv2(g_.binary(Op::kAdd, x2, real(1)))};
    for (int64_t k = 0; k < 4; ++k) {
      taps.index.push_back(g_.clamp(i64(0), g_.binary(Op::kAdd, i, i64(k - 1)), i64(n_ - 1)));
    }
    return taps;
  }

  Taps nearest(std::optional<double> scale) {
    if (m_ == n_) return {{iota()}, {real(1)}};
    if (m_ == 2 * n_) return {{g_.binary(Op::kShiftRightArithmetic, iota(), i64(1))}, {real(1)}};
    const float s = at::native::compute_scales_value<float>(scale, n_, m_);
    Value j = g_.convert(iota(), DType::kF32);
    Value src = g_.unary(Op::kFloor, g_.binary(Op::kMul, j, g_.constant(s, {DType::kF32, {m_}})));
    return {{g_.binary(Op::kMin, g_.convert(src, DType::kI64), i64(n_ - 1))}, {real(1)}};
  }

  // nearest_neighbor_exact_compute_source_index: (o + 0.5) is a double, the
  // product is rounded to float for floorf.
  Taps nearest_exact(std::optional<double> scale) {
    const float s = at::native::compute_scales_value<float>(scale, n_, m_);
    const ir::TensorType d{DType::kF64, {m_}};
    Value j = g_.binary(Op::kAdd, g_.convert(iota(), DType::kF64), g_.constant(0.5, d));
    Value p =
        g_.convert(g_.binary(Op::kMul, j, g_.constant(static_cast<double>(s), d)), DType::kF32);
    Value src = g_.convert(g_.unary(Op::kFloor, p), DType::kI64);
    return {{g_.binary(Op::kMin, src, i64(n_ - 1))}, {real(1)}};
  }

 private:
  ir::Graph& g_;
  int64_t n_, m_;
  DType ct_;
};

Taps make_taps(LoweringContext& ctx, Mode mode, int64_t n, int64_t m, bool align_corners,
               std::optional<double> scale, DType ct) {
  TapBuilder b(ctx, n, m, ct);
  switch (mode) {
    case Mode::kNearest: return b.nearest(scale);
    case Mode::kNearestExact: return b.nearest_exact(scale);
    case Mode::kLinear: return b.linear(align_corners, scale);
    case Mode::kCubic: return b.cubic(align_corners, scale);
    case Mode::kLinearAA:
    case Mode::kCubicAA: break;  // a dense matrix: aa_matrix
  }
  return {};
}

// x resized along `dim` to the taps' length: sum_k weight_k * x[index_k].
Value apply_taps(LoweringContext& ctx, Value x, int64_t dim, const Taps& taps) {
  auto& g = ctx.g();
  Value acc;
  for (size_t k = 0; k < taps.index.size(); ++k) {
    Value v = take_along_dim(ctx, x, dim, taps.index[k]);
    if (taps.index.size() == 1) return v;  // nearest: weight 1
    Value w = g.broadcast_in_dim(taps.weight[k], dims(ctx, v), {dim});
    Value term = g.binary(Op::kMul, v, w);
    acc = acc.valid() ? g.binary(Op::kAdd, acc, term) : term;
  }
  return acc;
}

// The [m, n] matrix of the dim's linear map.
Value taps_matrix(LoweringContext& ctx, const Taps& taps, int64_t m, int64_t n, DType ct) {
  auto& g = ctx.g();
  const ir::TensorType it{DType::kI64, {m, n}}, ft{ct, {m, n}};
  Value column = g.iota(it, 1);
  Value acc = g.constant(0, ft);
  for (size_t k = 0; k < taps.index.size(); ++k) {
    Value hit = g.compare(Cmp::kEQ, g.broadcast_in_dim(taps.index[k], {m, n}, {0}), column);
    Value w = g.broadcast_in_dim(taps.weight[k], {m, n}, {0});
    acc = g.binary(Op::kAdd, acc, g.select(hit, w, g.constant(0, ft)));
  }
  return acc;
}

// The [m, n] matrix of the antialiased filter along one dim: CPU's
// HelperInterpBase::_compute_indices_min_size_weights_aa (UpSampleKernel.cpp),
// interp_size 2 (linear) or 4 (cubic), with its float / double roundings.
// Output o covers input [xmin, xmin + xsize) around center = scale * (o + 0.5)
// with support h * max(scale, 1), h = interp_size / 2; weights
// filter((i - center + 0.5) * invscale), normalised to sum 1. The filters are
// HelperInterpLinear::aa_filter, max(0, 1 - |x|), and
// HelperInterpCubic::aa_filter, Keys' cubic convolution with a = -0.5
// ("Cubic convolution interpolation for digital image processing", 1981).
Value aa_matrix(LoweringContext& ctx, Mode mode, int64_t n, int64_t m, bool align_corners,
                std::optional<double> scale_arg, DType ct) {
  auto& g = ctx.g();
  const double scale = pixel_scale(n, m, align_corners, scale_arg, ct);
  auto as_ct = [&](double v) {
    return ct == DType::kF64 ? v : static_cast<double>(static_cast<float>(v));
  };
  const double half = mode == Mode::kCubicAA ? 2.0 : 1.0;
  const double support = as_ct(scale >= 1.0 ? half * scale : half);
  const double invscale = as_ct(scale >= 1.0 ? 1.0 / scale : 1.0);
  const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const std::vector<int64_t> shape{m, n};
  const ir::TensorType d{DType::kF64, shape}, c{ct, shape}, it{DType::kI64, shape};
  Value o = g.convert(g.iota(it, 0), DType::kF64), i = g.iota(it, 1);
  Value center = g.convert(
      g.binary(Op::kMul, g.constant(scale, d), g.binary(Op::kAdd, o, g.constant(0.5, d))), ct);
  auto edge = [&](double sign) {  // int64(center -/+ support + 0.5)
    Value e = g.convert(g.binary(Op::kAdd, center, g.constant(sign * support, c)), DType::kF64);
    return g.convert(g.binary(Op::kAdd, e, g.constant(0.5, d)), DType::kI64);
  };
  Value xmin = g.binary(Op::kMax, edge(-1), g.constant_int(0, it));
  Value xsize = g.binary(Op::kSub, g.binary(Op::kMin, edge(1), g.constant_int(n, it)), xmin);
  xsize = g.clamp(g.constant_int(0, it), xsize, g.constant_int(max_size, it));
  Value inside = g.binary(Op::kAnd, g.compare(Cmp::kGE, i, xmin),
                          g.compare(Cmp::kLT, i, g.binary(Op::kAdd, xmin, xsize)));
  Value x = g.binary(Op::kSub, g.convert(i, ct), center);
  x = g.binary(Op::kMul, g.binary(Op::kAdd, g.convert(x, DType::kF64), g.constant(0.5, d)),
               g.constant(invscale, d));
  x = g.unary(Op::kAbs, g.convert(x, ct));
  auto k = [&](double v) { return g.constant(v, c); };
  auto add = [&](Value p, Value q) { return g.binary(Op::kAdd, p, q); };
  auto mul = [&](Value p, Value q) { return g.binary(Op::kMul, p, q); };
  Value w;
  if (mode == Mode::kCubicAA) {
    const double a = -0.5;
    // ((a + 2) x - (a + 3)) x^2 + 1 below 1; ((a x - 5a) x + 8a) x - 4a below 2.
    Value near = add(mul(mul(add(mul(k(a + 2), x), k(-(a + 3))), x), x), k(1));
    Value far = add(mul(add(mul(add(mul(k(a), x), k(-5 * a)), x), k(8 * a)), x), k(-4 * a));
    w = g.select(g.compare(Cmp::kLT, x, k(1)), near,
                 g.select(g.compare(Cmp::kLT, x, k(2)), far, k(0)));
  } else {
    w = g.select(g.compare(Cmp::kLT, x, k(1)), g.binary(Op::kSub, k(1), x), k(0));
  }
  w = g.select(inside, w, g.constant(0, c));
  Value total = g.broadcast_in_dim(reduce(ctx, w, {1}, false, ir::Reducer::kAdd), shape, {0});
  Value nonzero = g.compare(Cmp::kNE, total, g.constant(0, c));
  return g.select(nonzero, g.binary(Op::kDiv, w, total), w);
}

// ATen's upsample_{1,2,3}d_common_check.
std::vector<int64_t> common_check(int64_t k, c10::IntArrayRef input_size,
                                  c10::IntArrayRef output_size) {
  if (k == 1) {
    auto r = at::native::upsample_1d_common_check(input_size, output_size);
    return {r.begin(), r.end()};
  }
  if (k == 2) {
    auto r = at::native::upsample_2d_common_check(input_size, output_size);
    return {r.begin(), r.end()};
  }
  auto r = at::native::upsample_3d_common_check(input_size, output_size);
  return {r.begin(), r.end()};
}

std::optional<double> opt_real(const Args& a, size_t i) {
  if (a.is_none(i)) return std::nullopt;
  return a.real(i);
}

// One op's description: its mode, rank, and the name CPU's dtype error gives.
struct Spec {
  Mode mode;
  int64_t k;
  const char* kernel;           // forward: the dispatch name in CPU's NotImplementedError
  const char* backward_kernel;  // backward: likewise
};

bool has_align(Mode mode) { return mode != Mode::kNearest && mode != Mode::kNearestExact; }

// upsample_*(self, output_size, [align_corners,] scales...).
std::vector<Value> upsample_forward(LoweringContext& ctx, const Args& a, const Spec& s) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const auto out = a.ints(1);
  const auto full = common_check(s.k, self.sizes(), out);
  // The meta functions allow an empty batch but no other empty dim.
  bool ok = self.dim() == s.k + 2;
  for (int64_t d = 1; ok && d < self.dim(); ++d) ok = self.size(d) != 0;
  TORCH_CHECK(ok || (s.k > 1 && self.numel() != 0), "Non-empty ", s.k + 2,
              "D data tensor expected but got a tensor with sizes ", self.sizes());
  const auto st = self.scalar_type();
  const bool nearest = s.mode == Mode::kNearestExact;
  // CPU interpolates uint8 images with Pillow's fixed-point weights
  // (UpSampleKernelAVXAntialias.h), which this float lowering does not repeat:
  // such calls run on CPU.
  if (!nearest && st == at::kByte) decline_to_cpu(" for uint8 input");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st) || (nearest && st == at::kByte), "\"",
                              s.kernel, "\" not implemented for '", st, "'");
  const DType dt = to_ir(st);
  if (self.numel() == 0) return {g.constant(0, {dt, full})};
  const DType ct = interp_compute_dtype(dt);
  const bool align = has_align(s.mode) && a.boolean(2);
  const size_t scales = has_align(s.mode) ? 3 : 2;
  Value x = ctx.tensor(self);
  if (!nearest) x = g.convert(x, ct);
  for (int64_t j = s.k - 1; j >= 0; --j) {
    const int64_t d = 2 + j;
    if (antialiased(s.mode)) {
      // The separable kernel resizes W, then H, skipping a dim of unchanged size.
      if (self.size(d) != out[j]) {
        Value w = aa_matrix(ctx, s.mode, self.size(d), out[j], align, opt_real(a, scales + j), ct);
        x = contract_dim(ctx, x, d, g.transpose(w, {1, 0}));
      }
      continue;
    }
    Taps taps = make_taps(ctx, s.mode, self.size(d), out[j], align, opt_real(a, scales + j), ct);
    if (dt != ct) {  // the kernels keep 16-bit weights in the input's type
      for (Value& w : taps.weight) w = g.convert(g.convert(w, dt), ct);
    }
    x = apply_taps(ctx, x, d, taps);
  }
  return {g.convert(x, dt)};
}

// upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...).
std::vector<Value> upsample_backward(LoweringContext& ctx, const Args& a, const Spec& s) {
  auto& g = ctx.g();
  const at::Tensor& grad = a.tensor(0);
  const auto out = a.ints(1), in = a.ints(2);
  const auto full = common_check(s.k, in, out);
  if (s.k == 1) {
    for (int64_t d = 0; d < 3; ++d) at::check_dim_size(grad, 3, d, full[d]);
  } else {
    TORCH_CHECK(grad.dim() == s.k + 2, "Expected grad_output to be a tensor of dimension ", s.k + 2,
                " but got: dimension ", grad.dim());
    for (int64_t d = 0; d < s.k + 2; ++d) {
      TORCH_CHECK(grad.size(d) == full[d], "Expected grad_output to have the same shape as output;",
                  " output.size(", d, ") = ", full[d], " but got grad_output.size(", d,
                  ") = ", grad.size(d));
    }
  }
  const auto st = grad.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"", s.backward_kernel,
                              "\" not implemented for '", st, "'");
  const DType dt = to_ir(st);
  if (grad.numel() == 0) return {g.constant(0, {dt, in})};
  const DType ct = interp_compute_dtype(dt);
  const bool align = has_align(s.mode) && a.boolean(3);
  const size_t scales = has_align(s.mode) ? 4 : 3;
  Value dy = g.convert(ctx.tensor(grad), ct);
  for (int64_t j = 0; j < s.k; ++j) {
    const int64_t n = in[2 + j], m = out[j];
    if (antialiased(s.mode)) {
      dy = contract_dim(ctx, dy, 2 + j,
                        aa_matrix(ctx, s.mode, n, m, align, opt_real(a, scales + j), ct));
      continue;
    }
    Taps taps = make_taps(ctx, s.mode, n, m, align, opt_real(a, scales + j), ct);
    if (dt != ct) {
      for (Value& w : taps.weight) w = g.convert(g.convert(w, dt), ct);
    }
    dy = contract_dim(ctx, dy, 2 + j, taps_matrix(ctx, taps, m, n, ct));
  }
  return {g.convert(dy, dt)};
}

constexpr Spec kLinear1d{Mode::kLinear, 1, "compute_indices_weights_linear",
                         "upsample_linear1d_backward"};
constexpr Spec kBilinear2d{Mode::kLinear, 2, "upsample_bilinear2d_channels_last",
                           "upsample_bilinear2d_backward"};
constexpr Spec kTrilinear3d{Mode::kLinear, 3, "compute_indices_weights_linear",
                            "upsample_trilinear3d_backward"};
constexpr Spec kBicubic2d{Mode::kCubic, 2, "compute_indices_weights_cubic",
                          "upsample_bicubic2d_backward"};
constexpr Spec kBicubic2dAA{Mode::kCubicAA, 2, "compute_index_ranges_weights",
                            "upsample_bicubic2d_aa_backward_cpu"};
constexpr Spec kBilinear2dAA{Mode::kLinearAA, 2, "compute_index_ranges_weights",
                             "upsample_bilinear2d_aa_backward_cpu"};
constexpr Spec kExact1d{Mode::kNearestExact, 1, "compute_indices_weights_nearest",
                        "_upsample_nearest_exact1d_backward"};
constexpr Spec kExact2d{Mode::kNearestExact, 2, "upsample_nearest2d_channels_last",
                        "_upsample_nearest_exact2d_backward"};
constexpr Spec kExact3d{Mode::kNearestExact, 3, "compute_indices_weights_nearest",
                        "_upsample_nearest_exact3d_backward"};
constexpr Spec kNearest1d{Mode::kNearest, 1, "", "upsample_nearest1d_backward"};
constexpr Spec kNearest2d{Mode::kNearest, 2, "", "upsample_nearest2d_backward"};
constexpr Spec kNearest3d{Mode::kNearest, 3, "", "upsample_nearest3d_backward"};

template <const Spec& S>
std::vector<Value> forward_rule(LoweringContext& ctx, const Args& a) {
  return upsample_forward(ctx, a, S);
}
template <const Spec& S>
std::vector<Value> backward_rule(LoweringContext& ctx, const Args& a) {
  return upsample_backward(ctx, a, S);
}

RegisterLowering kUpsampleInterpRules[] = {
    {"upsample_linear1d", forward_rule<kLinear1d>},
    {"upsample_bilinear2d", forward_rule<kBilinear2d>},
    {"upsample_trilinear3d", forward_rule<kTrilinear3d>},
    {"upsample_bicubic2d", forward_rule<kBicubic2d>},
    {"_upsample_bilinear2d_aa", forward_rule<kBilinear2dAA>},
    {"_upsample_bicubic2d_aa", forward_rule<kBicubic2dAA>},
    {"_upsample_nearest_exact1d", forward_rule<kExact1d>},
    {"_upsample_nearest_exact2d", forward_rule<kExact2d>},
    {"_upsample_nearest_exact3d", forward_rule<kExact3d>},
    {"upsample_linear1d_backward", backward_rule<kLinear1d>},
    {"upsample_bilinear2d_backward", backward_rule<kBilinear2d>},
    {"upsample_trilinear3d_backward", backward_rule<kTrilinear3d>},
    {"upsample_bicubic2d_backward", backward_rule<kBicubic2d>},
    {"_upsample_bilinear2d_aa_backward", backward_rule<kBilinear2dAA>},
    {"_upsample_bicubic2d_aa_backward", backward_rule<kBicubic2dAA>},
    {"_upsample_nearest_exact1d_backward", backward_rule<kExact1d>},
    {"_upsample_nearest_exact2d_backward", backward_rule<kExact2d>},
    {"_upsample_nearest_exact3d_backward", backward_rule<kExact3d>},
    {"upsample_nearest1d_backward", backward_rule<kNearest1d>},
    {"upsample_nearest2d_backward", backward_rule<kNearest2d>},
    {"upsample_nearest3d_backward", backward_rule<kNearest3d>},
};

}  // namespace
}  // namespace ttpu::aten
