// nn.EmbeddingBag / F.embedding_bag on tpu: _embedding_bag (and its
// _forward_only twin), _embedding_bag_dense_backward and
// _embedding_bag_per_sample_weights_backward, which only CPU and CUDA
// implement, composed of ops that are lowered (index_select, index_add,
// scatter_reduce, cumsum), so a bag op is a handful of tpu programs and no
// CPU fallback. They run below autograd (derivatives.yaml gives the backward).
//
// Shapes: weight [V, D], indices [N] (int32/int64), offsets [B] (or [B + 1]
// with include_last_offset), per_sample_weights [N] or undefined. Returns
// (output [B, D], offset2bag, bag_size [B], max_indices), laid out as CPU's
// kernel returns them (EmbeddingBag.cpp): offset2bag [N] for mean and max,
// empty for sum (ATen's backward rebuilds it); max_indices [B, D] for max,
// else [B]. An empty bag's output is 0; an index equal to padding_idx counts
// for nothing.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

namespace ttpu::aten {
namespace {

constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

struct Bags {
  at::Tensor idx;         // [N] int64
  at::Tensor offset2bag;  // [N] int64: the bag of each index
  at::Tensor valid;       // [N] bool: not padding_idx
  int64_t bags = 0;
};

Bags bags_of(const at::Tensor& indices, const at::Tensor& offsets, bool include_last_offset,
             int64_t padding_idx) {
  TORCH_CHECK(indices.dim() == 1, "input has to be 1D but got ", indices.dim(), "D");
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ",
              offsets.dim());
  Bags b;
  b.idx = indices.to(at::kLong);
  const int64_t n = b.idx.numel();
  at::Tensor offs = offsets.to(at::kLong);
  b.bags = include_last_offset ? std::max<int64_t>(offs.numel() - 1, 0) : offs.numel();
  offs = offs.narrow(0, 0, b.bags);
  // A mark where each bag starts; their running count less one is the bag of
  // each index (empty bags are skipped over, as their starts coincide).
  at::Tensor marks = at::zeros({n + 1}, b.idx.options());
  marks.index_add_(0, offs.clamp(0, n), at::ones({b.bags}, b.idx.options()));
  b.offset2bag = marks.cumsum(0).narrow(0, 0, n) - 1;
  b.valid =
      padding_idx >= 0 ? b.idx.ne(padding_idx) : at::ones({n}, b.idx.options().dtype(at::kBool));
  return b;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
    bool /*scale_grad_by_freq*/, int64_t mode, bool /*sparse*/,
    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  TORCH_CHECK(mode >= kSum && mode <= kMax, "embedding_bag: unknown mode ", mode);
  const bool psw = per_sample_weights.has_value() && per_sample_weights->defined();
  TORCH_CHECK(!psw || mode == kSum,
              "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
              "supported for mode='sum' (got mode='",
              mode == kMean ? "mean" : "max", "'). Please open a feature request on GitHub.");
  Bags b = bags_of(indices, offsets, include_last_offset, padding_idx);
  const int64_t n = b.idx.numel(), d = weight.size(1);
  at::Tensor rows = weight.index_select(0, b.idx);  // [N, D]
  if (psw) rows = rows * per_sample_weights->to(weight.scalar_type()).unsqueeze(1);
  at::Tensor keep = b.valid.unsqueeze(1);
  at::Tensor bag_size =
      at::zeros({b.bags}, b.idx.options()).index_add_(0, b.offset2bag, b.valid.to(at::kLong));
  at::Tensor empty_bag = bag_size.eq(0).unsqueeze(1);
  if (mode != kMax) {
    at::Tensor out = at::zeros({b.bags, d}, weight.options())
                         .index_add_(0, b.offset2bag, at::where(keep, rows, 0));
    if (mode == kSum) {
      return {out, at::empty({0}, b.idx.options()), at::zeros({b.bags}, b.idx.options()),
              at::zeros({b.bags}, b.idx.options())};
    }
    out = out / bag_size.clamp_min(1).unsqueeze(1).to(out.scalar_type());
    return {out, b.offset2bag, bag_size, bag_size.clone()};
  }
  const double lowest = -std::numeric_limits<double>::infinity();
  at::Tensor where_bag = b.offset2bag.unsqueeze(1).expand({n, d});
  at::Tensor masked = at::where(keep, rows, lowest);
  at::Tensor out = at::full({b.bags, d}, lowest, weight.options())
                       .scatter_reduce_(0, where_bag, masked, "amax", /*include_self=*/true);
  // The first index of its bag holding the maximum (CPU's strict > keeps the
  // first), as a row of weight; 0 for an empty bag.
  at::Tensor is_max = masked.eq(out.index_select(0, b.offset2bag)).logical_and_(keep);
  at::Tensor position = at::arange(n, b.idx.options()).unsqueeze(1).expand({n, d});
  at::Tensor first = at::full({b.bags, d}, n, b.idx.options())
                         .scatter_reduce_(0, where_bag, at::where(is_max, position, n), "amin",
                                          /*include_self=*/true);
  at::Tensor first_row = first.clamp_max(std::max<int64_t>(n - 1, 0)).flatten();
  at::Tensor max_indices =
      at::where(empty_bag, 0, b.idx.index_select(0, first_row).view({b.bags, d}));
  return {at::where(empty_bag, 0, out), b.offset2bag, bag_size, max_indices};
}

at::Tensor dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                          const at::Tensor& offset2bag, const at::Tensor& bag_size,
                          const at::Tensor& maximum_indices, int64_t num_weights,
                          bool scale_grad_by_freq, int64_t mode,
                          const std::optional<at::Tensor>& per_sample_weights,
                          int64_t padding_idx) {
  const at::Tensor idx = indices.to(at::kLong);
  const int64_t d = grad.size(1);
  at::Tensor grad_weight = at::zeros({num_weights, d}, grad.options());
  if (mode == kMax) {
    at::Tensor live = bag_size.gt(0).unsqueeze(1).expand_as(grad);
    at::Tensor rows = maximum_indices.to(at::kLong);
    if (padding_idx >= 0) live = live.logical_and(rows.ne(padding_idx));
    return grad_weight.scatter_add_(0, rows, at::where(live, grad, 0));
  }
  at::Tensor g = grad.index_select(0, offset2bag.to(at::kLong));  // [N, D]
  if (mode == kMean) {
    g = g / bag_size.to(at::kLong)
                .index_select(0, offset2bag.to(at::kLong))
                .clamp_min(1)
                .unsqueeze(1)
                .to(g.scalar_type());
  }
  if (per_sample_weights.has_value() && per_sample_weights->defined()) {
    g = g * per_sample_weights->to(g.scalar_type()).unsqueeze(1);
  }
  if (scale_grad_by_freq) {
    at::Tensor counts =
        at::zeros({num_weights}, idx.options()).index_add_(0, idx, at::ones_like(idx));
    g = g / counts.index_select(0, idx).unsqueeze(1).to(g.scalar_type());
  }
  if (padding_idx >= 0) g = at::where(idx.ne(padding_idx).unsqueeze(1), g, 0);
  return grad_weight.index_add_(0, idx, g);
}

