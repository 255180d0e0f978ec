// The background compile pool (compile_pool.h). Its threads are detached and
// the pool is never destroyed: a thread blocked on the queue at exit holds
// nothing of XLA's, and one still compiling is counted in
// Runtime::compiles_running(), which torchtpu's exit hook waits for.
#include "runtime/compile_pool.h"
#include "settings/settings.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace ttpu::runtime {
namespace {

std::atomic<bool>& flag() {
  static std::atomic<bool> on{settings::flag("TORCHTPU_BACKGROUND_COMPILE", true)};
  return on;
}

struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  int threads = 0;  // started so far
  int idle = 0;

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      ++idle;
      cv.wait(lock, [this] { return !queue.empty(); });
      --idle;
      std::function<void()> work = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      work();  // never throws: the caller's work catches its own errors
      work = nullptr;
      lock.lock();
    }
  }
};

Pool& pool() {
  static auto* p = new Pool();  // never destroyed (see the top)
  return *p;
}

std::atomic<bool> g_closed{false};  // see close_compile_queue

}  // namespace

void close_compile_queue() { g_closed.store(true); }
bool compile_queue_closed() { return g_closed.load(); }

void set_background_compile(bool on) { flag().store(on); }
bool background_compile() { return flag().load(std::memory_order_relaxed); }

int compile_threads() {
  static const int n = [] {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return static_cast<int>(
        settings::integer("TORCHTPU_COMPILE_THREADS", std::clamp(cores, 2, 8), 1, 64));
  }();
  return n;
}

bool submit_compile(std::function<void()> work) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  // Threads start on demand, up to the limit: a process that never compiles
  // in the background never has them.
  if (p.idle <= static_cast<int>(p.queue.size()) && p.threads < compile_threads()) {
    try {
      std::thread([&p] { p.loop(); }).detach();
      ++p.threads;
    } catch (const std::system_error&) {
      if (p.threads == 0) return false;  // nobody would ever run it
    }
  }
  p.queue.push_back(std::move(work));
  p.cv.notify_one();
  return true;
}

}  // namespace ttpu::runtime
