// Lowerings of grid_sampler_2d and grid_sampler_2d_backward
// (F.grid_sample on 4-D input): bilinear, nearest and bicubic sampling with
// zeros, border and reflection padding.
//
// The arithmetic is the CPU kernel's vectorized one (aten/src/ATen/native/cpu/
// GridSamplerKernel.cpp, ComputeLocation / ApplyGridSample): grid coordinates
// are unnormalised with (x + 1) * (size - 1) / 2 (align_corners) or
// (x + 1) * size / 2 - 0.5, then clipped (border) or reflected and clipped
// (reflection); bilinear weights are products of the distances to the four
// neighbours, out-of-range neighbours read 0; nearest rounds half to even;
// bicubic takes 4 x 4 neighbours around the unnormalised point with
// A = -0.75 coefficients, applying the padding to each neighbour. The grid
// gradient uses the coordinate map's derivative (apply_get_grad).
//
// Layout: input [N, C, H, W] is read as [N, H * W, C], so sampling P = Ho * Wo
// points is one gather of C-wide rows per (n, point), and the input gradient one
// scatter-add of such rows.
#include <ATen/native/GridSamplerUtils.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

struct Sampler {
  LoweringContext& ctx;
  int64_t n, c, h, w, p;  // batch, channels, input height / width, points
  DType dt;
  Padding padding;
  bool align_corners;

  ir::Graph& g() { return ctx.g(); }
  Value k(double v) { return g().constant(v, {dt, {n, p}}); }
  Value ik(int64_t v) { return g().constant_int(v, {DType::kI64, {n, p}}); }

  // One axis' coordinate map (ComputeLocation for an axis of `size`).
  double scaling(int64_t size) const {
    return align_corners ? static_cast<double>(size - 1) / 2 : static_cast<double>(size) / 2;
  }
  Value unnormalize(Value x, int64_t size) {
    Value r = g().binary(Op::kMul, g().binary(Op::kAdd, x, k(1)), k(scaling(size)));
    return align_corners ? r : g().binary(Op::kSub, r, k(0.5));
  }
  Value clip(Value x, int64_t size) {
    return g().binary(Op::kMin, k(static_cast<double>(size - 1)), g().binary(Op::kMax, x, k(0)));
  }
  // reflect_coordinates: fold x into [low, low + span] by whole double spans.
  Value reflect(Value x, int64_t size) {
    const double low = align_corners ? 0 : -0.5;
    const double twice_span =
        align_corners ? 2.0 * static_cast<double>(size - 1) : 2.0 * static_cast<double>(size);
    if (twice_span == 0) return k(0);
    Value a = g().unary(Op::kAbs, g().binary(Op::kSub, x, k(low)));
    Value flips = truncate(g().binary(Op::kDiv, a, k(twice_span)));
    Value extra = g().binary(Op::kSub, a, g().binary(Op::kMul, flips, k(twice_span)));
    Value folded = g().binary(Op::kMin, extra, g().binary(Op::kSub, k(twice_span), extra));
    return g().binary(Op::kAdd, folded, k(low));
  }
  Value truncate(Value x) {
    Value neg = g().compare(Cmp::kLT, x, k(0));
    return g().select(neg, g().unary(Op::kCeil, x), g().unary(Op::kFloor, x));
  }
  // compute_coordinates: the padding applied to an unnormalised coordinate.
  Value pad_coordinate(Value x, int64_t size) {
    if (padding == kBorder) return clip(x, size);
    if (padding == kReflection) return clip(reflect(x, size), size);
    return x;
  }
  // apply_get_grad's multiplier: d coordinate / d grid value.
  Value coordinate_grad(Value x, int64_t size) {
    Value scale = k(scaling(size));
    if (padding == kZeros) return scale;
    Value u = unnormalize(x, size);
    Value refl_grad = k(1);
    if (padding == kReflection) {
      const double low = align_corners ? 0 : -0.5;
      const double twice_span =
          align_corners ? 2.0 * static_cast<double>(size - 1) : 2.0 * static_cast<double>(size);
      if (twice_span == 0) return k(0);
      Value shifted = g().binary(Op::kSub, u, k(low));
      Value neg = g().compare(Cmp::kLT, shifted, k(0));
      Value a = g().unary(Op::kAbs, shifted);
      Value flips = truncate(g().binary(Op::kDiv, a, k(twice_span)));
      Value extra = g().binary(Op::kSub, a, g().binary(Op::kMul, flips, k(twice_span)));
      Value reflected = g().binary(Op::kSub, k(twice_span), extra);
      Value more = g().compare(Cmp::kGT, extra, reflected);
      u = g().binary(Op::kAdd, g().select(more, reflected, extra), k(low));
      Value flip = g().compare(Cmp::kNE, more, neg);  // more xor neg
      refl_grad = g().select(flip, k(-1), k(1));
    }
    // clip_coordinates_get_grad: the borders count as outside.
    Value inside = g().binary(Op::kAnd, g().compare(Cmp::kGT, u, k(0)),
                              g().compare(Cmp::kLT, u, k(static_cast<double>(size - 1))));
    return g().select(inside, g().binary(Op::kMul, refl_grad, scale), k(0));
  }

