// What every host-staged collective of TpuBackend shares (backend.cc): the host
// staging buffers and transfers (staging.cc) and the call through the group's
// issue queue with its signature exchange (host_collective.cc).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "distributed/signature_check.h"
#include "distributed/backend.h"
#include "distributed/issue_order.h"

namespace ttpu::distributed {

using Tensors = std::vector<at::Tensor>;

// The device-to-host copies a queued call still has to make: they run on the
// issue queue (issue_order.h) ahead of its collective, not on the caller's thread.
using Pending = std::vector<std::function<void()>>;

// A host buffer for a result: same shape and dtype, contiguous (pooled from
// 64 KB: a fresh allocation costs its page faults on first touch).
at::Tensor host_like(const at::Tensor& t);
Tensors host_like(const Tensors& ts);
std::vector<Tensors> host_like(const std::vector<Tensors>& tss);

// Dense, contiguous host copy: what gloo requires. With `pending`, the copy
// itself may be left there (it reads the values `t` has now); without, it is
// made here.
at::Tensor to_host(const at::Tensor& t, Pending* pending);
Tensors to_host(const Tensors& ts, Pending* pending);

// Host results into the caller's tpu tensors, in place (storage and data_ptr
// kept; see staging.cc).
void copy_back(const Tensors& dst, const Tensors& src);

// TORCHTPU_DIST_CHECK=0 skips the cross-rank signature check (signature_check.h): a
// mismatch then aborts inside gloo, as it does for CPU tensors.
bool signature_checks_enabled();

// A rank-local argument check, run before the exchange so that its failure is
// part of the signature: the other ranks then raise too instead of waiting in
// a collective this rank never joins.
template <class F>
std::exception_ptr local_check(F check) {
  try {
    check();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// A call's device-to-host copies, started on the caller's thread before its
// signature exchange: starting one runs the deferred device checks of the ops
// producing the input (an index out of range, ...), and such an error must be
// part of the signature (valid = false) so that every rank raises instead of
// the others running a collective this rank never joins. The copies
// themselves run later, first in the call's queued job.
class Staging {
 public:
  Staging() { release_retired(); }  // the caller's thread: its reads before this call are over
  at::Tensor in(const at::Tensor& t) {
    if (!error_) {
      try {
        return to_host(t, &pending_);
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    return host_like(t);  // never sent: the call fails with error_
  }
  Tensors in(const Tensors& ts) {
    Tensors out;
    out.reserve(ts.size());
    for (const auto& t : ts) out.push_back(in(t));
    return out;
  }
  std::exception_ptr error() const { return error_; }
  Pending take() { return std::move(pending_); }

 private:
  Pending pending_;
  std::exception_ptr error_;
};

using IssueFn = std::function<std::vector<c10::intrusive_ptr<c10d::Work>>()>;

// One call through the group's issue queue (issue_order.h). The constructor issues
// the signature exchange at once, on the control group (its own gloo group,
// so it need not wait for the collectives queued before it to be issued), so
// its round trip runs while earlier calls and this call's staging copies do;
// issue() queues the verdict and the inner collective(s) and returns the work
// at once. A rank-local error raises from issue(), after the
// exchange (the other ranks learn of it); other errors (a mismatch, gloo's)
// reach the work: its wait() and its future.
class QueuedCall {
 public:
  // `staged`: the call's input copies, started before (their pending steps
  // move here; an error starting them counts as a local error, after `local`).
  QueuedCall(Staging& staged, const GroupChannels& group, const char* name, CallSignature sig,
             std::chrono::milliseconds timeout, std::exception_ptr local = nullptr,
             bool checked = true);

  c10::intrusive_ptr<c10d::Work> issue(IssueFn fn, std::function<void()> finish_fn, Tensors outputs,
                                       std::chrono::milliseconds timeout, int rank,
                                       c10d::OpType type);

 private:
  struct State {
    std::optional<SignatureCheck> check;
    std::exception_ptr error;  // the exchange could not be issued
  };
  GroupChannels group_;
  std::exception_ptr local_;
  std::shared_ptr<State> state_;
  Pending pending_;
};

}  // namespace ttpu::distributed
