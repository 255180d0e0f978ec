// Fused eager mode: ATen ops are appended to one pending graph per device
// instead of being executed; the graph is compiled as ONE program (cached by its
// structure) and run when a value is read, when it reaches a size cap, at an op
// with no lowering (the CPU fallback reads its inputs), or at torchtpu.sync().
//
// Values, never structure, vary between training steps: device buffers, Python
// scalars and RNG state are program parameters, so a loop compiles its step
// graphs once and then hits the cache.
//
// Lifetimes: a Slot whose value is pending is listed in `live_` until the flush
// gives it a buffer, or until its storage dies (forget()); dead values are left
// for XLA to eliminate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/runtime.h"

namespace ttpu::runtime {

// An input of a recorded op: a slot (its pending value if it still has one at
// record time, else its buffer) or a plain buffer (scalars, RNG state).
struct RecordedArg {
  std::shared_ptr<pjrt::Buffer> buffer;
  Slot* slot = nullptr;
};

class Fusion {
 public:
  explicit Fusion(int device) : device_(device) {}

  // Appends `op`'s program: its parameters bound to `args`, and `values[i]`
  // becoming the pending value of `out_slots[i]`. Flushes past the size cap.
  void record(const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
              const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
              const std::string& op);
  // Compiles and runs the pending graph; every pending slot gets its buffer.
  // On failure the slots are marked with the error (raised at their next read)
  // and pjrt::PjrtError is thrown.
  void flush();
  void forget(Slot* slot);
  size_t num_ops() const { return ops_; }

 private:
  ir::Value param(const std::shared_ptr<pjrt::Buffer>& buffer, const ir::TensorType& type,
                  bool dedup);
  void reset();

  int device_;
  ir::Graph graph_;
  std::vector<std::shared_ptr<pjrt::Buffer>> args_;
  std::vector<std::pair<pjrt::Buffer*, ir::Value>> slot_params_;  // dedup of slot buffers
  std::vector<Slot*> live_;
  size_t ops_ = 0;
  std::string first_op_;
};

// The pending graph of `device` (created on first use).
Fusion& fusion(int device);
// Flushes every device's pending graph.
void flush_all();
// If `slot` is pending, flushes its graph so `slot.buffer` holds its value;
// raises the slot's recorded error if its program failed.
void materialize(Slot& slot);
// Called when a storage dies: drops its pending value.
void forget_pending(Slot& slot);

}  // namespace ttpu::runtime
