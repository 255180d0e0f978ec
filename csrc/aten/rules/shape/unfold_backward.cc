// Lowering of unfold_backward, the gradient of Tensor.unfold(dim, size, step).
//
// unfold's window w, position j reads input element w * step + j along `dim`,
// and its gradient adds grad[..., w, ..., j] there. For each position j the
// windows' values, spread `step` apart by interior padding and shifted by j,
// form one input-shaped term; the gradient is the sum of the `size` terms.
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Op;

// unfold_backward(grad_in, input_sizes, dim, size, step): grad_in has the
// input's sizes with sizes[dim] replaced by the window count, plus a trailing
// dim of `size`.
std::vector<ir::Value> unfold_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const std::vector<int64_t> sizes = a.ints(1);
  const int64_t rank = static_cast<int64_t>(sizes.size());
  const int64_t dim = rank == 0 ? 0 : c10::maybe_wrap_dim(a.integer(2), rank);
  const int64_t size = a.integer(3), step = a.integer(4);
  TORCH_CHECK(step > 0, "step is ", step, " but must be > 0");
  auto& g = ctx.g();
  const ir::DType dt = to_ir(grad.scalar_type());
  ir::Value gv = ctx.tensor(grad);
  if (rank == 0) return {g.reshape(gv, {})};  // a 0-d input unfolds to one window
  const int64_t windows = grad.size(dim);
  const int64_t extent = sizes[dim];
  ir::Value sum = g.constant(0, {dt, sizes});
  if (windows == 0 || size == 0) return {sum};
  std::vector<int64_t> start(rank + 1, 0), limit = grad.sizes().vec(), strides(rank + 1, 1);
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  interior[dim] = step - 1;
  ir::Value zero = ctx.constant(0, dt);
  for (int64_t j = 0; j < size; ++j) {
    start[rank] = j;
    limit[rank] = j + 1;
    ir::Value part = g.reshape(g.slice(gv, start, limit, strides),
                               std::vector<int64_t>(limit.begin(), limit.end() - 1));
    // Window w lands at w * step + j; the rest of the extent is zero.
    low[dim] = j;
    high[dim] = extent - (j + (windows - 1) * step + 1);
    sum = g.binary(Op::kAdd, sum, g.pad(part, zero, low, high, interior));
  }
  return {sum};
}

RegisterLowering r_unfold_backward("unfold_backward", unfold_backward);

}  // namespace
}  // namespace ttpu::aten
