// The runtime: one PJRT client per process, the compiled-program cache, the eager
// modes and the metrics. No torch include: the aten layer calls in with IR graphs
// and PJRT buffers.
//
// Lifetimes: the Runtime is a process singleton created on first use and never
// destroyed (PJRT plugins must not be unloaded; destroying the client at exit
// races the plugin's own static destructors). Buffers are shared_ptr owned by the
// storage Slots that hold them and by in-flight bookkeeping.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/key.h"
#include "cache/store.h"
#include "ir/graph.h"
#include "pjrt/pjrt.h"
#include "stablehlo/emit.h"

namespace ttpu::runtime {

enum class EagerMode { kStrict, kDebug, kFused };

// How many FusedRegions (fusion.h) this thread is inside.
extern thread_local int t_fused_region;

// Reductions of all_reduce_local (c10d's ReduceOp names; kAvg on floating and
// complex types only).
enum class ReduceOp { kSum, kProduct, kMin, kMax, kAvg };

// Counters read by torchtpu.metrics. Times in nanoseconds, sizes in bytes.
struct Metrics {
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_ns{0};
  std::atomic<int64_t> executes{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cache_misses{0};
  // Persistent (on-disk) cache, consulted on an in-memory miss: a hit loads a
  // serialized executable instead of compiling; `persistent_rejected` counts
  // entries found but not used (corrupt, foreign, refused by the plugin), which
  // are also misses; `persistent_load_ns` is time spent reading + deserializing hits.
  std::atomic<int64_t> persistent_hits{0};
  std::atomic<int64_t> persistent_misses{0};
  std::atomic<int64_t> persistent_rejected{0};
  std::atomic<int64_t> persistent_load_ns{0};
  std::atomic<int64_t> bytes_to_device{0};
  std::atomic<int64_t> bytes_to_host{0};
  // Fused mode: argument buffers donated to their program (memory reused for
  // an output instead of held next to it), and their bytes.
  std::atomic<int64_t> donations{0};
  std::atomic<int64_t> donated_bytes{0};
  // Fused mode: pending graphs run (each is one program; more than one per
  // step means something cut the step: a read, a fallback, the size cap).
  std::atomic<int64_t> fused_flushes{0};
  // Fused mode: ops run as strict programs because the Python line that
  // started their region stopped fusing (a recompile storm, fusion.h).
  std::atomic<int64_t> fused_strict_ops{0};
  // Calls replayed by the aten layer's dispatch cache without lowering the op:
  // strict mode runs the cached program again (also counted in cache_hits),
  // fused mode appends the cached op graph again.
  std::atomic<int64_t> dispatch_cache_hits{0};
  // Strict mode's background compiles (compile_pool.h): ops recorded while
  // their programs (or their inputs') compiled, and the most compiles the
  // pool ran at once.
  std::atomic<int64_t> deferred_ops{0};
  std::atomic<int64_t> background_compiles_peak{0};
  void reset();
};

// The device contents of one tensor storage: a flat 1-D PJRT buffer of
// `numel()` elements of `dtype`. A view reads and writes it through index
// arithmetic in the programs it takes part in; replacing `buffer` is how every
// alias of the storage sees a write. A null buffer means "never written" and
// reads as zeros (the contents of torch.empty are unspecified). Slots may share
// one buffer (a storage copy by the allocator); fused mode donates a buffer to
// XLA only when its slot is the sole owner (fusion.h).
struct Slot {
  std::shared_ptr<pjrt::Buffer> buffer;
  ir::DType dtype = ir::DType::kU8;  // element type of `buffer`
  int64_t nbytes = 0;
  int device = 0;
  std::string producer;  // ATen op that produced `buffer`: named in async errors
  // Fused mode: the value is a node of the device's pending graph, not yet
  // computed (`buffer` is stale until the graph is flushed). See fusion.h.
  bool pending = false;
  ir::Value pending_value;
  // Set when the program that should have produced this value failed; every
  // later read raises it instead of returning garbage.
  std::string error;
  int64_t numel() const { return nbytes / ir::byte_size(dtype); }
};

pjrt::ElementType element_type(ir::DType t);

// The XLA settings for a strict per-op program: kQuick when every tensor it
// makes has at most 2^16 elements. Measured (bench/bench_compile_time.py
// --per-op): the quick settings cut compile CPU time about 30% (median and
// p90), but some ops then run slower on large tensors (softmax on 1024x1024:
// +45%). Below this size every op runs in microseconds either way, and
// dispatch dominates; above it the program is built for speed, as it may run
// every step of a long loop. kQuickCpu (which Runtime::effective takes back
// to kQuick on another plugin) unless a value is float8: XLA:CPU's loop
// emitters round some floats to float8 and back otherwise than PyTorch and its
// fusion emitters do (tests/device/test_float8.py, measured).
pjrt::Optimization per_op_optimization(const ir::Graph& graph);

class Runtime {
 public:
  // The process runtime, initialised on first use with the plugin path set by
  // set_default_plugin() or the TORCHTPU_PLUGIN variable. Throws
  // pjrt::PluginError if the plugin cannot be loaded.
  // In a child forked after the runtime started, throws std::runtime_error
  // (pjrt::fork_message()) instead.
  static Runtime& get();
  // The device count without the fork check (a forked child may still ask);
  // 0 when the runtime was never started.
  static int device_count_if_started();
  static bool initialized();
  // Initialise explicitly (torchtpu.init). Throws std::runtime_error if already
  // initialised with a different plugin or device count.
  static Runtime& init(const std::string& plugin_path, int cpu_device_count);
  static void set_default_plugin(const std::string& path);
  static std::string resolve_plugin_path();

