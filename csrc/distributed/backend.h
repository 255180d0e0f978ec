// TpuBackend: torch.distributed's c10d::Backend for tpu tensors. It stages each
// collective's tpu tensors through host memory and runs it with an inner
// c10d backend (ProcessGroupGloo built on the same store, rank, size, timeout),
// so the transport, rendezvous and timeouts are PyTorch's own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "distributed/issue_order.h"

namespace ttpu::distributed {

// Name under which the backend is registered in torch.distributed.
inline constexpr const char* kBackendName = "tpu";

// How results reach the caller's tpu tensors: `fn(dst, host)` writes `host`
// into `dst` in place and may keep `host`'s memory as the device buffer's own
// (torchtpu's core installs aten::adopt_host_retiring; the default is copy_).
// Staging buffers are never written after they are handed over. It returns
// the device buffer `dst` held before (or null), which is kept alive until
// the caller's thread is back in the backend (retire() below): a read of the
// output that overlaps the write-back then sees old or new values, never
// freed memory.
using HostToTpuFn = std::shared_ptr<void> (*)(const at::Tensor& dst, const at::Tensor& host);
void set_host_to_tpu(HostToTpuFn fn);

// How inputs reach the host: `fn(src, host)` starts reading tpu `src` into
// the dense host tensor `host` and returns the step that finishes the copy on
// another thread (the issue queue), or null when the copy is done already
// (torchtpu's core installs aten::download_later; the default is copy_, on
// the calling thread). The step holds `src`'s values as of the call.
using TpuToHostFn = std::function<void()> (*)(const at::Tensor& src, const at::Tensor& host);
void set_tpu_to_host(TpuToHostFn fn);

// Old device buffers replaced by write-backs, held until release_retired()
// runs on a caller's thread (every queued call and every wait()).
void retire(std::shared_ptr<void> buffer);
void release_retired();

// A host-staged collective in flight: the inner (gloo) works plus the step that
// copies host results back into the caller's tpu tensors. start() chains that
// step on the inner works' futures, so it runs on the thread that completes
// the last of them (gloo's worker) as soon as the data is in: getFuture()
// returns at once and its future completes by itself, which is what lets DDP's
// bucketed all-reduce overlap the rest of backward. wait() bounds the inner
// waits by the timeout (gloo's own timeout errors the futures too), then runs
// the step itself if no callback has yet. Inner works without futures (the
// base Work's getFuture throws) keep the lazy form: the step runs on the
// first thread that waits, asks for the future, or polls a completed work.
class TpuWork : public c10d::Work {
 public:
  TpuWork(std::vector<c10::intrusive_ptr<c10d::Work>> inners, std::function<void()> finish_fn,
          std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout, int rank,
          c10d::OpType type);

  // Chains completion on the inner futures; call once, right after creation
  // (the callbacks hold a reference to the work until they run).
  void start();
  // A queued call (issue_order.h): the inner works come later, from issued() or
  // issue_failed() on the issuing thread; wait() first drains `issuer` (runs
  // the queue) on its own thread; getFuture() before the call is issued hurries
  // it (the caller will not wait: the queue's thread starts it now). Weak: a
  // job must never hold the last reference to its queue.
  void defer(std::weak_ptr<Issuer> issuer);
  // `fail_with` (non-null): the inners run (the ranks stay in step) but the
  // work fails with it instead of writing back (this rank's input could not
  // be read).
  void issued(std::vector<c10::intrusive_ptr<c10d::Work>> inners,
              std::exception_ptr fail_with = nullptr);
  void issue_failed(std::exception_ptr error);
  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  // Once: with `error` null runs the copy-back, then completes the future with
  // the outputs or with the error (the inner one or the copy-back's).
  void finish(std::exception_ptr error);
  // Completes the future (running its callbacks) and wakes wait().
  void complete(std::exception_ptr error);
  bool is_finished();  // finish() has run (its future may still be being marked)
  // Called as each inner future completes; the last one finishes the work.
  void inner_done(c10::ivalue::Future& done);

  std::vector<c10::intrusive_ptr<c10d::Work>> inners_;
  std::function<void()> finish_fn_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> chained_{false};  // completion comes from callbacks (start, defer)
  std::atomic<size_t> remaining_{0};  // inner futures not yet completed
  std::exception_ptr inner_error_;    // the first inner future's error (under complete_mutex_)
  std::exception_ptr fail_with_;      // see issued() (under complete_mutex_)
  std::mutex complete_mutex_;
  bool finished_ = false;        // under complete_mutex_
  std::timed_mutex wait_mutex_;  // held by the thread waiting for the inners
  // Queued calls: inners_ is set once, under issue_mutex_, before issued_.
  std::weak_ptr<Issuer> issuer_;
  mutable std::mutex issue_mutex_;
  std::condition_variable issue_cv_;
  bool issued_ = true;
};

class SignatureStore;  // signature_exchange.h

// What every queued call of one tpu group goes through (host_collective.h).
struct GroupChannels {
  std::shared_ptr<Issuer> issuer;           // the data collectives' issue order
  c10::intrusive_ptr<c10d::Backend> inner;  // the data collectives (gloo)
  // The signature exchanges, each issued by its call at once: on a group of
  // their own, their order never interleaves with the data collectives', so
  // an exchange need not queue behind the collectives before it.
  c10::intrusive_ptr<c10d::Backend> control;
  // Or, in small groups, through the store's queues (signature_check.h; nullptr: the
  // all_reduce on `control`).
  std::shared_ptr<SignatureStore> signatures;
};

class TpuBackend : public c10d::Backend {
 public:
  // `inner` runs the host collectives, `control` (another gloo group on the
  // same ranks) the signature exchanges (signature_check.h); `timeout` bounds every wait.
  TpuBackend(c10::intrusive_ptr<c10d::Backend> inner, c10::intrusive_ptr<c10d::Backend> control,
             std::shared_ptr<SignatureStore> signatures, int rank, int size,
             std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return kBackendName; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setGroupUid(const std::string& pg_uid) override;
  // The inner backend counts the collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL's
  // wrapper and the flight recorder read it).
  void setSequenceNumberForGroup() override { group_.inner->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override {
    return group_.inner->getSequenceNumberForGroup();
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  std::chrono::milliseconds timeout_for(std::chrono::milliseconds requested) const;
  // Wraps `inners` (none, or every inner work the result waits for) and the
  // copy-back `finish_fn` (run once, after all inners) in a started TpuWork.
  c10::intrusive_ptr<c10d::Work> make_work(std::vector<c10::intrusive_ptr<c10d::Work>> inners,
                                           std::function<void()> finish_fn,
                                           std::vector<at::Tensor> outputs,
                                           std::chrono::milliseconds timeout, c10d::OpType type);
  c10::intrusive_ptr<c10d::Work> make_work(c10::intrusive_ptr<c10d::Work> inner,
                                           std::function<void()> finish_fn,
                                           std::vector<at::Tensor> outputs,
                                           std::chrono::milliseconds timeout, c10d::OpType type) {
    return make_work(std::vector<c10::intrusive_ptr<c10d::Work>>{std::move(inner)},
                     std::move(finish_fn), std::move(outputs), timeout, type);
  }

  GroupChannels group_;  // every inner collective goes out through its issuer, in call order
  c10::intrusive_ptr<Options> options_;
};

}  // namespace ttpu::distributed
