// User kernels: registration (parse + one standalone compile) and the call.
#include "aten/user_kernel.h"

#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "aten/lowering.h"
#include "cache/sha256.h"
#include "pjrt/pjrt.h"
#include "runtime/runtime.h"
#include "stablehlo/kernel_module.h"

namespace ttpu::aten {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
// handle -> kernel; never shrinks (a kernel is a few KB of text, registered
// once per distinct function and argument signature).
std::unordered_map<std::string, std::shared_ptr<const ir::UserFunction>>& registry() {
  static std::unordered_map<std::string, std::shared_ptr<const ir::UserFunction>> r;
  return r;
}

std::string type_list(const std::vector<ir::TensorType>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].mlir();
  return "(" + s + ")";
}

}  // namespace

KernelSignature register_kernel(const std::string& name, const std::string& text) {
  // The name takes part in the key so error messages always name the kernel
  // the user called (two names for one text compile twice: rare and harmless).
  const std::string key = cache::to_hex(cache::sha256(name + '\0' + text));
  std::shared_ptr<const ir::UserFunction> fn;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(key);
    if (it != registry().end()) fn = it->second;
  }
  if (!fn) {
    ir::UserFunction parsed;
    try {
      parsed = stablehlo::prepare_kernel(text, name, key);
    } catch (const ir::IrError& e) {
      TORCH_CHECK(false, e.what());
    }
    auto made = std::make_shared<const ir::UserFunction>(std::move(parsed));
    // Compiled on its own before any use: a rejected body fails here, with
    // the kernel's name, instead of inside a fused graph built around it.
    ir::Graph g;
    std::vector<ir::Value> params;
    for (const auto& t : made->params) params.push_back(g.parameter(t));
    const std::string op = "kernel '" + name + "'";
    try {
      g.set_outputs(g.call(made, params));
      runtime::Runtime::get().compile(g, op);
    } catch (const pjrt::PjrtError& e) {
      TORCH_CHECK(false, op, ": the plugin rejected the program: ", e.what());
    } catch (const ir::IrError& e) {
      TORCH_CHECK(false, e.what());
    }
    std::lock_guard<std::mutex> lock(registry_mutex());
    fn = registry().emplace(key, made).first->second;
  }
  return KernelSignature{key, fn->params, fn->results};
}

std::vector<at::Tensor> run_kernel(const std::string& handle, const std::vector<at::Tensor>& args) {
  std::shared_ptr<const ir::UserFunction> fn;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(handle);
    TORCH_CHECK(it != registry().end(), "torchtpu: no kernel registered as ", handle);
    fn = it->second;
  }
  const std::string op = "kernel '" + fn->name + "'";
  TORCH_CHECK_VALUE(args.size() == fn->params.size(), op, " takes ", fn->params.size(),
                    " tensor arguments ", type_list(fn->params), ", got ", args.size());
  int device = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const at::Tensor& t = args[i];
    TORCH_CHECK_TYPE(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, op,
                     ": argument ", i, " must be a tpu tensor, got ",
                     t.defined() ? t.device().str() : std::string("an undefined tensor"));
    TORCH_CHECK_VALUE(device < 0 || t.device().index() == device, op,
                      ": arguments are on different tpu devices");
    device = t.device().index();
    const ir::TensorType& want = fn->params[i];
    TORCH_CHECK_TYPE(to_ir(t.scalar_type()) == want.dtype, op, ": argument ", i, " has dtype ",
                     t.scalar_type(), ", the kernel takes ", want.mlir());
    TORCH_CHECK_VALUE(t.sizes() == c10::IntArrayRef(want.dims), op, ": argument ", i, " has shape ",
                      t.sizes(), ", the kernel takes ", want.mlir());
  }
  if (device < 0) device = current_device();
  LoweringContext ctx(op, device);
  std::vector<ir::Value> values;
  for (const auto& t : args) values.push_back(ctx.tensor(t));
  std::vector<ir::Value> outs;
  try {
    outs = ctx.g().call(fn, values);
  } catch (const ir::IrError& e) {
    TORCH_CHECK(false, e.what());
  }
  return ctx.run(outs);
}

}  // namespace ttpu::aten
