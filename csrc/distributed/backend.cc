// TpuBackend: every collective copies its tpu inputs to host tensors (started at
// the call, finished on the group's issue queue: aten::download_later), runs
// the same collective on the inner gloo backend, and copies the host results
// back into the caller's tpu tensors in place (copy_ keeps storage and data_ptr,
// which DDP's bucket views and FSDP's padded buffers rely on).
#include "distributed/backend.h"

#include "distributed/host_collective.h"
#include "distributed/trace.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <exception>

namespace ttpu::distributed {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;
using Tensors = std::vector<at::Tensor>;
using WorkBackendPtr = c10::intrusive_ptr<c10d::Backend>;

void check_tpu(const at::Tensor& t, const char* op) {
  TORCH_CHECK_VALUE(t.defined(), "torch.distributed backend 'tpu': ", op,
                    " got an undefined tensor");
  TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1,
                    "torch.distributed backend 'tpu': ", op, " takes tpu tensors, got one on ",
                    t.device(),
                    ". CPU tensors need a group with a CPU backend, e.g. "
                    "init_process_group('cpu:gloo,tpu:tpu') or init_process_group() with no "
                    "backend");
  TORCH_CHECK_VALUE(!t.is_sparse(), "torch.distributed backend 'tpu': ", op,
                    " does not take sparse tensors");
}

void check_all(const Tensors& ts, const char* op) {
  for (const auto& t : ts) check_tpu(t, op);
}

void check_all(const std::vector<Tensors>& tss, const char* op) {
  for (const auto& ts : tss) check_all(ts, op);
}

// Gloo has no AVG: the host path sums and divides (integers truncate, as the
// quotient of an integer sum has no other integer value).
struct Reduction {
  ReduceOp inner;
  bool average = false;
};

Reduction map_reduction(const ReduceOp& op, const char* name) {
  TORCH_CHECK_VALUE(op.op_ != ReduceOp::PREMUL_SUM, "torch.distributed backend 'tpu': ", name,
                    " does not support ReduceOp.PREMUL_SUM");
  if (op.op_ == ReduceOp::AVG) return {ReduceOp(ReduceOp::SUM), true};
  return {op, false};
}

void divide(const Tensors& host, int size) {
  for (const auto& t : host) {
    auto& m = const_cast<at::Tensor&>(t);
    if (at::isIntegralType(m.scalar_type(), /*includeBool=*/false))
      m.div_(size, "trunc");
    else
      m.div_(size);
  }
}

Tensors flatten(const std::vector<Tensors>& tss) {
  Tensors out;
  for (const auto& ts : tss) out.insert(out.end(), ts.begin(), ts.end());
  return out;
}

int64_t reduce_arg(const ReduceOp& op) { return static_cast<int64_t>(op.op_); }

}  // namespace

TpuBackend::TpuBackend(c10::intrusive_ptr<c10d::Backend> inner,
                       c10::intrusive_ptr<c10d::Backend> control,
                       std::shared_ptr<SignatureStore> signatures, int rank, int size,
                       std::chrono::milliseconds timeout)
    : Backend(rank, size),
      group_{std::make_shared<Issuer>(), std::move(inner), std::move(control),
             std::move(signatures)},
      options_(c10::make_intrusive<Options>(kBackendName, timeout)) {
  TORCH_CHECK(group_.inner && group_.control,
              "torch.distributed backend 'tpu' needs an inner and a control host backend");
}

void TpuBackend::setTimeout(std::chrono::milliseconds timeout) { options_->timeout = timeout; }

void TpuBackend::setGroupUid(const std::string& pg_uid) {
  Backend::setGroupUid(pg_uid);
  options_->group_name = pg_uid;
  group_.inner->setGroupUid(pg_uid);
  group_.control->setGroupUid(pg_uid + ":signatures");
}

std::chrono::milliseconds TpuBackend::timeout_for(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? options_->timeout : requested;
}

WorkPtr TpuBackend::make_work(std::vector<WorkPtr> inners, std::function<void()> finish_fn,
                              Tensors outputs, std::chrono::milliseconds timeout, OpType type) {
  auto work = c10::make_intrusive<TpuWork>(std::move(inners), std::move(finish_fn),
                                           std::move(outputs), timeout, getRank(), type);
  work->start();
  return work;
}

