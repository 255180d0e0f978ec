// A user's StableHLO module (a JAX lowering, hand-written text) prepared for
// inlining into our programs as the functions a kCall node calls.
//
// The user's module has its own public @main, maybe private helpers, and
// attributes (mhlo.num_partitions on the module, jax.result_info and
// mhlo.sharding / mhlo.layout_mode on arguments and results) that mean
// something only on an entry function. prepare_kernel keeps each function's
// body verbatim, drops those attributes, makes every function private and
// renames it (and every reference to it) with a prefix derived from the
// kernel's content hash, so several kernels and our own @main share a module
// and XLA inlines the calls, fusing across them. No torch, no PJRT.
#pragma once

#include <string>

#include "ir/graph.h"

namespace ttpu::stablehlo {

// Kernel text that cannot be inlined (not a module, no entry function, an
// unsupported type, unbalanced brackets, ...). The message names the kernel.
class KernelTextError : public ir::IrError {
  using IrError::IrError;
};

// Parses `text` (`module [@name] [attributes {...}] { func.func ... }`, or the
// bare list of func.func; debug locations, as jax.export prints them, are
// dropped) and returns the kernel ready for Graph::call. The
// entry is @main, else the module's only public function. `name` appears in
// error messages; `key` (a hex content hash of `text`, at least 16 digits) is
// stored in the result and gives the symbol prefix "ttpu_k<key[0:16]>_".
// Throws KernelTextError.
ir::UserFunction prepare_kernel(const std::string& text, const std::string& name,
                                const std::string& key);

// "tensor<2x3xf32>" -> {kF32, {2, 3}}. Dynamic dims, encodings, element types
// without a DType (i4, f8, tokens, tuples) throw KernelTextError naming `what`.
ir::TensorType parse_tensor_type(const std::string& text, const std::string& what);

}  // namespace ttpu::stablehlo
