#include "aten/compiled_call.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

#include "stablehlo/emit.h"
#include <mutex>

#include "aten/device.h"
#include "runtime/fusion.h"

namespace ttpu::aten {
namespace {

// The buffer of a written input's `slot` that a replay may donate: its own,
// or, when something else holds it too (another storage sharing it, a read in
// flight), a copy of it in the slot's place, so the holder keeps its value.
std::shared_ptr<pjrt::Buffer> donatable(runtime::Slot& slot, const runtime::Capture& cap) {
  auto& rt = runtime::Runtime::get();
  const long own = slot.buffer.get() == rt.last_output(cap.device) ? 2 : 1;
  if (slot.buffer.use_count() > own) {
    try {
      slot.buffer = rt.copy_to_device(*slot.buffer, slot.dtype, slot.nbytes, cap.device);
    } catch (const pjrt::PjrtError& e) {
      TORCH_CHECK(false, "tpu: ", cap.name, ": copying a written input failed: ", e.what());
    }
  }
  return slot.buffer;
}

int device_of_inputs(const std::vector<at::Tensor>& inputs) {
  if (inputs.empty()) return current_device();
  return inputs[0].device().index();
}

// A tensor of `view`'s geometry over `storage` (no dispatcher call: this is
// what empty/as_strided would build, without their checks, which the capture
// already passed).
at::Tensor wrap(c10::Storage storage, const auto& view) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::fromScalarType(view.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(view.sizes, view.strides, view.offset);
  return t;
}

// Deferred checks pending when the capture began: the call's own come after.
thread_local size_t t_checks_before_capture = 0;
thread_local uint64_t t_drains_before_capture = 0;

}  // namespace

CompiledCall::View CompiledCall::View::of(const at::Tensor& t) {
  return {t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset(),
          static_cast<int64_t>(t.storage().nbytes())};
}

bool CompiledCall::View::matches(const at::Tensor& t) const {
  return t.scalar_type() == dtype && t.sizes().equals(sizes) && t.strides().equals(strides) &&
         t.storage_offset() == offset &&
         static_cast<int64_t>(t.storage().nbytes()) == storage_nbytes;
}

void CompiledCall::begin(const std::vector<at::Tensor>& inputs, bool writes) {
  std::vector<runtime::Slot*> slots;
  for (const at::Tensor& t : inputs) slots.push_back(&slot_of(t));
  runtime::fusion(device_of_inputs(inputs)).begin_capture(slots, writes);
  t_checks_before_capture = deferred_checks().size();
  t_drains_before_capture = deferred_check_drains();
}

void CompiledCall::abort(const std::vector<at::Tensor>& inputs) {
  runtime::fusion(device_of_inputs(inputs)).abort_capture();
}

std::shared_ptr<CompiledCall> CompiledCall::end(
    const std::vector<at::Tensor>& inputs, const std::vector<std::optional<at::Tensor>>& outputs) {
  const int device = device_of_inputs(inputs);
  std::unique_ptr<runtime::Capture> capture;
  try {
    capture = runtime::fusion(device).end_capture();
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", e.what());
  }
  if (capture == nullptr) return nullptr;
  auto call = std::make_shared<CompiledCall>();
  std::vector<runtime::Slot*> input_slots;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (t.device().index() != device) return nullptr;
    runtime::Slot& slot = slot_of(t);
    input_slots.push_back(&slot);
    call->inputs_.push_back(View::of(t));
    call->input_slot_dtypes_.push_back(slot.dtype);
    size_t alias = i;
    for (size_t j = 0; j < i; ++j) {
      if (input_slots[j]->buffer == slot.buffer) {
        alias = j;
        break;
      }
    }
    call->input_alias_.push_back(alias);
  }
  for (const auto& o : outputs) {
    Output out;
    if (o.has_value() && o->defined()) {
      if (o->device().type() != c10::DeviceType::PrivateUse1 || o->device().index() != device) {
        return nullptr;
      }
      out.view = View::of(*o);
      runtime::Slot* slot = &slot_of(*o);
      const auto& produced = capture->outputs;
      auto p = std::find(produced.begin(), produced.end(), slot);
      auto in = std::find(input_slots.begin(), input_slots.end(), slot);
      // (an input first: a written input's storage takes its new value)
      if (in != input_slots.end()) {
        out.from = From::kInput;
        out.index = static_cast<size_t>(in - input_slots.begin());
      } else if (p != produced.end()) {
        out.from = From::kProgram;
        out.index = static_cast<size_t>(p - produced.begin());
      } else if (out.view.storage_nbytes == 0) {
        out.from = From::kEmpty;
      } else {
        return nullptr;  // a value that did not come from this call
      }
    }
    call->outputs_.push_back(std::move(out));
  }
  const std::vector<DeferredCheck> checks = deferred_checks();
  if (deferred_check_drains() != t_drains_before_capture) return nullptr;
  for (size_t i = t_checks_before_capture; i < checks.size(); ++i) {
    const auto& produced = capture->outputs;
    auto p = std::find(produced.begin(), produced.end(), &slot_of(checks[i].value));
    auto q = std::find(produced.begin(), produced.end(), &slot_of(checks[i].ok));
    if (p == produced.end() || q == produced.end()) return nullptr;
    call->checks_.push_back({static_cast<size_t>(p - produced.begin()),
                             static_cast<size_t>(q - produced.begin()), View::of(checks[i].value),
                             View::of(checks[i].ok), checks[i].check});
  }
  call->capture_ = std::move(capture);
  return call;
}

