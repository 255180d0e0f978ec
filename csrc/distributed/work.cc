// TpuWork: a host-staged collective in flight. Its copy-back runs once: on
// the thread that completes the last inner future (chained by start()), or on
// the first thread that waits for it, whichever comes first.
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <thread>

#include <c10/util/Exception.h>

#include "distributed/backend.h"
#include "distributed/issue_order.h"
#include "distributed/trace.h"

namespace ttpu::distributed {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using Tensors = std::vector<at::Tensor>;

TpuWork::TpuWork(std::vector<WorkPtr> inners, std::function<void()> finish_fn, Tensors outputs,
                 std::chrono::milliseconds timeout, int rank, OpType type)
    : Work(rank, type),
      inners_(std::move(inners)),
      finish_fn_(std::move(finish_fn)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  // A null inner (nothing to wait for) is dropped: barrier-free copy steps.
  inners_.erase(std::remove_if(inners_.begin(), inners_.end(), [](const WorkPtr& w) { return !w; }),
                inners_.end());
}

void TpuWork::defer(std::weak_ptr<Issuer> issuer) {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  issuer_ = std::move(issuer);
  issued_ = false;
  chained_ = true;  // its future completes by itself (from issued() on)
}

void TpuWork::issued(std::vector<WorkPtr> inners, std::exception_ptr fail_with) {
  if (fail_with) {
    std::lock_guard<std::mutex> guard(complete_mutex_);
    fail_with_ = std::move(fail_with);
  }
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    inners_ = std::move(inners);
    issued_ = true;
  }
  issue_cv_.notify_all();
  // Inner works without futures (none of the queued gloo collectives) leave
  // it lazy: the first wait() completes it. Waiting here would hold up the
  // queue, and may run inside a wait() of this very work (its drain()).
  start();
}

void TpuWork::issue_failed(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    issued_ = true;
  }
  issue_cv_.notify_all();
  finish(error);
}

int TpuWork::sourceRank() const {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  return issued_ && inners_.size() == 1 ? inners_[0]->sourceRank() : -1;
}

void TpuWork::start() {
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
  try {
    for (auto& w : inners_) futures.push_back(w->getFuture());
  } catch (const c10::Error&) {
    chained_ = false;
    return;  // an inner work without a future: the lazy form (see backend.h)
  }
  chained_ = true;
  if (futures.empty()) {
    finish(nullptr);
    return;
  }
  remaining_.store(futures.size());
  // Each callback keeps the work alive until it runs, so the results land in
  // the caller's tensors even when the work itself is dropped unwaited (as
  // with NCCL, whose kernel writes them regardless).
  auto self = c10::intrusive_ptr<TpuWork>::reclaim_copy(this);
  for (auto& f : futures)
    f->addCallback([self](c10::ivalue::Future& done) { self->inner_done(done); });
}

void TpuWork::inner_done(c10::ivalue::Future& done) {
  if (done.hasError()) {
    std::lock_guard<std::mutex> guard(complete_mutex_);
    if (!inner_error_) inner_error_ = done.exception_ptr();
  }
  if (remaining_.fetch_sub(1) != 1) return;
  trace::mark("inner_done");
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> guard(complete_mutex_);
    error = inner_error_;
  }
  // Runs on the completing thread (gloo's worker): the copy-back only hands
  // the staging buffer to the plugin, so it does not hold gloo up. Nothing
  // may escape into the future's machinery.
  try {
    finish(error);
  } catch (...) {}
}

void TpuWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> guard(complete_mutex_);
    if (finished_) return;
    if (!error) error = fail_with_;
    if (!error) {
      try {
        if (finish_fn_) finish_fn_();
        trace::mark("written_back");
      } catch (...) {
        error = std::current_exception();
      }
    }
    finish_fn_ = nullptr;  // drops the staging buffers' references: the pool reuses them
    finished_ = true;
  }
  if (Issuer::in_job()) {
    // Finished inside a queued job (its inner futures were already complete
    // when start() chained them): the future's callbacks may wait for a later
    // collective whose job is queued behind this one (PowerSGD's hook does),
    // so they run on a thread of their own instead.
    auto self = c10::intrusive_ptr<TpuWork>::reclaim_copy(this);
    std::thread([self, error] { self->complete(error); }).detach();
    return;
  }
  complete(error);
}

void TpuWork::complete(std::exception_ptr error) {
  // Outside complete_mutex_: the future runs its callbacks (DDP's, Python's
  // then()) inline, and one of them may wait for this work.
  if (error)
    future_->setErrorIfNeeded(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
  trace::mark("future_completed");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
}

bool TpuWork::isCompleted() {
  if (future_->completed()) return true;
  // Chained: a callback completes it (never block here, a poll may hold the GIL).
  if (chained_) return false;
  for (auto& w : inners_)
    if (!w->isCompleted()) return false;
  try {
    wait(timeout_);  // the inners are done: only the copy-back is left
  } catch (...) {
    // Recorded in the future; isSuccess and wait report it.
  }
  return true;
}

bool TpuWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

bool TpuWork::is_finished() {
  std::lock_guard<std::mutex> guard(complete_mutex_);
  return finished_;
}

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  trace::mark("wait");
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  // One thread at a time waits for the inners, and none once it is finished:
  // some inner works do their own copy-out on every wait() (gloo's
  // reduce_scatter_tensor), which must not land after the write-back.
  std::unique_lock<std::timed_mutex> waiting(wait_mutex_, std::defer_lock);
  if (!is_finished() && waiting.try_lock_for(limit) && !is_finished()) {
    std::exception_ptr error;
    std::vector<WorkPtr> inners;
    {
      std::unique_lock<std::mutex> lock(issue_mutex_);
      if (!issued_) {
        auto issuer = issuer_.lock();
        lock.unlock();
        if (issuer) issuer->drain();  // issues this call (and those queued before it) here
        lock.lock();
        if (!issue_cv_.wait_for(lock, limit, [this] { return issued_; })) {
          try {
            C10_THROW_ERROR(DistBackendError,
                            "torch.distributed backend 'tpu': timed out waiting for the "
                            "collective to be issued (the calls queued before it did not "
                            "finish)");
          } catch (...) {
            error = std::current_exception();
          }
        }
      }
      inners = inners_;
    }
    // The inner waits bound the wait and raise gloo's errors (a timeout, a
    // peer that left); a timeout here fails the work and its future.
    try {
      if (!error)
        for (auto& w : inners) w->wait(limit);
    } catch (...) {
      error = std::current_exception();
    }
    finish(error);  // no-op when a callback already finished it
  }
  if (!is_finished()) {
    // Another thread holds the inner wait past our limit.
    C10_THROW_ERROR(DistBackendError,
                    "torch.distributed backend 'tpu': timed out waiting for the collective");
  }
  future_->wait();    // another thread may still be marking it (immediate then)
  release_retired();  // this thread's reads before wait() are over
  trace::mark("wait_returns");
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TpuWork::getFuture() {
  if (chained_) {
    std::shared_ptr<Issuer> issuer;
    {
      std::lock_guard<std::mutex> lock(issue_mutex_);
      if (!issued_) issuer = issuer_.lock();
    }
    if (issuer) issuer->hurry();  // DDP's bucket hook: nobody waits on this thread
    trace::mark(issuer ? "future_hurried" : "future_taken");
  } else {
    // The lazy form: its future completes only after the copy-back.
    try {
      wait(timeout_);
    } catch (...) {
      // The future carries the error.
    }
  }
  return future_;
}

}  // namespace ttpu::distributed
