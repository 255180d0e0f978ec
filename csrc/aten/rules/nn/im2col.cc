// Lowerings of im2col and col2im (torch.nn.functional.unfold and fold; each is
// the other's backward).
//
// im2col: [N, C, H, W] -> [N, C * kh * kw, L] with L = oh * ow sliding blocks;
// column c * kh * kw + i * kw + j, block (y, x) holds the zero-padded input at
// (y * sh + i * dh, x * sw + j * dw) (aten/src/ATen/native/im2col.h). Each
// kernel offset (i, j) is one strided slice of the padded input.
// col2im: the transpose; each offset's [oh, ow] block is placed back into the
// padded canvas by an interior-padded pad and summed in offset order, the
// order CPU's col2im accumulates in, then the padding is cropped.
// A 3-D input ([C, H, W] / [C * kh * kw, L]) is the batch-less form.
#include <ATen/native/im2col_shape_check.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Value;

struct Params {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

// The templates' list-length checks, then the four lists as Params.
Params parse(const Args& a, size_t first) {
  const char* names[] = {"kernel_size", "dilation", "padding", "stride"};
  std::vector<int64_t> v[4];
  for (size_t i = 0; i < 4; ++i) {
    v[i] = a.ints(first + i);
    TORCH_CHECK(v[i].size() == 2, "It is expected ", names[i], " equals to 2, but got size ",
                v[i].size());
  }
  return {v[0][0], v[0][1], v[1][0], v[1][1], v[2][0], v[2][1], v[3][0], v[3][1]};
}

// The CPU kernels take floats and bool (a bool col2im sums as "or").
void check_dtype(const at::Tensor& t, const char* kernel) {
  const auto st = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st) || st == at::kBool, "\"", kernel,
                              "\" not implemented for '", st, "'");
}

// im2col(self, kernel_size, dilation, padding, stride).
std::vector<Value> im2col(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const Params p = parse(a, 1);
  at::native::im2col_shape_check(self, at::Tensor(), p.kh, p.kw, p.dh, p.dw, p.ph, p.pw, p.sh,
                                 p.sw);
  check_dtype(self, "im2col_out_cpu");
  const bool batched = self.dim() == 4;
  const int64_t n = batched ? self.size(0) : 1, c = self.size(-3), h = self.size(-2),
                w = self.size(-1);
  const int64_t oh = (h + 2 * p.ph - (p.dh * (p.kh - 1) + 1)) / p.sh + 1;
  const int64_t ow = (w + 2 * p.pw - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  std::vector<int64_t> out_shape{n, c * p.kh * p.kw, oh * ow};
  if (!batched) out_shape.erase(out_shape.begin());
  const ir::DType dt = to_ir(self.scalar_type());
  if (self.numel() == 0) return {g.constant(0, {dt, out_shape})};
  Value x = g.reshape(ctx.tensor(self), {n, c, h, w});
  x = g.pad(x, ctx.constant(0, dt), {0, 0, p.ph, p.pw}, {0, 0, p.ph, p.pw}, {0, 0, 0, 0});
  std::vector<Value> blocks;
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      const int64_t y0 = i * p.dh, x0 = j * p.dw;
      Value b =
          g.slice(x, {0, 0, y0, x0}, {n, c, y0 + (oh - 1) * p.sh + 1, x0 + (ow - 1) * p.sw + 1},
                  {1, 1, p.sh, p.sw});
      blocks.push_back(g.reshape(b, {n, c, 1, oh * ow}));
    }
  }
  Value cols = blocks.size() == 1 ? blocks[0] : g.concatenate(blocks, 2);
  return {g.reshape(cols, out_shape)};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride).
std::vector<Value> col2im(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const auto output_size = a.ints(1);
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ",
              output_size.size());
  const Params p = parse(a, 2);
  const int64_t h = output_size[0], w = output_size[1];
  at::native::col2im_shape_check(self, at::Tensor(), h, w, p.kh, p.kw, p.dh, p.dw, p.ph, p.pw, p.sh,
                                 p.sw);
  check_dtype(self, "col2im_out_cpu");
  const bool batched = self.dim() == 3;
  const int64_t n = batched ? self.size(0) : 1;
  const int64_t c = self.size(-2) / (p.kh * p.kw);
  const int64_t oh = (h + 2 * p.ph - (p.dh * (p.kh - 1) + 1)) / p.sh + 1;
  const int64_t ow = (w + 2 * p.pw - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  std::vector<int64_t> out_shape{n, c, h, w};
  if (!batched) out_shape.erase(out_shape.begin());
  const ir::DType dt = to_ir(self.scalar_type());
  if (self.numel() == 0) return {g.constant(0, {dt, out_shape})};
  const int64_t hp = h + 2 * p.ph, wp = w + 2 * p.pw;
  Value cols = g.reshape(ctx.tensor(self), {n, c, p.kh * p.kw, oh, ow});
  Value zero = ctx.constant(0, dt);
  Value acc = g.constant(0, {dt, {n, c, hp, wp}});
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      const int64_t k = i * p.kw + j, y0 = i * p.dh, x0 = j * p.dw;
      Value b = g.reshape(g.slice(cols, {0, 0, k, 0, 0}, {n, c, k + 1, oh, ow}, {1, 1, 1, 1, 1}),
                          {n, c, oh, ow});
      const int64_t y_hi = hp - (y0 + (oh - 1) * p.sh + 1), x_hi = wp - (x0 + (ow - 1) * p.sw + 1);
      b = g.pad(b, zero, {0, 0, y0, x0}, {0, 0, y_hi, x_hi}, {0, 0, p.sh - 1, p.sw - 1});
      acc = g.binary(dt == ir::DType::kBool ? ir::Op::kOr : ir::Op::kAdd, acc, b);
    }
  }
  Value out = g.slice(acc, {0, 0, p.ph, p.pw}, {n, c, p.ph + h, p.pw + w}, {1, 1, 1, 1});
  return {g.reshape(out, out_shape)};
}

RegisterLowering kIm2colRules[] = {
    {"im2col", im2col},
    {"col2im", col2im},
};

}  // namespace
}  // namespace ttpu::aten
