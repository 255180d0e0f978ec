#include "aten/pinned.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include <c10/core/impl/alloc_cpu.h>

namespace ttpu::aten {
namespace {

std::mutex g_pinned_mutex;
std::map<const char*, size_t> g_blocks;  // start -> size, for interior pointers

void free_pinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_blocks.erase(static_cast<const char*>(ptr));
  }
  c10::free_cpu(ptr);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* ptr = n ? c10::alloc_cpu(n) : nullptr;
    if (ptr) {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_blocks[static_cast<const char*>(ptr)] = n;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }

bool is_pinned_ptr(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  auto it = g_blocks.upper_bound(p);
  if (it == g_blocks.begin()) return false;
  --it;
  return p < it->first + it->second;
}

}  // namespace ttpu::aten
