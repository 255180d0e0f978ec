// The recompile guard of fused eager mode: counts the distinct fused graphs
// compiled per Python line where a graph started, and says what differed from
// the closest graph compiled before from that line (shape, dtype, op sequence),
// so a recompilation storm (a batch shape that changes every step, a Python
// value baked into the structure) is named instead of silently slowing a loop.
//
// The runtime is free of Python and torch: the bindings install two hooks, one
// that returns the user's "file:line" (called when the first op of a pending
// graph is recorded) and one that decides what a new graph means (warn, raise,
// nothing: the threshold lives in torchtpu.config). A hook may throw; the
// exception leaves Fusion::flush with the graph's slots marked failed.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ttpu::runtime {

// One recorded ATen op: its name and the types of what it produced (result
// tensors with their real shapes, then the flat values of the storages it wrote).
struct OpSummary {
  std::string op;
  std::vector<ir::TensorType> results;
};

// What a fused graph looked like, compactly: enough to explain a recompile.
struct GraphSummary {
  std::vector<OpSummary> ops;
  std::vector<ir::TensorType> parameters;  // in parameter order
  std::vector<int32_t> donations;          // ir::Graph::donations()
};

// A fused graph that is not in the program cache and is about to compile.
struct NewGraph {
  std::string start;       // "file:line" of the first op, or "<unknown>"
  int count = 0;           // distinct graphs compiled from `start`, this one included
  std::string difference;  // from the closest earlier graph from `start`; "" if first
  // Graphs from `start` (this one included) that differed from their closest
  // earlier graph by shape ("shape: ..."): a growing or varying dimension.
  int shape_changes = 0;
};

// "file:line" of the user code issuing the current op ("" if unknown).
using SourceLocator = std::function<std::string()>;
// Told about every new fused graph before it compiles; may throw to refuse it.
using RecompileHandler = std::function<void(const NewGraph&)>;

void set_source_locator(SourceLocator locator);
std::string locate_source();  // "" when no locator is installed
void set_recompile_handler(RecompileHandler handler);

// One line: what makes `now` a different program than `before`, starting with
// the kind of difference: "shape: ...", "dtype: ...", "op sequence: ...",
// "donation: ..." or "structure: ...".
std::string describe_difference(const GraphSummary& now, const GraphSummary& before);

class RecompileGuard {
 public:
  // Records a new graph started at `start` and calls the handler (if any)
  // outside the lock. Throws whatever the handler throws. `may_stop_fusing`
  // false (a torch.compile graph, always one program) reports no shape
  // changes, so the handler never marks the line for it.
  void on_new_graph(const std::string& start, GraphSummary summary, bool may_stop_fusing = true);
  // Distinct graphs compiled per start line.
  std::map<std::string, int> counts() const;
  // A storm: graphs starting at `start` run strict from now on (fusion.h);
  // the handler decides. "" and "<unknown>" are never marked (they would
  // cover unrelated code): returns whether `start` was marked.
  bool stop_fusing(const std::string& start);
  bool stops_fusing(const std::string& start) const;
  // Forgets counts and marks.
  void reset();

 private:
  // The last few graphs of a line are kept to find the closest one; a storm
  // of thousands must not keep thousands of summaries.
  static constexpr size_t kKeptPerLine = 16;
  struct Line {
    int count = 0;
    int shape_changes = 0;
    bool strict = false;
    std::deque<GraphSummary> recent;
  };
  mutable std::mutex mu_;
  std::map<std::string, Line> lines_;
};

// The process-wide guard (fused graphs of every device).
RecompileGuard& recompile_guard();

}  // namespace ttpu::runtime
