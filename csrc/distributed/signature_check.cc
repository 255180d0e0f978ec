// The signature exchange of signature_check.h: a MAX all_reduce of [h, ~h] on gloo or
// each rank's h through the store's queues, and on a mismatch the 8-int64 signatures all-gathered for the message.
#include "distributed/signature_check.h"

#include "distributed/trace.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <sstream>

namespace ttpu::distributed {
namespace {

// Header layout (int64): a tag that tells a signature from a payload (a rank
// that called another collective sends different bytes), then the call.
enum Field : int64_t { kTag, kOp, kArg, kCount, kDtype, kNumel, kHash, kValid, kFields };
constexpr int64_t kSignatureTag = 0x74707573'69676e31;  // "tpusign1"

// FNV-1a over the dtype and element count of every tensor: lists of several
// tensors (all_reduce_coalesced, reduce_scatter's input list) agree when their
// hashes do; the first tensor is also sent in the clear for the message.
int64_t hash_tensors(const std::vector<at::Tensor>& ts) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& t : ts) {
    mix(static_cast<int64_t>(t.scalar_type()));
    mix(t.numel());
  }
  return static_cast<int64_t>(h);
}

// The torch.distributed name of a collective (what the user called).
std::string op_name(int64_t code) {
  using c10d::OpType;
  switch (static_cast<OpType>(code)) {
    case OpType::BROADCAST: return "broadcast";
    case OpType::ALLREDUCE: return "all_reduce";
    case OpType::ALLREDUCE_COALESCED: return "all_reduce_coalesced";
    case OpType::REDUCE: return "reduce";
    case OpType::ALLGATHER: return "all_gather";
    case OpType::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case OpType::GATHER: return "gather";
    case OpType::SCATTER: return "scatter";
    case OpType::REDUCE_SCATTER: return "reduce_scatter";
    case OpType::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case OpType::ALLTOALL_BASE: return "all_to_all_single";
    default: return c10d::opTypeToString(static_cast<OpType>(code));
  }
}

std::string describe(const int64_t* f) {
  std::ostringstream os;
  if (f[kTag] != kSignatureTag) return "a different kind of call (not a tpu collective)";
  os << op_name(f[kOp]);
  if (f[kValid] == 0) {
    os << " that failed its own argument checks (see that rank's error)";
    return os.str();
  }
  if (f[kCount] == 0) return os.str();
  os << " with " << c10::getDtypeNames(static_cast<c10::ScalarType>(f[kDtype])).first << " of "
     << f[kNumel] << " elements";
  if (f[kCount] > 1) os << " (+" << f[kCount] - 1 << " more tensors)";
  return os.str();
}

// The verdict's hash: FNV-1a over the signature's bytes, then a final mix so
// that every input bit moves every output bit.
int64_t hash_signature(const int64_t* f) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t k = 0; k < kFields; ++k)
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(f[k] >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<int64_t>(h);
}

}  // namespace

SignatureCheck::SignatureCheck(c10d::Backend& inner, std::shared_ptr<SignatureStore> store,
                               c10::intrusive_ptr<c10d::Backend> details, const char* name,
                               const CallSignature& sig, std::chrono::milliseconds timeout)
    : name_(name),
      rank_(inner.getRank()),
      details_(std::move(details)),
      store_(std::move(store)),
      size_(inner.getSize()),
      timeout_(timeout) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(at::kCPU);
  mine_ = at::empty({kFields}, options);
  int64_t* f = mine_.data_ptr<int64_t>();
  f[kTag] = kSignatureTag;
  f[kOp] = static_cast<int64_t>(sig.op);
  f[kArg] = sig.arg;
  f[kCount] = static_cast<int64_t>(sig.tensors.size());
  f[kDtype] = sig.tensors.empty() ? -1 : static_cast<int64_t>(sig.tensors[0].scalar_type());
  f[kNumel] = sig.tensors.empty() ? 0 : sig.tensors[0].numel();
  f[kHash] = hash_tensors(sig.tensors);
  f[kValid] = sig.valid ? 1 : 0;
  const int64_t h = hash_signature(f);
  hash_ = h;
  if (store_) {
    store_->push(h);
    return;
  }
  // MAX over the ranks of [h, ~h] is [max h, ~min h]: all equal iff a == ~b.
  agree_ = at::empty({2}, options);
  agree_.data_ptr<int64_t>()[0] = h;
  agree_.data_ptr<int64_t>()[1] = ~h;
  std::vector<at::Tensor> in{agree_};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::MAX);
  opts.timeout = timeout;
  works_.push_back(inner.allreduce(in, opts));
}

void SignatureCheck::verify() {
  bool same_hash = true;
  if (store_) {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) same_hash = store_->pop(r, name_, timeout_) == hash_ && same_hash;
  } else {
    for (auto& w : works_) w->wait(timeout_);
    const int64_t* v = agree_.data_ptr<int64_t>();
    same_hash = v[0] == ~v[1];
  }
  trace::mark("signature_done");
  const bool mine_valid = mine_.data_ptr<int64_t>()[kValid] == 1;
  // Equal hashes: every rank made this call (and every rank's own checks
  // passed, or failed alike: each then raises its own error).
  if (same_hash) return;
  // They differ, and every rank knows it: all of them fetch the details (the
  // same byte count everywhere) for the message.
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < details_->getSize(); ++r) all[0].push_back(at::empty_like(mine_));
  std::vector<at::Tensor> in{mine_};
  c10d::AllgatherOptions opts;
  opts.timeout = timeout_;
  details_->allgather(all, in, opts)->wait(timeout_);
  const int size = static_cast<int>(all[0].size());
  bool valid = true;
  for (int r = 0; r < size; ++r) valid = valid && all[0][r].data_ptr<int64_t>()[kValid] == 1;
  // This rank's own invalid call raises its own error (the caller rethrows
  // it); the others learn which rank failed.
  if (!mine_valid) return;
  std::ostringstream os;
  os << "torch.distributed backend 'tpu': " << name_
     << (valid ? " called with different tensors on different ranks"
               : ": another rank's call failed its own argument checks")
     << " (every rank must make the same collective call with tensors of the same dtype "
        "and number of elements):";
  for (int r = 0; r < size; ++r) {
    os << (r ? ";" : "") << " rank " << r << " called " << describe(all[0][r].data_ptr<int64_t>());
    const int64_t* f = all[0][r].data_ptr<int64_t>();
    if (f[kTag] == kSignatureTag && f[kArg] != all[0][0].data_ptr<int64_t>()[kArg]) {
      os << " (root / reduce op " << f[kArg] << ")";
    }
  }
  TORCH_CHECK(false, os.str());
}

}  // namespace ttpu::distributed
