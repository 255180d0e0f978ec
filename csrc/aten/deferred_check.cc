#include "aten/deferred_check.h"

#include "aten/copy.h"

namespace ttpu::aten {
namespace {

std::vector<DeferredCheck>& pending() {
  static auto* checks = new std::vector<DeferredCheck>();  // outlives static teardown
  return *checks;
}

thread_local bool t_running = false;
uint64_t g_drains = 0;

}  // namespace

// A loop that never reads would grow the list (and keep its small device
// values) without bound: past this many, the checks run (one wait).
constexpr size_t kMaxPending = 4096;

void defer_check(at::Tensor value, CheckFn check) {
  if (pending().size() >= kMaxPending) run_deferred_checks();
  pending().push_back({std::move(value), std::move(check)});
}

void check_device_values(const at::Tensor& value, CheckFn check) {
  if (runtime::Runtime::get().mode() == runtime::EagerMode::kFused) {
    defer_check(value, std::move(check));
  } else {
    check(to_host(value));
  }
}

const std::vector<DeferredCheck>& deferred_checks() { return pending(); }

uint64_t deferred_check_drains() { return g_drains; }

void run_deferred_checks() {
  if (t_running || pending().empty()) return;
  t_running = true;
  struct Done {
    ~Done() { t_running = false; }
  } done;
  std::vector<DeferredCheck> checks;
  checks.swap(pending());
  ++g_drains;
  for (const DeferredCheck& c : checks) c.check(to_host(c.value));
}

}  // namespace ttpu::aten