std::optional<std::vector<std::optional<at::Tensor>>> CompiledCall::replay(
    const std::vector<at::Tensor>& inputs) const {
  const runtime::Capture& cap = *capture_;
  if (inputs.size() != inputs_.size()) return std::nullopt;
  std::vector<runtime::Slot*> slots;
  slots.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 ||
        t.device().index() != cap.device || !inputs_[i].matches(t)) {
      return std::nullopt;
    }
    runtime::Slot& slot = slot_of(t);
    if (slot.pending || !slot.error.empty()) {
      try {
        runtime::materialize(slot);
      } catch (const pjrt::PjrtError& e) {
        TORCH_CHECK(false, "tpu: ", cap.name, ": an input failed: ", e.what());
      }
    }
    if (slot.buffer == nullptr || slot.dtype != input_slot_dtypes_[i]) return std::nullopt;
    if (input_alias_[i] != i && slots[input_alias_[i]]->buffer != slot.buffer) {
      return std::nullopt;
    }
    slots.push_back(&slot);
  }
  auto& rt = runtime::Runtime::get();
  // Every draw eager would take, in order, whether or not the program reads it.
  std::vector<std::shared_ptr<pjrt::Buffer>> draws;
  if (cap.rng_draws > 0) {
    at::Generator gen = default_generator(cap.device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto* impl = gen.get<TpuGenerator>();
    for (size_t d = 0; d < cap.rng_draws; ++d) {
      auto [seed, offset] = impl->next_draw();
      uint64_t state[2] = {seed, offset};
      draws.push_back(rt.upload(state, ir::DType::kU64, {2}, cap.device));
    }
  }
  std::vector<pjrt::Buffer*> args;
  args.reserve(cap.args.size());
  // Written inputs' buffers the program consumes (aliased to their outputs).
  std::vector<std::shared_ptr<pjrt::Buffer>> donated;
  int64_t donated_bytes = 0;
  for (const runtime::Capture::Arg& a : cap.args) {
    switch (a.source) {
      case runtime::Capture::Source::kInput:
        if (a.donated_to >= 0) {
          donated.push_back(donatable(*slots[a.index], cap));
          donated_bytes += slots[a.index]->nbytes;
        }
        args.push_back(slots[a.index]->buffer.get());
        break;
      case runtime::Capture::Source::kRng: args.push_back(draws[a.index].get()); break;
      case runtime::Capture::Source::kConstant: args.push_back(a.constant.get()); break;
    }
  }
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  try {
    buffers = rt.execute(*cap.executable, args, cap.device, cap.name);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", cap.name, " failed: ", e.what());
  }
  for (const auto& [i, k] : cap.written) {
    runtime::Slot& slot = *slots[i];
    slot.buffer = buffers[k];
    slot.dtype = cap.output_dtypes[k];
    slot.producer = cap.name;
  }
  if (!donated.empty() && !buffers.empty()) {
    std::vector<std::unique_ptr<pjrt::Buffer>> consumed;
    for (auto& b : donated) {
      if (b.use_count() == 1) consumed.push_back(b->release());
    }
    rt.metrics().donations += static_cast<int64_t>(donated.size());
    rt.metrics().donated_bytes += donated_bytes;
    donated.clear();  // (one still held elsewhere dies with its last owner)
    if (!consumed.empty()) runtime::keep_donated_until_run(std::move(consumed), *buffers[0]);
  }
  // One storage per program output, shared by the outputs that view it.
  std::vector<std::optional<c10::Storage>> storages(buffers.size());
  std::vector<std::optional<at::Tensor>> result;
  result.reserve(outputs_.size());
  for (const Output& o : outputs_) {
    switch (o.from) {
      case From::kNone: result.emplace_back(std::nullopt); break;
      case From::kInput: result.emplace_back(wrap(inputs[o.index].storage(), o.view)); break;
      case From::kEmpty: result.emplace_back(wrap(new_storage(0, cap.device), o.view)); break;
      case From::kProgram:
        result.emplace_back(program_output(buffers, storages, o.index, o.view));
        break;
    }
  }
  for (const Check& c : checks_) {
    defer_check(program_output(buffers, storages, c.output, c.view),
                program_output(buffers, storages, c.ok_output, c.ok_view), c.check);
  }
  return result;
}