  pjrt::Client& client() { return *client_; }
  const std::string& plugin_path() const { return plugin_path_; }
  int device_count() const { return client_->device_count(); }
  // The mode ops run in on this thread: the chosen one, except fused inside
  // a strict thread's FusedRegion (fusion.h).
  EagerMode mode() const {
    return t_fused_region > 0 && mode_ == EagerMode::kStrict ? EagerMode::kFused : mode_;
  }
  // The mode set_mode() chose, regions aside.
  EagerMode chosen_mode() const { return mode_; }
  void set_mode(EagerMode m) { mode_ = m; }
  Metrics& metrics() { return metrics_; }

  // Compiles `graph` (cached in memory by fingerprint, on disk by cache::Key) and enqueues it on `device` with
  // `args` bound to graph.parameters() in order. In debug mode waits for the
  // outputs, so an execution error is raised here. `op` names the ATen op for
  // error messages. `fingerprint`, when given, is graph.fingerprint() already
  // computed (a fused graph's can be large). Throws pjrt::PjrtError.
  std::vector<std::shared_ptr<pjrt::Buffer>> run(
      const ir::Graph& graph, const std::vector<pjrt::Buffer*>& args, int device,
      const std::string& op, const std::string* fingerprint = nullptr,
      pjrt::Optimization level = pjrt::Optimization::kFull);
  // Enqueues a compiled program (as run() does after compiling); `op` names it
  // in an asynchronous failure that synchronize() reports.
  std::vector<std::shared_ptr<pjrt::Buffer>> execute(pjrt::Executable& exe,
                                                     const std::vector<pjrt::Buffer*>& args,
                                                     int device, const std::string& op = "");
  // Returns the program for `graph`, compiling it on a miss (compile.cc).
  // Where the bindings installed a wait poll, the compile runs on its own
  // thread and the wait polls: an exception from the poll (KeyboardInterrupt)
  // leaves here at once while the compile finishes and is cached. Callers
  // asking for a program that is still compiling wait for that compile.
  // `level`: kQuick for strict mode's per-op programs (pjrt/compile_options.h;
  // TORCHTPU_QUICK_COMPILE=0 turns it off). Programs are cached in memory by
  // fingerprint alone: a one-op fused graph may reuse a per-op program.
  std::shared_ptr<pjrt::Executable> compile(const ir::Graph& graph, const std::string& op,
                                            const std::string* fingerprint = nullptr,
                                            pjrt::Optimization level = pjrt::Optimization::kFull);
  // Whether `graph`'s program (compiled at `level`) can run without an XLA
  // compile: loaded in memory, or an entry in the persistent cache (only its
  // presence is checked; a damaged entry compiles later as usual). Emits the
  // StableHLO text to find the disk key when not in memory.
  bool program_at_hand(const ir::Graph& graph, pjrt::Optimization level);
  // The level a request for `level` compiles at: kFull with
  // TORCHTPU_QUICK_COMPILE=0, kQuick for kQuickCpu on another plugin.
  pjrt::Optimization effective(pjrt::Optimization level) const;
  // Whether the program with this fingerprint is loaded in memory now (a
  // request for it compiles nothing and waits for nothing).
  bool program_loaded(const std::string& fingerprint) const {
    std::lock_guard<std::mutex> lock(mu_);
    return programs_.count(fingerprint) != 0;
  }
  // Starts compiling `graph` (fingerprint `fingerprint`) at `level` on the
  // background pool (compile_pool.h) and returns at once; nothing when it is
  // loaded or compiling already. A later compile() of it waits for this one
  // (interruptibly), and gets its error if it failed. Counted as a cache miss
  // now, and in compiles_running() until it is done.
  void compile_ahead(const ir::Graph& graph, const std::string& op, const std::string& fingerprint,
                     pjrt::Optimization level);
  // Whether a program with this fingerprint was compiled (or loaded) in this
  // process, evicted since or not: the recompile guard's "new graph".
  // A program still compiling (one a Ctrl-C left running) counts as compiled.
  bool has_program(const std::string& fingerprint) const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.count(std::hash<std::string>{}(fingerprint)) != 0 ||
           compiling_.count(fingerprint) != 0;
  }
  // Compiles running on their own threads (one a Ctrl-C left running, or one
  // being waited for). The process must not exit while any runs: XLA's static
  // destructors would pull its state from under it (exit 134 or 139, measured),
  // so torchtpu's exit hook waits for this to reach 0.
  int compiles_running() const { return compiles_running_.load(); }
  // Compiles StableHLO text (uncached); a rejection is a PjrtError naming `op`.
  std::shared_ptr<pjrt::Executable> compile_text(
      const std::string& text, const std::string& op,
      pjrt::Optimization level = pjrt::Optimization::kFull);

