// The generic PrivateUse1 kernel behind every lowered op, and its registration.
//
// One boxed functor serves the functional, in-place and out= overloads of an op:
// the rule computes values from the functional arguments, and the variant decides
// where they go (new tensors, `self`, or the `out` tensors). Registration derives
// the variants from the dispatcher's schemas, so the table lists each op once.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/resize.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <deque>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "aten/dispatch_cache.h"
#include "aten/fallback.h"
#include "aten/lowering.h"
#include "aten/out_dtype.h"
#include "aten/result_layout.h"
#include "aten/barebones_dtypes.h"

namespace ttpu::aten {
namespace {

enum class Variant { kFunctional, kInplace, kOut, kOutOnly };

int device_of(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args) {
    if (a.isTensor()) {
      const auto& t = a.toTensor();
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
        return t.device().index();
      }
    } else if (a.isTensorList()) {
      for (const auto& t : a.toTensorVector()) {
        if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
          return t.device().index();
        }
      }
    }
  }
  return current_device();  // no tpu tensor argument: the device guard's device
}

// A tensor whose conj or neg bit is set (x.conj(), x.conj().imag): its storage
// holds the unconjugated / unnegated values, which a rule would read raw.
bool has_math_bit(const at::Tensor& t) { return t.defined() && (t.is_conj() || t.is_neg()); }

bool any_math_bit(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args) {
    if (a.isTensor() && has_math_bit(a.toTensor())) return true;
    if (a.isList()) {  // Tensor[] and Tensor?[]
      for (const auto& e : a.toListRef()) {
        if (e.isTensor() && has_math_bit(e.toTensor())) return true;
      }
    }
  }
  return false;
}

bool is_dtype_arg(const c10::Argument& a) {
  auto type = a.real_type();
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

// A complex tensor among the arguments, or a complex dtype argument
// (torch.zeros(..., dtype=torch.cfloat)). Not the outs: as TensorIterator's
// common dtype, the computation follows the inputs, and a complex `out=` of
// real inputs takes the real result converted (true_divide(int16, int32,
// out=complex64) is 2.5, not an integer quotient).
bool any_complex(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (i < schema.arguments().size() && schema.arguments()[i].is_out()) continue;
    if (is_complex_arg(args[i])) return true;
    if (i < schema.arguments().size() && is_dtype_arg(schema.arguments()[i]) && args[i].isInt() &&
        c10::isComplexType(static_cast<c10::ScalarType>(args[i].toInt()))) {
      return true;
    }
  }
  return false;
}

// TensorIterator's overlap check for an in-place or out= pointwise op: an
// input sharing only some elements with the written tensor (t.t().mul_(t)) is
// refused, as on CPU, since the result would depend on the write order.
void check_partial_overlap(bool pointwise, c10::ArrayRef<c10::IValue> inputs,
                           const at::Tensor& dst) {
  if (!pointwise) return;
  for (const auto& a : inputs) {
    if (!a.isTensor()) continue;
    const at::Tensor& t = a.toTensor();
    if (t.defined() && t.device() == dst.device()) at::assert_no_partial_overlap(dst, t);
  }
}

// ATen's overlap checks of the indexing ops, which are not pointwise (their
// meta functions and CPU kernels): the written tensor may not have elements
// that share memory, nor overlap its index or source. The fill family
// (index_fill_, masked_fill_, index_put_) may not overlap its index / mask /
// values either; on an expanded tensor CPU warns and writes only the selected
// elements, which tpu's write of the whole result cannot do (the unselected
// copies of a shared element would win): LoweringContext::write refuses it.
enum class IndexOverlap {
  kNone,
  kNoOverlap,           // index_add_, index_copy_, put_, scatter_...: no internal overlap either
  kInputs,              // index_fill_, index_put_: none with the index / values
  kNoPartialWithInputs  // masked_fill_: none partial with the mask
};

