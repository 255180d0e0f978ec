// Fused mode's half of the aten layer's dispatch cache (aten/dispatch_cache.h):
// a copy of the op Fusion::record appends, taken on request, so that a repeated
// call can be appended again without running its lowering rule and building its
// graph (most of a fused op's host cost, measured with callgrind).
//
// A separate header (not fusion.h, which every rule includes) so the aten
// layer's dispatch cache is the only other user.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/fusion.h"

namespace ttpu::runtime {

// What Fusion::record was given for one op, copied before it moved the graph.
struct RecordedOp {
  bool taken = false;  // record ran while the tap was set
  ir::Graph graph;     // the op's program: parameters bound to `args`, outputs unset
  std::vector<RecordedArg> args;
  std::vector<ir::Value> values;  // graph values that became out_slots' pending values
  std::vector<Slot*> out_slots;
  std::vector<ir::TensorType> result_types;
};

// While one lives, the first op Fusion::record appends on this thread is
// copied into `*op` (later ops, and ops of other threads, are not).
class RecordTap {
 public:
  explicit RecordTap(RecordedOp* op);
  ~RecordTap();
  RecordTap(const RecordTap&) = delete;
  RecordTap& operator=(const RecordTap&) = delete;

 private:
  RecordedOp* previous_;
};

// fusion.record(op_graph, ...) for a graph that stays the caller's (a cached
// op's): its nodes are copied into the pending graph rather than moved, which
// spares the caller a copy of the whole op graph (params included) per call.
void record_copy(Fusion& fusion, const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                 const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
                 const std::string& op, std::vector<ir::TensorType> result_types);

}  // namespace ttpu::runtime
