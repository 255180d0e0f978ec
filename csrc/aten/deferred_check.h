// Checks of device values reported at the next host read instead of at the op.
//
// An index range check needs the index's values, which live on the device. In
// strict and debug mode the op reads them at once (a sync per checked op, errors
// at the op). In fused mode, and in compiled graphs, that read would cut the
// pending graph in two, so the op instead records a small value (for an index:
// its min and max) into the same graph and defers the check: every host read
// (.cpu(), .item(), print, torchtpu.sync()) first downloads the deferred values
// and raises the first failure, with the op's own exception type and message,
// as CUDA reports a device-side assert at the next synchronizing call. The
// out-of-range op's results are never returned to the user unchecked.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace ttpu::aten {

// Raises (TORCH_CHECK / TORCH_CHECK_INDEX) when the host copy of the deferred
// value shows a failure.
using CheckFn = std::function<void(const at::Tensor& host)>;

struct DeferredCheck {
  at::Tensor value;  // tpu
  CheckFn check;
};

void defer_check(at::Tensor value, CheckFn check);
// Checks `value` (a tpu tensor just computed by a probe program) now in strict
// and debug mode (a sync), or defers it in fused mode.
void check_device_values(const at::Tensor& value, CheckFn check);
// Downloads every deferred value and raises the first failure; all pending
// checks are consumed either way. Reentrant calls (its own downloads) do nothing.
void run_deferred_checks();
// The pending checks (a compiled-graph capture records the ones its call made).
std::vector<DeferredCheck> deferred_checks();
// How many times the pending checks were consumed: a capture whose call saw a
// drain cannot tell which checks were its own.
uint64_t deferred_check_drains();

}  // namespace ttpu::aten