at::Tensor per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                       const at::Tensor& indices, const at::Tensor& offsets,
                                       const at::Tensor& offset2bag, int64_t mode,
                                       int64_t padding_idx) {
  TORCH_CHECK(mode == kSum,
              "embedding_bag_backward: per_sample_weights only supported for "
              "mode='sum'");
  const at::Tensor idx = indices.to(at::kLong);
  at::Tensor bag = offset2bag;
  if (bag.numel() != idx.numel()) bag = bags_of(indices, offsets, false, -1).offset2bag;
  at::Tensor r = (grad.index_select(0, bag.to(at::kLong)) * weight.index_select(0, idx)).sum(1);
  if (padding_idx >= 0) r = at::where(idx.ne(padding_idx), r, 0);
  return r;
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
// per_sample_weights?, padding_idx): the dense gradient of weight [V, D];
// offset2bag is rebuilt when the forward left it empty (mode sum).
at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices,
                                  const at::Tensor& offsets, const at::Tensor& offset2bag,
                                  const at::Tensor& bag_size, const at::Tensor& maximum_indices,
                                  c10::SymInt num_weights, bool scale_grad_by_freq, int64_t mode,
                                  bool sparse, const std::optional<at::Tensor>& per_sample_weights,
                                  int64_t padding_idx) {
  TORCH_CHECK(!sparse,
              "embedding_bag: sparse gradients are not supported on tpu; use "
              "sparse=False (the gradient is then dense, as the optimizer steps take it)");
  at::Tensor bag = offset2bag;
  if (indices.numel() != 0 && bag.numel() != indices.numel()) {
    bag = bags_of(indices, offsets, false, -1).offset2bag;
  }
  return dense_backward(grad, indices, bag, bag_size, maximum_indices,
                        num_weights.guard_int(__FILE__, __LINE__), scale_grad_by_freq, mode,
                        per_sample_weights, padding_idx);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag_backward", &embedding_bag_backward);
  m.impl("_embedding_bag", &embedding_bag);
  m.impl("_embedding_bag_forward_only", &embedding_bag);
  m.impl("_embedding_bag_dense_backward", &dense_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", &per_sample_weights_backward);
}

}  // namespace
}  // namespace ttpu::aten