// The rule of table name `key`, decided once per kernel.
IndexOverlap index_overlap_rule(const std::string& key) {
  static const std::unordered_set<std::string> kNoOverlap = {
      "index_add",   "index_copy",        "index_reduce",   "put",
      "scatter.src", "scatter.value",     "scatter.reduce", "scatter.value_reduce",
      "scatter_add", "scatter_reduce.two"};
  static const std::unordered_set<std::string> kInputs = {
      "index_fill.int_Scalar", "index_fill.int_Tensor", "index_put", "_index_put_impl"};
  if (kNoOverlap.count(key) != 0) return IndexOverlap::kNoOverlap;
  if (kInputs.count(key) != 0) return IndexOverlap::kInputs;
  if (key == "masked_fill.Scalar" || key == "masked_fill.Tensor") {
    return IndexOverlap::kNoPartialWithInputs;
  }
  return IndexOverlap::kNone;
}

void check_index_overlap(IndexOverlap rule, c10::ArrayRef<c10::IValue> inputs,
                         const at::Tensor& dst) {
  if (rule == IndexOverlap::kNone) return;
  if (rule == IndexOverlap::kNoOverlap) at::assert_no_internal_overlap(dst);
  auto check = [&](const c10::IValue& v) {
    if (!v.isTensor() || !v.toTensor().defined() || v.toTensor().device() != dst.device()) return;
    if (rule == IndexOverlap::kNoPartialWithInputs) {
      at::assert_no_partial_overlap(dst, v.toTensor());
    } else {
      at::assert_no_overlap(dst, v.toTensor());
    }
  };
  for (const auto& a : inputs) {
    if (a.isList()) {  // index_put's indices
      for (const c10::IValue& e : a.toListRef()) check(e);
    } else {
      check(a);
    }
  }
}

// The out= arguments of a call, and the index of the first (`*first_out`,
// left as it is when there is none).
std::vector<at::Tensor> out_arguments(const c10::FunctionSchema& schema,
                                      c10::ArrayRef<c10::IValue> args, size_t* first_out) {
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].is_out()) {
      *first_out = std::min(*first_out, i);
      outs.push_back(args[i].toTensor());
    }
  }
  return outs;
}

// Whether the functional op of table name `key` ("foo.overload") is tagged
// pointwise. Its in-place and out= forms are checked as it is: PyTorch's tags
// miss some of them (__irshift__ has no pointwise tag, __ilshift__ has).
bool is_pointwise(const std::string& key) {
  const auto dot = key.find('.');
  auto handle = c10::Dispatcher::singleton().findSchema(
      {"aten::" + key.substr(0, dot), dot == std::string::npos ? "" : key.substr(dot + 1)});
  return handle.has_value() && handle->hasTag(at::Tag::pointwise);
}

