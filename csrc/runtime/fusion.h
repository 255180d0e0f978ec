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
// Recompile storms: when the recompile guard has marked a Python line as one
// that stops fusing (fusion_guard.h: its graphs kept changing shape), a graph
// that starts at that line keeps, next to the fused graph, each op's own
// program and where its inputs come from. At the flush, a fused program
// already compiled (an earlier shape) still runs as one program; a new one is
// not compiled: the ops run as strict mode's per-op programs, except that
// runs of ops unchanged since the line's previous such graph go as one cached
// segment program (fusion_per_op.cc). So a growing dimension recompiles only
// the few small programs of the ops it reaches. Same boundaries, same results.
//
// Hybrid (opt-in, fusion_hybrid.h): a graph whose program is not compiled
// yet need not wait for XLA. It keeps each op's program as a storm's graph
// does; at the flush, if every op's program is at hand (in memory or in the
// persistent cache: strict mode ran them before), its fused program starts
// compiling on a thread of its own and the ops run one by one meanwhile
// (strict mode's programs, no segments). Otherwise it compiles as usual:
// measured, compiling a step's ~150 small programs costs more than its one
// fused program (bench/bench_fused.py's GPT step, cold: 16.3 s vs 5.9 s). A
// later graph with the same structure runs fused once that compile is done,
// and op by op while it is not. A start line whose graph was found compiled
// stops keeping per-op programs (recording costs less) until a graph from it
// is new again. Results: the per-op programs are strict mode's.
//
// Deferred strict graphs (record_deferred, compile_pool.h): strict mode's ops
// waiting for programs that compile in the background. Kept op by op like a
// hybrid graph, never compiled whole, and at the flush every op runs as its
// own program (no segments, no donation), results used or not, through
// run_deferred: values settle op by op, so a failure or Ctrl-C loses only
// what it reaches.
//
// Buffer donation: at a flush, a live slot whose previous buffer the graph read
// and that nothing else holds (no other storage shares it, see Slot) donates
// that buffer to the program, aliased to the slot's own output, so an in-place
// update (optimizer step, copy_) does not hold two copies of the tensor. The
// donated buffer is consumed by XLA: the flush drops every reference to it and
// the slot gets the output buffer. TORCHTPU_DONATE=0 turns donation off.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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
  // recompile guard. Flushes past the size cap. `op_graph`'s nodes are moved
  // into the pending graph (it is left fit only to be destroyed).
  void record(ir::Graph& op_graph, const std::vector<RecordedArg>& args,
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
  // `writes`: the graph may write its inputs (capture.h).
  void begin_capture(const std::vector<Slot*>& inputs, bool writes = false);
  // Called by every random op: the buffer holding its {seed, offset} state.
  // A draw from a generator other than the device's default refuses capture.
  void note_rng(const pjrt::Buffer* state, bool default_generator);
  std::unique_ptr<Capture> end_capture();
  void abort_capture();
  bool capturing() const { return capture_.active; }
  // (see discard_deferred below)
  void discard_if_deferred(const std::string& why);

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
  // Discounts the runtime's hold on the device's last program output.
  Donated donate(ir::Graph& graph, const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                 const std::vector<SlotParam>& slot_params, const std::vector<Slot*>& live) const;

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
  std::string start_;  // user's "file:line" of the first op
  // Storms (see the top): the recorded ops of a graph whose start line
  // stopped fusing, to run one by one instead of compiling the fused graph.
  // A buffer input is a raw pointer: args_ (then the flush's `args`) owns
  // every buffer the graph binds, and an extra owner would stop donation.
  struct OpInput {
    pjrt::Buffer* buffer;       // a buffer, or else (null):
    size_t op = 0, result = 0;  // a result of an earlier op
  };
  struct OpProgram {
    ir::Graph graph;  // outputs set: as strict mode runs it
    std::vector<OpInput> inputs;
    std::string op;
  };
  struct Producer {
    size_t op, result;
  };
  bool region_ = false;    // recorded inside a FusedRegion (fusion.h's end)
  bool per_op_ = false;    // start_ stopped fusing: ops_ are kept in per_op_ops_
  bool hybrid_ = false;    // per_op_ because of hybrid mode, not a storm
  bool deferred_ = false;  // strict ops waiting for their compiles (record_deferred)
  std::vector<OpProgram> per_op_ops_;
  std::map<std::pair<int32_t, int32_t>, Producer> producers_;  // graph_ value -> op result
  // Per start line: the signature of each op of the last graph run op by op
  // (fusion_per_op.cc: an op unchanged since then joins a cached segment).
  std::map<std::string, std::vector<size_t>> last_per_op_;
  // (fusion_per_op.cc) Keeps the op just appended to graph_ in per_op_ops_.
  void keep_op(const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
               const std::vector<ir::Value>& bound, const std::vector<ir::Value>& values,
               const std::vector<ir::Value>& mapped, const std::string& op);
  // Runs `ops` (a graph from `start`) without compiling the graph and gives
  // each of `live` (whose values are `outputs` of the fused graph) its
  // buffer. `segments`: ops unchanged since the line's previous such graph
  // run as one cached program (storms); hybrid graphs run strictly op by op.
  // Throws pjrt::PjrtError (or ir::IrError).
  void run_per_op(const std::string& start, const std::vector<OpProgram>& ops,
                  const std::map<std::pair<int32_t, int32_t>, Producer>& producers,
                  const std::vector<ir::Value>& outputs, const std::vector<Slot*>& live,
                  bool segments);
  // A deferred strict graph's flush (record_deferred): each op runs as its
  // own program, in issue order, waiting for its compile. A slot takes its
  // buffer as soon as the op computing its final value has run, and a result
  // no slot keeps is dropped after its last reader, so memory peaks as in
  // strict mode. An op that fails fails only what is computed from it (the
  // slots it or a reader of it would have given a value get the error, an
  // in-place update's slot included: its value cannot be made); the others
  // run on. Returns the first failure ("op: error"), or "" when none.
  // Any other exception (KeyboardInterrupt from a compile wait) marks the
  // slots of the ops not run yet as lost and goes on.
  std::string run_deferred(const std::vector<OpProgram>& ops,
                           const std::map<std::pair<int32_t, int32_t>, Producer>& producers,
                           const std::vector<ir::Value>& outputs, const std::vector<Slot*>& live,
                           const std::string& name);
  // Hybrid mode's test: every op of `ops` has its program loaded or on disk
  // (running op by op then compiles nothing in the open).
  static bool per_op_at_hand(const std::vector<OpProgram>& ops);
  // Runs ops [begin, end) as one program; fills their `results`.
  void run_segment(const std::vector<OpProgram>& ops, size_t begin, size_t end,
                   std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>>& results);
  std::vector<OpSummary> summary_;  // one per recorded op
  // The live slots of the graphs being flushed (innermost last). The
  // recompile handler runs Python, which may free a storage whose value such
  // a graph computes: forget() clears its entry so the flush skips it.
  std::vector<std::vector<Slot*>*> flushing_;
  CaptureState capture_;
  // flush()'s steps. The pending graph, taken out of the recorder (reset()
  // then starts the next one), with what each step reads and updates.
  struct Taken {
    ir::Graph graph;
    std::vector<std::shared_ptr<pjrt::Buffer>> args;
    std::vector<SlotParam> slot_params;
    std::vector<Slot*> live;
    std::vector<ir::Value> outs;  // the pending value of each of `live`
    std::string start, name;
    GraphSummary summary;
    std::vector<OpProgram> per_op;
    std::map<std::pair<int32_t, int32_t>, Producer> producers;
    bool can_run_per_op = false, hybrid = false, region = false, deferred = false;
    bool shown = false;  // shown to the recompile guard (once per flush)
  };
  Taken take_pending();
  // A graph new to this process is shown to the recompile guard first, once;
  // a refusal (TORCHTPU_RECOMPILE=error) fails its slots and goes on.
  void show_new_graph(Taken& t);
  // Whether `t` runs op by op now: a storm (its line stopped fusing and its
  // program is not compiled), or hybrid mode while its program compiles in
  // the background (started here when its ops' programs are at hand).
  bool choose_per_op(Taken& t, const std::string& key);
  void run_ops_one_by_one(Taken& t);
  // Runs `t` as one program (compiling it in the open if it is new), gives
  // the slots their buffers and keeps the donated ones until it has run.
  void run_fused(Taken& t, const std::string& key, const Donated& donated);
  // Fills capture_.result from the program end_capture's flush just ran.
  void take_capture(const ir::Graph& graph, const std::string& key, const std::string& name,
                    const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                    const std::vector<Slot*>& live);
};

