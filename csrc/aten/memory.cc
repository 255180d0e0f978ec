// The tpu allocator and its accounting. Allocation hands out a storage Slot
// (no device memory yet: PJRT buffers appear when a program or upload writes
// the slot, and are freed when the last slot holding them lets go). The bytes
// counted are the storages' sizes per device, which is what CUDA's
// memory_allocated counts (bytes of live tensors' storages, there rounded to
// blocks). There is no cache: reserved equals allocated and empty_cache has
// nothing to release. Registered as a c10 DeviceAllocator so torch.accelerator's
// memory functions reach it.
#include "aten/memory.h"

#include <c10/core/impl/COW.h>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "aten/device.h"
#include "runtime/fusion.h"

namespace ttpu::aten {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
constexpr size_t kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

std::mutex g_stats_mu;
std::vector<DeviceStats> g_stats;  // per device, grown on demand

DeviceStats& stats_locked(int device) {
  if (device >= static_cast<int>(g_stats.size())) g_stats.resize(device + 1);
  return g_stats[device];
}

void check_index(c10::DeviceIndex device) {
  const int n = device_count_or_zero();
  TORCH_CHECK_INDEX(device >= 0 && device < n, "Invalid device argument ", int(device),
                    ": this process has ", n, " tpu device(s)");
}

// Adds (or, negative, removes) `bytes` of storage on `device`; `blocks` is the
// change in the number of live storages.
void account(int device, int64_t bytes, int blocks) {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  DeviceStats& s = stats_locked(device);
  for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes}) {
    if (bytes >= 0) {
      (*arr)[kAll].increase(static_cast<size_t>(bytes));
    } else {
      (*arr)[kAll].decrease(static_cast<size_t>(-bytes));
    }
  }
  for (auto* arr : {&s.allocation, &s.segment, &s.active}) {
    if (blocks > 0) (*arr)[kAll].increase(static_cast<size_t>(blocks));
    if (blocks < 0) (*arr)[kAll].decrease(static_cast<size_t>(-blocks));
  }
}

void delete_slot(void* ctx) {
  auto* slot = static_cast<runtime::Slot*>(ctx);
  runtime::forget_pending(*slot);
  account(slot->device, -slot->nbytes, -1);
  delete slot;
}

// /proc/meminfo's value for `key` in bytes, or -1.
int64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

}  // namespace

bool addresses_a_slot(const c10::DataPtr& data) {
  // from_blob's DataPtrs (DLPack import of a tpu tensor: its data_ptr, the
  // slot's address) carry c10's std::function context, whose deleter is
  // private to c10: taken once from a DataPtr of that kind.
  static const c10::DeleterFnPtr kFromBlob = c10::InefficientStdFunctionContext::makeDataPtr(
                                                 nullptr, [](void*) {}, c10::Device(c10::kCPU))
                                                 .get_deleter();
  const c10::DeleterFnPtr deleter = data.get_deleter();
  return deleter == &delete_slot || deleter == kFromBlob || c10::impl::cow::is_cow_data_ptr(data);
}

namespace {

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const int device = current_device();
    auto* slot = new runtime::Slot();
    slot->nbytes = static_cast<int64_t>(nbytes);
    slot->device = device;
    account(device, slot->nbytes, 1);
    // The address is the slot itself: unique and stable for the storage's life.
    return c10::DataPtr(slot, slot, &delete_slot,
                        c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  // PJRT buffers are never written in place (every write makes a new buffer and
  // swaps it into the slot), so a copy may share the source buffer.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    auto* d = static_cast<runtime::Slot*>(dest);
    auto* s = static_cast<const runtime::Slot*>(src);
    TORCH_CHECK(static_cast<int64_t>(count) == s->nbytes && d->nbytes == s->nbytes,
                "tpu: partial storage copies are not supported");
    runtime::materialize(*const_cast<runtime::Slot*>(s));
    d->buffer = s->buffer;
    d->dtype = s->dtype;
    d->producer = s->producer;
  }

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}                    // nothing is cached
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one queue per device
  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_index(device);
    std::lock_guard<std::mutex> lock(g_stats_mu);
    return stats_locked(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_index(device);
    std::lock_guard<std::mutex> lock(g_stats_mu);
    DeviceStats& s = stats_locked(device);
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                      &s.active_bytes, &s.requested_bytes}) {
      (*arr)[kAll].reset_accumulated();
    }
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_index(device);
    std::lock_guard<std::mutex> lock(g_stats_mu);
    DeviceStats& s = stats_locked(device);
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                      &s.active_bytes, &s.requested_bytes}) {
      (*arr)[kAll].reset_peak();
    }
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_index(device);
    pjrt::Client::MemoryStats m;
    if (runtime::Runtime::get().client().memory_stats(device, &m) && m.limit > 0) {
      return {static_cast<size_t>(std::max<int64_t>(0, m.limit - m.bytes_in_use)),
              static_cast<size_t>(m.limit)};
    }
    // The CPU plugin reports no device memory: its buffers are host memory.
    const int64_t total = meminfo_bytes("MemTotal");
    const int64_t avail = meminfo_bytes("MemAvailable");
    TORCH_CHECK(total > 0 && avail >= 0,
                "tpu: the plugin reports no memory statistics "
                "and /proc/meminfo is not readable");
    return {static_cast<size_t>(avail), static_cast<size_t>(total)};
  }
};

TpuAllocator g_allocator;

}  // namespace

c10::Allocator* tpu_allocator() { return &g_allocator; }

c10::DeviceAllocator* tpu_device_allocator() { return &g_allocator; }

void set_storage_nbytes(const c10::Storage& storage, runtime::Slot& slot, int64_t nbytes) {
  account(slot.device, nbytes - slot.nbytes, 0);
  storage.unsafeGetStorageImpl()->set_nbytes(static_cast<size_t>(nbytes));
  slot.nbytes = nbytes;
}

}  // namespace ttpu::aten
