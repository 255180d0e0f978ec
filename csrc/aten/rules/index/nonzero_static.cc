// Lowering of nonzero_static(self, size, fill_value) -> i64 [size, self.dim()]:
// the coordinates of the first `size` non-zero elements (NaN counts as
// non-zero) in row-major order, rows past the count filled with fill_value
// (ATen's nonzero_static_out_cpu). The shape is static, so unlike nonzero no
// count is read: sorting the keys "flat position if non-zero, else numel"
// brings the wanted positions first, in order, and a key of numel marks a
// fill row.
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ir::Value;

std::vector<Value> nonzero_static(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const int64_t size = a.integer(1), fill = a.integer(2);
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  const int64_t n = self.numel(), rank = self.dim();
  const ir::TensorType out{DType::kI64, {size, rank}};
  if (rank == 0 || size == 0) return {g.constant_int(0, out)};
  if (n == 0) return {g.constant_int(fill, out)};
  const ir::TensorType flat{DType::kI64, {n}};
  Value v = g.reshape(ctx.tensor(self), {n});
  Value key = g.select(g.compare(Cmp::kNE, v, full_like(ctx, v, 0)), g.iota(flat, 0),
                       g.constant_int(n, flat));
  Value pos = g.sort({key}, 0, Cmp::kLT)[0];
  // Exactly `size` rows: the first ones, or all of them padded with "none".
  if (size <= n) {
    pos = g.slice(pos, {0}, {size}, {1});
  } else {
    pos = g.pad(pos, g.constant_int(n, {DType::kI64, {}}), {0}, {size - n}, {0});
  }
  const ir::TensorType col{DType::kI64, {size}};
  Value none = g.compare(Cmp::kEQ, pos, g.constant_int(n, col));
  std::vector<Value> columns;
  int64_t stride = n;
  for (int64_t j = 0; j < rank; ++j) {
    stride /= self.size(j);
    Value c = stride == 1 ? pos : g.binary(Op::kDiv, pos, g.constant_int(stride, col));
    if (j > 0) c = g.binary(Op::kRem, c, g.constant_int(self.size(j), col));
    c = g.select(none, g.constant_int(fill, col), c);
    columns.push_back(g.reshape(c, {size, 1}));
  }
  return {g.concatenate(columns, 1)};
}

RegisterLowering kNonzeroStaticRules[] = {
    {"nonzero_static", nonzero_static},
};

}  // namespace
}  // namespace ttpu::aten
