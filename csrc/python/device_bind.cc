// torchtpu._C's device functions behind torch.tpu: the current device, memory
// statistics, events, generators, and test hooks into storages.
#include "python/bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "aten/device.h"
#include "aten/memory.h"
#include "runtime/event.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using ttpu::runtime::Runtime;

namespace ttpu::python {

void bind_device(py::module& m) {
  m.def("_current_device", [] {
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  });
  m.def("_set_device", [](int index) {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, index));
  });
  // Memory accounting (aten/memory.cc), keyed as torch.cuda.memory_stats keys
  // its "<stat>.all.<current|peak|allocated|freed>" entries.
  m.def("_memory_stats", [](int device) {
    auto stats = ttpu::aten::tpu_device_allocator()->getDeviceStats(device);
    py::dict out;
    auto put = [&](const char* name, const c10::CachingAllocator::StatArray& a) {
      const auto& s = a[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      std::string base = std::string(name) + ".all.";
      out[py::str(base + "current")] = s.current;
      out[py::str(base + "peak")] = s.peak;
      out[py::str(base + "allocated")] = s.allocated;
      out[py::str(base + "freed")] = s.freed;
    };
    put("allocation", stats.allocation);
    put("segment", stats.segment);
    put("active", stats.active);
    put("allocated_bytes", stats.allocated_bytes);
    put("reserved_bytes", stats.reserved_bytes);
    put("active_bytes", stats.active_bytes);
    put("requested_bytes", stats.requested_bytes);
    out["num_alloc_retries"] = stats.num_alloc_retries;
    out["num_ooms"] = stats.num_ooms;
    return out;
  });
  m.def("_reset_peak_memory_stats",
        [](int device) { ttpu::aten::tpu_device_allocator()->resetPeakStats(device); });
  m.def("_reset_accumulated_memory_stats",
        [](int device) { ttpu::aten::tpu_device_allocator()->resetAccumulatedStats(device); });
  m.def("_mem_get_info", [](int device) {
    return guarded([&] { return ttpu::aten::tpu_device_allocator()->getMemoryInfo(device); });
  });
  m.def("_device_kind", [](int device) {
    return guarded([&] { return Runtime::get().client().device_kind(device); });
  });
  // Event.elapsed_time for torch.tpu.Event (torch.Event's own accepts only an
  // exact torch.Event as the end). The ids are c10::Event::eventId(): our
  // runtime::DeviceEvent pointers, 0 until recorded.
  m.def("_event_elapsed_ms", [](uintptr_t start, uintptr_t end) {
    TORCH_CHECK_VALUE(start != 0 && end != 0,
                      "Both events must be recorded before calculating elapsed time.");
    auto* a = reinterpret_cast<ttpu::runtime::DeviceEvent*>(start);
    auto* b = reinterpret_cast<ttpu::runtime::DeviceEvent*>(end);
    TORCH_CHECK_VALUE(a->timing() && b->timing(),
                      "Both events must be created with argument 'enable_timing=True'.");
    py::gil_scoped_release release;
    return a->elapsed_ms(*b);
  });
  m.def("_device_copy_supported", [] { return Runtime::get().device_copy_supported(); });
  m.def("_manual_seed", [](uint64_t seed, int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  });
  m.def("_seed", [](int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.seed();
  });
  m.def("_initial_seed",
        [](int device) { return ttpu::aten::default_generator(device).current_seed(); });
  m.def("_get_rng_state", [](int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return at::Tensor(gen.get_state());
  });
  m.def("_set_rng_state", [](const at::Tensor& state, int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  });
  m.def("_storage_producer", [](const at::Tensor& t) { return ttpu::aten::slot_of(t).producer; });
  // For tests: a new tensor whose storage is a copy made by the tpu allocator
  // (Allocator::clone, the path copy-on-write materialisation takes), which
  // shares the source's PJRT buffer.
  m.def("_allocator_clone", [](const at::Tensor& t) {
    const c10::Storage& src = t.storage();
    c10::Allocator* alloc = ttpu::aten::tpu_allocator();
    c10::DeviceGuard guard(t.device());
    c10::Storage copy(c10::Storage::use_byte_size_t(), src.nbytes(),
                      alloc->clone(src.data(), src.nbytes()), alloc, /*resizable=*/true);
    auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(copy), t.key_set(), t.dtype());
    out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    return out;
  });
  // For tests: identifies the PJRT buffer behind a storage (0: none yet), to
  // tell storages that share one buffer.
  m.def("_storage_buffer_id", [](const at::Tensor& t) {
    return reinterpret_cast<uintptr_t>(ttpu::aten::slot_of(t).buffer.get());
  });
}

}  // namespace ttpu::python
