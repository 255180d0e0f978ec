// torch.profiler's device timeline for tpu (profiler.cc): a kineto child
// profiler that shows executed programs, XLA compiles and host/device copies.
#pragma once

namespace ttpu::aten {

// Registers the profiler with PyTorch's PrivateUse1ProfilerRegistry; called
// once from module init.
void register_profiler();
// Registers the legacy autograd profiler's PrivateUse1 event hooks
// (profiler_legacy.cc); called by register_profiler.
void register_legacy_profiler_stubs();

}  // namespace ttpu::aten
