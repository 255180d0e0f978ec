#include "aten/dispatch_cache.h"

#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <unordered_set>

#include "aten/device.h"

namespace ttpu::aten {
namespace {

// Argument kinds in a key (each followed by its fields).
enum Tag : int64_t { kUndefined = 1, kTensor, kDouble, kInt, kBool, kNone, kHostScalar };

runtime::Slot* tpu_slot(const c10::IValue& v) {
  if (!v.isTensor()) return nullptr;
  const at::Tensor& t = v.toTensor();
  if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) return nullptr;
  return static_cast<runtime::Slot*>(t.storage().data_ptr().get_context());
}

uint64_t hash_of(const int64_t* words, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over 64-bit words
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint64_t>(words[i]);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

bool DispatchCache::allowed(const std::string& key) {
  static const bool on = [] {
    const char* v = std::getenv("TORCHTPU_DISPATCH_CACHE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  // Rules read nothing but their arguments' metadata, scalar values and the
  // default dtype (rules/elementwise: binary.cc's add_sub, mul, div without a
  // rounding mode, rsub, pow_rule; unary.cc's float_op / neg / abs rules;
  // activation.cc's relu).
  static const std::unordered_set<std::string> ops = {
      "add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar",
      "div.Tensor", "div.Scalar", "rsub.Scalar", "pow.Tensor_Scalar",
      "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos",
      "reciprocal", "relu"};
  return on && ops.count(key) != 0;
}

bool DispatchCache::make_key(c10::ArrayRef<c10::IValue> args, int device, Key* key) {
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
      if (t.device().is_cpu() && t.dim() == 0 && !t.is_complex() && t.element_size() <= 8) {
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
      // Other host tensors (their value is read), storages without a buffer or
      // with a pending value: lowered every time.
      if (slot == nullptr || slot->pending || slot->buffer == nullptr || !slot->error.empty() ||
          t.is_conj() || t.is_neg()) {
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
    } else {
      return false;  // complex and symbolic scalars, lists, strings
    }
  }
  return true;
}

bool DispatchCache::replay(const Key& key, c10::ArrayRef<c10::IValue> args, int device,
                           const std::string& op, std::vector<at::Tensor>* out) {
  const uint64_t h = hash_of(key.data(), key.size());
  std::shared_ptr<const Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& x : entries_) {
      if (x->hash == h && x->key.size() == key.size() &&
          std::equal(x->key.begin(), x->key.end(), key.begin())) {
        e = x;
        break;
      }
    }
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
  out->reserve(e->outputs.size());
  size_t k = 0;
  // Results first, then the written storages (LoweringContext::run's order).
  const size_t computed = buffers.size() - e->writes.size();
  for (size_t w = 0; w < e->writes.size(); ++w) {
    runtime::Slot* slot = tpu_slot(args[e->writes[w]]);
    slot->buffer = buffers.at(computed + w);
    slot->producer = op;
  }
  for (const Output& o : e->outputs) {
    if (!o.defined) {
      out->emplace_back();
      continue;
    }
    at::Tensor t = new_tensor(o.alloc_sizes, o.dtype, device);
    if (o.strided) t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides);
    if (t.numel() > 0) {
      runtime::Slot& slot = slot_of(t);
      slot.dtype = to_ir(o.dtype);
      slot.buffer = buffers.at(k++);
      slot.producer = op;
    }
    out->push_back(std::move(t));
  }
  return true;
}

void DispatchCache::remember(const Key& key, c10::ArrayRef<c10::IValue> args,
                             const LoweringContext& ctx, const std::vector<at::Tensor>& results,
                             std::vector<int> writes) {
  if (!ctx.replayable()) return;
  auto e = std::make_shared<Entry>();
  e->key.assign(key.begin(), key.end());
  e->hash = hash_of(key.data(), key.size());
  e->exe = ctx.executable();
  for (const runtime::RecordedArg& a : ctx.bound_args()) {
    Source s;
    if (a.slot != nullptr) {
      for (size_t i = 0; i < args.size() && s.arg < 0; ++i) {
        if (tpu_slot(args[i]) == a.slot) s.arg = static_cast<int>(i);
      }
      if (s.arg < 0) return;  // a storage the rule made itself
    } else {
      if (a.buffer == nullptr) return;
      s.constant = a.buffer;
    }
    e->sources.push_back(std::move(s));
  }
  size_t computed = 0;
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
      if (t.numel() > 0) ++computed;
    }
    e->outputs.push_back(std::move(o));
  }
  for (int w : writes) {
    if (w < 0 || static_cast<size_t>(w) >= args.size() || tpu_slot(args[w]) == nullptr) return;
  }
  e->writes = std::move(writes);
  // One program output per computed result and per storage written (so
  // nothing else was written).
  if (computed + e->writes.size() != static_cast<size_t>(e->exe->num_outputs())) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() < kMaxEntries) {
    entries_.push_back(std::move(e));
  } else {
    entries_[next_] = std::move(e);
    next_ = (next_ + 1) % kMaxEntries;
  }
}

}  // namespace ttpu::aten
