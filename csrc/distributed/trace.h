// Stage marks of the tpu backend's collectives, for bench/profile_distributed.py:
// where one call's time goes (its critical path across the caller's thread,
// the issue queue and gloo's worker), by wall clock and by the marking
// thread's own CPU clock. Off unless enabled (_C._dist_trace(True)); a mark
// then costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace ttpu::distributed::trace {

struct Mark {
  const char* what;   // a string literal
  int64_t wall_ns;    // steady clock
  int64_t thread_ns;  // CLOCK_THREAD_CPUTIME_ID of the marking thread
  uint64_t thread;    // the marking thread (a hash of its id)
};

extern std::atomic<bool> g_enabled;

void mark_slow(const char* what);
inline void mark(const char* what) {
  if (g_enabled.load(std::memory_order_relaxed)) mark_slow(what);
}

// Starts (clearing what was recorded) or stops recording; take() returns the
// marks so far and clears them. At most 1 << 16 marks are kept.
void enable(bool on);
std::vector<Mark> take();

}  // namespace ttpu::distributed::trace
