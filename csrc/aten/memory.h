// The tpu allocator (a c10::DeviceAllocator: storages are runtime::Slots) and
// its per-device accounting, which torch.tpu.memory_* and torch.accelerator.*
// read. See memory.cc for what the numbers count.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include "runtime/runtime.h"

namespace c10 {
struct DeviceAllocator;
}

namespace ttpu::aten {

c10::Allocator* tpu_allocator();
c10::DeviceAllocator* tpu_device_allocator();

// Whether a tpu DataPtr's address is a runtime::Slot: made by the tpu
// allocator, c10's copy-on-write wrapper of one, or from_blob of a tpu
// tensor's data_ptr (DLPack import), all at the slot's address. False for a
// slice of a storage (UntypedStorage[a:b]), whose address is its parent's
// plus an offset (copy.h, own_storage_slice).
bool addresses_a_slot(const c10::DataPtr& data);

// Changes a tpu storage's size (storage and slot), keeping the accounting right.
// Touches no device data.
void set_storage_nbytes(const c10::Storage& storage, runtime::Slot& slot, int64_t nbytes);

}  // namespace ttpu::aten
