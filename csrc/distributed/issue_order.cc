// Issuer (issue_order.h): one thread per tpu group runs the queued issue steps in
// order; waiters run them too.
#include "distributed/issue_order.h"
#include "settings/settings.h"

#include <cstdlib>

namespace ttpu::distributed {
namespace {

thread_local int t_jobs_running = 0;

}  // namespace

bool Issuer::in_job() { return t_jobs_running > 0; }

Issuer::Issuer() : thread_([this] { loop(); }) {}

std::chrono::microseconds Issuer::grace() {
  static const std::chrono::microseconds us(
      settings::integer("TORCHTPU_DIST_GRACE_US", kGrace.count(), 0, 60'000'000));
  return us;
}

Issuer::~Issuer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The last reference may go from a job's own closure on the thread itself.
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();
  else if (thread_.joinable())
    thread_.join();
}

void Issuer::push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void Issuer::drain() {
  std::lock_guard<std::mutex> run(run_mu_);
  for (;;) {
    std::function<void()> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    ++t_jobs_running;
    job();
    --t_jobs_running;
  }
}

void Issuer::hurry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return;  // already taken: the next job keeps its grace
    hurry_ = true;
  }
  cv_.notify_all();
}

void Issuer::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty()) return;
      // A blocking collective's caller is about to wait for its work, and a
      // waiter runs the queue itself: leave it the job for a moment rather
      // than take it and make the caller wait for this thread (a thread hop
      // each way, and on a busy machine a scheduling delay). Its drain()
      // empties the queue; the grace then ends without a job to run.
      cv_.wait_for(lock, grace(), [this] { return stop_ || queue_.empty() || hurry_; });
      hurry_ = false;
      if (queue_.empty()) continue;
    }
    drain();
  }
}

}  // namespace ttpu::distributed
