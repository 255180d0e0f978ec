// The metadata-only kernels of the PrivateUse1 device: allocation, views, resize,
// set_. They touch no device data (views share the storage slot), so they are
// plain ATen code rather than lowerings.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/copy.h"
#include "aten/device.h"
#include "aten/memory.h"
#include "aten/lowering.h"
#include "runtime/fusion.h"

namespace ttpu::aten {
namespace {

constexpr c10::DispatchKeySet kTpuKeys{c10::DispatchKey::PrivateUse1};

void check_device(std::optional<c10::Device> device) {
  if (device.has_value() && device->has_index()) check_device_index(device->index());
}

// Under torch.use_deterministic_algorithms(True) with
// torch.utils.deterministic.fill_uninitialized_memory (on by default), new
// memory holds NaN (floats) or the dtype's maximum, as ATen's CPU and CUDA
// empty kernels fill it.
at::Tensor filled_if_deterministic(at::Tensor t) {
  const auto& context = at::globalContext();
  if (context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory()) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool>,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == c10::kStrided,
              "tpu supports only strided tensors, got layout ", *layout);
  check_device(device);
  c10::OptionalDeviceGuard guard(device);
  to_ir(dtype.value_or(c10::get_default_dtype_as_scalartype()));  // dtype check
  return filled_if_deterministic(at::detail::empty_generic(
      size, tpu_allocator(), kTpuKeys, dtype.value_or(c10::get_default_dtype_as_scalartype()),
      memory_format));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool>) {
  TORCH_CHECK(!layout.has_value() || *layout == c10::kStrided,
              "tpu supports only strided tensors, got layout ", *layout);
  check_device(device);
  c10::OptionalDeviceGuard guard(device);
  auto st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_ir(st);
  return filled_if_deterministic(
      at::detail::empty_strided_generic(size, stride, tpu_allocator(), kTpuKeys, st));
}

// Grows the storage if the new shape needs more bytes, keeping its contents.
void ensure_storage(const at::Tensor& self, int64_t needed_bytes) {
  c10::Storage storage = self.unsafeGetTensorImpl()->storage();
  if (needed_bytes > slot_of(storage).nbytes) resize_storage_bytes(storage, needed_bytes);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // As CPU's resize_: an unchanged shape keeps its strides (resize_as_ of a
  // transposed or channels-last tensor to its own shape is no restride) and
  // its storage (an expanded tensor's stays small).
  if (self.sizes() == size && !memory_format.has_value()) return self;
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  int64_t needed =
      (impl->numel() + impl->storage_offset()) * static_cast<int64_t>(self.element_size());
  const int64_t old_nbytes = static_cast<int64_t>(impl->storage().nbytes());
  if (impl->numel() > 0) ensure_storage(self, needed);
  const auto& context = at::globalContext();
  if (context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory()) {
    at::native::fill_resize_deterministic_(self, old_nbytes);  // as CPU's resize_
  }
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  int64_t max_index = storage_offset;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == 0) return self;
    max_index += (size[i] - 1) * (stride.empty() ? impl->stride(i) : stride[i]);
  }
  ensure_storage(self, (max_index + 1) * static_cast<int64_t>(self.element_size()));
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  auto storage = c10::Storage(c10::Storage::use_byte_size_t(), 0, tpu_allocator(), true);
  return set_storage(self, storage, 0, {0}, {});
}

