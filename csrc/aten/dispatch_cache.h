// The dispatch cache: a repeated eager call of a cached op runs its compiled
// program again (strict mode) or appends its recorded graph again (fused
// mode) without lowering it.
//
// Why: in strict mode an op's program is cached by its graph's fingerprint,
// but finding it meant running the rule, building the graph and serialising
// it on every call, about half of the host cost of `c = a + b` (measured with
// callgrind, bench/bench_eager.py --instructions). In fused mode nothing is
// compiled per op, but the rule and the graph it builds were about half of a
// recorded op's host cost. Here a call is keyed by everything the lowering
// reads (for every argument: tensor dtype, sizes,
// strides, offset, storage size and element type, which earlier argument
// shares its storage, device; scalar values and their kinds, a host 0-d
// tensor's (a wrapped Python number's) dtype and value; the default dtype;
// the device), and a key seen before replays the call. Strict: the program,
// its parameters bound to the same arguments' storages and the same scalar
// buffers, its results given the same sizes, strides and dtypes. Fused: the
// op's graph as Fusion::record was given it the first time
// (runtime/record_tap.h), its parameters bound to the same arguments'
// storages (their pending values or buffers, as record binds any op's) and
// scalar buffers, its values becoming the pending values of new results with
// the same metadata and of the same written arguments.
//
// Only ops whose rules depend on nothing else are cached (allowed(): the
// elementwise arithmetic of add, sub, mul, div and their scalar forms, a few
// common unary ops), in their functional, in-place and out= overloads, and a
// call is remembered only when its lowering was replayable (strict:
// LoweringContext::replayable(): no random state, no host tensor's value, no
// storage state changed; fused: the key admits only storages that hold a
// value, of the element size read, so the lowering changed none) and
// everything it wrote was an argument's storage (an in-place op's self, an
// out= tensor that needed no resize): a replay writes its new buffers
// (fused: pending values) into the same arguments' storages.
// TORCHTPU_DISPATCH_CACHE=0 turns it off. Results are the same programs on
// the same buffers (fused: the same graph nodes on the same inputs): identical.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aten/lowering.h"
#include "runtime/record_tap.h"

namespace ttpu::aten {

class DispatchCache {
 public:
  using Key = c10::SmallVector<int64_t, 48>;

  // Whether calls of the op whose functional rule is `key` ("add.Tensor";
  // also its in-place and out= overloads) are cached, and the cache is on
  // (TORCHTPU_DISPATCH_CACHE, read once).
  static bool allowed(const std::string& key);
  // The key of a call on `device`; false when the call cannot be cached (a
  // host tensor of more than 0 dims, a list, a storage never written; in
  // strict mode a storage pending in fused mode; in `fused` mode a storage
  // read with another element size than it holds).
  static bool make_key(c10::ArrayRef<c10::IValue> args, int device, Key* key, bool fused = false);

  // Runs the program cached under `key` on this call's arguments and returns
  // its results in `out` (none for an in-place or out= call: their storages
  // get the written buffers); false on a miss. Throws c10::Error naming `op`
  // if the execute fails (as LoweringContext::run does).
  bool replay(const Key& key, c10::ArrayRef<c10::IValue> args, int device, const std::string& op,
              std::vector<at::Tensor>* out);
  // Remembers the call that just ran through `ctx` (if it was replayable)
  // with its `results`; `writes`: the arguments whose storages it wrote (an
  // in-place op's self, the out tensor), in the order of their program
  // outputs after the results.
  void remember(const Key& key, c10::ArrayRef<c10::IValue> args, const LoweringContext& ctx,
                const std::vector<at::Tensor>& results, std::vector<int> writes = {});

  // Fused mode's replay and remember (keys from make_key(..., fused=true)).
  // replay_fused appends the op recorded under `key` to the device's pending
  // graph with this call's arguments (new results in `out`, none for an
  // in-place or out= call); false on a miss. Throws c10::Error as
  // LoweringContext::run does when the append (or the flush it triggers)
  // fails. remember_fused keeps `op` (what Fusion::record was given for this
  // call, runtime::RecordTap) when its inputs and outputs are all this call's
  // arguments, scalar buffers and `results`.
  bool replay_fused(const Key& key, c10::ArrayRef<c10::IValue> args, int device,
                    const std::string& op, std::vector<at::Tensor>* out);
  void remember_fused(const Key& key, c10::ArrayRef<c10::IValue> args, runtime::RecordedOp op,
                      const std::vector<at::Tensor>& results);

 private:
  struct Source {
    int arg = -1;                            // a tensor argument's storage buffer, or
    std::shared_ptr<pjrt::Buffer> constant;  // a buffer the key fixes (a scalar)
  };
  struct Output {
    bool defined = false;
    c10::ScalarType dtype = c10::kFloat;
    std::vector<int64_t> alloc_sizes;  // as allocated (memory order)
    std::vector<int64_t> sizes, strides;
    bool strided = false;  // sizes and strides set after allocation
  };
  struct Entry {
    uint64_t hash = 0;
    std::vector<int64_t> key;
    std::shared_ptr<pjrt::Executable> exe;
    std::vector<Source> sources;
    std::vector<Output> outputs;
    std::vector<int> writes;  // per written storage: the argument it belongs to
  };
  struct FusedEntry {
    uint64_t hash = 0;
    std::vector<int64_t> key;
    ir::Graph graph;  // the op's program as recorded (parameters per source)
    std::vector<Source> sources;
    std::vector<ir::Value> values;  // per pending value set: its graph value
    // Per value: >= 0 the result (index into outputs) it computes, or else
    // -1 - i, argument i's storage, which it writes.
    std::vector<int> targets;
    std::vector<ir::TensorType> result_types;
    std::vector<Output> outputs;
  };
  // Output metadata of `results` (as replay allocates them); the number
  // with elements (each one program output / pending value) in *computed.
  static std::vector<Output> outputs_of(const std::vector<at::Tensor>& results, size_t* computed);
  template <typename E>
  static std::shared_ptr<const E> find(const std::vector<std::shared_ptr<const E>>& entries,
                                       const Key& key);
  template <typename E>
  void insert(std::vector<std::shared_ptr<const E>>& entries, size_t& next,
              std::shared_ptr<const E> e);
  // New result tensors per `outputs` on `device`, with their slots' dtype set.
  static void allocate(const std::vector<Output>& outputs, int device,
                       std::vector<at::Tensor>* out);

  // A few shapes per op are common (a training loop's); past this many the
  // oldest entry makes room. Each holds its program loaded.
  static constexpr size_t kMaxEntries = 16;

  std::mutex mu_;
  std::vector<std::shared_ptr<const Entry>> entries_;
  size_t next_ = 0;  // the entry replaced next once full
  std::vector<std::shared_ptr<const FusedEntry>> fused_entries_;
  size_t fused_next_ = 0;
};

}  // namespace ttpu::aten