  // Rows of `table` [N, H * W, C] at integer points (x, y) (f values [N, P]),
  // 0 outside the input: [N, P, C]. Returns the in-bounds mask too.
  std::pair<Value, Value> read(Value table, Value x, Value y) {
    Value ok = in_bounds(x, y);
    Value flat = flat_index(x, y, ok);
    Value rows = g().gather(table, point_index(flat), gather_dims(), {n, p, c});
    Value zero = g().constant(0, {dt, {n, p, c}});
    return {g().select(g().broadcast_in_dim(ok, {n, p, c}, {0, 1}), rows, zero), ok};
  }
  // Adds rows `v` [N, P, C] at the in-bounds points (x, y) into `table`.
  Value add(Value table, Value x, Value y, Value v) {
    Value ok = in_bounds(x, y);
    Value zero = g().constant(0, {dt, {n, p, c}});
    v = g().select(g().broadcast_in_dim(ok, {n, p, c}, {0, 1}), v, zero);
    ir::ScatterDims sd;
    sd.update_window_dims = {2};
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 2;
    return g().scatter(table, point_index(flat_index(x, y, ok)), v, sd, ir::Reducer::kAdd);
  }
  Value in_bounds(Value x, Value y) {
    auto within = [&](Value v, int64_t size) {
      return g().binary(Op::kAnd, g().compare(Cmp::kGT, v, k(-1)),
                        g().compare(Cmp::kLT, v, k(static_cast<double>(size))));
    };
    return g().binary(Op::kAnd, within(x, w), within(y, h));
  }
  // y * W + x for in-bounds points, else 0 (read as 0 / add 0 there).
  Value flat_index(Value x, Value y, Value ok) {
    Value xi = g().convert(g().select(ok, x, k(0)), DType::kI64);
    Value yi = g().convert(g().select(ok, y, k(0)), DType::kI64);
    return g().binary(Op::kAdd, g().binary(Op::kMul, yi, ik(w)), xi);
  }
  Value point_index(Value flat) {
    Value batch = g().reshape(g().iota({DType::kI64, {n, p}}, 0), {n, p, 1});
    return g().concatenate({batch, g().reshape(flat, {n, p, 1})}, 2);
  }
  ir::GatherDims gather_dims() const {
    ir::GatherDims d;
    d.offset_dims = {2};
    d.collapsed_slice_dims = {0, 1};
    d.start_index_map = {0, 1};
    d.index_vector_dim = 2;
    d.slice_sizes = {1, 1, c};
    return d;
  }
  Value spread(Value v) { return g().broadcast_in_dim(v, {n, p, c}, {0, 1}); }
};

// get_cubic_upsample_coefficients (UpSample.h), A = -0.75, for t [N, P].
std::vector<Value> cubic_coefficients(Sampler& s, Value t) {
  auto& g = s.g();
  constexpr double A = -0.75;
  auto conv1 = [&](Value x) {  // ((A + 2) x - (A + 3)) x x + 1
    Value r = g.binary(Op::kSub, g.binary(Op::kMul, s.k(A + 2), x), s.k(A + 3));
    return g.binary(Op::kAdd, g.binary(Op::kMul, g.binary(Op::kMul, r, x), x), s.k(1));
  };
  auto conv2 = [&](Value x) {  // ((A x - 5A) x + 8A) x - 4A
    Value r = g.binary(Op::kSub, g.binary(Op::kMul, s.k(A), x), s.k(5 * A));
    r = g.binary(Op::kAdd, g.binary(Op::kMul, r, x), s.k(8 * A));
    return g.binary(Op::kSub, g.binary(Op::kMul, r, x), s.k(4 * A));
  };
  Value x2 = g.binary(Op::kSub, s.k(1), t);
  return {conv2(g.binary(Op::kAdd, t, s.k(1))), conv1(t), conv1(x2),
          conv2(g.binary(Op::kAdd, x2, s.k(1)))};
}

