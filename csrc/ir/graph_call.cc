// The builder of Op::kCall: a call of a user kernel (a JAX function or
// StableHLO text, torchtpu.kernels); the emitter writes its body once as a
// function of the module and calls it (stablehlo/emit.cc, kernel_module.h).
#include "ir/graph.h"
#include "ir/graph_check.h"

namespace ttpu::ir {

using detail::fail;

// A user kernel's call. Its types were parsed from the kernel's own signature
// (stablehlo/kernel_module.h), so a mismatch here is the caller's argument
// error: the message names the kernel and the argument.
std::vector<Value> Graph::call(std::shared_ptr<const UserFunction> fn,
                               const std::vector<Value>& operands) {
  if (!fn) fail("call", "no kernel");
  const std::string what = "kernel '" + fn->name + "'";
  if (operands.size() != fn->params.size()) {
    fail(what, "takes " + std::to_string(fn->params.size()) + " arguments, got " +
                   std::to_string(operands.size()));
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const TensorType& t = operand_type("call", operands[i]);
    if (!(t == fn->params[i])) {
      fail(what, "argument " + std::to_string(i) + " is " + t.mlir() + ", the kernel takes " +
                     fn->params[i].mlir());
    }
  }
  if (fn->results.empty()) fail(what, "returns nothing");
  for (const TensorType& t : fn->results) detail::check_dims("call", t.dims);
  Attrs at;
  at.call = std::move(fn);
  const std::vector<TensorType> results = at.call->results;
  Value v = add_node(Node{Op::kCall, operands, results, std::move(at)});
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) out.push_back(Value{v.node, static_cast<int32_t>(i)});
  return out;
}

}  // namespace ttpu::ir