at::Tensor CompiledCall::program_output(const std::vector<std::shared_ptr<pjrt::Buffer>>& buffers,
                                        std::vector<std::optional<c10::Storage>>& storages,
                                        size_t k, const View& view) const {
  auto& storage = storages[k];
  if (!storage.has_value()) {
    storage = new_storage(view.storage_nbytes, capture_->device);
    runtime::Slot& slot = slot_of(*storage);
    slot.buffer = buffers[k];
    slot.dtype = capture_->output_dtypes[k];
    slot.producer = capture_->name;
  }
  return wrap(*storage, view);
}

double CompiledCall::raw_execute_ns(const std::vector<at::Tensor>& inputs, int n) const {
  const runtime::Capture& cap = *capture_;
  TORCH_CHECK(n > 0 && inputs.size() == inputs_.size(), "raw_execute_ns: bad arguments");
  auto& rt = runtime::Runtime::get();
  std::vector<std::shared_ptr<pjrt::Buffer>> draws;
  std::vector<pjrt::Buffer*> args;
  std::vector<std::pair<size_t, size_t>> chained;  // (argument, output donated to it)
  uint64_t state[2] = {0, 0};
  for (const runtime::Capture::Arg& a : cap.args) {
    switch (a.source) {
      case runtime::Capture::Source::kInput: {
        runtime::Slot& slot = slot_of(inputs[a.index]);
        runtime::materialize(slot);  // (a value strict mode recorded)
        if (a.donated_to >= 0) {     // (the first execute consumes a copy)
          draws.push_back(rt.copy_to_device(*slot.buffer, slot.dtype, slot.nbytes, cap.device));
          chained.emplace_back(args.size(), static_cast<size_t>(a.donated_to));
          args.push_back(draws.back().get());
          break;
        }
        args.push_back(slot.buffer.get());
        break;
      }
      case runtime::Capture::Source::kRng:
        draws.push_back(rt.upload(state, ir::DType::kU64, {2}, cap.device));
        args.push_back(draws.back().get());
        break;
      case runtime::Capture::Source::kConstant: args.push_back(a.constant.get()); break;
    }
  }
  for (pjrt::Buffer* b : args) TORCH_CHECK(b != nullptr, "raw_execute_ns: an input has no value");
  std::vector<std::shared_ptr<pjrt::Buffer>> last;
  // Donated outputs' handles: destroying one before its consumer ran would wait.
  std::vector<std::unique_ptr<pjrt::Buffer>> consumed;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto outs = cap.executable->execute(args, cap.device);
    for (const auto& [arg, out] : chained) {
      if (!last.empty()) consumed.push_back(last[out]->release());
      args[arg] = outs[out].get();
    }
    last = std::move(outs);
  }
  for (auto& b : last) b->await_ready();
  const auto ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start);
  return ns.count() / n;
}

