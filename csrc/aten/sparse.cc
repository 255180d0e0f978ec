// Sparse COO tensors on tpu (layout torch.sparse_coo, dispatch key
// SparsePrivateUse1): a sparse tensor is PyTorch's own SparseTensorImpl over
// two tpu tensors, its indices and values. PyTorch's device-generic sparse
// kernels (construction, accessors, copies, clone: they touch no element
// memory themselves) serve it directly; every other sparse op (coalesce,
// add, mul, to_dense, ...) runs through the counted CPU fallback below,
// whose results come back as tpu tensors (a sparse result over tpu indices
// and values). There is no sparse lowering: sparse math is host work.
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <torch/library.h>

#include <vector>

#include "aten/fallback.h"

namespace ttpu::aten {
namespace {

bool on_tpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// A tpu argument moved to CPU for the call; `written` when the op writes it
// (in-place / out=), so its CPU result is copied back.
struct Moved {
  at::Tensor tpu;
  at::Tensor cpu;
  bool written;
};

at::Tensor to_cpu(const at::Tensor& t, bool written, std::vector<Moved>& moved) {
  if (!on_tpu(t)) return t;
  at::Tensor c = t.cpu();  // sparse-aware (_to_copy moves indices and values)
  moved.push_back({t, c, written});
  return c;
}

// Every sparse op without a kernel here runs on CPU: tpu arguments (sparse or
// dense, also inside tensor lists) move to CPU, the op runs there, written
// arguments are copied back and new results move to the arguments' device.
// ATen's cpu_fallback moves arguments as dense tensors, which loses the
// sparse layout, hence this one.
void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  count_cpu_fallback(op, " for sparse COO tensors");
  std::vector<Moved> moved;
  c10::Device device(c10::DeviceType::PrivateUse1, 0);
  std::vector<c10::IValue> args;
  for (size_t i = 0; i < n; ++i) {
    c10::IValue v = std::move((*stack)[stack->size() - n + i]);
    const auto* alias = schema.arguments()[i].alias_info();
    const bool written = alias != nullptr && alias->isWrite();
    if (v.isTensor()) {
      if (on_tpu(v.toTensor())) device = v.toTensor().device();
      args.emplace_back(to_cpu(v.toTensor(), written, moved));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList()) {
        if (on_tpu(t)) device = t.device();
        list.push_back(to_cpu(t, written, moved));
      }
      args.emplace_back(std::move(list));
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
        if (t && on_tpu(*t)) device = t->device();
        list.push_back(t ? std::optional<at::Tensor>(to_cpu(*t, written, moved)) : std::nullopt);
      }
      args.emplace_back(std::move(list));
    } else {
      args.push_back(std::move(v));
    }
  }
  torch::jit::drop(*stack, n);
  for (auto& v : args) torch::jit::push(*stack, std::move(v));
  op.callBoxed(stack);
  for (const Moved& m : moved) {
    if (!m.written) continue;
    at::Tensor dst = m.tpu;
    if (!dst.is_sparse() && !dst.sizes().equals(m.cpu.sizes())) dst.resize_(m.cpu.sizes());
    dst.copy_(m.cpu);
  }
  // A result that is a written argument returns that argument; others move.
  auto back = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined()) return r;
    for (const Moved& m : moved) {
      if (m.written && r.is_same(m.cpu)) return m.tpu;
    }
    return r.device().is_cpu() ? r.to(device) : r;
  };
  const size_t nret = schema.returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = back(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList()) list.push_back(back(t));
      v = std::move(list);
    }
  }
}

// ATen's cpu_fallback (dense ops with a sparse out=) writes a CPU result back
// with _copy_from_and_resize(cpu, tpu); for sparse tensors that is a sparse copy
// (indices and values move to tpu, sizes follow the source).
at::Tensor sparse_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor out = dst;
  at::native::copy_sparse_wrapper_(out, self, false);
  return dst;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("_copy_from_and_resize", TORCH_FN(sparse_copy_from_and_resize));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

}  // namespace ttpu::aten