// The coefficients' derivatives in t (GridSamplerKernel.cpp
// get_cubic_coefficients_grad).
std::vector<Value> cubic_coefficients_grad(Sampler& s, Value t) {
  auto& g = s.g();
  constexpr double A = -0.75;
  auto mul = [&](Value a, Value b) { return g.binary(Op::kMul, a, b); };
  auto sub = [&](Value a, Value b) { return g.binary(Op::kSub, a, b); };
  auto add = [&](Value a, Value b) { return g.binary(Op::kAdd, a, b); };
  Value x0 = sub(s.k(-1), t), x1 = g.unary(Op::kNeg, t), x2 = sub(s.k(1), t), x3 = sub(s.k(2), t);
  return {sub(mul(sub(mul(s.k(-3 * A), x0), s.k(10 * A)), x0), s.k(8 * A)),
          mul(sub(mul(s.k(-3 * (A + 2)), x1), s.k(2 * (A + 3))), x1),
          mul(sub(mul(s.k(3 * (A + 2)), x2), s.k(2 * (A + 3))), x2),
          add(mul(sub(mul(s.k(3 * A), x3), s.k(10 * A)), x3), s.k(8 * A))};
}

// Checks, then the sampler and the grid's x, y as [N, P] values.
struct Setup {
  Sampler s;
  Value gx, gy;
};

Setup setup(LoweringContext& ctx, const at::Tensor& input, const at::Tensor& grid, int64_t padding,
            bool align) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_2d(input, grid);
  const auto st = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st),
                              "\"grid_sampler_2d_cpu_kernel_impl\" not implemented for '", st, "'");
  // The CPU kernel reads the grid as the input's type (data_ptr<scalar_t>).
  TORCH_CHECK(grid.scalar_type() == st, "expected scalar type ", st, " but found ",
              grid.scalar_type());
  const int64_t p = grid.size(1) * grid.size(2);
  Sampler s{ctx,           input.size(0),
            input.size(1), input.size(2),
            input.size(3), p,
            to_ir(st),     static_cast<Padding>(padding),
            align};
  auto& g = ctx.g();
  Value gr = g.reshape(ctx.tensor(grid), {s.n, p, 2});
  Value gx = g.reshape(g.slice(gr, {0, 0, 0}, {s.n, p, 1}, {1, 1, 1}), {s.n, p});
  Value gy = g.reshape(g.slice(gr, {0, 0, 1}, {s.n, p, 2}, {1, 1, 1}), {s.n, p});
  return {s, gx, gy};
}

