#include "aten/deferred_check.h"

#include <mutex>

#include "aten/copy.h"

namespace ttpu::aten {
namespace {

std::vector<DeferredCheck>& pending() {
  static auto* checks = new std::vector<DeferredCheck>();  // outlives static teardown
  return *checks;
}

thread_local bool t_running = false;
uint64_t g_drains = 0;
std::mutex g_mu;  // guards pending() and g_drains (ops may come from several threads)

}  // namespace

// A loop that never reads would grow the list (and keep its small device
// values) without bound: past this many, the checks run (one wait).
constexpr size_t kMaxPending = 4096;

void defer_check(at::Tensor value, CheckFn check) {
  bool full;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    full = pending().size() >= kMaxPending;
  }
  if (full) run_deferred_checks();
  std::lock_guard<std::mutex> lock(g_mu);
  pending().push_back({std::move(value), std::move(check)});
}

void check_device_values(const at::Tensor& value, CheckFn check) {
  if (runtime::Runtime::get().mode() == runtime::EagerMode::kFused) {
    defer_check(value, std::move(check));
  } else {
    check(to_host(value));
  }
}

std::vector<DeferredCheck> deferred_checks() {
  std::lock_guard<std::mutex> lock(g_mu);
  return pending();
}

uint64_t deferred_check_drains() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_drains;
}

void run_deferred_checks() {
  if (t_running) return;
  std::vector<DeferredCheck> checks;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (pending().empty()) return;
    checks.swap(pending());
    ++g_drains;
  }
  t_running = true;
  struct Done {
    ~Done() { t_running = false; }
  } done;
  for (const DeferredCheck& c : checks) c.check(to_host(c.value));
}

}  // namespace ttpu::aten
