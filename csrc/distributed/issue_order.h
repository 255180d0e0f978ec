// Issuer: the order in which one tpu group's host collectives reach gloo.
//
// Gloo pairs the collectives of the ranks by the order they are issued in, so
// every rank must issue them in the same order. The tpu backend issues its
// data collective only after the signature check (signature_check.h; the exchange
// itself goes out at the call, on a group of its own), which takes a round
// trip: done on the caller's thread, that round trip blocks it (DDP's
// autograd thread, at every bucket). Instead each
// call queues its steps here and returns; one thread runs the queue in order,
// and a thread that waits for a work runs the queue itself first (a call
// that is waited for at once, as a blocking collective is, pays no thread
// hop: the thread leaves a newly queued job kGrace to a waiter before it
// takes it). Jobs never wait for the queue themselves.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace ttpu::distributed {

class Issuer {
 public:
  Issuer();
  ~Issuer();  // runs what is queued, then stops the thread
  Issuer(const Issuer&) = delete;
  Issuer& operator=(const Issuer&) = delete;

  // Queues `job` (it must not throw); jobs run one at a time, in push order.
  void push(std::function<void()> job);
  // Runs queued jobs on this thread until the queue is empty (waits for a
  // job another thread is running first, so the order holds).
  void drain();
  // Ends the thread's grace for what is queued now: its caller will not wait
  // for it on its own thread (it asked for the work's future, as DDP's bucket
  // hooks do), so the thread starts it at once instead of kGrace later.
  void hurry();
  // Whether this thread is running a queued job now (any group's). A job must
  // not run user code that may wait: a future's callbacks (PowerSGD's hook
  // waits inside then() for a collective it just issued, whose job is queued
  // behind the running one) would wait forever.
  static bool in_job();

 private:
  // How long the thread leaves a newly queued job to a waiter: a blocking
  // collective's wait() follows its call within a few microseconds; an
  // asynchronous call's job starts this much later, unless its caller says
  // at once that it will not wait (hurry()).
  static constexpr std::chrono::microseconds kGrace{200};
  static std::chrono::microseconds grace();  // TORCHTPU_DIST_GRACE_US, else kGrace

  void loop();

  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  bool hurry_ = false;  // end the current grace (hurry())
  std::mutex run_mu_;   // held while jobs run
  std::thread thread_;
};

}  // namespace ttpu::distributed
