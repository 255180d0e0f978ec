// TpuWork: a host-staged collective in flight; its copy-back runs once, on
// the first thread that waits for it.
#include <ATen/core/ivalue.h>

#include "distributed/backend.h"

namespace ttpu::distributed {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using Tensors = std::vector<at::Tensor>;

TpuWork::TpuWork(WorkPtr inner, std::function<void()> finish_fn, Tensors outputs,
                 std::chrono::milliseconds timeout, int rank, OpType type)
    : Work(rank, type),
      inner_(std::move(inner)),
      finish_fn_(std::move(finish_fn)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void TpuWork::complete(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard(complete_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) {
      if (exception_) std::rethrow_exception(exception_);
      return;
    }
  }
  std::exception_ptr error;
  try {
    if (inner_) inner_->wait(timeout);
    if (finish_fn_) finish_fn_();
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
  finish_fn_ = nullptr;
  if (error) {
    future_->setErrorIfNeeded(error);
    std::rethrow_exception(error);
  }
  future_->markCompleted(c10::IValue(outputs_));
}

bool TpuWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  if (inner_ && !inner_->isCompleted()) return false;
  try {
    complete(timeout_);
  } catch (...) {
    // The failure is recorded; isSuccess/wait report it.
  }
  return true;
}

bool TpuWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  complete(timeout == kNoTimeout ? timeout_ : timeout);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TpuWork::getFuture() {
  // DDP and functional collectives chain on the future: it completes only
  // after the copy-back, so waiting here is what makes its value correct.
  try {
    complete(timeout_);
  } catch (...) {
    // The future carries the error.
  }
  return future_;
}

}  // namespace ttpu::distributed