WorkPtr TpuBackend::broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) {
  check_all(tensors, "broadcast");
  Staging st;  // before the exchange: its errors are part of the signature
  auto host = st.in(tensors);
  QueuedCall call(st, group_, "broadcast", {OpType::BROADCAST, opts.rootRank, tensors},
                  timeout_for(opts.timeout));
  bool root = opts.rootRank == getRank();
  return call.issue(
      [inner = group_.inner, host, opts]() mutable -> std::vector<WorkPtr> {
        return {inner->broadcast(host, opts)};
      },
      [tensors, host, root] {
        if (!root) copy_back(tensors, host);
      },
      tensors, timeout_for(opts.timeout), getRank(), OpType::BROADCAST);
}

WorkPtr TpuBackend::allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) {
  trace::mark("call");
  check_all(tensors, "all_reduce");
  auto red = map_reduction(opts.reduceOp, "all_reduce");
  Staging st;  // before the exchange: its errors are part of the signature
  auto host = st.in(tensors);
  QueuedCall call(st, group_, "all_reduce", {OpType::ALLREDUCE, reduce_arg(opts.reduceOp), tensors},
                  timeout_for(opts.timeout));
  c10d::AllreduceOptions inner_opts = opts;
  inner_opts.reduceOp = red.inner;
  int size = getSize();
  return call.issue(
      [inner = group_.inner, host, inner_opts]() mutable -> std::vector<WorkPtr> {
        return {inner->allreduce(host, inner_opts)};
      },
      [tensors, host, red, size] {
        if (red.average) divide(host, size);
        copy_back(tensors, host);
      },
      tensors, timeout_for(opts.timeout), getRank(), OpType::ALLREDUCE);
}

WorkPtr TpuBackend::allreduce_coalesced(Tensors& tensors,
                                        const c10d::AllreduceCoalescedOptions& opts) {
  // One host all_reduce per tensor: gloo's coalesced form needs one dtype.
  check_all(tensors, "all_reduce_coalesced");
  auto red = map_reduction(opts.reduceOp, "all_reduce_coalesced");
  Staging st;  // before the exchange: its errors are part of the signature
  Tensors host = st.in(tensors);
  QueuedCall call(st, group_, "all_reduce_coalesced",
                  {OpType::ALLREDUCE_COALESCED, reduce_arg(opts.reduceOp), tensors},
                  timeout_for(opts.timeout));
  int size = getSize();
  auto timeout = opts.timeout;
  auto reduce_op = red.inner;
  return call.issue(
      [inner = group_.inner, host, timeout, reduce_op]() -> std::vector<WorkPtr> {
        std::vector<WorkPtr> works;
        for (const auto& h : host) {
          Tensors one{h};
          c10d::AllreduceOptions o;
          o.reduceOp = reduce_op;
          o.timeout = timeout;
          works.push_back(inner->allreduce(one, o));
        }
        return works;
      },
      [tensors, host, red, size] {
        if (red.average) divide(host, size);
        copy_back(tensors, host);
      },
      tensors, timeout_for(opts.timeout), getRank(), OpType::ALLREDUCE_COALESCED);
}

WorkPtr TpuBackend::reduce(Tensors& tensors, const c10d::ReduceOptions& opts) {
  check_all(tensors, "reduce");
  auto red = map_reduction(opts.reduceOp, "reduce");
  Staging st;  // before the exchange: its errors are part of the signature
  auto host = st.in(tensors);
  QueuedCall call(st, group_, "reduce",
                  {OpType::REDUCE, reduce_arg(opts.reduceOp) * 65536 + opts.rootRank, tensors},
                  timeout_for(opts.timeout));
  c10d::ReduceOptions inner_opts = opts;
  inner_opts.reduceOp = red.inner;
  bool root = opts.rootRank == getRank();
  int size = getSize();
  return call.issue(
      [inner = group_.inner, host, inner_opts]() mutable -> std::vector<WorkPtr> {
        return {inner->reduce(host, inner_opts)};
      },
      [tensors, host, red, size, root] {
        if (!root) return;  // only the root's tensor holds the result
        if (red.average) divide(host, size);
        copy_back(tensors, host);
      },
      tensors, timeout_for(opts.timeout), getRank(), OpType::REDUCE);
}

