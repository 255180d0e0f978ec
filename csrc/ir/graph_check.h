// Checks shared by the graph builders (graph.cc, graph_structured.cc). Internal
// to the ir layer: not installed, not included from other layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/types.h"

namespace ttpu::ir::detail {

// Throws IrError "<op>: <message>".
[[noreturn]] inline void fail(const std::string& op, const std::string& message) {
  throw IrError(op + ": " + message);
}

std::string ints_str(const std::vector<int64_t>& v);                // "[1, 2]"
void check_dims(const char* op, const std::vector<int64_t>& dims);  // all >= 0
// Each axis in [0, rank), no repeats, ascending when `sorted`.
void check_axes(const char* op, const char* what, const std::vector<int64_t>& axes, int64_t rank,
                bool sorted);

}  // namespace ttpu::ir::detail
