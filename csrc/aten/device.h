// The PrivateUse1 device `tpu`: allocator, storage slots, dtype mapping, the
// default generator. Tensor storages hold a runtime::Slot as their DataPtr
// context; the DataPtr's address is the slot's own address (never dereferenced:
// it only gives data_ptr() a stable, unique value per storage, as on CUDA).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "ir/types.h"
#include "runtime/runtime.h"

namespace ttpu::aten {

ir::DType to_ir(c10::ScalarType t);  // TORCH_CHECK on unsupported dtypes
c10::ScalarType to_aten(ir::DType t);
ir::TensorType ir_type(const at::Tensor& t);  // sizes + dtype

// The slot behind a tpu tensor's storage, to read. TORCH_CHECKs the tensor is on
// tpu. A copy-on-write storage (Tensor._lazy_clone, c10/core/impl/COW.h) wraps
// the slot it shares with its source in c10's COW context: the DataPtr's address
// is still the slot, so a read finds it there and materializes nothing.
runtime::Slot& slot_of(const at::Tensor& t);
runtime::Slot& slot_of(const c10::Storage& s);
// The slot a write replaces the buffer of: a copy-on-write storage is first
// materialized (c10 gives it a slot of its own through the allocator's
// copy_data, which shares the PJRT buffer, so this copies no device memory),
// and the write then leaves the other storages of the lazy clone alone.
runtime::Slot& slot_to_write(const at::Tensor& t);
runtime::Slot& slot_to_write(const c10::Storage& s);

c10::Allocator* tpu_allocator();

// New contiguous tpu tensor whose slot will receive a program output.
at::Tensor new_tensor(c10::IntArrayRef sizes, c10::ScalarType dtype, int device);
// New resizable tpu storage of `nbytes` on `device`, its slot not yet written.
c10::Storage new_storage(int64_t nbytes, int device);
// This thread's current tpu device (torch.tpu.current_device()).
int current_device();
void set_current_device(int device);  // unchecked: the guard validates
// Grows or shrinks a tpu storage to `nbytes` (Storage.resize_, FSDP2's free and
// regrow). Growing keeps the old contents at the start; shrinking to 0 frees
// the device buffer. data_ptr() is unchanged.
void resize_storage_bytes(const c10::Storage& storage, int64_t nbytes);
// The DeviceGuardImpl of tpu (device, streams, events; stream.cc).
c10::impl::DeviceGuardImplInterface* new_guard_impl();

// The process-wide generator of `device`: seed and a counter (offset) that each
// random op advances, so draws differ and manual_seed makes them repeat.
struct TpuGenerator : public c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex device);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // Returns {seed, offset} and advances the offset by one draw.
  std::pair<uint64_t, uint64_t> next_draw();

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_ = 67280421310721ULL;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
int device_count_or_zero() noexcept;
// Raises IndexError (as CUDA's) unless 0 <= index < device_count_or_zero(); the
// message says how the CPU plugin is given more devices.
void check_device_index(int index);
void register_device();  // guard + hooks; called once from module init

}  // namespace ttpu::aten