WorkPtr TpuBackend::allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                              const c10d::AllgatherOptions& opts) {
  check_all(inputs, "all_gather");
  check_all(outputs, "all_gather");
  auto timeout = timeout_for(opts.timeout);
  bool uneven = false;
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i)
    for (const auto& o : outputs[i]) uneven |= o.sizes() != inputs[i].sizes();
  auto flat_out = flatten(outputs);
  // The output lists must agree across ranks (uneven inputs are allowed), and
  // this rank's input must fit its own slot.
  const int rank = getRank(), size = getSize();
  auto local = local_check([&] {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                      "torch.distributed backend 'tpu': "
                      "all_gather needs one output list per input");
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK_VALUE(static_cast<int>(outputs[i].size()) == size,
                        "torch.distributed backend 'tpu': all_gather needs ", size,
                        " output tensors, got ", outputs[i].size());
      TORCH_CHECK_VALUE(outputs[i][rank].numel() == inputs[i].numel() &&
                            outputs[i][rank].scalar_type() == inputs[i].scalar_type(),
                        "torch.distributed backend 'tpu': all_gather output ", rank,
                        " must have the input's dtype and size");
    }
  });
  Staging st;  // before the exchange: its errors are part of the signature
  auto host_in = st.in(inputs);
  QueuedCall call(st, group_, "all_gather", {OpType::ALLGATHER, 0, flat_out}, timeout, local);
  auto host_out = host_like(outputs);
  auto finish = [flat_out, host_out] { copy_back(flat_out, flatten(host_out)); };
  if (!uneven || inputs.size() != 1) {
    return call.issue(
        [inner = group_.inner, host_out, host_in, opts]() mutable -> std::vector<WorkPtr> {
          return {inner->allgather(host_out, host_in, opts)};
        },
        finish, flat_out, timeout, rank, OpType::ALLGATHER);
  }
  // Gloo's all_gather needs equal sizes; uneven inputs (as NCCL allows) are
  // gathered as one broadcast per rank, each rank the root of its own slot.
  // (Unless the local check failed, host_out[0] holds one tensor per rank;
  // if it failed, issue() raises before the closure runs.)
  auto inner_timeout = opts.timeout;
  return call.issue(
      [inner = group_.inner, host_out, host_in, rank, size,
       inner_timeout]() -> std::vector<WorkPtr> {
        // Runs after the staging copies (and only if the local check passed).
        host_out[0][rank].copy_(host_in[0]);
        std::vector<WorkPtr> works;
        for (int r = 0; r < size; ++r) {
          Tensors slot{host_out[0][r]};
          c10d::BroadcastOptions b;
          b.rootRank = r;
          b.timeout = inner_timeout;
          works.push_back(inner->broadcast(slot, b));
        }
        return works;
      },
      finish, flat_out, timeout, rank, OpType::ALLGATHER);
}

WorkPtr TpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                    const c10d::AllgatherOptions& opts) {
  check_tpu(input, "all_gather_into_tensor");
  check_tpu(output, "all_gather_into_tensor");
  auto local = local_check([&] {
    TORCH_CHECK_VALUE(output.numel() == input.numel() * getSize(),
                      "torch.distributed backend 'tpu': all_gather_into_tensor output has ",
                      output.numel(),
                      " elements, expected input numel * world size = ", input.numel() * getSize());
  });
  Staging st;  // before the exchange: its errors are part of the signature
  auto host_in = st.in(input);
  QueuedCall call(st, group_, "all_gather_into_tensor", {OpType::_ALLGATHER_BASE, 0, {input}},
                  timeout_for(opts.timeout), local);
  auto host_out = host_like(output);
  Tensors outs{output};
  return call.issue(
      [inner = group_.inner, host_out, host_in, opts]() mutable -> std::vector<WorkPtr> {
        // Flat, as NCCL takes it: only the element counts must agree (SyncBatchNorm
        // gathers [2C+1] into [1, world * (2C+1)]), while gloo chunks dim 0.
        at::Tensor flat_out = host_out.view({-1}), flat_in = host_in.reshape({-1});
        return {inner->_allgather_base(flat_out, flat_in, opts)};
      },
      [outs, host_out] { copy_back(outs, {host_out}); }, outs, timeout_for(opts.timeout), getRank(),
      OpType::_ALLGATHER_BASE);
}

WorkPtr TpuBackend::allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                                    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "torch.distributed backend 'tpu': all_gather_into_tensor_coalesced needs "
                    "as many outputs as inputs");
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(_allgather_base(outputs[i], inputs[i], opts));
  auto timeout = timeout_for(opts.timeout);
  return make_work(works, nullptr, outputs, timeout, OpType::COALESCED);
}

