// Cross-rank agreement on a collective's tensors before the host collective runs.
//
// Gloo trusts every rank to pass the same number of bytes: when they differ it
// throws from its transport thread and the process aborts ("terminate called
// after throwing gloo::EnforceNotMet"; CPU tensors on ProcessGroupGloo abort
// the same way), and a broadcast of mismatched sizes silently copies a prefix.
// So each tpu collective first all-gathers a fixed 64-byte signature of its
// call (op, root or reduce op, dtype and element count of its tensors) on the
// inner gloo backend. Every rank sees every signature and reaches the same
// verdict: all equal, the collective runs; otherwise every rank raises the
// same RuntimeError naming each rank's tensors. The exchange is issued before
// the device-to-host staging copies and waited for after them, so its round
// trip overlaps the copies.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace ttpu::distributed {

// What one rank passes to a collective that all ranks must pass alike.
struct CallSignature {
  c10d::OpType op;
  int64_t arg = 0;                  // root rank, reduce op, or 0
  std::vector<at::Tensor> tensors;  // their dtypes and element counts must agree
  bool valid = true;                // false: this rank's call failed a local check
};

// One signature exchange in flight (started by the constructor).
class SignatureCheck {
 public:
  SignatureCheck(c10d::Backend& inner, const char* name, const CallSignature& sig,
                 std::chrono::milliseconds timeout);
  // Waits for every rank's signature. Raises RuntimeError (on every rank alike)
  // when they differ, and the gloo error when the exchange itself fails (a peer
  // left, the timeout passed).
  void verify();

 private:
  const char* name_;
  int rank_;
  at::Tensor mine_;
  std::vector<std::vector<at::Tensor>> all_;
  c10::intrusive_ptr<c10d::Work> work_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ttpu::distributed
