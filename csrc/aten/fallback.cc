// The CPU fallback: any ATen op with no lowering runs on CPU (inputs copied to
// host, outputs back), counted per op and warned once per op. With
// TORCHTPU_FALLBACK=error it raises instead, so a user can prove a program runs
// natively.
//
// Before it runs, an op's tensors are checked to be on one device, as the
// wrappers PyTorch generates for CUDA kernels check them: the out and
// positional tensor arguments of every aten op whose native_functions.yaml
// entry does not say `device_check: NoCheck` (TensorIterator ops and index
// ops take CPU scalars or CPU indices and check for themselves). CPU's
// kernels check nothing, so without this a CPU tensor given with a tpu one
// was accepted (complex linalg.lstsq with a CPU right-hand side).
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>

#include "aten/fallback.h"
#include "settings/settings.h"

namespace ttpu::aten {
namespace {

std::mutex g_fallback_mu;
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
    std::lock_guard<std::mutex> lock(g_fallback_mu);
    first = g_counts[full]++ == 0;
  }
  if (first) {
    TORCH_WARN("tpu: ", full, " has no tpu lowering", why,
               "; running it on CPU (copies its "
               "inputs to host and back). Set TORCHTPU_FALLBACK=error to make this an error.");
  }
}

std::mutex g_yaml_mu;
std::string g_yaml_path;

// "name.overload" of every op whose entry in native_functions.yaml says
// `device_check: NoCheck`; empty when the file is not known or not readable
// (then no op is checked: the fallback's behaviour before the check).
const std::set<std::string>& no_check_ops(bool* known) {
  static std::set<std::string> ops;
  static bool read = false, ok = false;
  std::lock_guard<std::mutex> lock(g_yaml_mu);
  if (!read) {
    read = true;
    std::ifstream in(g_yaml_path);
    std::string line, current;
    const std::string func = "- func: ";
    while (in && std::getline(in, line)) {
      if (line.rfind(func, 0) == 0) {
        current = line.substr(func.size(), line.find('(') - func.size());
        ok = true;
      } else if (line.find("device_check: NoCheck") != std::string::npos && !current.empty()) {
        ops.insert(current);
      }
    }
  }
  *known = ok;
  return ops;
}

void check_same_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& schema = op.schema();
  const auto& name = schema.operator_name();
  if (name.name.rfind("aten::", 0) != 0) return;
  const std::string entry =
      name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
  bool known = false;
  const auto& skip = no_check_ops(&known);
  if (!known || skip.count(entry)) return;
  const auto& args = schema.arguments();
  if (stack.size() < args.size()) return;
  const std::string method =
      "wrapper_PrivateUse1_" + name.overload_name + "_" + name.name.substr(6);
  std::optional<c10::Device> common;
  const size_t first = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kwarg_only() && !args[i].is_out()) continue;
    const c10::IValue& v = stack[first + i];
    const char* arg = args[i].name().c_str();
    if (v.isTensor()) {
      c10::impl::check_and_update_common_device(common, v.toTensor(), method.c_str(), arg);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec())
        c10::impl::check_and_update_common_device(common, t, method.c_str(), arg);
    } else if (v.isOptionalTensorList()) {
      c10::impl::check_and_update_common_device(common, v.toOptionalTensorList(), method.c_str(),
                                                arg);
    }
  }
}

void fallback_for(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* why) {
  check_same_device(op, *stack);
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

void set_native_functions_yaml(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_yaml_mu);
  g_yaml_path = path;
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mu);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mu);
  g_counts.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

}  // namespace ttpu::aten
