// Reading a buffer's bytes straight from its own memory, on a plugin whose
// device memory is this process's host memory (the XLA:CPU plugin). There a
// device-to-host copy is one memcpy after the buffer's ready event, without
// PJRT_Buffer_ToHostBuffer's size query, host literal and copy event. Other
// plugins keep ToHostBuffer: the pointer they hand out is a device address.
#pragma once

#include <cstdint>

#include "pjrt/pjrt.h"

namespace ttpu::pjrt {

// Whether `client`'s device memory is readable host memory: the platform is
// "cpu", the plugin implements PJRT_Buffer_OpaqueDeviceMemoryDataPointer, and
// a probe buffer's pointer reads back
// the bytes it was made from (read with process_vm_readv, which fails
// instead of faulting on an unmapped address). Probed once per client;
// TORCHTPU_PJRT_HOST_READ=0 (read then) turns it off.
bool device_memory_is_host(Client& client);

// Copies the whole of `buffer` (of `client`) into `dst` (`nbytes`, dense
// row-major) with a memcpy from the buffer's memory, after its ready event.
// The caller holds `buffer` and must not donate it meanwhile (host_read.cc
// says why no external reference is taken). Never writes the buffer. Returns
// false, having copied nothing, where that does not apply (another plugin, a
// size other than `nbytes`, a non-default layout, a buffer whose producer
// failed): the caller then uses Buffer::to_host, which reports the errors.
bool read_in_place(Client& client, const Buffer& buffer, void* dst, int64_t nbytes);

}  // namespace ttpu::pjrt