  // Host -> device copy of dense row-major data.
  std::shared_ptr<pjrt::Buffer> upload(const void* data, ir::DType dtype,
                                       const std::vector<int64_t>& dims, int device);
  // upload() that may let the buffer use `data` itself instead of a copy
  // (pjrt::Client::buffer_adopting_host): `release` runs once the plugin no
  // longer needs `data`; `data` must not be written or freed until then.
  std::shared_ptr<pjrt::Buffer> upload_adopting(void* data, ir::DType dtype,
                                                const std::vector<int64_t>& dims, int device,
                                                std::function<void()> release);
  // upload() that may still be reading `data` when it returns
  // (pjrt::Client::buffer_from_host_async): `release` runs once it has.
  std::shared_ptr<pjrt::Buffer> upload_async(const void* data, ir::DType dtype,
                                             const std::vector<int64_t>& dims, int device,
                                             std::function<void()> release);
  // Device -> host copy of a whole buffer; waits. Throws pjrt::PjrtError.
  void download(const pjrt::Buffer& buffer, void* dst, int64_t nbytes);
  // `buffer` (holding `nbytes` of `dtype`, 1-D) copied to `device`: the
  // plugin's device-to-device copy where it has one (asynchronous), else
  // staged through host memory. Throws pjrt::PjrtError.
  std::shared_ptr<pjrt::Buffer> copy_to_device(const pjrt::Buffer& buffer, ir::DType dtype,
                                               int64_t nbytes, int device);
  // Whether the last copy_to_device used the plugin's copy (false: host staging).
  bool device_copy_supported() const { return device_copy_ok_; }
  // The buffers enqueued on `device` (program outputs, uploads, copies) that
  // are still alive and not known to be complete: what an event recorded now
  // waits for. `*mark` receives a number to hand to retire() once they are all
  // computed.
  std::vector<std::shared_ptr<pjrt::Buffer>> in_flight(int device, uint64_t* mark);
  // Every buffer in_flight(device, &mark) returned is computed: later calls
  // skip them (an event recorded after another completed waits only for the
  // newer work). Lock-free: called from the plugin's ready callbacks.
  void retire(int device, uint64_t mark);
  // Whether everything in_flight(device, &mark) returned is known computed
  // (by an event's callbacks or a synchronize() that returned).
  bool retired(int device, uint64_t mark) const {
    return retired_[device].load(std::memory_order_acquire) >= mark;
  }
  // A cached 0-d buffer holding `bits` (the value's bit pattern in `dtype`).
  std::shared_ptr<pjrt::Buffer> scalar(ir::DType dtype, uint64_t bits, int device);

