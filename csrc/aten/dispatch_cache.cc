#include "aten/dispatch_cache.h"

#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <unordered_set>

#include "aten/device.h"
#include "settings/settings.h"

namespace ttpu::aten {
namespace {

// Argument kinds in a key (each followed by its fields).
enum Tag : int64_t { kUndefined = 1, kTensor, kDouble, kInt, kBool, kNone, kHostScalar, kIntList };

// The slot of a tpu tensor argument (nullptr for anything else); `write`: the
// slot a write goes to (slot_to_write: a copy-on-write storage gets its own).
runtime::Slot* tpu_slot(const c10::IValue& v, bool write = false) {
  if (!v.isTensor()) return nullptr;
  const at::Tensor& t = v.toTensor();
  if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) return nullptr;
  return write ? &slot_to_write(t) : &slot_of(t);
}

uint64_t hash_of(const int64_t* words, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over 64-bit words
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint64_t>(words[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// Where each bound argument of a cached op comes from: a call argument (by
// position) or a constant buffer. False when one is neither (a storage the
// rule made itself): such an op is not cached.
// The position of the call argument whose storage is `slot`, or -1.
int arg_of(c10::ArrayRef<c10::IValue> args, const runtime::Slot* slot) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (tpu_slot(args[i]) == slot) return static_cast<int>(i);
  }
  return -1;
}

template <class Source>
bool sources_of(const std::vector<runtime::RecordedArg>& bound, c10::ArrayRef<c10::IValue> args,
                std::vector<Source>* out) {
  for (const runtime::RecordedArg& a : bound) {
    Source s;
    if (a.slot != nullptr) {
      s.arg = arg_of(args, a.slot);
      if (s.arg < 0) return false;
    } else {
      if (a.buffer == nullptr) return false;
      s.constant = a.buffer;
    }
    out->push_back(std::move(s));
  }
  return true;
}

}  // namespace

bool DispatchCache::allowed(const std::string& key) {
  static const bool on = settings::flag("TORCHTPU_DISPATCH_CACHE", true);
  // Rules read nothing but their arguments' metadata, scalar values, int
  // lists and the default dtype, and warn of nothing (rules/elementwise:
  // binary.cc's add_sub, mul, div without a rounding mode, rsub, pow_rule,
  // maximum/minimum, the comparisons, bitwise and logical ops; unary.cc's
  // float_op / neg / abs / bitwise_not / logical_not rules; activation.cc's
  // relu and silu; unary_pointwise.cc's where; rules/reduce/reduce.cc's plain
  // reductions, whose errors on an empty dim depend on shapes alone;
  // rules/linalg/matmul.cc's mm, addmm, bmm and baddbmm, whose transposed-
  // operand form is read from the strides in the key).
  // clang-format off
  static const std::unordered_set<std::string> ops = {
      "add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar",
      "div.Tensor", "div.Scalar", "rsub.Tensor", "rsub.Scalar", "pow.Tensor_Scalar",
      "maximum", "minimum",
      "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "reciprocal",
      "relu", "silu",
      "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "lt.Tensor", "lt.Scalar",
      "le.Tensor", "le.Scalar", "gt.Tensor", "gt.Scalar", "ge.Tensor", "ge.Scalar",
      "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor", "bitwise_not",
      "logical_and", "logical_or", "logical_xor", "logical_not", "where.self",
      "sum", "sum.dim_IntList", "mean", "mean.dim", "prod", "amax", "amin", "max", "min",
      "max.dim", "min.dim", "argmax", "argmin", "any", "all", "any.dim", "all.dim", "any.dims",
      "all.dims",
      "mm", "addmm", "bmm", "baddbmm"};
  // clang-format on
  return on && ops.count(key) != 0;
}

bool DispatchCache::make_key(c10::ArrayRef<c10::IValue> args, int device, Key* key, bool fused) {
  key->push_back(device);
  key->push_back(static_cast<int64_t>(c10::get_default_dtype_as_scalartype()));
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& a = args[i];
    if (a.isTensor()) {
      const at::Tensor& t = a.toTensor();
      if (!t.defined()) {
        key->push_back(kUndefined);
        continue;
      }
      // (A lazily negated one is refused below, with tensors of other devices:
      // its bits are not its value.)
      if (t.device().is_cpu() && t.dim() == 0 && !t.is_complex() && !t.is_neg() &&
          t.element_size() <= 8) {
        // A Python number (wrapped) or a host 0-d tensor: lowered as a scalar
        // parameter of its value, so its bits and dtype are the key (and
        // whether it is a wrapped number, which type promotion treats apart).
        int64_t bits = 0;
        std::memcpy(&bits, t.const_data_ptr(), t.element_size());
        key->append({kHostScalar, static_cast<int64_t>(t.scalar_type()),
                     t.unsafeGetTensorImpl()->is_wrapped_number() ? 1 : 0, bits});
        continue;
      }
      runtime::Slot* slot = tpu_slot(a);
      // Other host tensors (their value is read), storages never written
      // (the lowering adopts the dtype read), with a failed value, or (strict)
      // with a pending value: lowered every time. Fused mode binds a pending
      // value as it binds a buffer, but a storage read with another element
      // size is computed or reinterpreted first (LoweringContext::use).
      if (slot == nullptr || !slot->error.empty() || t.is_conj() || t.is_neg()) return false;
      if (fused ? (slot->buffer == nullptr && !slot->pending) ||
                      ir::byte_size(slot->dtype) != ir::byte_size(to_ir(t.scalar_type()))
                : slot->pending || slot->buffer == nullptr) {
        return false;
      }
      int64_t alias = -1;  // an earlier argument on the same storage
      for (size_t j = 0; j < i && alias < 0; ++j) {
        if (tpu_slot(args[j]) == slot) alias = static_cast<int64_t>(j);
      }
      key->append({kTensor, t.device().index(), static_cast<int64_t>(t.scalar_type()), t.dim()});
      key->append(t.sizes().begin(), t.sizes().end());
      key->append(t.strides().begin(), t.strides().end());
      key->append({t.storage_offset(), slot->nbytes, static_cast<int64_t>(slot->dtype), alias});
    } else if (a.isDouble()) {
      int64_t bits = 0;
      const double d = a.toDouble();
      std::memcpy(&bits, &d, sizeof(bits));
      key->append({kDouble, bits});
    } else if (a.isInt()) {
      key->append({kInt, a.toInt()});
    } else if (a.isBool()) {
      key->append({kBool, a.toBool() ? 1 : 0});
    } else if (a.isNone()) {
      key->push_back(kNone);
    } else if (a.isIntList()) {  // a reduction's dims
      const auto ints = a.toIntList();
      key->append({kIntList, static_cast<int64_t>(ints.size())});
      for (const int64_t v : ints) key->push_back(v);
    } else {
      return false;  // complex and symbolic scalars, other lists, strings
    }
  }
  return true;
}

