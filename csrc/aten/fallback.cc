// The CPU fallback: any ATen op with no lowering runs on CPU (inputs copied to
// host, outputs back), counted per op and warned once per op. With
// TORCHTPU_FALLBACK=error it raises instead, so a user can prove a program runs
// natively.
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "aten/fallback.h"
#include "settings/settings.h"

namespace ttpu::aten {
namespace {

std::mutex g_mu;
std::map<std::string, int64_t> g_counts;

bool fallback_is_error() {
  return settings::choice("TORCHTPU_FALLBACK", "cpu", {"cpu", "error"}) == "error";
}

// `why` completes "has no tpu lowering" in the error and the warning.
void count_for(const c10::OperatorHandle& op, const char* why) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error(), "tpu: ", full, " has no tpu lowering", why,
                              " and TORCHTPU_FALLBACK=error forbids running it on CPU");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    first = g_counts[full]++ == 0;
  }
  if (first) {
    TORCH_WARN("tpu: ", full, " has no tpu lowering", why,
               "; running it on CPU (copies its "
               "inputs to host and back). Set TORCHTPU_FALLBACK=error to make this an error.");
  }
}

void fallback_for(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* why) {
  count_for(op, why);
  at::native::cpu_fallback(op, stack);
}

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  fallback_for(op, stack, "");
}

}  // namespace

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* why) {
  fallback_for(op, stack, why);
}

void count_cpu_fallback(const c10::OperatorHandle& op, const char* why) { count_for(op, why); }

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

}  // namespace ttpu::aten