  // Collectives (collectives.cc).
  //
  // Whether this runtime's PJRT client can run one XLA program across
  // processes: true only when the plugin built a multi-process topology (its
  // client lists devices of other processes, which a plugin such as the GPU
  // one does when created with num_nodes > 1 and a key-value store). False on
  // the CPU plugin (xla-cpu-pjrt 0.0.1 never does, and refuses such programs:
  // "Multiprocess computations aren't implemented on the CPU backend"), and
  // on any single-process client, which is what the runtime creates today.
  // False means: collectives across processes go through the host.
  bool supports_cross_process_collectives() const;
  // All-reduces buffers that sit on distinct local devices, with one program
  // over those devices (stablehlo.all_reduce, num_replicas = buffers.size()).
  // Returns result d, on the device of buffers[d], enqueued as run() does.
  // All buffers must have one element type and dims. Throws
  // std::invalid_argument for an empty list, a null buffer, two buffers on
  // one device, differing types or dims, bool buffers, kAvg on integers;
  // pjrt::PjrtError from the plugin.
  std::vector<std::shared_ptr<pjrt::Buffer>> all_reduce_local(
      const std::vector<pjrt::Buffer*>& buffers, ReduceOp op);
  // Runs one SPMD program over local devices (docs/spmd.md): `text` is
  // StableHLO over global shapes with Shardy shardings (`sdy.mesh`,
  // `sdy.sharding`), partitioned by XLA into devices.size() partitions;
  // args[d] are the arguments of partition d, on devices[d] (each argument's
  // per-device buffer, of one type and dims on every device). Returns the
  // outputs per partition, [d][output], enqueued as run() does. Programs are
  // cached by text and devices. Throws std::invalid_argument for an empty or
  // repeated device list, a device this runtime lacks, a list count that is
  // not the device count; pjrt::PjrtError for what the plugin (or the PJRT
  // layer's launch checks) rejects. A module whose attributes say
  // `mhlo.num_replicas = N` (N > 1) is instead a per-device program run as N
  // replicas with no partitioner, its collectives over replica ids
  // (torchtpu.spmd.shard_map).
  std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> run_spmd(
      const std::string& text, const std::vector<int>& devices,
      const std::vector<std::vector<pjrt::Buffer*>>& args, const std::string& name);

  // Waits for every enqueued program; throws the first error met, naming its
  // op. The wait is interruptible (pjrt::set_wait_poll): an exception from the
  // poll leaves the programs not yet awaited tracked for the next call.
  // Programs whose outputs were all freed are waited for through the device's
  // last program (see last_output_). On return, everything enqueued before
  // the call is retired(): an event recorded before it queries complete even
  // if the plugin has not yet run the event's ready callbacks.
  void synchronize();
  // The output the runtime keeps of `device`'s last program (null if none):
  // an owner more than its tensors, which fused mode's donation test
  // discounts. Only compared, never dereferenced (it may be gone by then).
  const pjrt::Buffer* last_output(int device) const {
    std::lock_guard<std::mutex> lock(mu_);
    return device < static_cast<int>(last_output_.size()) ? last_output_[device].get() : nullptr;
  }
  size_t cached_programs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return programs_.size();
  }
  // The persistent cache, or null when disabled (TORCHTPU_CACHE=0,
  // TORCHTPU_CACHE_DIR="", or the directory was unusable: warned on stderr).
  const cache::DiskStore* disk_cache() const { return disk_cache_.get(); }

 private:
  Runtime(std::string plugin_path, int cpu_device_count);
  // `program`: `outs` are one program's outputs (executed in enqueue order on
  // `device`), kept as the device's last (last_output_).
  void track(const std::vector<std::shared_ptr<pjrt::Buffer>>& outs, const std::string& op,
             int device, bool program = false);
  // The upload `make` returns, counted (`nbytes`), traced and tracked.
  std::shared_ptr<pjrt::Buffer> uploaded(
      int64_t nbytes, int device, const std::function<std::shared_ptr<pjrt::Buffer>()>& make);
  struct CompileJob;
  std::shared_ptr<pjrt::Executable> await(CompileJob& job);
  // Publishes a job's result: into the program cache (on success) and to its waiters.
  void finish(const std::string& key, CompileJob& job, std::shared_ptr<pjrt::Executable> exe,
              std::exception_ptr error);
  void remember(const std::string& key, const std::shared_ptr<pjrt::Executable>& exe);  // mu_ held
  std::shared_ptr<pjrt::Executable> load_or_compile(const std::string& text, const std::string& op,
                                                    pjrt::Optimization level);
  void open_disk_cache(const pjrt::Plugin& plugin);
  std::shared_ptr<pjrt::Executable> load_from_disk(const cache::Key& key, const std::string& op);
  void store_to_disk(const cache::Key& key, const pjrt::Executable& exe);