WorkPtr TpuBackend::gather(std::vector<Tensors>& outputs, Tensors& inputs,
                           const c10d::GatherOptions& opts) {
  check_all(inputs, "gather");
  check_all(outputs, "gather");
  Staging st;  // before the exchange: its errors are part of the signature
  auto host_in = st.in(inputs);
  QueuedCall call(st, group_, "gather", {OpType::GATHER, opts.rootRank, inputs},
                  timeout_for(opts.timeout));
  auto host_out = host_like(outputs);
  auto flat_out = flatten(outputs);
  return call.issue(
      [inner = group_.inner, host_out, host_in, opts]() mutable -> std::vector<WorkPtr> {
        return {inner->gather(host_out, host_in, opts)};
      },
      [flat_out, host_out] { copy_back(flat_out, flatten(host_out)); }, flat_out,
      timeout_for(opts.timeout), getRank(), OpType::GATHER);
}

WorkPtr TpuBackend::scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                            const c10d::ScatterOptions& opts) {
  check_all(outputs, "scatter");
  check_all(inputs, "scatter");
  Staging st;  // before the exchange: its errors are part of the signature
  std::vector<Tensors> host_in;
  for (const auto& ts : inputs) host_in.push_back(st.in(ts));
  QueuedCall call(st, group_, "scatter", {OpType::SCATTER, opts.rootRank, outputs},
                  timeout_for(opts.timeout));
  auto host_out = host_like(outputs);
  return call.issue(
      [inner = group_.inner, host_out, host_in, opts]() mutable -> std::vector<WorkPtr> {
        return {inner->scatter(host_out, host_in, opts)};
      },
      [outputs, host_out] { copy_back(outputs, host_out); }, outputs, timeout_for(opts.timeout),
      getRank(), OpType::SCATTER);
}

WorkPtr TpuBackend::reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                   const c10d::ReduceScatterOptions& opts) {
  check_all(outputs, "reduce_scatter");
  check_all(inputs, "reduce_scatter");
  auto red = map_reduction(opts.reduceOp, "reduce_scatter");
  Staging st;  // before the exchange: its errors are part of the signature
  std::vector<Tensors> host_in;
  for (const auto& ts : inputs) host_in.push_back(st.in(ts));
  QueuedCall call(st, group_, "reduce_scatter",
                  {OpType::REDUCE_SCATTER, reduce_arg(opts.reduceOp), flatten(inputs)},
                  timeout_for(opts.timeout));
  auto host_out = host_like(outputs);
  c10d::ReduceScatterOptions inner_opts = opts;
  inner_opts.reduceOp = red.inner;
  int size = getSize();
  return call.issue(
      [inner = group_.inner, host_out, host_in, inner_opts]() mutable -> std::vector<WorkPtr> {
        return {inner->reduce_scatter(host_out, host_in, inner_opts)};
      },
      [outputs, host_out, red, size] {
        if (red.average) divide(host_out, size);
        copy_back(outputs, host_out);
      },
      outputs, timeout_for(opts.timeout), getRank(), OpType::REDUCE_SCATTER);
}

WorkPtr TpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                         const c10d::ReduceScatterOptions& opts) {
  check_tpu(output, "reduce_scatter_tensor");
  check_tpu(input, "reduce_scatter_tensor");
  auto local = local_check([&] {
    TORCH_CHECK_VALUE(
        input.numel() == output.numel() * getSize(),
        "torch.distributed backend 'tpu': reduce_scatter_tensor input has ", input.numel(),
        " elements, expected output numel * world size = ", output.numel() * getSize());
  });
  auto red = map_reduction(opts.reduceOp, "reduce_scatter_tensor");
  Staging st;  // before the exchange: its errors are part of the signature
  auto host_in = st.in(input);
  QueuedCall call(st, group_, "reduce_scatter_tensor",
                  {OpType::_REDUCE_SCATTER_BASE, reduce_arg(opts.reduceOp), {output}},
                  timeout_for(opts.timeout), local);
  c10d::AllreduceOptions inner_opts;
  inner_opts.reduceOp = red.inner;
  inner_opts.timeout = opts.timeout;
  Tensors outs{output};
  const int size = getSize(), rank = getRank();
  const int64_t n = output.numel();
  // Gloo's reduce_scatter_tensor all-reduces a copy of the input and copies
  // this rank's chunk out in its wait() (no future; and it sums whatever the
  // reduce op). The staging copy is ours: all-reduce it in place, with the
  // op, and write back this rank's chunk.
  return call.issue(
      [inner = group_.inner, host_in, inner_opts]() -> std::vector<WorkPtr> {
        Tensors one{host_in};
        return {inner->allreduce(one, inner_opts)};
      },
      [outs, host_in, red, size, rank, n] {
        at::Tensor mine = host_in.reshape({-1}).narrow(0, rank * n, n).view(outs[0].sizes());
        if (red.average) divide({mine}, size);
        copy_back(outs, {mine});
      },
      outs, timeout_for(opts.timeout), rank, OpType::_REDUCE_SCATTER_BASE);
}

