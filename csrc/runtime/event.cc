#include "runtime/event.h"

#include <chrono>

#include "pjrt/pjrt.h"
#include "runtime/fusion.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace ttpu::runtime {

void DeviceEvent::Point::finish_one() {
  std::lock_guard<std::mutex> lock(mu);
  if (--remaining == 0) {
    done_ns = trace::now_ns();
    // Later records need not wait for these buffers again.
    Runtime::get().retire(device, mark);
    cv.notify_all();
  }
}

void DeviceEvent::record(int device) {
  flush_all();  // fused mode: pending graphs become enqueued programs first
  auto point = std::make_shared<Point>();
  auto buffers = Runtime::get().in_flight(device, &point->mark);
  point->device = device;
  // One extra count held while registering, so the point cannot complete
  // before every buffer has its callback.
  point->remaining = static_cast<int>(buffers.size()) + 1;
  for (auto& b : buffers) {
    b->on_ready([point](bool) { point->finish_one(); });
  }
  point->finish_one();
  device_ = device;
  point_ = std::move(point);
}

bool DeviceEvent::query() const {
  if (point_ == nullptr) return true;
  {
    std::lock_guard<std::mutex> lock(point_->mu);
    if (point_->remaining == 0) return true;
  }
  // Reached, its callbacks still to run: a synchronize() returned since.
  return Runtime::get().retired(point_->device, point_->mark);
}

void DeviceEvent::synchronize() const {
  if (point_ == nullptr) return;
  std::unique_lock<std::mutex> lock(point_->mu);
  auto reached = [this] { return point_->remaining == 0; };
  // Interruptible as a host read is: the poll runs every 50 ms (unlocked: it
  // may take the GIL) and may throw (KeyboardInterrupt), leaving the work queued.
  while (!point_->cv.wait_for(lock, std::chrono::milliseconds(50), reached)) {
    lock.unlock();
    pjrt::poll_wait();
    lock.lock();
  }
}

double DeviceEvent::elapsed_ms(const DeviceEvent& end) const {
  synchronize();
  end.synchronize();
  return static_cast<double>(end.point_->done_ns - point_->done_ns) / 1e6;
}

void synchronize_device_queue(int device) {
  DeviceEvent e(false);
  e.record(device);
  e.synchronize();
}

}  // namespace ttpu::runtime
