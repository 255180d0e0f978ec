// Host <-> device transfers for tpu tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/runtime.h"

namespace ttpu::aten {

// A CPU tensor with the values of `src` (any tpu view); waits for them.
// Raises RuntimeError naming the op whose asynchronous execution failed.
at::Tensor to_host(const at::Tensor& src);
// Writes a CPU tensor (broadcastable, any dtype) into the tpu view `dst`.
void from_host(const at::Tensor& dst, const at::Tensor& src_cpu);
// from_host() for a dense host tensor that the caller hands over: when `src`
// has `dst`'s dtype and shape and `dst` is a whole storage, the device buffer
// may take `src`'s memory itself (no allocation, no copy on the CPU plugin);
// `src`'s storage is then held until the plugin lets go of it, and the
// caller must never write it again (torch.distributed's staging buffers).
void adopt_host(const at::Tensor& dst, const at::Tensor& src);
// Re-types a slot's bytes as `dtype` (a storage viewed with another element size,
// as torch.save/torch.load do with byte storages) by a host round trip.
void reinterpret_slot(runtime::Slot& slot, ir::DType dtype);
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
// A slice of a tpu storage (UntypedStorage[a:b], torch/csrc/Storage.cpp) made
// a storage of its own: its DataPtr addresses its parent's slot plus a byte
// offset, which is not a slot. Replaces that DataPtr with a new slot holding
// a copy of those bytes (a host round trip), so reads see the parent's
// values; a later write to the slice does not reach the parent (CUDA's
// slices share memory; docs/limitations.md). Raises RuntimeError for a
// storage whose memory torchtpu did not allocate.
void own_storage_slice(const c10::Storage& storage);

}  // namespace ttpu::aten