class LoweringKernel final : public c10::OperatorKernel {
 public:
  // `complex_rule`: the rule for calls with complex tensors (complex_table()),
  // or null when the op declines them. `key`: the rule's table name.
  LoweringKernel(const Rule* rule, const Rule* complex_rule, Variant variant, std::string name,
                 std::string key)
      : rule_(rule),
        complex_rule_(complex_rule),
        variant_(variant),
        name_(std::move(name)),
        key_(std::move(key)),
        // Fixed per op: looked up once here rather than by name on every call.
        unsigned_native_(barebones_unsigned_native(key_)),
        float8_native_(float8_native(key_)),
        // ATen's abs_ refuses complex self before computing (a real result
        // would cast back into it).
        refuses_complex_self_(variant == Variant::kInplace && key_ == "abs"),
        pointwise_(is_pointwise(key_)),
        index_overlap_(index_overlap_rule(key_)),
        // (neg and sign check bool / complex inputs first, in their rules too)
        out_dtype_first_(same_dtype_unary(key_) && key_ != "neg" && key_ != "sign") {
    if (variant_ != Variant::kOutOnly && DispatchCache::allowed(key_)) {
      cache_ = std::make_unique<DispatchCache>();
    }
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const auto& schema = op.schema();
    const size_t nargs = schema.arguments().size();
    auto args = torch::jit::last(*stack, nargs);
    // The dispatch cache before the checks below: a call is remembered only
    // after they passed, and its key fixes everything they read (dtypes,
    // math bits: make_key refuses those tensors; a dtype argument's value), so
    // a hit needs none of them.
    CacheProbe probe;
    if (cache_ != nullptr && replayed(schema, stack, &probe)) return;
    // Declined calls run on CPU (counted): a complex tensor for a real-only
    // rule, or a lazily conjugated / negated tensor (the CPU kernels, reached
    // through _copy_from, see the bits; no rule reads them).
    const Rule* rule = rule_;
    const bool complex = any_complex(schema, args);
    if (complex) rule = complex_rule_;
    if (rule == nullptr) {
      run_cpu_fallback(op, stack, " for complex tensors");
      return;
    }
    if (any_math_bit(args)) {
      run_cpu_fallback(op, stack, " for conjugated or negated views (x.conj(), x.conj().imag)");
      return;
    }
    // uint16/32/64 (barebones_dtypes.h): ops CPU computes in these dtypes run
    // natively; the others only when every result is floating (the op computes
    // in a float type, as CPU does), else on CPU, which raises what CPU raises.
    const bool unsigned_gated = !unsigned_native_ && any_barebones_unsigned(schema, args);
    if (unsigned_gated && variant_ == Variant::kOutOnly) {
      run_cpu_fallback(op, stack, kUnsignedWhy);
      return;
    }
    // float8 (barebones_dtypes.h): only the ops that move, select or compare
    // values, which CPU implements for float8, run natively; the rest on CPU,
    // which computes or raises as CPU does.
    if (!float8_native_ && any_float8(schema, args)) {
      run_cpu_fallback(op, stack, " for float8 tensors");
      return;
    }
    try {
      run(schema, rule, op, stack, /*cacheable=*/!complex && !unsigned_gated && probe.keyed,
          unsigned_gated, probe);
    } catch (const DeclinedToCpu& d) {
      run_cpu_fallback(op, stack, d.why);
    } catch (const ir::IrDtypeError& e) {
      // A dtype the op has no lowering for: CPU's dispatch raises
      // NotImplementedError ("\"remainder_cpu\" not implemented for 'Bool'").
      TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", schema.name().substr(schema.name().find("::") + 2),
                                  "\" not implemented for '", to_aten(e.dtype), "'");
    }
  }

 private:
  // A call's dispatch cache key, made before the checks.
  struct CacheProbe {
    bool keyed = false;  // `key` is set: the call may be replayed or remembered
    bool fused = false;  // fused mode (else strict)
    int device = 0;
    DispatchCache::Key key;
  };

  // The dispatch cache (dispatch_cache.h): a call seen before runs its
  // program again (strict) or appends its recorded graph again (fused)
  // without being lowered; true when it did (the stack then holds the
  // returns). Fills *probe for run() either way.
  bool replayed(const c10::FunctionSchema& schema, torch::jit::Stack* stack, CacheProbe* probe) {
    const runtime::EagerMode mode = runtime::Runtime::get().mode();
    probe->fused = mode == runtime::EagerMode::kFused;
    if (!probe->fused && mode != runtime::EagerMode::kStrict) return false;
    const size_t nargs = schema.arguments().size();
    auto args = torch::jit::last(*stack, nargs);
    probe->device = device_of(args);
    probe->keyed = DispatchCache::make_key(args, probe->device, &probe->key, probe->fused);
    if (!probe->keyed) return false;
    std::vector<at::Tensor> tensors;
    if (!(probe->fused ? cache_->replay_fused(probe->key, args, probe->device, name_, &tensors)
                       : cache_->replay(probe->key, args, probe->device, name_, &tensors))) {
      return false;
    }
    // An in-place or out= call's storages now hold the written buffers.
    std::vector<c10::IValue> returns;
    if (variant_ == Variant::kInplace) {
      returns.push_back(args[0]);
    } else if (variant_ == Variant::kOut) {
      for (size_t i = 0; i < nargs; ++i) {
        if (schema.arguments()[i].is_out()) returns.push_back(args[i]);
      }
    }
    torch::jit::drop(*stack, nargs);
    if (variant_ == Variant::kFunctional) {
      push_returns(schema, std::move(tensors), stack);
    } else {
      for (auto& r : returns) stack->emplace_back(std::move(r));
    }
    return true;
  }

  // Lowers and runs the call; the stack changes only after the rule returned.
  // `cacheable`: remember it in the dispatch cache under probe.key.
  void run(const c10::FunctionSchema& schema, const Rule* rule, const c10::OperatorHandle& op,
           torch::jit::Stack* stack, bool cacheable, bool unsigned_gated, const CacheProbe& probe) {
    const size_t nargs = schema.arguments().size();
    auto args = torch::jit::last(*stack, nargs);
    const int device = probe.keyed ? probe.device : device_of(args);
    const DispatchCache::Key& key = probe.key;
    const bool fused = probe.fused;
    LoweringContext ctx(name_, device);
    // Fused mode: what ctx.run hands to Fusion::record, for remember_fused.
    runtime::RecordedOp recorded;
    auto run_ctx = [&](const std::vector<ir::Value>& results) {
      std::optional<runtime::RecordTap> tap;
      if (cacheable && fused) tap.emplace(&recorded);
      return ctx.run(results);
    };
    switch (variant_) {
      case Variant::kFunctional: {
        ctx.set_makes_new_results();
        auto values = (*rule)(ctx, Args(args));
        if (complex_rule_ == nullptr && returns_complex(ctx, values)) {
          // A real-only rule asked for a complex result.
          run_cpu_fallback(op, stack, " for complex tensors");
          return;
        }
        if (unsigned_gated && !all_floating(ctx, values)) {
          run_cpu_fallback(op, stack, kUnsignedWhy);
          return;
        }
        lay_out_results(ctx, op, args, values);
        auto tensors = run_ctx(values);
        if (cacheable && fused) {
          cache_->remember_fused(key, args, std::move(recorded), tensors);
        } else if (cacheable) {
          cache_->remember(key, args, ctx, tensors);
        }
        torch::jit::drop(*stack, nargs);
        push_returns(schema, std::move(tensors), stack);
        return;
      }
      case Variant::kInplace: {
        at::Tensor self = args[0].toTensor();
        TORCH_CHECK(!refuses_complex_self_ || !self.is_complex(),
                    "In-place abs is not supported for complex tensors.");
        check_partial_overlap(pointwise_, args.slice(1), self);
        check_index_overlap(index_overlap_, args.slice(1), self);
        auto values = (*rule)(ctx, Args(args));
        TORCH_CHECK(!values.empty(), name_, ": the rule returned no value");
        if (unsigned_gated && !all_floating(ctx, values)) {
          run_cpu_fallback(op, stack, kUnsignedWhy);
          return;
        }
        const ir::TensorType t = ctx.g().type(values[0]);
        check_castable(to_aten(t.dtype), self);
        TORCH_CHECK(c10::IntArrayRef(t.dims) == self.sizes(), "output with shape ", self.sizes(),
                    " doesn't match the broadcast shape ", c10::IntArrayRef(t.dims));
        ctx.write(self, values[0]);
        run_ctx({});
        if (cacheable && fused) {
          cache_->remember_fused(key, args, std::move(recorded), {});
        } else if (cacheable) {
          cache_->remember(key, args, ctx, {}, {0});
        }
        torch::jit::drop(*stack, nargs);
        stack->emplace_back(std::move(self));
        return;
      }
      case Variant::kOut: {
        size_t first_out = nargs;
        std::vector<at::Tensor> outs = out_arguments(schema, args, &first_out);
        for (const auto& o : outs) {
          check_partial_overlap(pointwise_, args.slice(0, first_out), o);
          check_index_overlap(index_overlap_, args.slice(1, first_out - 1), o);
        }
        // (before the rule, whose dtype check comes second on CPU)
        if (out_dtype_first_ && args[0].isTensor() && outs.size() == 1) {
          const c10::ScalarType self = args[0].toTensor().scalar_type();
          TORCH_CHECK(outs[0].scalar_type() == self, "Found dtype ", outs[0].scalar_type(),
                      " but expected ", self);
        }
        auto values = (*rule)(ctx, Args(args.slice(0, first_out)));
        TORCH_CHECK(values.size() >= outs.size(), name_, ": rule returned ", values.size(),
                    " values for ", outs.size(), " outputs");
        if (unsigned_gated && !all_floating(ctx, values)) {
          run_cpu_fallback(op, stack, kUnsignedWhy);
          return;
        }
        const c10::ScalarType self_dtype =
            args[0].isTensor() ? args[0].toTensor().scalar_type() : c10::ScalarType::Undefined;
        for (size_t i = 0; i < outs.size(); ++i) {
          const ir::TensorType t = ctx.g().type(values[i]);
          check_out_dtype(key_, to_aten(t.dtype), self_dtype, outs[i], i);
          // A resized out has new metadata (and storage): not replayable
          // under the key of its old sizes.
          if (outs[i].sizes() != c10::IntArrayRef(t.dims)) {
            cacheable = false;
            resize_out(op, args.slice(0, first_out), outs[i], t, i);
          }
          ctx.write(outs[i], values[i]);
        }
        run_ctx({});
        if (cacheable && outs.size() == 1 && fused) {
          cache_->remember_fused(key, args, std::move(recorded), {});
        } else if (cacheable && outs.size() == 1) {
          cache_->remember(key, args, ctx, {}, {static_cast<int>(first_out)});
        }
        torch::jit::drop(*stack, nargs);
        for (auto& o : outs) stack->emplace_back(std::move(o));
        return;
      }
      case Variant::kOutOnly: {
        // The rule wrote its results into the arguments; each return is the
        // argument it aliases (the out tensor of arange.out, `self` of an
        // in-place op such as _amp_update_scale_).
        std::vector<c10::IValue> returns = aliased_returns(schema, args);
        (*rule)(ctx, Args(args));
        ctx.run({});
        torch::jit::drop(*stack, nargs);
        for (auto& r : returns) stack->emplace_back(std::move(r));
        return;
      }
    }
  }

  // New results take the layout CPU's kernel gives them (result_layout.h).
  void lay_out_results(LoweringContext& ctx, const c10::OperatorHandle& op,
                       c10::ArrayRef<c10::IValue> args, const std::vector<ir::Value>& values) {
    const LayoutRule& layout = layout_of(op);
    if (layout.kind == ResultLayout::kRowMajor) return;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i].valid()) continue;
      // No node is added while `type` is read.
      const ir::TensorType& type = ctx.g().type(values[i]);
      auto strides = result_strides(layout, args, type.dims, i, to_aten(type.dtype));
      if (!strides.empty()) ctx.set_result_strides(i, std::move(strides));
    }
  }

  // Out `i` resized to result type `t`: resize_output warns, as CPU does, when
  // the out had elements. TensorIterator (and the structured kernels of sort
  // and cat) restrides an out it resizes to the layout it computed for the
  // result; an out of the right shape keeps its own. flip, index_put and
  // put's out= forms resize row-major.
  void resize_out(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> inputs, at::Tensor& out,
                  const ir::TensorType& t, size_t i) {
    at::native::resize_output(out, t.dims);
    const LayoutRule& layout = layout_of(op);
    const ResultLayout k = layout.kind;
    if (k == ResultLayout::kIterator || k == ResultLayout::kIteratorSwapped ||
        k == ResultLayout::kAddr || k == ResultLayout::kGlu || k == ResultLayout::kCat ||
        (k == ResultLayout::kPreserveSelf && op.schema().name() == "aten::sort")) {
      auto strides = result_strides(layout, inputs, t.dims, i, to_aten(t.dtype));
      if (!strides.empty()) out.as_strided_(t.dims, strides);
    }
  }

  // result_layout(op), which builds the op's name and looks it up: the same
  // for every call of this kernel, so computed at its first call.
  const LayoutRule& layout_of(const c10::OperatorHandle& op) {
    std::call_once(layout_once_, [&] { layout_ = result_layout(op); });
    return layout_;
  }

  // Per return of `schema`, the argument with the same (written) alias set.
  static std::vector<c10::IValue> aliased_returns(const c10::FunctionSchema& schema,
                                                  c10::ArrayRef<c10::IValue> args) {
    std::vector<c10::IValue> out;
    for (const auto& r : schema.returns()) {
      const c10::AliasInfo* ra = r.alias_info();
      TORCH_CHECK(ra != nullptr && ra->isWrite(), schema.name(),
                  ": a self-writing rule's op must return only arguments it writes");
      bool found = false;
      for (size_t i = 0; i < schema.arguments().size() && !found; ++i) {
        const c10::AliasInfo* aa = schema.arguments()[i].alias_info();
        if (aa != nullptr && aa->isWrite() && aa->beforeSets() == ra->beforeSets()) {
          out.push_back(args[i]);
          found = true;
        }
      }
      TORCH_CHECK(found, schema.name(), ": no argument aliases return ", r.name());
    }
    return out;
  }

  static constexpr const char* kUnsignedWhy = " for uint16/uint32/uint64 tensors";

  // Every result floating: the op computed in a float type, which CPU's
  // kernels do for the barebones unsigned dtypes too (x.sin(), x / y, x * 1.5).
  static bool all_floating(LoweringContext& ctx, const std::vector<ir::Value>& values) {
    for (ir::Value v : values) {
      if (!v.valid()) continue;
      const ir::DType d = ctx.g().type(v).dtype;
      if (!ir::is_float(d) || ir::is_float8(d)) return false;
    }
    return true;
  }

  static bool returns_complex(LoweringContext& ctx, const std::vector<ir::Value>& values) {
    for (ir::Value v : values) {
      if (v.valid() && ir::is_complex(ctx.g().type(v).dtype)) return true;
    }
    return false;
  }

  static void push_returns(const c10::FunctionSchema& schema, std::vector<at::Tensor> tensors,
                           torch::jit::Stack* stack) {
    const auto& returns = schema.returns();
    if (returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType) {
      stack->emplace_back(c10::List<at::Tensor>(tensors));
      return;
    }
    TORCH_CHECK(tensors.size() == returns.size(), schema.name(), ": lowering returned ",
                tensors.size(), " tensors for ", returns.size(), " results");
    for (auto& t : tensors) stack->emplace_back(std::move(t));
  }

  const Rule* rule_;
  const Rule* complex_rule_;
  Variant variant_;
  std::string name_;
  std::string key_;
  bool unsigned_native_;        // barebones_unsigned_native(key_)
  bool float8_native_;          // float8_native(key_)
  bool refuses_complex_self_;   // abs_
  bool pointwise_;              // the functional op is tagged pointwise (check_partial_overlap)
  IndexOverlap index_overlap_;  // check_index_overlap's rule for this op
  bool out_dtype_first_;        // an out= of another dtype is refused before the rule
  std::once_flag layout_once_;
  LayoutRule layout_;
  std::unique_ptr<DispatchCache> cache_;  // null: calls of this kernel are not cached
};