WorkPtr TpuBackend::reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                                    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "torch.distributed backend 'tpu': reduce_scatter_tensor_coalesced needs "
                    "as many outputs as inputs");
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  auto timeout = timeout_for(opts.timeout);
  return make_work(works, nullptr, outputs, timeout, OpType::COALESCED);
}

WorkPtr TpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                  std::vector<int64_t>& output_splits,
                                  std::vector<int64_t>& input_splits,
                                  const c10d::AllToAllOptions& opts) {
  check_tpu(output, "all_to_all_single");
  check_tpu(input, "all_to_all_single");
  // Even splits: the sizes must agree. Uneven splits are not checked across
  // ranks (each rank's splits are its own; a wrong pair still aborts in gloo).
  const bool even = output_splits.empty() && input_splits.empty();
  Tensors agreed = even ? Tensors{input} : Tensors{};
  Staging st;  // before the exchange: its errors are part of the signature
  auto host_in = st.in(input);
  QueuedCall call(
      st, group_, "all_to_all_single",
      {OpType::ALLTOALL_BASE, even ? 0 : static_cast<int64_t>(input.scalar_type()) + 1, agreed},
      timeout_for(opts.timeout));
  auto host_out = host_like(output);
  Tensors outs{output};
  return call.issue(
      [inner = group_.inner, host_out, host_in, output_splits, input_splits,
       opts]() mutable -> std::vector<WorkPtr> {
        return {inner->alltoall_base(host_out, host_in, output_splits, input_splits, opts)};
      },
      [outs, host_out] { copy_back(outs, {host_out}); }, outs, timeout_for(opts.timeout), getRank(),
      OpType::ALLTOALL_BASE);
}

WorkPtr TpuBackend::alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) {
  check_all(outputs, "all_to_all");
  check_all(inputs, "all_to_all");
  Staging st;  // before the exchange: its errors are part of the signature
  auto host_in = st.in(inputs);
  QueuedCall call(st, group_, "all_to_all", {OpType::ALLTOALL, 0, {}}, timeout_for(opts.timeout),
                  nullptr, /*checked=*/false);
  auto host_out = host_like(outputs);
  return call.issue(
      [inner = group_.inner, host_out, host_in, opts]() mutable -> std::vector<WorkPtr> {
        return {inner->alltoall(host_out, host_in, opts)};
      },
      [outputs, host_out] { copy_back(outputs, host_out); }, outputs, timeout_for(opts.timeout),
      getRank(), OpType::ALLTOALL);
}

WorkPtr TpuBackend::barrier(const c10d::BarrierOptions& opts) {
  // The inner backend is host-only: it must not see the tpu device ids. It
  // goes through the queue so that it follows the collectives issued before.
  c10d::BarrierOptions inner_opts = opts;
  inner_opts.device_ids.clear();
  inner_opts.device = std::nullopt;
  Staging st;  // none: no tensors
  QueuedCall call(st, group_, "barrier", {OpType::BARRIER, 0, {}}, timeout_for(opts.timeout),
                  nullptr, /*checked=*/false);
  return call.issue(
      [inner = group_.inner, inner_opts]() mutable -> std::vector<WorkPtr> {
        return {inner->barrier(inner_opts)};
      },
      nullptr, {}, timeout_for(opts.timeout), getRank(), OpType::BARRIER);
}

WorkPtr TpuBackend::send(Tensors& tensors, int dst, int tag) {
  check_all(tensors, "send");
  auto host = to_host(tensors, nullptr);  // send is not queued: copied here
  auto work = group_.inner->send(host, dst, tag);
  // The host copy lives in the closure until the send completes.
  return make_work(work, [host] {}, tensors, options_->timeout, OpType::SEND);
}

WorkPtr TpuBackend::recv(Tensors& tensors, int src, int tag) {
  check_all(tensors, "recv");
  auto host = host_like(tensors);
  auto work = group_.inner->recv(host, src, tag);
  return make_work(
      work, [tensors, host] { copy_back(tensors, host); }, tensors, options_->timeout,
      OpType::RECV);
}

WorkPtr TpuBackend::recvAnysource(Tensors& tensors, int tag) {
  check_all(tensors, "recv");
  auto host = host_like(tensors);
  auto work = group_.inner->recvAnysource(host, tag);
  return make_work(
      work, [tensors, host] { copy_back(tensors, host); }, tensors, options_->timeout,
      OpType::RECVANYSOURCE);
}

}  // namespace ttpu::distributed
