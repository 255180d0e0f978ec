#include "aten/growing_views.h"

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
  std::string key = op;
  key += '|';
  key += std::to_string(static_cast<int>(dtype));
  for (int64_t s : sizes) {
    key += ',';
    key += std::to_string(s);
  }
  // Strict ops come from several threads (user threads, autograd's).
  static std::mutex mu;
  static auto* seen = new std::unordered_map<std::string, Seen>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = seen->find(key);
  if (it == seen->end()) {
    if (seen->size() >= kMaxKeys) seen->clear();
    seen->emplace(std::move(key), Seen{storage_numel});
    return false;
  }
  if (it->second.storage_numel != storage_numel) {
    it->second.varies = true;
    it->second.storage_numel = storage_numel;
  }
  return it->second.varies;
}

}  // namespace ttpu::aten