// Tensor.record_stream (FSDP2, DDP): a caching allocator must not reuse the
// block before `s` is done with it. Here a storage's buffer lives as long as
// any enqueued program uses it (PJRT holds it), so there is nothing to note.
void record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a tpu stream, got one on ", s.device());
  (void)self;
}

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, int64_t nbytes) {
  TORCH_CHECK(nbytes >= 0, "tpu: storage size must be non-negative, got ", nbytes);
  auto& slot = slot_to_write(storage);
  if (nbytes == slot.nbytes) return;
  if (nbytes == 0) {
    // FSDP2 frees unsharded parameters this way: drop the value (and the
    // device memory once nothing else holds the buffer).
    runtime::forget_pending(slot);
    slot.buffer = nullptr;
    slot.error.clear();
    set_storage_nbytes(storage, slot, 0);
    return;
  }
  runtime::materialize(slot);
  if (slot.buffer == nullptr || slot.nbytes == 0) {
    slot.buffer = nullptr;  // nothing to keep: contents unspecified, read as zeros
    set_storage_nbytes(storage, slot, nbytes);
    return;
  }
  if (nbytes % ir::byte_size(slot.dtype) != 0 || slot.nbytes % ir::byte_size(slot.dtype) != 0) {
    reinterpret_slot(slot, ir::DType::kU8);  // a byte count the element type cannot hold
  }
  // Keep the old contents: share the old buffer with a 1-D tensor, resize the
  // slot, and write the values that fit at its start.
  const int64_t old_numel = slot.numel();
  const int64_t keep = std::min(old_numel, nbytes / ir::byte_size(slot.dtype));
  const c10::ScalarType dtype = to_aten(slot.dtype);
  at::Tensor old = new_tensor({old_numel}, dtype, slot.device);
  slot_of(old).buffer = slot.buffer;
  slot_of(old).dtype = slot.dtype;
  set_storage_nbytes(storage, slot, nbytes);
  slot.buffer = nullptr;
  at::Tensor whole = at::detail::empty_generic({0}, tpu_allocator(), kTpuKeys, dtype, std::nullopt);
  whole.unsafeGetTensorImpl()->set_storage_keep_dtype(storage);
  whole.unsafeGetTensorImpl()->set_sizes_contiguous({keep});
  LoweringContext ctx("aten::resize_", slot.device);
  ctx.write(whole, ctx.tensor(old.narrow(0, 0, keep)));
  ctx.run({});
}

namespace {

// Whether `from`'s TensorImpl fields may be shallow-copied into `self`'s
// (`param.data = new`, VariableHooks::set_data). Module._apply asks this to
// decide whether `Module.to(device)` swaps each parameter's data in place
// (keeping the Parameter object, so tied weights stay tied) or makes new
// Parameters. ATen answers yes only between dense tensors of its own backend
// list (TensorImpl::has_compatible_shallow_copy_type: CPU, CUDA, MPS, HIP,
// XPU, HPU, MTIA), so without this a model moved to tpu got new Parameter
// objects and tied weights came apart (pytorch/pytorch#116255). A tpu tensor
// is a plain strided TensorImpl over a storage, like theirs, so the swap is as
// safe as CPU <-> CUDA. Registered at AutogradPrivateUse1, which a call with
// one tpu argument dispatches to.
bool is_dense_tpu(const at::Tensor& t) {
  const c10::DispatchKeySet ks = t.key_set();
  return t.layout() == c10::kStrided && ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
         ks.has_backend(c10::BackendComponent::PrivateUse1Bit);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (impl->has_compatible_shallow_copy_type(from.key_set())) return true;
  // ATen's own dense backends answer this for a CPU key set.
  const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
  auto dense = [&](const at::Tensor& t) {
    return is_dense_tpu(t) || t.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(cpu);
  };
  return (is_dense_tpu(self) || is_dense_tpu(from)) && dense(self) && dense(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
  m.impl("empty.memory_format", &empty_memory_format);
  m.impl("empty_strided", &empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);  // a view: ATen's device-generic kernel
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
  m.impl("set_.source_Storage", &set_source_storage);
  m.impl("set_.source_Tensor", &set_source_tensor);
  m.impl("set_", &set_empty);
  // Metadata only (same StorageImpl, offset, sizes, strides): ATen's kernel,
  // registered for CPU/CUDA/MPS alone (it took the CPU fallback's copies).
  m.impl("is_set_to", &at::native::is_set_to);
  m.impl("record_stream", &record_stream);
}

}  // namespace ttpu::aten
