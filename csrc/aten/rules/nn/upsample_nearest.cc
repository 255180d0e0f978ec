// Lowerings of upsample_nearest{1,2,3}d (torch.nn.functional.interpolate with
// mode='nearest'). Output position j of a resized dim reads input position
// min(floor(j * scale), n - 1) with scale = 1 / scale_factor when one is given,
// else n / m, computed in float as ATen's nearest_idx
// (aten/src/ATen/native/UpSample.h) does, including its shortcuts for m == n
// and m == 2n. Each resized dim is one gather.
#include <c10/util/Exception.h>

#include <sstream>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;

ir::Value nearest_dim(LoweringContext& ctx, ir::Value x, int64_t dim, int64_t m,
                      std::optional<double> scale_factor) {
  auto& g = ctx.g();
  const int64_t n = dims(ctx, x)[dim];
  if (m == n) return x;
  const ir::TensorType t{DType::kI64, {m}};
  ir::Value j = g.iota(t, 0);
  ir::Value i;
  if (m == 2 * n) {
    i = g.binary(Op::kShiftRightArithmetic, j, g.constant_int(1, t));
  } else {
    const float scale = scale_factor.has_value() && *scale_factor > 0
                            ? static_cast<float>(1.0 / *scale_factor)
                            : static_cast<float>(n) / static_cast<float>(m);
    const ir::TensorType f{DType::kF32, {m}};
    ir::Value src =
        g.unary(Op::kFloor, g.binary(Op::kMul, g.convert(j, DType::kF32), g.constant(scale, f)));
    i = g.binary(Op::kMin, g.convert(src, DType::kI64), g.constant_int(n - 1, t));
  }
  return take_along_dim(ctx, x, dim, i);
}

// ATen's upsample_{1,2,3}d_common_check, with its messages.
void check_upsample(const at::Tensor& self, const std::vector<int64_t>& out, int64_t k) {
  TORCH_CHECK(static_cast<int64_t>(out.size()) == k, "It is expected output_size equals to ", k,
              ", but got size ", out.size());
  TORCH_CHECK(self.dim() == k + 2, "It is expected input_size equals to ", k + 2, ", but got size ",
              self.dim());
  static const char* kNames[] = {"D", "H", "W"};
  std::ostringstream in, res;
  bool ok = true;
  for (int64_t j = 0; j < k; ++j) {
    const char* name = kNames[3 - k + j];
    const int64_t n = self.size(2 + j);
    in << (j ? ", " : "") << name << ": " << n;
    res << (j ? ", " : "") << name << ": " << out[j];
    ok = ok && n > 0 && out[j] > 0;
  }
  TORCH_CHECK(ok, "Input and output sizes should be greater than 0, but got input (", in.str(), ")",
              k == 1 ? " and" : "", " output (", res.str(), ")");
}

template <int64_t K>
std::vector<ir::Value> upsample_nearest(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::vector<int64_t> out = a.ints(1);
  check_upsample(self, out, K);
  // CPU's nearest kernels take the float dtypes and uint8 only, and name the
  // kernel that refuses the rest (2-d input goes to its channels-last kernel).
  const auto st = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::isFloatingType(st) || st == at::kByte, "\"",
      K == 2 ? "upsample_nearest2d_channels_last" : "compute_indices_weights_nearest",
      "\" not implemented for '", st, "'");
  ir::Value x = ctx.tensor(self);
  if (self.numel() == 0) {
    std::vector<int64_t> shape = self.sizes().vec();
    for (int64_t j = 0; j < K; ++j) shape[2 + j] = out[j];
    return {ctx.g().constant(0, {dtype(ctx, x), shape})};
  }
  for (int64_t j = 0; j < K; ++j) {
    std::optional<double> scale;
    if (!a.is_none(2 + j)) scale = a.real(2 + j);
    x = nearest_dim(ctx, x, 2 + j, out[j], scale);
  }
  return {x};
}

RegisterLowering kUpsampleNearestRules[] = {
    {"upsample_nearest1d", upsample_nearest<1>},
    {"upsample_nearest2d", upsample_nearest<2>},
    {"upsample_nearest3d", upsample_nearest<3>},
};

}  // namespace
}  // namespace ttpu::aten
