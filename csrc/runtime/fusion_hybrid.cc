// Hybrid fused mode's background compiles (fusion_hybrid.h). A compile runs on
// a detached thread through Runtime::compile, so it lands in the in-memory and
// persistent caches like any other and a foreground request for the same
// program joins it instead of compiling twice.
#include "runtime/fusion_hybrid.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "runtime/runtime.h"
#include "settings/settings.h"

namespace ttpu::runtime {
namespace {

std::atomic<bool>& hybrid_flag() {
  static std::atomic<bool> on{settings::flag("TORCHTPU_FUSED_HYBRID", false)};
  return on;
}

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, Background> programs;  // kCompiling or kFailed
  std::unordered_set<std::string> warm;
  std::atomic<int> running{0};
};

// Never destroyed: a detached compile may still finish during exit.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

}  // namespace

void set_fused_hybrid(bool on) { hybrid_flag().store(on); }
bool fused_hybrid() { return hybrid_flag().load(std::memory_order_relaxed); }

Background background_state(const std::string& key) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.programs.find(key);
  return it == r.programs.end() ? Background::kNone : it->second;
}

bool compile_in_background(ir::Graph graph, const std::string& key, const std::string& name) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.programs[key] = Background::kCompiling;
  }
  ++r.running;
  auto work = [&r, graph = std::move(graph), key = std::string(key),
               name = std::string(name)]() mutable {
    bool ok = true;
    try {
      Runtime::get().compile(graph, name, &key);
    } catch (...) {
      ok = false;  // shown to the user when the flush compiles it in the open
    }
    graph = ir::Graph();  // freed before the count drops: exit may follow at once
    {
      std::lock_guard<std::mutex> lock(r.mu);
      if (ok) {
        r.programs.erase(key);
      } else {
        r.programs[key] = Background::kFailed;
      }
    }
    std::string().swap(key);
    std::string().swap(name);
    --r.running;
  };
  try {
    std::thread(std::move(work)).detach();
  } catch (const std::system_error&) {
    std::lock_guard<std::mutex> lock(r.mu);
    r.programs.erase(key);
    --r.running;
    return false;
  }
  return true;
}

int background_compiles() { return registry().running.load(); }

bool background_busy() {
  static const int limit = std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
  return background_compiles() >= limit;
}

bool line_warm(const std::string& start) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.warm.count(start) != 0;
}

void set_line_warm(const std::string& start, bool warm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (warm) {
    r.warm.insert(start);
  } else {
    r.warm.erase(start);
  }
}

}  // namespace ttpu::runtime
