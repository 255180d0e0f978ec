// Fused eager mode: ATen ops are appended to one pending graph per device
// instead of being executed; the graph is compiled as ONE program (cached by its
// structure) and run when a value is read, when it reaches a size cap, at an op
// with no lowering (the CPU fallback reads its inputs), or at torchtpu.sync().
//
// Values, never structure, vary between training steps: device buffers, Python
// scalars and RNG state are program parameters, so a loop compiles its step
// graphs once and then hits the cache. A graph that is new to the cache is
// shown to the recompile guard (fusion_guard.h) before it compiles.
//
// Lifetimes: a Slot whose value is pending is listed in `live_` until the flush
// gives it a buffer, or until its storage dies (forget()); dead values are left
// for XLA to eliminate. While a slot is pending, `slot.buffer` still holds its
// previous value, which the graph may read as a parameter.
//
// Buffer donation: at a flush, a live slot whose previous buffer the graph read
// and that nothing else holds (no other storage shares it, see Slot) donates
// that buffer to the program, aliased to the slot's own output, so an in-place
// update (optimizer step, copy_) does not hold two copies of the tensor. The
// donated buffer is consumed by XLA: the flush drops every reference to it and
// the slot gets the output buffer. TORCHTPU_DONATE=0 turns donation off.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/capture.h"
#include "runtime/fusion_guard.h"
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
  // becoming the pending value of `out_slots[i]`. `result_types` (the op's
  // results as the user sees them) go into the graph's summary for the
  // recompile guard. Flushes past the size cap.
  void record(const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
              const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
              const std::string& op, std::vector<ir::TensorType> result_types);
  // Compiles and runs the pending graph; every pending slot gets its buffer.
  // On failure the slots are marked with the error (raised at their next read)
  // and the error is rethrown: pjrt::PjrtError, or whatever the recompile
  // handler threw.
  void flush();
  void forget(Slot* slot);
  size_t num_ops() const { return ops_; }

  // Capture for replay (runtime/capture.h). begin_capture expects no pending
  // ops (the caller flushed); end_capture flushes and returns the capture, or
  // null when it was refused (the flush's results are valid either way).
  void begin_capture(const std::vector<Slot*>& inputs);
  // Called by every random op: the buffer holding its {seed, offset} state.
  // A draw from a generator other than the device's default refuses capture.
  void note_rng(const pjrt::Buffer* state, bool default_generator);
  std::unique_ptr<Capture> end_capture();
  void abort_capture();
  bool capturing() const { return capture_.active; }

 private:
  // A slot's buffer bound as a parameter; one per buffer (dedup).
  struct SlotParam {
    pjrt::Buffer* buffer;
    ir::Value value;
    size_t arg;  // position in args_ and in graph_.parameters()
  };
  ir::Value param(const std::shared_ptr<pjrt::Buffer>& buffer, const ir::TensorType& type,
                  bool dedup);
  void reset();
  struct Donated {
    int64_t buffers = 0;
    int64_t bytes = 0;
  };
  // Marks in `graph` (outputs set: one per slot of `live`) each donatable
  // slot buffer.
  static Donated donate(ir::Graph& graph, const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                        const std::vector<SlotParam>& slot_params,
                        const std::vector<Slot*>& live);

  // Ops may come from several threads (user threads, autograd's device
  // threads): every entry point holds this (recursive: a flush may record or
  // forget) through FusionLock, see set_blocking_wait.
  std::recursive_mutex mu_;
  friend class FusionLock;
  int device_;
  ir::Graph graph_;
  std::vector<std::shared_ptr<pjrt::Buffer>> args_;
  std::vector<SlotParam> slot_params_;
  std::vector<Slot*> live_;
  size_t ops_ = 0;
  std::string first_op_;
  std::string start_;               // user's "file:line" of the first op
  std::vector<OpSummary> summary_;  // one per recorded op
  // The live slots of the graphs being flushed (innermost last). The
  // recompile handler runs Python, which may free a storage whose value such
  // a graph computes: forget() clears its entry so the flush skips it.
  std::vector<std::vector<Slot*>*> flushing_;
  CaptureState capture_;
  // Fills capture_.result from the program end_capture's flush just ran.
  void take_capture(const ir::Graph& graph, const std::string& key, const std::string& name,
                    const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                    const std::vector<Slot*>& live);
};

// How a thread waits for a Fusion held by another: the bindings make a thread
// that holds the Python GIL release it while it waits, since the holder may
// need the GIL (the recompile handler runs Python). Without a hook: just waits.
using BlockingWait = std::function<void(const std::function<void()>& wait)>;
void set_blocking_wait(BlockingWait hook);

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
