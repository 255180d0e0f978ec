// Graph -> StableHLO text (MLIR generic op form), entry function public @main.
// No torch include.
#pragma once

#include <string>

#include "ir/graph.h"

namespace ttpu::stablehlo {

// Choices of form that change speed on one backend, never values.
struct EmitOptions {
  // A 2-D dot_general contracting the last dim of both operands (x @ W.t(),
  // nn.Linear) with a large W is written as transpose(W @ x^T) when the two
  // transposes move less than W: XLA:CPU in xla-cpu-pjrt 0.0.1 runs that dot
  // about 2x slower than the other forms (256x1024x1024: 6.0 vs 2.7 ms of CPU
  // time). For the CPU plugin only: elsewhere the barriers it needs would
  // just block fusion.
  bool materialize_transposed_rhs = false;
};

// The module text for `graph`: parameters in graph.parameters() order become
// %arg0.., graph.outputs() the results. `module_name` only names the module.
// Throws ir::IrError on a graph it cannot express.
std::string emit(const ir::Graph& graph, const std::string& module_name = "torchtpu",
                 const EmitOptions& options = {});

}  // namespace ttpu::stablehlo
