#include "runtime/fusion.h"

#include "runtime/record_tap.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "runtime/fusion_hybrid.h"
#include "settings/settings.h"

namespace ttpu::runtime {
namespace {

// A pending graph past this many IR nodes is flushed: XLA's compile time per
// node grows with program size. TORCHTPU_FUSION_MAX_NODES overrides it.
//
// The default comes from this curve (bench/bench_fusion_size.py: one fused
// graph per fresh process, XLA:CPU plugin, 2 shared cores; CPU seconds of the
// whole run, best of 2; RSS growth; about 6 IR nodes per op):
//
//   ops (nodes)      elementwise chain        mixed (matmul, reduce, pointwise)
//     250 ( 1.5k)    0.25 s  1.0 ms/op   8 MB   0.24 s  0.95 ms/op 17 MB
//     500 (   3k)    0.54 s  1.1 ms/op  20 MB   0.28 s  0.55 ms/op 21 MB
//    1000 (   6k)    1.41 s  1.4 ms/op  46 MB   0.45 s  0.45 ms/op 32 MB
//    2000 (  12k)    3.56 s  1.8 ms/op 205 MB   1.01 s  0.50 ms/op 62 MB
//    4000 (  24k)    11.5 s  2.9 ms/op 749 MB   2.39 s  0.60 ms/op 134 MB
//
// An elementwise chain (which XLA fuses into one loop) costs a flat ~1 ms per
// op up to ~3k nodes, then time and memory per op grow; mixed graphs stay
// near-linear further. The old default (20000 nodes) sat deep in the growth
// (a 50,000-op chain: over 7 minutes, 2.6 GB). 4000 keeps every piece near the
// flat part, and equal pieces of a repeating chain hit the program cache.
size_t max_nodes() {
  static const size_t n =
      static_cast<size_t>(settings::integer("TORCHTPU_FUSION_MAX_NODES", 4000, 1, 1 << 30));
  return n;
}

bool donation_enabled() {
  static const bool on = settings::flag("TORCHTPU_DONATE", true);
  return on;
}

std::mutex g_mu;
// Whether any Fusion was ever made: until then no slot can be pending or
// being flushed, and a dying storage (every eager op's dropped result in
// strict mode) need not look one up.
std::atomic<bool> g_any_fusion{false};
// Never destroyed, like the Runtime: pending buffers must not be released into
// a plugin that static destruction may already have torn down.
std::map<int, std::unique_ptr<Fusion>>& fusions() {
  static auto* m = new std::map<int, std::unique_ptr<Fusion>>();
  return *m;
}

// The values of `slots` (null entries skipped) will never be computed: each
// read raises `why`.
void fail_slots(const std::vector<Slot*>& slots, const std::string& why) {
  for (Slot* s : slots) {
    if (s == nullptr) continue;
    s->pending = false;
    s->buffer = nullptr;
    s->error = why;
  }
}

// The dispatch cache's request for a copy of the next recorded op
// (record_tap.h); per thread, as ops are recorded on their caller's thread.
thread_local RecordedOp* t_tap = nullptr;
// Set by record_copy for the record call it makes: the op graph stays the
// caller's (a cached op's), so its nodes are copied, not moved.
thread_local bool t_keep_graph = false;

// Donated argument buffers whose program may not have run yet. Destroying
// such a PJRT_Buffer waits inside the plugin until the donation is settled
// (XLA:CPU: until the program that consumes it runs), so a flush that dropped
// them at once waited for its whole program, and the next step's recording
// never overlapped this step's execution (measured on bench_models' MLP:
// the flush took the step's 27-50 ms; its host work is ~3.5 ms). They are
// kept, holding no memory (the outputs own it now), until an output of their
// program is ready, and dropped by a later flush.
// The handles are taken out of their pjrt::Buffer objects (release()), so
// whoever tracks those weakly (the runtime's in-flight list) sees them gone.
struct DonatedArgs {
  std::shared_ptr<std::atomic<bool>> ran;
  std::vector<std::unique_ptr<pjrt::Buffer>> buffers;
};
std::mutex g_donated_mu;
std::vector<DonatedArgs>& donated_args() {
  static auto* v = new std::vector<DonatedArgs>();  // never destroyed (see fusions())
  return *v;
}

// Drops the kept donated buffers whose program has run (outside the lock:
// a destroy may still take a moment inside the plugin).
void drop_settled_donations() {
  std::vector<DonatedArgs> settled;
  {
    std::lock_guard<std::mutex> lock(g_donated_mu);
    auto& all = donated_args();
    if (all.empty()) return;
    auto first = std::stable_partition(all.begin(), all.end(), [](const DonatedArgs& d) {
      return !d.ran->load(std::memory_order_acquire);
    });
    settled.assign(std::make_move_iterator(first), std::make_move_iterator(all.end()));
    all.erase(first, all.end());
  }
}

BlockingWait& blocking_wait() {
  static auto* hook = new BlockingWait();
  return *hook;
}

}  // namespace

void keep_donated_until_run(std::vector<std::unique_ptr<pjrt::Buffer>> buffers,
                            const pjrt::Buffer& output) {
  auto ran = std::make_shared<std::atomic<bool>>(false);
  // (the callback may run on a plugin thread: it only sets the flag)
  output.on_ready([ran](bool) { ran->store(true, std::memory_order_release); });
  std::lock_guard<std::mutex> lock(g_donated_mu);
  donated_args().push_back({std::move(ran), std::move(buffers)});
}

void set_blocking_wait(BlockingWait hook) { blocking_wait() = std::move(hook); }

RecordTap::RecordTap(RecordedOp* op) : previous_(t_tap) { t_tap = op; }
RecordTap::~RecordTap() { t_tap = previous_; }

void record_copy(Fusion& fusion, const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                 const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
                 const std::string& op, std::vector<ir::TensorType> result_types) {
  t_keep_graph = true;  // record's first statement takes it back
  // record only reads op_graph while the flag is set (it appends a copy).
  fusion.record(const_cast<ir::Graph&>(op_graph), args, values, out_slots, op,
                std::move(result_types));
}

// Set by record_deferred for the record call it makes.
thread_local bool t_deferred = false;

void record_deferred(Fusion& fusion, ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                     const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
                     const std::string& op, std::vector<ir::TensorType> result_types) {
  t_deferred = true;  // record's first statements take it back
  ++Runtime::get().metrics().deferred_ops;
  fusion.record(op_graph, args, values, out_slots, op, std::move(result_types));
}

// Holds a Fusion's mutex; waits through the blocking-wait hook when another
// thread has it.
class FusionLock {
 public:
  explicit FusionLock(Fusion& f) : mu_(f.mu_) {
    if (mu_.try_lock()) return;
    if (const BlockingWait& wait = blocking_wait()) {
      wait([this] { mu_.lock(); });
    } else {
      mu_.lock();
    }
  }
  ~FusionLock() { mu_.unlock(); }
  FusionLock(const FusionLock&) = delete;
  FusionLock& operator=(const FusionLock&) = delete;

