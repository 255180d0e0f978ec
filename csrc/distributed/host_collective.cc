// QueuedCall (host_collective.h): one collective through the group's issue queue, its
// signature exchange first.
#include "distributed/host_collective.h"

#include <cstdlib>
#include <string>

#include "distributed/trace.h"
#include "settings/settings.h"

namespace ttpu::distributed {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

bool signature_checks_enabled() {
  static const bool enabled = settings::flag("TORCHTPU_DIST_CHECK", true);
  return enabled;
}

QueuedCall::QueuedCall(Staging& staged, const GroupChannels& group, const char* name,
                       CallSignature sig, std::chrono::milliseconds timeout,
                       std::exception_ptr local, bool checked)
    : group_(group),
      local_(local ? std::move(local) : staged.error()),
      state_(std::make_shared<State>()),
      pending_(staged.take()) {
  trace::mark("staged");
  sig.valid = !local_;
  if (!checked || !signature_checks_enabled()) {
    if (local_) std::rethrow_exception(local_);
    return;
  }
  try {
    state_->check.emplace(*group_.control, group_.signatures, group_.inner, name, sig, timeout);
  } catch (...) {
    state_->error = std::current_exception();
  }
  trace::mark("signature_issued");
}

WorkPtr QueuedCall::issue(IssueFn fn, std::function<void()> finish_fn, Tensors outputs,
                          std::chrono::milliseconds timeout, int rank, c10d::OpType type) {
  auto work = c10::make_intrusive<TpuWork>(std::vector<WorkPtr>{}, std::move(finish_fn),
                                           std::move(outputs), timeout, rank, type);
  work->defer(group_.issuer);
  group_.issuer->push(
      [state = state_, local = local_, fn = std::move(fn), work, pending = std::move(pending_)] {
        trace::mark("job_start");
        // The staging copies first: they overlap the signature exchange's round
        // trip. One that fails (the op producing the input failed on the
        // device) still lets the collective run, so that the ranks stay in
        // step; this rank's work raises the error (what it sent is unspecified).
        std::exception_ptr copy_error;
        for (const auto& step : pending) {
          try {
            step();
          } catch (...) {
            if (!copy_error) copy_error = std::current_exception();
          }
        }
        trace::mark("copied_to_host");
        try {
          if (state->error) std::rethrow_exception(state->error);
          if (state->check) state->check->verify();
          trace::mark("verified");
          if (local) std::rethrow_exception(local);
          work->issued(fn(), copy_error);
          trace::mark("data_issued");
        } catch (...) {
          work->issue_failed(std::current_exception());
        }
      });
  trace::mark("queued");
  if (local_) work->wait();  // raises this rank's own error
  return work;
}

}  // namespace ttpu::distributed