bool DispatchCache::replay(const Key& key, c10::ArrayRef<c10::IValue> args, int device,
                           const std::string& op, std::vector<at::Tensor>* out) {
  std::shared_ptr<const Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = find(entries_, key);
  }
  if (e == nullptr) return false;
  std::vector<pjrt::Buffer*> raw;
  raw.reserve(e->sources.size());
  for (const Source& s : e->sources) {
    raw.push_back(s.arg >= 0 ? tpu_slot(args[s.arg])->buffer.get() : s.constant.get());
  }
  auto& rt = runtime::Runtime::get();
  ++rt.metrics().cache_hits;  // the program was found, as Runtime::compile counts it
  ++rt.metrics().dispatch_cache_hits;
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  try {
    buffers = rt.execute(*e->exe, raw, device, op);
  } catch (const pjrt::PjrtError& err) {
    TORCH_CHECK(false, "tpu: ", op, " failed: ", err.what());
  }
  size_t k = 0;
  // Results first, then the written storages (LoweringContext::run's order).
  const size_t computed = buffers.size() - e->writes.size();
  for (size_t w = 0; w < e->writes.size(); ++w) {
    runtime::Slot* slot = tpu_slot(args[e->writes[w]], /*write=*/true);
    slot->buffer = buffers.at(computed + w);
    slot->producer = op;
  }
  allocate(e->outputs, device, out);
  for (at::Tensor& t : *out) {
    if (!t.defined() || t.numel() == 0) continue;
    runtime::Slot& slot = slot_of(t);
    slot.buffer = buffers.at(k++);
    slot.producer = op;
  }
  return true;
}

void DispatchCache::allocate(const std::vector<Output>& outputs, int device,
                             std::vector<at::Tensor>* out) {
  out->reserve(outputs.size());
  for (const Output& o : outputs) {
    if (!o.defined) {
      out->emplace_back();
      continue;
    }
    at::Tensor t = new_tensor(o.alloc_sizes, o.dtype, device);
    if (o.strided) t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides);
    if (t.numel() > 0) slot_of(t).dtype = to_ir(o.dtype);
    out->push_back(std::move(t));
  }
}

void DispatchCache::remember(const Key& key, c10::ArrayRef<c10::IValue> args,
                             const LoweringContext& ctx, const std::vector<at::Tensor>& results,
                             std::vector<int> writes) {
  if (!ctx.replayable()) return;
  auto e = std::make_shared<Entry>();
  e->key.assign(key.begin(), key.end());
  e->hash = hash_of(key.data(), key.size());
  e->exe = ctx.executable();
  if (!sources_of(ctx.bound_args(), args, &e->sources)) return;
  size_t computed = 0;
  e->outputs = outputs_of(results, &computed);
  for (int w : writes) {
    if (w < 0 || static_cast<size_t>(w) >= args.size() || tpu_slot(args[w]) == nullptr) return;
  }
  e->writes = std::move(writes);
  // One program output per computed result and per storage written (so
  // nothing else was written).
  if (computed + e->writes.size() != static_cast<size_t>(e->exe->num_outputs())) return;
  insert(entries_, next_, std::shared_ptr<const Entry>(std::move(e)));
}

