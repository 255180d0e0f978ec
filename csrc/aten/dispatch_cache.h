// Strict mode's dispatch cache: a repeated eager call of a cached op runs its
// compiled program again without lowering it.
//
// Why: in strict mode an op's program is cached by its graph's fingerprint,
// but finding it meant running the rule, building the graph and serialising
// it on every call, about half of the host cost of `c = a + b` (measured with
// callgrind, bench/bench_eager.py --instructions). Here a call is keyed by
// everything the lowering reads (for every argument: tensor dtype, sizes,
// strides, offset, storage size and element type, which earlier argument
// shares its storage, device; scalar values and their kinds, a host 0-d
// tensor's (a wrapped Python number's) dtype and value; the default dtype;
// the device), and a key seen before replays the program: its
// parameters bound to the same arguments' storages and the same scalar
// buffers, its results given the same sizes, strides and dtypes.
//
// Only ops whose rules depend on nothing else are cached (allowed(): the
// elementwise arithmetic of add, sub, mul, div and their scalar forms, a few
// common unary ops), in their functional, in-place and out= overloads, and a
// call is remembered only when its lowering was replayable
// (LoweringContext::replayable(): no random state, no host tensor's value,
// no storage state changed) and everything it wrote was an argument's
// storage (an in-place op's self, an out= tensor that needed no resize): a
// replay writes its new buffers into the same arguments' storages.
// TORCHTPU_DISPATCH_CACHE=0 turns it off. Results are the same programs on
// the same buffers: identical.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aten/lowering.h"

namespace ttpu::aten {

class DispatchCache {
 public:
  using Key = c10::SmallVector<int64_t, 48>;

  // Whether calls of the op whose functional rule is `key` ("add.Tensor";
  // also its in-place and out= overloads) are cached, and the cache is on
  // (TORCHTPU_DISPATCH_CACHE, read once).
  static bool allowed(const std::string& key);
  // The key of a call on `device`; false when the call cannot be cached (a
  // host tensor of more than 0 dims, a list, a storage never written or
  // pending in fused mode).
  static bool make_key(c10::ArrayRef<c10::IValue> args, int device, Key* key);

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
  // A few shapes per op are common (a training loop's); past this many the
  // oldest entry makes room. Each holds its program loaded.
  static constexpr size_t kMaxEntries = 16;

  std::mutex mu_;
  std::vector<std::shared_ptr<const Entry>> entries_;
  size_t next_ = 0;  // the entry replaced next once full
};

}  // namespace ttpu::aten
