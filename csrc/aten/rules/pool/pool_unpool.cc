// Lowerings of max_unpool2d / max_unpool3d: the inverse of max pooling, which
// writes each input value at the flat spatial position its index names in a
// zero output of `output_size`.
//
// One scatter into the flattened output: position (batch*channel) * volume +
// index. The indices' range is read on the host first to raise CPU's error
// ("Found an invalid max index"): a sync, see index_util.h's check_index_range.
// Duplicate indices (overlapping pooling windows) carry equal values, so the
// scatter's unspecified write order does not show.
#include <ATen/Context.h>
#include <c10/util/irange.h>

#include <sstream>

#include "aten/copy.h"
#include "aten/rules/index/index_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ValueList = std::vector<ir::Value>;

// "3x3" / "1x3x3": the output volume as CPU's message writes it.
std::string volume_text(const std::vector<int64_t>& size) {
  std::ostringstream s;
  for (size_t i = 0; i < size.size(); ++i) s << (i ? "x" : "") << size[i];
  return s.str();
}

ValueList unpool(LoweringContext& ctx, const at::Tensor& self, const at::Tensor& indices,
                 const std::vector<int64_t>& output_size) {
  const int64_t spatial = static_cast<int64_t>(output_size.size());
  TORCH_CHECK(indices.scalar_type() == at::kLong,
              "elements in indices should be type int64 but got: ", indices.scalar_type());
  TORCH_CHECK(self.sizes() == indices.sizes(),
              "Expected shape of indices to be same as that of "
              "the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  int64_t volume = 1;
  for (int64_t s : output_size) volume *= s;
  std::vector<int64_t> out_sizes(self.sizes().begin(), self.sizes().end() - spatial);
  const int64_t planes = c10::multiply_integers(out_sizes);
  out_sizes.insert(out_sizes.end(), output_size.begin(), output_size.end());
  auto& g = ctx.g();
  DType dt = to_ir(self.scalar_type());
  ir::Value zeros = g.constant(0, {dt, {planes * volume}});
  const int64_t n = self.numel();
  if (n == 0) return {g.reshape(zeros, out_sizes)};
  // The range check: min and max on the host, then the first bad index.
  {
    LoweringContext probe(ctx.op() + " (index range check)", ctx.device());
    auto& pg = probe.g();
    ir::Value v = pg.reshape(read_index(probe, indices), {n});
    ir::Value lo = pg.reshape(reduce(probe, v, {0}, false, ir::Reducer::kMin), {1});
    ir::Value hi = pg.reshape(reduce(probe, v, {0}, false, ir::Reducer::kMax), {1});
    at::Tensor host = to_host(probe.run({pg.concatenate({lo, hi}, 0)})[0]);
    if (host[0].item<int64_t>() < 0 || host[1].item<int64_t>() >= volume) {
      // CPU's kernel keeps the last bad index it meets and raises after the loop.
      at::Tensor all = to_host(indices).reshape({-1});
      for (int64_t i = n - 1; i >= 0; --i) {
        int64_t idx = all[i].item<int64_t>();
        TORCH_CHECK(idx >= 0 && idx < volume, "Found an invalid max index: ", idx,
                    " (output volumes are of size ", volume_text(output_size), ")");
      }
    }
  }
  const int64_t per_plane = n / planes;
  ir::TensorType it{DType::kI64, {planes, per_plane}};
  ir::Value idx = g.reshape(read_index(ctx, indices), {planes, per_plane});
  ir::Value base = g.binary(ir::Op::kMul, g.iota(it, 0), g.constant_int(volume, it));
  idx = g.reshape(g.binary(ir::Op::kAdd, idx, base), {n, 1});
  ir::ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  ir::Value values = g.reshape(ctx.tensor(self), {n});
  ir::Value out = g.scatter(zeros, idx, values, d, ir::Reducer::kReplace);
  return {g.reshape(out, out_sizes)};
}

// max_unpool2d(Tensor self, Tensor indices, SymInt[2] output_size)
ValueList max_unpool2d(LoweringContext& ctx, const Args& a) {
  // Duplicate indices make the written value depend on the write order: CPU
  // and CUDA alert under torch.use_deterministic_algorithms(True).
  at::globalContext().alertNotDeterministic("max_unpooling2d_forward_out");
  const at::Tensor& self = a.tensor(0);
  std::vector<int64_t> output_size = a.ints(2);
  // ATen's checks and messages (MaxUnpooling.cpp, max_unpooling2d_forward_out_cpu).
  TORCH_CHECK(output_size.size() == 2,
              "There should be exactly two elements (height, width) "
              "in output_size, but got ",
              output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "Input to max_unpooling2d should be a 3d or "
              "4d Tensor, but got a tensor with ",
              self.dim(), " dimensions.");
  TORCH_CHECK(a.tensor(1).scalar_type() == at::kLong,
              "elements in indices should be type int64 but got: ", a.tensor(1).scalar_type());
  TORCH_CHECK(self.sizes() == a.tensor(1).sizes(),
              "Expected shape of indices to be same as "
              "that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", a.tensor(1).sizes());
  for (int64_t i = 1; i < self.dim(); ++i) {
    TORCH_CHECK(self.size(i) > 0, "max_unpooling2d_forward_out_cpu(): ",
                "Expected input to have non-zero size for non-batch dimensions, but got ",
                self.sizes(), " with dimension ", i, " being empty.");
  }
  return unpool(ctx, self, a.tensor(1), output_size);
}

// max_unpool3d(Tensor self, Tensor indices, SymInt[3] output_size, int[3] stride,
// int[3] padding): stride and padding are only checked, as on CPU.
ValueList max_unpool3d(LoweringContext& ctx, const Args& a) {
  at::globalContext().alertNotDeterministic("max_unpooling3d_forward_out");
  const at::Tensor& self = a.tensor(0);
  std::vector<int64_t> output_size = a.ints(2);
  std::vector<int64_t> stride = a.ints(3);
  std::vector<int64_t> padding = a.ints(4);
  // ATen's checks and messages (MaxUnpooling.cpp, max_unpooling3d_shape_check).
  TORCH_CHECK(a.tensor(1).scalar_type() == at::kLong,
              "elements in indices should be type int64 but got: ", a.tensor(1).scalar_type());
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5,
              "Input to max_unpooling3d should be a 4d or "
              "5d Tensor, but got a tensor with ",
              self.dim(), " dimensions.");
  TORCH_CHECK(output_size.size() == 3,
              "There should be exactly three elements (depth, height, "
              "width) in output_size, but got ",
              output_size.size(), " elements.");
  TORCH_CHECK(stride.size() == 3,
              "There should be exactly three elements (depth, height, "
              "width) in stride, but got: ",
              stride.size(), " elements.");
  TORCH_CHECK(padding.size() == 3,
              "There should be exactly three elements (depth, height, "
              "width) in padding, but got: ",
              padding.size(), " elements.");
  TORCH_CHECK(self.sizes() == a.tensor(1).sizes(),
              "Expected shape of indices to be same as "
              "that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", a.tensor(1).sizes());
  for (int64_t i = 1; i < self.dim(); ++i) {
    TORCH_CHECK(self.size(i) > 0, "max_unpooling3d_forward_out_cpu(): ",
                "Expected input to have non-zero size for non-batch dimensions, but got ",
                self.sizes(), " with dimension ", i, " being empty.");
  }
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0,
              "strides should be greater than zero, but got stride: ", c10::IntArrayRef(stride));
  return unpool(ctx, self, a.tensor(1), output_size);
}

RegisterLowering kPoolUnpoolRules[] = {
    {"max_unpool2d", max_unpool2d},
    {"max_unpool3d", max_unpool3d},
};

}  // namespace
}  // namespace ttpu::aten
