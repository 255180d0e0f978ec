// The legacy autograd profiler's device hooks for tpu
// (`torch.autograd.profiler.profile(use_device="tpu")`).
//
// That profiler asks the PrivateUse1 ProfilerStubs, around every op, for an
// event and the host time (record), then for the device time between two
// events (elapsed, microseconds, as CUDA's stubs give cudaEventElapsedTime in
// ms * 1000). Unregistered, c10's default stubs warned per op and left the
// host time unset, so the table's CPU columns were garbage. Here an event is a
// runtime::DeviceEvent: the end of the device's queue when recorded (fused
// graphs pending then are flushed, so under this profiler fused mode runs
// smaller programs: values unchanged), reached when the work before it is
// computed; elapsed waits for both, as cudaEventElapsedTime does. The
// kineto-based torch.profiler (profiler.cc) needs none of this.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

#include "aten/device.h"
#include "aten/profiler.h"
#include "pjrt/pjrt.h"
#include "runtime/event.h"
#include "runtime/runtime.h"

namespace ttpu::aten {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct LegacyStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const int d = current_device();
    if (device != nullptr) *device = static_cast<c10::DeviceIndex>(d);
    auto e = std::make_shared<runtime::DeviceEvent>(/*timing=*/true);
    try {
      e->record(d);
    } catch (const pjrt::PjrtError& err) {
      TORCH_CHECK(false, "tpu profiler: recording an event failed: ", err.what());
    }
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    if (event != nullptr) *event = std::move(e);
  }
  float elapsed(const ProfilerVoidEventStub* start,
                const ProfilerVoidEventStub* end) const override {
    TORCH_CHECK(start != nullptr && end != nullptr && *start && *end,
                "tpu profiler: elapsed time of an event never recorded");
    const auto* a = static_cast<const runtime::DeviceEvent*>(start->get());
    const auto* b = static_cast<const runtime::DeviceEvent*>(end->get());
    return static_cast<float>(a->elapsed_ms(*b) * 1000.0);
  }
  // (no device-side markers or ranges: PJRT has no annotation API)
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    const int previous = current_device();
    for (int d = 0; d < runtime::Runtime::get().device_count(); ++d) {
      set_current_device(d);
      op(d);
    }
    set_current_device(previous);
  }
  void synchronize() const override { runtime::synchronize_device_queue(current_device()); }
};

}  // namespace

void register_legacy_profiler_stubs() {
  static LegacyStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
}

}  // namespace ttpu::aten
