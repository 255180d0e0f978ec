#pragma once

#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace c10 {
class OperatorHandle;
}

namespace ttpu::aten {

// Runs `op` on CPU through the counted, warned fallback (TORCHTPU_FALLBACK=error
// makes it raise). For kernels that decline a call they cannot lower (a complex
// input to a real-only rule); `why` completes "has no tpu lowering" in its
// message (" for complex tensors").
void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                      const char* why = "");
// The counting, warning and TORCHTPU_FALLBACK=error check alone, for
// fallbacks that move their arguments themselves (sparse.cc).
void count_cpu_fallback(const c10::OperatorHandle& op, const char* why);

// Thrown by a lowering rule, before it has run anything on the device, to hand
// the call to run_cpu_fallback: inputs CPU supports that the rule does not
// implement (uint8 bilinear resize: CPU's fixed-point arithmetic). The kernel
// catches it; `why` completes "has no tpu lowering" (" for uint8 input").
struct DeclinedToCpu {
  const char* why;
};
[[noreturn]] inline void decline_to_cpu(const char* why) { throw DeclinedToCpu{why}; }

// Where torch's packaged native_functions.yaml is: the fallback reads which
// ops skip the same-device check from it (fallback.cc), at its first use.
void set_native_functions_yaml(const std::string& path);

// Per-op counts of CPU fallback calls since the last reset ("aten::name.overload").
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace ttpu::aten