  std::string plugin_path_;
  std::shared_ptr<pjrt::Client> client_;
  EagerMode mode_ = EagerMode::kStrict;
  Metrics metrics_;
  std::unique_ptr<cache::KeyBuilder> cache_keys_;  // null iff disk_cache_ is
  std::unique_ptr<cache::DiskStore> disk_cache_;
  bool quick_compile_ = true;  // TORCHTPU_QUICK_COMPILE=0: every program at full optimization
  bool cpu_plugin_ = false;    // the client's platform is "cpu" (kQuickCpu stays)
  bool cache_log_ = false;     // TORCHTPU_CACHE_LOG=1: one stderr line per disk miss
  // Guards the maps and in_flight_ below (ops may come from several threads;
  // never held while compiling or calling out).
  mutable std::mutex mu_;
  // The loaded executables, least recently used last. Each costs the process
  // a few memory mappings (XLA:CPU's JIT code and data), and Linux caps a
  // process at vm.max_map_count (65530) mappings, past which XLA crashes: a
  // long run that compiled many shapes did. So at most max_programs_ stay
  // loaded (TORCHTPU_MAX_PROGRAMS, default 2048); an evicted one is reloaded
  // from the persistent cache, or recompiled, when it is needed again.
  struct Program {
    std::shared_ptr<pjrt::Executable> exe;
    std::list<const std::string*>::iterator lru;
  };
  std::unordered_map<std::string, Program> programs_;
  std::list<const std::string*> lru_;  // keys of programs_, most recent first
  size_t max_programs_ = 2048;
  std::unordered_set<size_t> seen_;  // hashes of every fingerprint compiled
  // Compiles in progress by fingerprint (compile.cc).
  std::unordered_map<std::string, std::shared_ptr<CompileJob>> compiling_;
  std::atomic<int> compiles_running_{0};
  std::unordered_map<std::string, std::shared_ptr<pjrt::Buffer>> scalars_;
  // Multi-device programs (all_reduce_local, run_spmd) by text + device ids;
  // cleared past kMaxCollectivePrograms.
  std::unordered_map<std::string, std::shared_ptr<pjrt::Executable>> collectives_;
  std::shared_ptr<pjrt::Executable> multi_device_program(const std::string& text,
                                                         const pjrt::MultiDeviceOptions& options,
                                                         const char* name);
  std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> run_multi(
      pjrt::Executable& exe, const std::vector<std::vector<pjrt::Buffer*>>& args,
      const std::vector<int>& devices, const std::string& name);
  // Enqueued buffers with their op, oldest first (bounded, see track()); `seq` increases.
  struct InFlight {
    int device;
    uint64_t seq;
    std::weak_ptr<pjrt::Buffer> buffer;
    std::string op;  // the ATen op (or fused graph) that produces it
  };
  std::vector<InFlight> in_flight_;
  uint64_t next_seq_ = 1;
  // Per device: one output of the last program enqueued there, held strongly.
  // in_flight_ holds the rest weakly (a strong hold costs a readiness check
  // per buffer to let go), so a program whose outputs were all freed would
  // not be waited for; but the plugin runs a device's programs in enqueue
  // order (XLA:CPU chains each execution to the last one enqueued; a GPU or
  // TPU stream is ordered), so waiting for the last program's output waits
  // for every program before it. Replaced at each program, dropped by
  // synchronize().
  std::vector<std::shared_ptr<pjrt::Buffer>> last_output_;
  // Per device: entries with seq up to this are known computed (retire()).
  std::unique_ptr<std::atomic<uint64_t>[]> retired_;
  std::atomic<bool> device_copy_ok_{true};
  stablehlo::EmitOptions emit_options_;  // set once at start from the platform
};

}  // namespace ttpu::runtime
