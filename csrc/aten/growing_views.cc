#include "aten/growing_views.h"

#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace ttpu::aten {
namespace {

struct Seen {
  int64_t storage_numel;
  bool varies = false;
};

// A program per distinct (op, view sizes, dtype) is what strict mode keeps
// anyway; past this many keys the table starts over (a key forgotten costs
// one more program of the old kind, never a wrong result).
constexpr size_t kMaxKeys = 4096;

}  // namespace

bool view_base_varies(const std::string& op, const std::vector<int64_t>& sizes, ir::DType dtype,
                      int64_t storage_numel) {
  // A hash, not the text of the key: this runs on every strict read of a part
  // of a storage. Two keys that collide only route an op's read through its
  // own buffer (one more small program), never change a value.
  uint64_t key = std::hash<std::string>{}(op) ^ (static_cast<uint64_t>(dtype) << 56);
  for (int64_t s : sizes) key = (key ^ static_cast<uint64_t>(s)) * 1099511628211ull;
  // Strict ops come from several threads (user threads, autograd's).
  static std::mutex mu;
  static auto* seen = new std::unordered_map<uint64_t, Seen>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = seen->find(key);
  if (it == seen->end()) {
    if (seen->size() >= kMaxKeys) seen->clear();
    seen->emplace(key, Seen{storage_numel});
    return false;
  }
  if (it->second.storage_numel != storage_numel) {
    it->second.varies = true;
    it->second.storage_numel = storage_numel;
  }
  return it->second.varies;
}

}  // namespace ttpu::aten
