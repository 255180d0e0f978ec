// Stage marks (trace.h): a mutex-guarded vector; only profiling turns it on.
#include "distributed/trace.h"

#include <time.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

namespace ttpu::distributed::trace {

std::atomic<bool> g_enabled{false};

namespace {
std::mutex g_mutex;
std::vector<Mark>* g_marks = new std::vector<Mark>();  // never destroyed: marks at exit
constexpr size_t kMaxMarks = 1 << 16;
}  // namespace

void mark_slow(const char* what) {
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  Mark m{what,
         std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
             .count(),
         static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec,
         std::hash<std::thread::id>()(std::this_thread::get_id())};
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_marks->size() < kMaxMarks) g_marks->push_back(m);
}

void enable(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_marks->clear();
  g_enabled.store(on);
}

std::vector<Mark> take() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Mark> out;
  out.swap(*g_marks);
  return out;
}

}  // namespace ttpu::distributed::trace
