// Graph -> StableHLO text (MLIR generic op form), entry function public @main.
// No torch include.
#pragma once

#include <string>

#include "ir/graph.h"

namespace ttpu::stablehlo {

// The module text for `graph`: parameters in graph.parameters() order become
// %arg0.., graph.outputs() the results. `module_name` only names the module.
// Throws ir::IrError on a graph it cannot express.
std::string emit(const ir::Graph& graph, const std::string& module_name = "torchtpu");

}  // namespace ttpu::stablehlo