std::vector<DispatchCache::Output> DispatchCache::outputs_of(const std::vector<at::Tensor>& results,
                                                             size_t* computed) {
  std::vector<Output> outputs;
  *computed = 0;
  for (const at::Tensor& t : results) {
    Output o;
    o.defined = t.defined();
    if (o.defined) {
      o.dtype = t.scalar_type();
      o.sizes = t.sizes().vec();
      o.strides = t.strides().vec();
      // Row-major strides, as new_tensor gives; anything else was set after
      // allocating the dims in memory order (LoweringContext::run).
      std::vector<int64_t> row_major(o.sizes.size());
      int64_t step = 1;
      for (size_t d = o.sizes.size(); d-- > 0;) {
        row_major[d] = step;
        step *= o.sizes[d];
      }
      o.strided = o.strides != row_major;
      if (o.strided) {
        std::vector<int64_t> order(o.sizes.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t x, int64_t y) { return o.strides[x] > o.strides[y]; });
        for (int64_t d : order) o.alloc_sizes.push_back(o.sizes[d]);
      } else {
        o.alloc_sizes = o.sizes;
      }
      if (t.numel() > 0) ++*computed;
    }
    outputs.push_back(std::move(o));
  }
  return outputs;
}

template <typename E>
std::shared_ptr<const E> DispatchCache::find(const std::vector<std::shared_ptr<const E>>& entries,
                                             const Key& key) {
  const uint64_t h = hash_of(key.data(), key.size());
  for (const auto& x : entries) {
    if (x->hash == h && x->key.size() == key.size() &&
        std::equal(x->key.begin(), x->key.end(), key.begin())) {
      return x;
    }
  }
  return nullptr;
}

template <typename E>
void DispatchCache::insert(std::vector<std::shared_ptr<const E>>& entries, size_t& next,
                           std::shared_ptr<const E> e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries.size() < kMaxEntries) {
    entries.push_back(std::move(e));
  } else {
    entries[next] = std::move(e);
    next = (next + 1) % kMaxEntries;
  }
}

bool DispatchCache::replay_fused(const Key& key, c10::ArrayRef<c10::IValue> args, int device,
                                 const std::string& op, std::vector<at::Tensor>* out) {
  std::shared_ptr<const FusedEntry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = find(fused_entries_, key);
  }
  if (e == nullptr) return false;
  ++runtime::Runtime::get().metrics().dispatch_cache_hits;
  allocate(e->outputs, device, out);
  // As LoweringContext::run hands the op to Fusion::record: a storage's
  // argument names only its slot (record binds its pending value or buffer).
  std::vector<runtime::RecordedArg> bound;
  bound.reserve(e->sources.size());
  for (const Source& s : e->sources) {
    if (s.arg >= 0) {
      bound.push_back({nullptr, tpu_slot(args[s.arg])});
    } else {
      bound.push_back({s.constant, nullptr});
    }
  }
  std::vector<runtime::Slot*> out_slots;
  out_slots.reserve(e->targets.size());
  for (int t : e->targets) {
    out_slots.push_back(t >= 0 ? &slot_of((*out)[t]) : tpu_slot(args[-1 - t], /*write=*/true));
  }
  try {
    runtime::record_copy(runtime::fusion(device), e->graph, bound, e->values, out_slots, op,
                         e->result_types);
  } catch (const pjrt::PjrtError& err) {
    TORCH_CHECK(false, "tpu: ", err.what());
  } catch (const ir::IrError& err) {
    TORCH_CHECK(false, "tpu: internal error lowering ", op, ": ", err.what());
  }
  return true;
}

void DispatchCache::remember_fused(const Key& key, c10::ArrayRef<c10::IValue> args,
                                   runtime::RecordedOp op, const std::vector<at::Tensor>& results) {
  if (!op.taken) return;
  auto e = std::make_shared<FusedEntry>();
  e->key.assign(key.begin(), key.end());
  e->hash = hash_of(key.data(), key.size());
  if (!sources_of(op.args, args, &e->sources)) return;
  size_t computed = 0;
  e->outputs = outputs_of(results, &computed);
  for (const runtime::Slot* slot : op.out_slots) {
    int target = -1;
    for (size_t r = 0; r < results.size() && target < 0; ++r) {
      const at::Tensor& t = results[r];
      if (t.defined() && t.numel() > 0 && &slot_of(t) == slot) target = static_cast<int>(r);
    }
    if (target < 0) {
      const int w = arg_of(args, slot);
      if (w < 0) return;  // a storage that is neither a result nor an argument
      target = -1 - w;
    }
    e->targets.push_back(target);
  }
  if (op.values.size() != op.out_slots.size()) return;
  e->graph = std::move(op.graph);
  e->values = std::move(op.values);
  e->result_types = std::move(op.result_types);
  insert(fused_entries_, fused_next_, std::shared_ptr<const FusedEntry>(std::move(e)));
}

}  // namespace ttpu::aten