// Same argument names and types, in order (defaults may differ).
bool same_arguments(const c10::FunctionSchema& functional, const c10::FunctionSchema& out) {
  std::vector<const c10::Argument*> non_out;
  for (const auto& a : out.arguments()) {
    if (!a.is_out()) non_out.push_back(&a);
  }
  const auto& fa = functional.arguments();
  if (fa.size() != non_out.size()) return false;
  for (size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].name() != non_out[i]->name() || fa[i].type()->str() != non_out[i]->type()->str()) {
      return false;
    }
  }
  return true;
}

// The functional's argument order read from an in-place overload's arguments:
// perm[i] = the in-place position of functional argument i (polygamma(n, self)
// vs polygamma_(self, n)); empty when the names do not correspond.
std::vector<size_t> inplace_order(const c10::FunctionSchema& functional,
                                  const c10::FunctionSchema& inplace) {
  const auto& fa = functional.arguments();
  const auto& ia = inplace.arguments();
  if (fa.size() != ia.size()) return {};
  std::vector<size_t> perm;
  for (const auto& f : fa) {
    auto it = std::find_if(ia.begin(), ia.end(), [&](const c10::Argument& i) {
      return i.name() == f.name() && i.type()->str() == f.type()->str();
    });
    if (it == ia.end()) return {};
    perm.push_back(static_cast<size_t>(it - ia.begin()));
  }
  return perm;
}

