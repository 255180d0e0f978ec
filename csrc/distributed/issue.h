// Issuer: the order in which one tpu group's host collectives reach gloo.
//
// Gloo pairs the collectives of the ranks by the order they are issued in, so
// every rank must issue them in the same order. The tpu backend issues its
// signature exchange and its data collective only after the signature check
// (agree.h), which takes a round trip: done on the caller's thread, that
// round trip blocks it (DDP's autograd thread, at every bucket). Instead each
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
  // Runs `job` on this thread at once when nothing is queued or running
  // (the order holds), else queues it. For jobs that do not block (issuing
  // an exchange): the caller then takes no thread hop.
  void run_or_push(std::function<void()> job);
  // Runs queued jobs on this thread until the queue is empty (waits for a
  // job another thread is running first, so the order holds).
  void drain();

 private:
  // How long the thread leaves a newly queued job to a waiter: a blocking
  // collective's wait() follows its call within a few microseconds; an
  // asynchronous call's job starts this much later.
  static constexpr std::chrono::microseconds kGrace{200};
  static std::chrono::microseconds grace();  // TORCHTPU_DIST_GRACE_US, else kGrace

  void loop();

  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::mutex run_mu_;  // held while jobs run
  std::thread thread_;
};

}  // namespace ttpu::distributed