CompiledCall::Description CompiledCall::describe() const {
  const runtime::Capture& cap = *capture_;
  TORCH_CHECK_NOT_IMPLEMENTED(cap.written.empty(), "torchtpu.spmd: ", cap.name,
                              " writes its inputs; such programs are not yet run over several "
                              "devices");
  TORCH_CHECK(cap.graph != nullptr, "torchtpu.spmd: ", cap.name, " kept no graph");
  const ir::Graph& graph = *cap.graph;
  Description d;
  d.text = stablehlo::emit(graph, "spmd");
  d.device = cap.device;
  const auto& params = graph.parameters();
  TORCH_CHECK(params.size() == cap.args.size(), "torchtpu.spmd: ", cap.name, " has ", params.size(),
              " parameters and ", cap.args.size(), " arguments");
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::TensorType& t = graph.type(ir::Value{params[i], 0});
    const runtime::Capture::Arg& a = cap.args[i];
    Param p{"constant", a.index, to_aten(t.dtype), t.dims, std::nullopt};
    if (a.source == runtime::Capture::Source::kInput) {
      p.source = "input";
    } else if (a.source == runtime::Capture::Source::kRng) {
      p.source = "rng";
    } else {
      int64_t numel = 1;
      for (int64_t n : t.dims) numel *= n;
      c10::Storage storage = new_storage(numel * ir::byte_size(t.dtype), cap.device);
      runtime::Slot& slot = slot_of(storage);
      slot.buffer = a.constant;
      slot.dtype = t.dtype;
      slot.producer = cap.name;
      View flat{to_aten(t.dtype), {numel}, {1}, 0, 0};
      p.constant = wrap(std::move(storage), flat);
    }
    d.params.push_back(std::move(p));
  }
  for (ir::Value v : graph.outputs()) {
    d.program_outputs.emplace_back(to_aten(graph.type(v).dtype), graph.type(v).dims);
  }
  for (const Output& o : outputs_) {
    static const char* kFrom[] = {"none", "program", "input", "empty"};
    d.outputs.push_back({kFrom[static_cast<int>(o.from)], o.index, o.view.dtype, o.view.sizes,
                         o.view.strides, o.view.offset});
  }
  for (const Check& c : checks_) {
    d.check_outputs.push_back(c.output);
    d.check_outputs.push_back(c.ok_output);
  }
  return d;
}

void CompiledCall::spmd_defer_checks(const std::vector<at::Tensor>& outputs) const {
  for (const Check& c : checks_) {
    TORCH_CHECK(c.output < outputs.size() && c.ok_output < outputs.size(),
                "spmd_defer_checks: ", outputs.size(), " outputs given");
    defer_check(wrap(outputs[c.output].storage(), c.view),
                wrap(outputs[c.ok_output].storage(), c.ok_view), c.check);
  }
}

}  // namespace ttpu::aten