 private:
  std::recursive_mutex& mu_;
};

ir::Value Fusion::param(const std::shared_ptr<pjrt::Buffer>& buffer, const ir::TensorType& type,
                        bool dedup) {
  if (dedup) {
    for (const SlotParam& p : slot_params_) {
      if (p.buffer == buffer.get()) return p.value;
    }
  }
  args_.push_back(buffer);
  ir::Value v = graph_.parameter(type);
  if (dedup) slot_params_.push_back({buffer.get(), v, args_.size() - 1});
  return v;
}

void Fusion::record(ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                    const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
                    const std::string& op, std::vector<ir::TensorType> result_types) {
  const bool keep_graph = std::exchange(t_keep_graph, false);
  const bool deferred = std::exchange(t_deferred, false);
  if (RecordedOp* tap = t_tap) {
    // Copied before the graph's nodes move into the pending graph.
    t_tap = nullptr;
    tap->taken = true;
    tap->graph = op_graph;
    tap->args = args;
    tap->values = values;
    tap->out_slots = out_slots;
    tap->result_types = result_types;
  }
  FusionLock lock(*this);
  if (ops_ > 0 && deferred != deferred_) flush();  // (see record_deferred)
  // An input bound pending whose graph another thread's flush has since
  // failed or dropped (its slot now has no buffer): refused before anything
  // is recorded, as the lowering refuses a failed input.
  for (const RecordedArg& a : args) {
    if (a.slot != nullptr && !a.slot->pending && a.slot->buffer == nullptr) {
      throw pjrt::PjrtError("fused execution",
                            op + ": an input was never computed: " +
                                (a.slot->error.empty() ? std::string("lost") : a.slot->error),
                            -1);
    }
  }
  // The user's line is looked up before anything else, so a flush the op
  // triggers cannot start the next graph without it.
  if (ops_ == 0 && deferred) {
    deferred_ = true;  // strict ops: no source line, always op by op
    per_op_ = true;
  } else if (ops_ == 0 && t_fused_region > 0) {
    region_ = true;  // one user op: no source line, never op by op
  } else if (ops_ == 0) {
    start_ = locate_source();
    // A torch.compile graph (capture) is always one program.
    per_op_ = !capture_.active && recompile_guard().stops_fusing(start_);
    hybrid_ = !per_op_ && !capture_.active && fused_hybrid() && !line_warm(start_);
    per_op_ = per_op_ || hybrid_;
  }
  // Per thread, reused: one allocation per recorded op fewer. Taken out while
  // in use (a flush below may run Python that records again).
  thread_local std::vector<ir::Value> t_bound;
  std::vector<ir::Value> bound = std::move(t_bound);
  bound.clear();
  for (size_t k = 0; k < args.size(); ++k) {
    const ir::TensorType& type = op_graph.type(ir::Value{op_graph.parameters()[k], 0});
    const RecordedArg& a = args[k];
    if (a.slot != nullptr && a.slot->pending) {
      bound.push_back(a.slot->pending_value);
    } else if (a.slot != nullptr) {
      bound.push_back(param(a.slot->buffer, type, /*dedup=*/true));
    } else {
      bound.push_back(param(a.buffer, type, /*dedup=*/false));
    }
  }
  // A storm's graph keeps the op's own program too (keep_op reads op_graph).
  std::vector<ir::Value> mapped = per_op_ || keep_graph
                                      ? graph_.append(op_graph, bound, values)
                                      : graph_.append(std::move(op_graph), bound, values);
  if (per_op_) keep_op(op_graph, args, bound, values, mapped, op);
  t_bound = std::move(bound);
  for (size_t i = 0; i < out_slots.size(); ++i) {
    Slot* s = out_slots[i];
    if (!s->pending) live_.push_back(s);
    s->pending = true;
    s->pending_value = mapped[i];
    s->error.clear();
    s->producer = op;
  }
  summary_.push_back({op, std::move(result_types)});
  if (ops_++ == 0) first_op_ = op;
  if (graph_.nodes().size() > max_nodes()) flush();
}

void Fusion::reset() {
  graph_ = ir::Graph();
  args_.clear();
  slot_params_.clear();
  live_.clear();
  ops_ = 0;
  first_op_.clear();
  start_.clear();
  region_ = false;
  per_op_ = false;
  hybrid_ = false;
  deferred_ = false;
  per_op_ops_.clear();
  producers_.clear();
  summary_.clear();
}

Fusion::Donated Fusion::donate(ir::Graph& graph,
                               const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                               const std::vector<SlotParam>& slot_params,
                               const std::vector<Slot*>& live) const {
  Donated d;
  if (!donation_enabled()) return d;
  const pjrt::Buffer* kept_as_last = Runtime::get().last_output(device_);
  for (size_t i = 0; i < live.size(); ++i) {
    const std::shared_ptr<pjrt::Buffer>& old = live[i]->buffer;
    if (old == nullptr) continue;
    // Two owners: the slot (about to get the output instead) and `args`,
    // plus the runtime's hold on its device's last program output (which
    // this program, enqueued after it, replaces). Anything more (another
    // storage sharing it through copy_data or a resize, a lowering context
    // still binding it, the scalar cache) means the buffer is still needed
    // after this program.
    if (old.use_count() != (old.get() == kept_as_last ? 3 : 2)) continue;
    auto p = std::find_if(slot_params.begin(), slot_params.end(),
                          [&](const SlotParam& sp) { return sp.buffer == old.get(); });
    if (p == slot_params.end() || args[p->arg] != old) continue;
    if (!(graph.type(p->value) == graph.type(graph.outputs()[i]))) continue;
    graph.donate(p->arg, i);
    ++d.buffers;
    d.bytes += live[i]->nbytes;
  }
  return d;
}

void Fusion::flush() {
  FusionLock lock(*this);
  if (capture_.active && !capture_.ending) capture_.broken = true;
  // (a deferred strict graph runs every op, results used or not, as strict
  // mode runs every op it is given)
  if (live_.empty() && !(deferred_ && per_op_ && per_op_ops_.size() == ops_)) {
    reset();
    return;
  }
  if (!deferred_) ++Runtime::get().metrics().fused_flushes;
  drop_settled_donations();
  Taken t = take_pending();
  // Listed while this frame runs, so that forget() can reach `t.live`.
  struct Flushing {
    std::vector<std::vector<Slot*>*>& stack;
    ~Flushing() { stack.pop_back(); }
  } flushing{flushing_};
  flushing_.push_back(&t.live);
  // A captured program runs again on other buffers: nothing may be consumed,
  // except a written input's buffer where the capture allows writes (the
  // replays donate it again; capture.h).
  const bool no_donation = t.deferred || (capture_.active && !capture_.writes);
  const Donated donated = no_donation ? Donated{} : donate(t.graph, t.args, t.slot_params, t.live);
  if (t.deferred && t.can_run_per_op) {
    // (its slots take their values or errors op by op)
    const std::string error = run_deferred(t.per_op, t.producers, t.outs, t.live, t.name);
    if (!error.empty()) throw pjrt::PjrtError("fused execution", t.name + ": " + error, -1);
    return;
  }
  // (a deferred strict graph that could not keep its ops compiles whole)
  const std::string key = t.graph.fingerprint();
  if (choose_per_op(t, key)) {
    run_ops_one_by_one(t);
  } else {
    run_fused(t, key, donated);
  }
}

Fusion::Taken Fusion::take_pending() {
  Taken t;
  t.outs.reserve(live_.size());
  for (Slot* s : live_) t.outs.push_back(s->pending_value);
  graph_.set_outputs(t.outs);
  t.name = (deferred_ ? "strict ops waiting for their compiles (" : "fused graph of ") +
           std::to_string(ops_) + " ops (first: " + first_op_ + ")" + (deferred_ ? ")" : "");
  t.graph = std::move(graph_);
  t.args = std::move(args_);
  t.slot_params = std::move(slot_params_);
  t.live = std::move(live_);
  t.start = std::move(start_);
  t.summary = GraphSummary{std::move(summary_), {}, {}};
  t.per_op = std::move(per_op_ops_);
  t.producers = std::move(producers_);
  t.can_run_per_op = per_op_ && t.per_op.size() == ops_;
  t.hybrid = hybrid_;
  t.region = region_;
  t.deferred = deferred_;
  reset();
  return t;
}

void Fusion::show_new_graph(Taken& t) {
  if (t.shown || t.region || t.deferred) return;
  t.shown = true;
  for (int32_t p : t.graph.parameters()) t.summary.parameters.push_back(t.graph.type({p, 0}));
  t.summary.donations = t.graph.donations();
  try {
    recompile_guard().on_new_graph(t.start, std::move(t.summary), !capture_.active);
  } catch (const std::exception& e) {
    // The handler refused the graph (TORCHTPU_RECOMPILE=error): its own
    // exception goes on unchanged, so Python sees a RecompileError.
    fail_slots(t.live, t.name + " was not compiled: " + e.what());
    throw;
  }
}

bool Fusion::choose_per_op(Taken& t, const std::string& key) {
  Runtime& rt = Runtime::get();
  // Hybrid (fusion.h): a new program compiles in the background, and the ops
  // run one by one until it is ready.
  bool per_op_now = false;
  if (t.deferred) {
    // (strict: no storms, no hybrid)
  } else if (t.can_run_per_op && t.hybrid) {
    const Background state = background_state(key);
    if (state == Background::kCompiling) {
      per_op_now = true;
    } else if (state == Background::kNone && !rt.has_program(key)) {
      bool at_hand = false;
      try {
        at_hand = per_op_at_hand(t.per_op);
      } catch (const std::exception&) {
        // (emitting an op's text failed: the graph compiles in the open
        // below, where a failure marks its slots and reaches the user)
      }
      if (at_hand && background_busy()) {
        per_op_now = true;  // its compile starts at a later flush
      } else if (at_hand) {
        show_new_graph(t);
        per_op_now = compile_in_background(t.graph, key, t.name);
      }
    }
  } else if (t.can_run_per_op) {
    per_op_now = !rt.has_program(key);  // a storm: not compiled (see fusion.h)
  }
  if (fused_hybrid() && !t.region && !t.deferred) {
    set_line_warm(t.start, !per_op_now && rt.has_program(key));
  }
  return per_op_now;
}

void Fusion::run_ops_one_by_one(Taken& t) {
  try {
    run_per_op(t.start, t.per_op, t.producers, t.outs, t.live, /*segments=*/!t.hybrid);
    Runtime::get().metrics().fused_strict_ops += static_cast<int64_t>(t.per_op.size());
  } catch (const std::runtime_error& e) {
    std::string message = t.name + " (run op by op) failed: " + e.what();
    fail_slots(t.live, message);
    throw pjrt::PjrtError("fused execution", message, -1);
  } catch (...) {
    fail_slots(t.live, t.name + " was interrupted before it ran; its values are lost");
    throw;  // KeyboardInterrupt from an interruptible wait goes on unchanged
  }
}

void Fusion::run_fused(Taken& t, const std::string& key, const Donated& donated) {
  Runtime& rt = Runtime::get();
  // (a failed background compile's graph was shown when that compile began)
  if (!rt.has_program(key) && background_state(key) != Background::kFailed) show_new_graph(t);
  std::vector<pjrt::Buffer*> raw;
  raw.reserve(t.args.size());
  for (auto& a : t.args) raw.push_back(a.get());
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  try {
    buffers = rt.run(t.graph, raw, device_, t.name, &key);
  } catch (const std::runtime_error& e) {
    std::string message = t.name + " failed: " + e.what();
    fail_slots(t.live, message);
    throw pjrt::PjrtError("fused execution", message, -1);
  } catch (...) {
    // Ctrl-C during the compile (the bindings' poll throws a Python error, not
    // a runtime_error): the compile goes on into the caches, the values are lost.
    fail_slots(t.live, t.name + " was interrupted before it ran; its values are lost");
    throw;
  }
  // From here on the donated buffers are consumed: the slots drop them for
  // their outputs, and `t.args` holds the last reference; it is kept until the
  // program has run (see keep_donated_until_run).
  for (size_t i = 0; i < t.live.size(); ++i) {
    if (t.live[i] == nullptr) continue;
    t.live[i]->buffer = buffers[i];
    t.live[i]->pending = false;
    t.live[i]->producer = t.name;
  }
  // (before the donated arguments are released: the capture tells them by buffer)
  if (capture_.active && capture_.ending && !capture_.broken) {
    take_capture(t.graph, key, t.name, t.args, t.live);
  }
  if (donated.buffers > 0 && !buffers.empty()) {
    std::vector<std::unique_ptr<pjrt::Buffer>> consumed;
    const auto& to = t.graph.donations();
    for (size_t p = 0; p < to.size() && p < t.args.size(); ++p) {
      // (another owner left, e.g. a read holding it: it dies with that one)
      if (to[p] >= 0 && t.args[p].use_count() == 1) {
        consumed.push_back(t.args[p]->release());
        t.args[p].reset();
      }
    }
    try {
      if (!consumed.empty()) keep_donated_until_run(std::move(consumed), *buffers[0]);
    } catch (const std::exception&) {
      // (no ready callback: `consumed` is destroyed here, which waits for
      // the program; the flush itself succeeded)
    }
  }
  rt.metrics().donations += donated.buffers;
  rt.metrics().donated_bytes += donated.bytes;
}

void Fusion::begin_capture(const std::vector<Slot*>& inputs, bool writes) {
  FusionLock lock(*this);
  capture_ = CaptureState();
  capture_.active = true;
  capture_.writes = writes;
  capture_.broken = ops_ != 0;
  capture_.inputs = inputs;
  for (Slot* s : inputs) {
    if (s->pending || s->buffer == nullptr || !s->error.empty()) capture_.broken = true;
    capture_.input_buffers.push_back(s->buffer.get());
  }
}

void Fusion::note_rng(const pjrt::Buffer* state, bool default_generator) {
  FusionLock lock(*this);
  if (!capture_.active) return;
  if (!default_generator) capture_.broken = true;
  capture_.rng_buffers.push_back(state);
}

std::unique_ptr<Capture> Fusion::end_capture() {
  FusionLock lock(*this);
  if (!capture_.active) return nullptr;
  capture_.ending = true;
  struct Reset {
    CaptureState& state;
    ~Reset() { state = CaptureState(); }
  } reset_on_exit{capture_};
  if (live_.empty()) capture_.broken = true;  // nothing computed: no program to replay
  flush();
  return std::move(capture_.result);
}

void Fusion::take_capture(const ir::Graph& graph, const std::string& key, const std::string& name,
                          const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                          const std::vector<Slot*>& live) {
  auto find = [](const auto& list, const pjrt::Buffer* b) {
    return static_cast<size_t>(std::find(list.begin(), list.end(), b) - list.begin());
  };
  auto cap = std::make_unique<Capture>();
  for (size_t k = 0; k < live.size(); ++k) {
    // A written input: its new value reaches the caller's tensor at each replay.
    auto in = std::find(capture_.inputs.begin(), capture_.inputs.end(), live[k]);
    if (in == capture_.inputs.end()) continue;
    if (!capture_.writes) return;
    cap->written.emplace_back(static_cast<size_t>(in - capture_.inputs.begin()), k);
  }
  cap->executable = Runtime::get().compile(graph, name, &key);
  cap->graph = std::make_shared<const ir::Graph>(graph);
  cap->name = name;
  cap->device = device_;
  cap->rng_draws = capture_.rng_buffers.size();
  cap->outputs = live;
  for (ir::Value v : graph.outputs()) cap->output_dtypes.push_back(graph.type(v).dtype);
  const std::vector<int32_t>& donations = graph.donations();
  for (size_t p = 0; p < args.size(); ++p) {
    const auto& a = args[p];
    const int32_t donated_to = p < donations.size() ? donations[p] : -1;
    if (size_t i = find(capture_.input_buffers, a.get()); i < capture_.input_buffers.size()) {
      cap->args.push_back({Capture::Source::kInput, i, nullptr, donated_to});
    } else if (donated_to >= 0) {
      return;  // a written tensor that is not an input: a replay could not update it
    } else if (size_t d = find(capture_.rng_buffers, a.get()); d < capture_.rng_buffers.size()) {
      cap->args.push_back({Capture::Source::kRng, d, nullptr});
    } else {
      cap->args.push_back({Capture::Source::kConstant, 0, a});
    }
  }
  capture_.result = std::move(cap);
}

void Fusion::abort_capture() {
  FusionLock lock(*this);
  capture_ = CaptureState();
}

void Fusion::forget(Slot* slot) {
  FusionLock lock(*this);
  if (!slot->pending && flushing_.empty()) return;
  auto it = std::find(live_.rbegin(), live_.rend(), slot);
  if (it != live_.rend()) live_.erase(std::next(it).base());
  for (std::vector<Slot*>* live : flushing_)
    std::replace(live->begin(), live->end(), slot, static_cast<Slot*>(nullptr));
  slot->pending = false;
}

Fusion& fusion(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& f = fusions()[device];
  if (!f) {
    f = std::make_unique<Fusion>(device);
    g_any_fusion.store(true);
  }
  return *f;
}

FusedRegion::~FusedRegion() {
  if (!open_) return;
  try {
    close();
  } catch (...) {
    // (an exception is already on its way out; the failed values raise at
    // their next read)
  }
}

void FusedRegion::close() {
  if (!std::exchange(open_, false)) return;
  if (--t_fused_region == 0) flush_all();
}

namespace {

// Every device's Fusion, listed under g_mu and used without it (a flush may
// create another device's).
std::vector<Fusion*> all_fusions() {
  std::vector<Fusion*> all;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [d, f] : fusions()) all.push_back(f.get());
  return all;
}

}  // namespace