// Strict mode's background compiles (compile_pool.h): records a strict op
// whose program is still compiling, or that reads a value such an op
// computes, into `fusion`'s pending graph as a deferred strict graph: never
// compiled as one program and never shown to the recompile guard; at its
// flush each op runs as its own program, the one strict mode compiles (the
// flush waits for the compiles it needs). A pending graph of another kind (a
// FusedRegion's) is flushed first: the two never mix. Arguments as record's.
void record_deferred(Fusion& fusion, ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                     const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
                     const std::string& op, std::vector<ir::TensorType> result_types);

// Every device's deferred strict graph is dropped unrun: its slots get `why`
// as their error (the exit hook, after an error or Ctrl-C ended the script).
void discard_deferred(const std::string& why);

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
// How many flushes materialize() has made (reads of pending values) in this
// process; never reset. The optimizer-step hook tells a read that already
// ended a step's graph from a cut at the node limit by it.
uint64_t read_flushes();
// Called when a storage dies: drops its pending value.
void forget_pending(Slot& slot);

// Strict mode's one-program regions: while one is open on a strict-mode
// thread, the ops that thread issues are recorded as fused mode records them
// (Runtime::mode() says kFused there), and closing the outermost region
// flushes them as one program. A multi-tensor op (`_foreach_*`, aten layer)
// runs this way: one program per call, as CUDA runs one kernel launch for it,
// instead of one program per tensor. A region's graph is not shown to the
// recompile guard and never runs op by op (storms, hybrid): it is one op of
// the user's. Nothing changes in debug and fused modes. Nests.
class FusedRegion {
 public:
  FusedRegion() { ++t_fused_region; }
  // Leaving by an exception flushes what was recorded (as strict mode would
  // have run it) and drops that flush's own error: the first one goes on.
  ~FusedRegion();
  // Leaves the region; the outermost flushes, throwing pjrt::PjrtError if its
  // program fails (the values then raise at their next read).
  void close();
  FusedRegion(const FusedRegion&) = delete;
  FusedRegion& operator=(const FusedRegion&) = delete;

 private:
  bool open_ = true;
};

}  // namespace ttpu::runtime
