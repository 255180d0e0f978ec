// Cross-rank agreement on a collective's tensors before the host collective runs.
//
// Gloo trusts every rank to pass the same number of bytes: when they differ it
// throws from its transport thread and the process aborts ("terminate called
// after throwing gloo::EnforceNotMet"; CPU tensors on ProcessGroupGloo abort
// the same way), and a broadcast of mismatched sizes silently copies a prefix.
// So each tpu collective first agrees on a fixed 64-byte signature of its
// call (op, root or reduce op, dtype and element count of its tensors, and
// whether the rank's own argument checks passed) on a gloo group of its own.
// The common case exchanges only h, a 64-bit hash of the signature, and
// every rank reaches the same verdict from it: one all_reduce MAX over
// [h, ~h], which is [max h, ~min h] (0.27 ms and 0.18 ms of CPU per exchange
// on gloo here, against 0.31-0.34 ms and 0.17-0.19 ms for an all_gather of
// the signatures). In groups of up to TORCHTPU_DIST_STORE_RANKS ranks (4 by
// default) each rank instead pushes h to every peer through the group's c10d
// key-value store (a queue per sender and receiver, on connections of its
// own) and pops the peers' (signature_exchange.h: 0.11 ms per exchange here against the
// all_reduce's 0.28-0.32 ms). Only
// when the hashes differ do the ranks all-gather the signatures themselves,
// and every rank raises the same RuntimeError naming each rank's call. The
// exchange is issued before the device-to-host staging copies are made and
// waited for after them, so its
// round trip overlaps the copies.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "distributed/signature_exchange.h"

namespace ttpu::distributed {

// What one rank passes to a collective that all ranks must pass alike.
struct CallSignature {
  c10d::OpType op;
  int64_t arg = 0;                  // root rank, reduce op, or 0
  std::vector<at::Tensor> tensors;  // their dtypes and element counts must agree
  bool valid = true;                // false: this rank's call failed a local check
};

// One signature exchange in flight (started by the constructor, on
// `exchange`: a group that carries nothing else, issued in call order).
class SignatureCheck {
 public:
  // `details`: the group verify() all-gathers the signatures on after a
  // mismatch (the data group: verify() runs in its issue order, so every
  // rank reaches that all-gather at the same point of its order).
  // `store`: the store form's channels, or nullptr for the all_reduce on
  // `exchange`.
  SignatureCheck(c10d::Backend& exchange, std::shared_ptr<SignatureStore> store,
                 c10::intrusive_ptr<c10d::Backend> details, const char* name,
                 const CallSignature& sig, std::chrono::milliseconds timeout);
  // Waits for the verdict. Raises RuntimeError (on every rank alike) when the
  // signatures differ (after all-gathering them for the message), and the gloo
  // error when an exchange itself fails (a peer left, the timeout passed).
  void verify();

 private:
  const char* name_;
  int rank_;
  c10::intrusive_ptr<c10d::Backend> details_;  // for the details, on a mismatch
  at::Tensor mine_;                            // the signature (8 int64)
  at::Tensor agree_;                       // [h, ~h], then MAX over the ranks (the all_reduce form)
  std::shared_ptr<SignatureStore> store_;  // the store form
  int size_;
  int64_t hash_ = 0;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ttpu::distributed