// `rule` reading its arguments in the order `perm` picks them (kept for the
// life of the process: kernels hold rule pointers).
const Rule* reordered(const Rule* rule, std::vector<size_t> perm) {
  if (rule == nullptr) return nullptr;
  static auto* kept = new std::deque<Rule>();
  kept->push_back([rule, perm](LoweringContext& ctx, const Args& a) {
    std::vector<c10::IValue> v;
    for (size_t p : perm) v.push_back(a[p]);
    return (*rule)(ctx, Args(v));
  });
  return &kept->back();
}

bool is_out_fn(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments()) {
    if (a.is_out()) return true;
  }
  return false;
}

torch::Library& library() {
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                        __FILE__, __LINE__);
  return *lib;
}

void impl(const std::string& name, const Rule* rule, const Rule* complex_rule, Variant variant,
          const std::string& key) {
  library().impl(name.c_str(),
                 torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweringKernel>(
                     rule, complex_rule, variant, "aten::" + name, key)));
}

// The rule serving complex calls of `name`, or null (see complex_table()).
const Rule* complex_rule_for(const std::string& name, const Rule* main) {
  auto it = complex_table().find(name);
  if (it == complex_table().end()) return nullptr;
  return it->second ? &it->second : main;
}

std::string full_name(const c10::OperatorName& n) {
  std::string s = n.name.substr(6);  // drop "aten::"
  if (!n.overload_name.empty()) s += "." + n.overload_name;
  return s;
}

}  // namespace