void flush_all() {
  for (Fusion* f : all_fusions()) f->flush();
}

void Fusion::discard_if_deferred(const std::string& why) {
  FusionLock lock(*this);
  if (!deferred_) return;
  fail_slots(live_, why);
  reset();
}

void discard_deferred(const std::string& why) {
  for (Fusion* f : all_fusions()) f->discard_if_deferred(why);
}

namespace {
std::atomic<uint64_t> g_read_flushes{0};  // see read_flushes()
}  // namespace

uint64_t read_flushes() { return g_read_flushes.load(std::memory_order_relaxed); }

void materialize(Slot& slot) {
  if (slot.pending) {
    fusion(slot.device).flush();
    g_read_flushes.fetch_add(1, std::memory_order_relaxed);
  }
  if (slot.pending) {
    // Its graph is being flushed further up this stack: Python code run by
    // the recompile handler (a warning hook) read it before it exists.
    throw pjrt::PjrtError("fused execution",
                          "a value was read while the graph computing it was being compiled "
                          "(from code run by the recompile warning?)",
                          -1);
  }
  if (!slot.error.empty()) throw pjrt::PjrtError("fused execution", slot.error, -1);
}

void forget_pending(Slot& slot) {
  // Under the Fusion's lock even when not pending: another thread's flush may
  // be about to give this slot its buffer.
  if (!g_any_fusion.load()) return;
  fusion(slot.device).forget(&slot);
}

}  // namespace ttpu::runtime
