// The DeviceGuardImpl of tpu: current device, streams and events, as c10 (and
// torch.Stream / torch.Event / torch.tpu.Stream) use them.
//
// Streams: PJRT has no stream object; a device runs what is enqueued on it, and
// PJRT orders every program after the producers of its inputs. So every stream
// of a device is the device's one queue: the default stream has id 0, new and
// pooled streams get other ids (so code that compares streams sees them differ)
// but work issued on any of them lands in the same queue. Waiting on an event
// from another stream is therefore already satisfied when the work is issued;
// data moving between devices is ordered by the copy (Buffer::copy_to_device).
//
// Events are runtime::DeviceEvent: the point in the device's queue at record().
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <unordered_map>

#include "aten/device.h"
#include "runtime/event.h"
#include "runtime/fusion.h"

namespace ttpu::aten {
namespace {

constexpr c10::StreamId kPoolSize = 32;  // ids 1..32: getStreamFromGlobalPool
std::atomic<c10::StreamId> g_next_pooled{0};
std::atomic<c10::StreamId> g_next_new{kPoolSize + 1};
// This thread's current stream id per device (absent: the default stream).
thread_local std::unordered_map<int, c10::StreamId> t_current_stream;

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

c10::DeviceIndex resolve(c10::DeviceIndex d) {
  return d < 0 ? static_cast<c10::DeviceIndex>(current_device()) : d;
}

runtime::DeviceEvent* as_event(void* e) { return static_cast<runtime::DeviceEvent*>(e); }

// PJRT errors become RuntimeError (c10::Error) with their message.
template <typename F>
auto pjrt_checked(F f) {
  try {
    return f();
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", e.what());
  }
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "expected a tpu device, got ", d);
    if (d.index() >= 0) {
      check_device_index(d.index());
      set_current_device(d.index());
    }
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }

  // --- streams
  c10::Stream getStream(c10::Device d) const override {
    auto dev = resolve(d.index());
    auto it = t_current_stream.find(dev);
    return make_stream(dev, it == t_current_stream.end() ? 0 : it->second);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return make_stream(resolve(d.index()), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return make_stream(resolve(d.index()), 1 + (g_next_pooled++ % kPoolSize));
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return make_stream(resolve(d.index()), g_next_new++);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    t_current_stream[resolve(s.device_index())] = s.id();
    return old;
  }
  bool queryStream(const c10::Stream& s) const override {
    return pjrt_checked([&] {
      runtime::DeviceEvent e(false);
      e.record(resolve(s.device_index()));
      return e.query();
    });
  }
  void synchronizeStream(const c10::Stream& s) const override {
    pjrt_checked([&] {
      runtime::synchronize_device_queue(resolve(s.device_index()));
      return 0;
    });
  }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    pjrt_checked([] {
      runtime::flush_all();
      runtime::Runtime::get().synchronize();
      return 0;
    });
  }

  // --- events
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                int(device_index),
                " does not match recording stream's "
                "device index ",
                int(stream.device_index()), ".");
    if (*event == nullptr) {
      *event = new runtime::DeviceEvent(flag == c10::EventFlag::BACKEND_DEFAULT);
    }
    pjrt_checked([&] {
      as_event(*event)->record(resolve(stream.device_index()));
      return 0;
    });
  }
  void block(void* event, const c10::Stream&) const override {
    // One queue per device, inputs ordered by PJRT: nothing to insert.
    (void)event;
  }
  bool queryEvent(void* event) const override {
    return event == nullptr || as_event(event)->query();
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) as_event(event)->synchronize();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete as_event(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    auto* a = as_event(start);
    auto* b = as_event(end);
    TORCH_CHECK(a->timing() && b->timing(),
                "Both events must be created with argument 'enable_timing=True'.");
    return a->elapsed_ms(*b);
  }
};

}  // namespace

c10::impl::DeviceGuardImplInterface* new_guard_impl() { return new TpuGuardImpl(); }

}  // namespace ttpu::aten
