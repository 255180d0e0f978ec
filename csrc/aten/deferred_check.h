// Checks of device values reported at the next host read instead of at the op.
//
// An index range check needs the index's values, which live on the device.
// Reading them at the op would make the host wait at every checked op (strict
// mode) or cut the pending graph in two (fused mode, compiled graphs). So the
// op computes, on the device, a small value describing what it checked (for an
// index: its min and max) and an ok flag, and defers the check: every host read
// (.cpu(), .item(), print, torchtpu.sync()) first runs the pending checks and
// raises the first failure, with the op's own exception type and message, as
// CUDA reports a device-side assert at the next synchronizing call. The
// out-of-range op's results are never returned to the user unchecked.
//
// Running the pending checks costs one device read whatever their number: the
// ok flags are ANDed on the device (programs of kOkChunk flags, so one compile
// serves any count) and only that one bool is downloaded, or, when the read
// that triggers them is small, downloaded with that read's value in one
// transfer (read_with_checks: a decode loop's per-token stop check). The values
// are read, one by one, only when some check failed. Debug mode checks at the op.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <vector>

namespace ttpu::aten {

// Raises (TORCH_CHECK / TORCH_CHECK_INDEX) when the host copy of the deferred
// value shows a failure.
using CheckFn = std::function<void(const at::Tensor& host)>;

struct DeferredCheck {
  at::Tensor value;  // tpu: what `check` reads
  at::Tensor ok;     // tpu bool 0-d: true when the check passes
  CheckFn check;
};

void defer_check(at::Tensor value, at::Tensor ok, CheckFn check);
// Checks `value` (a tpu tensor just computed by a probe program, with its ok
// flag) now in debug mode (a wait), else defers it.
void check_device_values(const at::Tensor& value, const at::Tensor& ok, CheckFn check);
// Raises the first failure among the pending checks; all of them are consumed
// either way. Reentrant calls (its own reads) do nothing.
void run_deferred_checks();
// A small read (`src` of at most 64 bytes, e.g. an .item()) while checks are
// pending: the checks' verdict and `src`'s elements come back in ONE transfer
// (one program concatenating their bits), and a failure raises as
// run_deferred_checks() would. Returns the host copy (contiguous, `src`'s
// sizes), or nullopt when this does not apply (nothing pending, a larger,
// complex or float8 value, checks on another device or more than one
// program's worth of them): the caller then reads as usual.
std::optional<at::Tensor> read_with_checks(const at::Tensor& src);
// The pending checks (a compiled-graph capture records the ones its call made).
std::vector<DeferredCheck> deferred_checks();
// How many times the pending checks were consumed: a capture whose call saw a
// drain cannot tell which checks were its own.
uint64_t deferred_check_drains();

}  // namespace ttpu::aten
