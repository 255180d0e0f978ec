// Host staging of TpuBackend's collectives (host_collective.h): the reused host buffers,
// the two transfers (installed by torchtpu's core through bind()) and the
// device buffers that write-backs replace, kept until no read can use them.
#include "distributed/host_collective.h"

#include <ATen/ATen.h>

#include <atomic>
#include <map>
#include <mutex>

namespace ttpu::distributed {
namespace {
// Host staging buffers are reused: a fresh host allocation costs its page
// faults on first touch (5 ms for 1 MB on this machine, 500x the copy itself).
// A buffer is free again when only the pool holds its storage (the TpuWork
// and the caller's views of it are gone).
class StagingPool {
 public:
  at::Tensor acquire(at::IntArrayRef sizes, c10::ScalarType dtype) {
    int64_t numel = c10::multiply_integers(sizes);
    size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
    auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
    if (bytes < kMinBytes) return at::empty(sizes, options);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& list = free_[{dtype, numel}];
    for (auto& t : list)  // views share the storage: its count says who uses it
      if (t.storage().use_count() == 1) return t.view(sizes);
    at::Tensor t = at::empty({numel}, options);
    if (list.size() < kPerKey && held_ + bytes <= kMaxBytes) {
      list.push_back(t);
      held_ += bytes;
    }
    return t.view(sizes);
  }

 private:
  static constexpr size_t kMinBytes = 64 << 10;    // small ones: malloc reuses them
  static constexpr size_t kMaxBytes = 512u << 20;  // bound on what the pool keeps
  static constexpr size_t kPerKey = 4;
  std::mutex mutex_;
  std::map<std::pair<c10::ScalarType, int64_t>, std::vector<at::Tensor>> free_;
  size_t held_ = 0;
};

StagingPool& pool() {
  static StagingPool* p = new StagingPool();  // never destroyed: used at exit
  return *p;
}

std::atomic<HostToTpuFn> g_host_to_tpu{nullptr};
std::atomic<TpuToHostFn> g_tpu_to_host{nullptr};

std::mutex g_retired_mutex;
// Never destroyed: write-backs may still run at exit.
auto* g_retired = new std::vector<std::shared_ptr<void>>();

}  // namespace

void set_host_to_tpu(HostToTpuFn fn) { g_host_to_tpu.store(fn); }
void set_tpu_to_host(TpuToHostFn fn) { g_tpu_to_host.store(fn); }

// A host buffer for a result: same shape and dtype, contiguous.
at::Tensor host_like(const at::Tensor& t) { return pool().acquire(t.sizes(), t.scalar_type()); }

// Dense, contiguous host copy: what gloo requires. With `pending`, the copy
// itself may be left there (it reads the values `t` has now); without, it is
// made here.
at::Tensor to_host(const at::Tensor& t, Pending* pending) {
  at::Tensor h = host_like(t);
  TpuToHostFn fn = g_tpu_to_host.load();
  if (fn != nullptr && pending != nullptr) {
    if (auto step = fn(t, h)) pending->push_back(std::move(step));
  } else {
    h.copy_(t);
  }
  return h;
}

Tensors to_host(const Tensors& ts, Pending* pending) {
  Tensors out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(to_host(t, pending));
  return out;
}

Tensors host_like(const Tensors& ts) {
  Tensors out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(host_like(t));
  return out;
}

std::vector<Tensors> host_like(const std::vector<Tensors>& tss) {
  std::vector<Tensors> out;
  for (const auto& ts : tss) out.push_back(host_like(ts));
  return out;
}

// Host results into the caller's tpu tensors, in place (storage and data_ptr
// kept). The staging buffer becomes the device buffer where the plugin allows
// (no new device allocation, whose first touch costs as much as the copy
// again: 64 MB took 41 ms here against 4 ms for the reverse copy into a reused
// host buffer); the pool reuses it only once the device buffer lets go.
void copy_back(const Tensors& dst, const Tensors& src) {
  HostToTpuFn fn = g_host_to_tpu.load();
  for (size_t i = 0; i < dst.size(); ++i) {
    if (fn != nullptr)
      retire(fn(dst[i], src[i]));
    else
      const_cast<at::Tensor&>(dst[i]).copy_(src[i]);
  }
}

// Gloo has no AVG: the host path sums and divides (integers truncate, as the

void retire(std::shared_ptr<void> buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(g_retired_mutex);
  g_retired->push_back(std::move(buffer));
}

void release_retired() {
  std::vector<std::shared_ptr<void>> drop;
  {
    std::lock_guard<std::mutex> lock(g_retired_mutex);
    if (g_retired->empty()) return;
    drop.swap(*g_retired);
  }
  // Destroyed here, outside the lock (a buffer's end calls the plugin).
}

}  // namespace ttpu::distributed