Value input_table(LoweringContext& ctx, const at::Tensor& input, const Sampler& s) {
  auto& g = ctx.g();
  return g.transpose(g.reshape(ctx.tensor(input), {s.n, s.c, s.h * s.w}), {0, 2, 1});
}

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners).
std::vector<Value> grid_sampler_2d(LoweringContext& ctx, const Args& a) {
  const at::Tensor& input = a.tensor(0);
  const at::Tensor& grid = a.tensor(1);
  const int64_t mode = a.integer(2);
  Setup su = setup(ctx, input, grid, a.integer(3), a.boolean(4));
  Sampler& s = su.s;
  auto& g = ctx.g();
  const std::vector<int64_t> out_shape{s.n, s.c, grid.size(1), grid.size(2)};
  if (input.numel() == 0 || s.p == 0) return {g.constant(0, {s.dt, out_shape})};
  Value table = input_table(ctx, input, s);
  Value out;
  if (mode == kBicubic) {
    Value ix = s.unnormalize(su.gx, s.w), iy = s.unnormalize(su.gy, s.h);
    Value x0 = g.unary(Op::kFloor, ix), y0 = g.unary(Op::kFloor, iy);
    auto cx = cubic_coefficients(s, g.binary(Op::kSub, ix, x0));
    auto cy = cubic_coefficients(s, g.binary(Op::kSub, iy, y0));
    for (int64_t i = 0; i < 4; ++i) {
      Value y = s.pad_coordinate(g.binary(Op::kAdd, y0, s.k(static_cast<double>(i - 1))), s.h);
      Value row;
      for (int64_t j = 0; j < 4; ++j) {
        Value x = s.pad_coordinate(g.binary(Op::kAdd, x0, s.k(static_cast<double>(j - 1))), s.w);
        Value term = g.binary(Op::kMul, s.read(table, x, y).first, s.spread(cx[j]));
        row = row.valid() ? g.binary(Op::kAdd, row, term) : term;
      }
      Value term = g.binary(Op::kMul, row, s.spread(cy[i]));
      out = out.valid() ? g.binary(Op::kAdd, out, term) : term;
    }
  } else {
    Value ix = s.pad_coordinate(s.unnormalize(su.gx, s.w), s.w);
    Value iy = s.pad_coordinate(s.unnormalize(su.gy, s.h), s.h);
    if (mode == kNearest) {
      out = s.read(table, g.unary(Op::kRoundNearestEven, ix), g.unary(Op::kRoundNearestEven, iy))
                .first;
    } else {
      Value xw = g.unary(Op::kFloor, ix), yn = g.unary(Op::kFloor, iy);
      Value xe = g.binary(Op::kAdd, xw, s.k(1)), ys = g.binary(Op::kAdd, yn, s.k(1));
      Value dw = g.binary(Op::kSub, ix, xw), de = g.binary(Op::kSub, s.k(1), dw);
      Value dn = g.binary(Op::kSub, iy, yn), ds = g.binary(Op::kSub, s.k(1), dn);
      Value terms[4] = {
          g.binary(Op::kMul, s.read(table, xw, yn).first, s.spread(g.binary(Op::kMul, ds, de))),
          g.binary(Op::kMul, s.read(table, xe, yn).first, s.spread(g.binary(Op::kMul, ds, dw))),
          g.binary(Op::kMul, s.read(table, xw, ys).first, s.spread(g.binary(Op::kMul, dn, de))),
          g.binary(Op::kMul, s.read(table, xe, ys).first, s.spread(g.binary(Op::kMul, dn, dw)))};
      out = g.binary(Op::kAdd, g.binary(Op::kAdd, g.binary(Op::kAdd, terms[0], terms[1]), terms[2]),
                     terms[3]);
    }
  }
  return {g.reshape(g.transpose(out, {0, 2, 1}), out_shape)};
}

// grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode,
// padding_mode, align_corners, output_mask) -> (grad_input, grad_grid).
std::vector<Value> grid_sampler_2d_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_output = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const at::Tensor& grid = a.tensor(2);
  const int64_t mode = a.integer(3);
  const auto mask = a[6].toBoolList();
  Setup su = setup(ctx, input, grid, a.integer(4), a.boolean(5));
  Sampler& s = su.s;
  auto& g = ctx.g();
  const std::vector<int64_t> grid_shape = grid.sizes().vec();
  Value zero_input = g.constant(0, {s.dt, input.sizes().vec()});
  Value zero_grid = g.constant(0, {s.dt, grid_shape});
  if (input.numel() == 0 || s.p == 0)
    return {mask[0] ? zero_input : Value(), mask[1] ? zero_grid : Value()};
  Value table = input_table(ctx, input, s);
  Value go =
      g.transpose(g.reshape(ctx.tensor(grad_output), {s.n, s.c, s.p}), {0, 2, 1});  // [N, P, C]
  Value gin = g.constant(0, {s.dt, {s.n, s.h * s.w, s.c}});
  Value gx_acc = s.k(0), gy_acc = s.k(0);
  auto channel_sum = [&](Value v) { return reduce(ctx, v, {2}, false, ir::Reducer::kAdd); };
  if (mode == kBicubic) {
    Value ix = s.unnormalize(su.gx, s.w), iy = s.unnormalize(su.gy, s.h);
    Value x0 = g.unary(Op::kFloor, ix), y0 = g.unary(Op::kFloor, iy);
    Value tx = g.binary(Op::kSub, ix, x0), ty = g.binary(Op::kSub, iy, y0);
    auto cx = cubic_coefficients(s, tx), cy = cubic_coefficients(s, ty);
    auto dx = cubic_coefficients_grad(s, tx), dy = cubic_coefficients_grad(s, ty);
    for (int64_t i = 0; i < 4; ++i) {
      Value y = s.pad_coordinate(g.binary(Op::kAdd, y0, s.k(static_cast<double>(i - 1))), s.h);
      for (int64_t j = 0; j < 4; ++j) {
        Value x = s.pad_coordinate(g.binary(Op::kAdd, x0, s.k(static_cast<double>(j - 1))), s.w);
        gin = s.add(gin, x, y, g.binary(Op::kMul, go, s.spread(g.binary(Op::kMul, cx[j], cy[i]))));
        Value vg = channel_sum(g.binary(Op::kMul, s.read(table, x, y).first, go));
        gx_acc =
            g.binary(Op::kSub, gx_acc, g.binary(Op::kMul, vg, g.binary(Op::kMul, dx[j], cy[i])));
        gy_acc =
            g.binary(Op::kSub, gy_acc, g.binary(Op::kMul, vg, g.binary(Op::kMul, dy[i], cx[j])));
      }
    }
    gx_acc = g.binary(Op::kMul, gx_acc, s.k(s.scaling(s.w)));
    gy_acc = g.binary(Op::kMul, gy_acc, s.k(s.scaling(s.h)));
  } else {
    Value ix = s.pad_coordinate(s.unnormalize(su.gx, s.w), s.w);
    Value iy = s.pad_coordinate(s.unnormalize(su.gy, s.h), s.h);
    if (mode == kNearest) {
      gin = s.add(gin, g.unary(Op::kRoundNearestEven, ix), g.unary(Op::kRoundNearestEven, iy), go);
    } else {
      Value xw = g.unary(Op::kFloor, ix), yn = g.unary(Op::kFloor, iy);
      Value xe = g.binary(Op::kAdd, xw, s.k(1)), ys = g.binary(Op::kAdd, yn, s.k(1));
      Value dw = g.binary(Op::kSub, ix, xw), de = g.binary(Op::kSub, s.k(1), dw);
      Value dn = g.binary(Op::kSub, iy, yn), ds = g.binary(Op::kSub, s.k(1), dn);
      auto weighted = [&](Value wt) { return g.binary(Op::kMul, go, s.spread(wt)); };
      gin = s.add(gin, xw, yn, weighted(g.binary(Op::kMul, ds, de)));
      gin = s.add(gin, xe, yn, weighted(g.binary(Op::kMul, ds, dw)));
      gin = s.add(gin, xw, ys, weighted(g.binary(Op::kMul, dn, de)));
      gin = s.add(gin, xe, ys, weighted(g.binary(Op::kMul, dn, dw)));
      Value nw = s.read(table, xw, yn).first, ne = s.read(table, xe, yn).first;
      Value sw = s.read(table, xw, ys).first, se = s.read(table, xe, ys).first;
      // ((ne - nw) * s + (se - sw) * n) * gOut and ((sw - nw) * e + (se - ne) * w) * gOut, summed over C.
      Value gx = g.binary(Op::kAdd, g.binary(Op::kMul, g.binary(Op::kSub, ne, nw), s.spread(ds)),
                          g.binary(Op::kMul, g.binary(Op::kSub, se, sw), s.spread(dn)));
      Value gy = g.binary(Op::kAdd, g.binary(Op::kMul, g.binary(Op::kSub, sw, nw), s.spread(de)),
                          g.binary(Op::kMul, g.binary(Op::kSub, se, ne), s.spread(dw)));
      gx_acc = g.binary(Op::kMul, channel_sum(g.binary(Op::kMul, gx, go)),
                        s.coordinate_grad(su.gx, s.w));
      gy_acc = g.binary(Op::kMul, channel_sum(g.binary(Op::kMul, gy, go)),
                        s.coordinate_grad(su.gy, s.h));
    }
  }
  Value grad_input = g.reshape(g.transpose(gin, {0, 2, 1}), input.sizes().vec());
  Value grad_grid = g.reshape(
      g.concatenate({g.reshape(gx_acc, {s.n, s.p, 1}), g.reshape(gy_acc, {s.n, s.p, 1})}, 2),
      grid_shape);
  return {mask[0] ? grad_input : Value(), mask[1] ? grad_grid : Value()};
}

RegisterLowering kGridSampleRules[] = {
    {"grid_sampler_2d", grid_sampler_2d},
    {"grid_sampler_2d_backward", grid_sampler_2d_backward},
};

}  // namespace
}  // namespace ttpu::aten
