// User kernels (issue 13): StableHLO text from a JAX lowering or written by
// hand, registered once per text and run on tpu tensors as one more op.
//
// A registered kernel becomes an ir::UserFunction (stablehlo/kernel_module.h);
// running it lowers to one kCall node through a LoweringContext, so it takes
// part in every mode exactly as an ATen op does: its own cached program in
// strict and debug mode, a call inside the pending graph in fused mode and
// under torch.compile (XLA inlines it and fuses across it).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "ir/types.h"

namespace ttpu::aten {

struct KernelSignature {
  std::string handle;  // what run_kernel takes
  std::vector<ir::TensorType> params, results;
};

// Parses `text`, and compiles it once on its own (the program a strict-mode
// call runs), so text that does not parse or that the plugin rejects is
// reported here, naming the kernel, and never at a later fused flush.
// Registering the same (name, text) again returns the same handle without
// compiling. Throws c10::Error (RuntimeError) naming `name`.
KernelSignature register_kernel(const std::string& name, const std::string& text);

// Runs a registered kernel on tpu tensors (any strides; CPU 0-d tensors are
// not accepted: a kernel's arguments are device tensors). Returns one new
// tensor per result. Throws c10::TypeError for a non-tpu argument or a dtype
// the kernel does not take, c10::ValueError for a wrong count or shape,
// c10::Error for an unknown handle.
std::vector<at::Tensor> run_kernel(const std::string& handle, const std::vector<at::Tensor>& args);

}  // namespace ttpu::aten
