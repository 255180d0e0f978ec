// The store form of the signature exchange (signature_check.h): each rank pushes its
// call's hash to every peer through a queue in the group's c10d store, and
// pops the peers' hashes from its own queues.
//
// A store has no liveness signal: a pop whose sender exited would wait for the
// whole timeout (30 minutes by default), where gloo fails at once. So the
// group also watches its peers: one receive from each peer is posted on the
// group's control gloo group, on a tag no rank ever sends to. Gloo fails such
// a receive as soon as the peer's connection closes (the peer exited, was
// killed, or destroyed the group: measured 0.02 s after a peer's os._exit),
// and a watcher thread per peer then pushes a "left" mark behind that peer's
// hashes in this rank's queue. A pop reaches the mark after the hashes the
// peer sent before it left, raises, and puts the mark back for the next call.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace ttpu::distributed {

class SignatureStore {
 public:
  // `base`: a store of the group's own keys with queues (clones of it get
  // connections of their own); `control`: a gloo group on the same ranks
  // that carries nothing else in this form.
  SignatureStore(const c10::intrusive_ptr<c10d::Store>& base,
                 c10::intrusive_ptr<c10d::Backend> control, std::chrono::milliseconds timeout);
  // Aborts the watch's receives and joins its threads.
  ~SignatureStore();
  SignatureStore(const SignatureStore&) = delete;
  SignatureStore& operator=(const SignatureStore&) = delete;

  // Sends this call's hash to every peer (the caller's thread).
  void push(int64_t hash);
  // This call's hash from peer `from` (the issue thread; blocks up to
  // `timeout`). Raises c10::Error when the peer left, the timeout passed or
  // the store failed; `what` names the collective in the message.
  int64_t pop(int from, const char* what, std::chrono::milliseconds timeout);

 private:
  int rank_, size_;
  c10::intrusive_ptr<c10d::Backend> control_;  // outlives the receives posted on it
  // Connections of their own: a blocking pop holds its connection.
  c10::intrusive_ptr<c10d::Store> push_, pop_, alert_;
  std::vector<at::Tensor> slots_;  // what the watch's receives would fill
  std::vector<c10::intrusive_ptr<c10d::Work>> watches_;
  std::vector<std::thread> watchers_;
};

// Groups of up to TORCHTPU_DIST_STORE_RANKS ranks (read once; default
// kStoreRanks) exchange signatures through `base`, where it has queues; others,
// or a store without queues, get nullptr (the all_reduce form on `control`).
inline constexpr int kStoreRanks = 4;
std::shared_ptr<SignatureStore> signature_store(const c10::intrusive_ptr<c10d::Store>& base,
                                                const c10::intrusive_ptr<c10d::Backend>& control,
                                                std::chrono::milliseconds timeout);

}  // namespace ttpu::distributed