std::unordered_map<std::string, Rule>& complex_table() {
  static std::unordered_map<std::string, Rule> table;
  return table;
}

RegisterComplex::RegisterComplex(const char* name, Rule rule) {
  if (!complex_table().emplace(name, std::move(rule)).second) {
    duplicate_lowerings().push_back(std::string(name) + " (complex)");
  }
}

bool is_complex_arg(const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return t.defined() && t.is_complex();
  }
  if (v.isList()) {  // Tensor[] and Tensor?[] (read in place, no copy)
    for (const auto& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined() && e.toTensor().is_complex()) return true;
    }
    return false;
  }
  return false;
}

void resize_out(const at::Tensor& out, c10::IntArrayRef sizes) {
  if (out.sizes() != sizes) out.resize_(sizes);
}

void register_lowerings() {
  static bool done = false;
  if (done) return;
  done = true;
  for (const auto& name : duplicate_lowerings()) {
    TORCH_CHECK(false, "torchtpu: aten::", name, " has two lowering rules");
  }
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_map<std::string, std::vector<c10::OperatorName>> overloads;
  for (const auto& n : dispatcher.getAllOpNames()) {
    if (n.name.rfind("aten::", 0) == 0) overloads[n.name].push_back(n);
  }
  for (const auto& [name, rule] : complex_table()) {
    TORCH_CHECK(lowering_table().count(name) || out_only_table().count(name),
                "torchtpu: complex rule for aten::", name, " has no main rule");
  }
  for (const auto& [name, rule] : lowering_table()) {
    const Rule* complex_rule = complex_rule_for(name, &rule);
    auto dot = name.find('.');
    std::string base = name.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
    auto handle = dispatcher.findSchema({"aten::" + base, overload});
    TORCH_CHECK(handle.has_value(), "torchtpu: lowering for unknown op aten::", name);
    TORCH_CHECK(!handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd),
                "torchtpu: aten::", name,
                " is CompositeImplicitAutograd; lower what it "
                "decomposes into instead");
    impl(name, &rule, complex_rule, Variant::kFunctional, name);
    // The in-place overload: foo_ for foo, and Python's operator names
    // __iX__ for the dunder ops (__lshift__ -> __ilshift__).
    const bool dunder =
        base.size() > 4 && base.rfind("__", 0) == 0 && base.compare(base.size() - 2, 2, "__") == 0;
    const std::string inplace_base = dunder ? "__i" + base.substr(2) : base + "_";
    if (auto inplace = dispatcher.findSchema({"aten::" + inplace_base, overload})) {
      const auto& args = inplace->schema().arguments();
      const std::vector<size_t> perm = inplace_order(handle->schema(), inplace->schema());
      if (!args.empty() && args[0].alias_info() && args[0].alias_info()->isWrite() &&
          !perm.empty() &&
          !inplace->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        const bool in_order = std::is_sorted(perm.begin(), perm.end());
        impl(inplace_base + (overload.empty() ? "" : "." + overload),
             in_order ? &rule : reordered(&rule, perm),
             in_order ? complex_rule : reordered(complex_rule, perm), Variant::kInplace, name);
      }
    }
    for (const auto& on : overloads["aten::" + base]) {
      auto oh = dispatcher.findSchema(on);
      if (!oh || !is_out_fn(oh->schema()) ||
          oh->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        continue;
      }
      if (same_arguments(handle->schema(), oh->schema())) {
        impl(full_name(on), &rule, complex_rule, Variant::kOut, name);
      }
    }
  }
  for (const auto& [name, rule] : out_only_table()) {
    impl(name, &rule, complex_rule_for(name, &rule), Variant::kOutOnly, name);
  }
}

}  // namespace ttpu::aten
