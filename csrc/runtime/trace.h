// Profiler records: what the runtime did on the devices while a profiler
// session runs (each executed program, each XLA compile, each copy between
// host and device), for torch.profiler's device timeline. No torch include:
// the aten layer's kineto adapter (aten/profiler.cc) starts and stops a
// session and turns the records into trace activities.
//
// Cost when no session runs: one relaxed load of one atomic flag at each
// hook (trace::active()), nothing else, so the hot path is unchanged.
//
// Times are steady-clock nanoseconds. A program's record starts when it is
// enqueued and ends when the plugin's ready callback fires for its first
// output (PJRT computes all outputs of one execution together); an upload's
// likewise. A download and a compile block their thread: start and end are
// taken around the call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ttpu::pjrt {
class Buffer;
}

namespace ttpu::runtime::trace {

enum class Kind : uint8_t {
  kExecute,         // one program run on `device` (a strict op, a fused graph, a compiled graph)
  kCompile,         // one XLA compile (PJRT_Client_Compile), on the caller's or a compile thread
  kHostToDevice,    // an upload of `bytes`
  kDeviceToHost,    // a download of `bytes`
  kDeviceToDevice,  // a copy of `bytes` to `device` from another device
};

struct Record {
  Kind kind = Kind::kExecute;
  int device = 0;
  std::string name;  // the ATen op, fused graph or compiled graph; for copies, the direction
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t queued_ns = 0;  // kExecute: when it was enqueued (start_ns may be later, see stop())
  int64_t bytes = 0;
  uint64_t seq = 0;  // order of the calls that made the records
  // The profiler's correlation id of the host op that made it (0: none), so
  // the timeline links the device event to its ATen op.
  uint64_t correlation = 0;
};

namespace detail {
extern std::atomic<bool> g_active;
}

// Whether a session is recording: the only work a hook does when none is.
inline bool active() { return detail::g_active.load(std::memory_order_relaxed); }

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The innermost correlation id pushed on this thread (0 if none): the
// profiler pushes one around each host op it records.
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation();

// Starts recording (dropping what an earlier session left). One session at a
// time, as torch.profiler allows.
void start();
// Stops recording and returns the records, oldest call first. Waits up to
// `wait` for the completion callbacks of work recorded during the session
// (programs and uploads still running), so a profile that ends right after
// enqueuing still shows them; what has not completed by then is left out.
// Programs on one device run one after another: an execute record's start is
// moved to the end of the one before it on its device when that ended later
// than it was enqueued (it waited in the queue), so durations are device time.
std::vector<Record> stop(std::chrono::milliseconds wait = std::chrono::seconds(60));

// Adds a finished record (blocking work: compiles, downloads).
void add(Record r);
// Adds `r` when `buffer` is computed (its end_ns is that moment). The
// callback runs on a plugin thread; a record completing after the session
// ended is dropped.
void add_when_ready(Record r, const pjrt::Buffer& buffer);

// Adds the record of one program execution enqueued at `queued` (on
// `device`, named `op`), ending when its first output is computed.
void add_execute(const std::vector<std::shared_ptr<pjrt::Buffer>>& outs, const std::string& op,
                 int device, int64_t queued);

}  // namespace ttpu::runtime::trace
