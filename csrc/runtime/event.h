// Events: a recorded point in one device's queue, as a CUDA event is a point in
// a stream. PJRT has no queue object to mark, so recording takes the buffers
// enqueued on the device so far (Runtime::in_flight, after flushing fused
// graphs) and the point is reached when all of them are computed. The time of
// that moment (steady clock, taken in the plugin's ready callback) is the
// event's timestamp: elapsed time between two events is device time between
// the completion of the work before each.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace ttpu::runtime {

class DeviceEvent {
 public:
  explicit DeviceEvent(bool timing) : timing_(timing) {}
  // Marks the current end of `device`'s queue; a second record replaces the
  // point (as cudaEventRecord does). Throws pjrt::PjrtError.
  void record(int device);
  bool recorded() const { return point_ != nullptr; }
  bool timing() const { return timing_; }
  int device() const { return device_; }
  // True when the recorded point is reached (or nothing was recorded).
  bool query() const;
  // Blocks until the recorded point is reached. An op that failed before it is
  // not raised here: its error is raised at the next read of its result.
  // Interruptible (pjrt::poll_wait): what the poll throws leaves the wait.
  void synchronize() const;
  // Milliseconds from this event's point to `end`'s; waits for both.
  double elapsed_ms(const DeviceEvent& end) const;

 private:
  struct Point {
    std::mutex mu;
    std::condition_variable cv;
    int remaining = 0;    // buffers not yet computed
    int64_t done_ns = 0;  // steady-clock time the last one was
    int device = 0;
    uint64_t mark = 0;  // Runtime::in_flight's mark, retired when done
    void finish_one();
  };
  bool timing_;
  int device_ = -1;
  std::shared_ptr<Point> point_;
};

// Blocks until every buffer enqueued on `device` so far is computed (errors
// are left for the reads, as DeviceEvent::synchronize does).
void synchronize_device_queue(int device);

}  // namespace ttpu::runtime
