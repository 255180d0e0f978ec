// The multi-tensor ops (`aten::_foreach_*`: the optimizers' default foreach
// implementation, clip_grad_norm_, GradScaler's bookkeeping) as one program
// per call in strict mode.
//
// ATen implements them for backends without a kernel of their own by a loop
// over the tensors (CompositeExplicitAutograd, "slow" kernels), so each call
// became one strict program per tensor: an AdamW step over a model with 50
// parameters ran about 400 programs and compiled one per op and parameter
// shape (bench/bench_models.py's GPT step: 73 programs compiled at the first
// step). Here that same loop runs inside a FusedRegion (runtime/fusion.h):
// the per-tensor ops are recorded and the call runs as one program, as CUDA
// runs one kernel launch per foreach call. The per-tensor lowerings are the
// ones strict mode uses, so each element is computed by the same operations.
// Debug mode keeps one program per tensor (an error at the tensor's op);
// fused mode records the loop into its pending graph as before.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/lowering.h"
#include "runtime/fusion.h"

namespace ttpu::aten {
namespace {

void foreach_in_one_program(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const bool strict = runtime::Runtime::get().mode() == runtime::EagerMode::kStrict;
  if (!strict) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
    return;
  }
  runtime::FusedRegion region;
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
  try {
    region.close();
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, op.schema().name(), ": ", e.what());
  }
}

}  // namespace

void register_foreach() {
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                        __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& n : dispatcher.getAllOpNames()) {
    if (n.name.rfind("aten::_foreach_", 0) != 0) continue;
    auto handle = dispatcher.findSchema(n);
    if (!handle || handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      continue;
    }
    std::string name = n.name.substr(6);  // drop "aten::"
    if (!n.overload_name.empty()) name += "." + n.overload_name;
    lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_in_one_program>());
  }
}

}  // namespace ttpu::aten
