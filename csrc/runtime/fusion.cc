#include "runtime/fusion.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ttpu::runtime {
namespace {

// A pending graph past this many IR nodes is flushed: XLA's compile time grows
// with program size, and a step rarely needs more. TORCHTPU_FUSION_MAX_NODES
// overrides it.
size_t max_nodes() {
  static const size_t n = [] {
    const char* v = std::getenv("TORCHTPU_FUSION_MAX_NODES");
    long parsed = v ? std::strtol(v, nullptr, 10) : 0;
    return parsed > 0 ? static_cast<size_t>(parsed) : size_t{20000};
  }();
  return n;
}

std::mutex g_mu;
std::map<int, std::unique_ptr<Fusion>>& fusions() {
  static std::map<int, std::unique_ptr<Fusion>> m;
  return m;
}

}  // namespace

ir::Value Fusion::param(const std::shared_ptr<pjrt::Buffer>& buffer, const ir::TensorType& type,
                        bool dedup) {
  if (dedup) {
    for (const auto& [b, v] : slot_params_) {
      if (b == buffer.get()) return v;
    }
  }
  args_.push_back(buffer);
  ir::Value v = graph_.parameter(type);
  if (dedup) slot_params_.emplace_back(buffer.get(), v);
  return v;
}

void Fusion::record(const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                    const std::vector<ir::Value>& values, const std::vector<Slot*>& out_slots,
                    const std::string& op) {
  std::vector<ir::Value> bound;
  bound.reserve(args.size());
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
  std::vector<ir::Value> mapped = graph_.append(op_graph, bound, values);
  for (size_t i = 0; i < out_slots.size(); ++i) {
    Slot* s = out_slots[i];
    if (!s->pending) live_.push_back(s);
    s->pending = true;
    s->pending_value = mapped[i];
    s->error.clear();
    s->producer = op;
  }
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
}

void Fusion::flush() {
  if (live_.empty()) {
    reset();
    return;
  }
  std::vector<ir::Value> outs;
  outs.reserve(live_.size());
  for (Slot* s : live_) outs.push_back(s->pending_value);
  graph_.set_outputs(outs);
  std::string name = "fused graph of " + std::to_string(ops_) + " ops (first: " + first_op_ + ")";
  ir::Graph graph = std::move(graph_);
  std::vector<std::shared_ptr<pjrt::Buffer>> args = std::move(args_);
  std::vector<Slot*> live = std::move(live_);
  reset();
  std::vector<pjrt::Buffer*> raw;
  raw.reserve(args.size());
  for (auto& a : args) raw.push_back(a.get());
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  try {
    buffers = Runtime::get().run(graph, raw, device_, name);
  } catch (const std::exception& e) {
    for (Slot* s : live) {
      s->pending = false;
      s->buffer = nullptr;
      s->error = name + " failed: " + e.what();
    }
    throw;
  }
  for (size_t i = 0; i < live.size(); ++i) {
    live[i]->buffer = buffers[i];
    live[i]->pending = false;
    live[i]->producer = name;
  }
}

void Fusion::forget(Slot* slot) {
  auto it = std::find(live_.rbegin(), live_.rend(), slot);
  if (it != live_.rend()) live_.erase(std::next(it).base());
  slot->pending = false;
}

Fusion& fusion(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& f = fusions()[device];
  if (!f) f = std::make_unique<Fusion>(device);
  return *f;
}

void flush_all() {
  std::vector<Fusion*> all;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto& [d, f] : fusions()) all.push_back(f.get());
  }
  for (Fusion* f : all) f->flush();
}

void materialize(Slot& slot) {
  if (slot.pending) fusion(slot.device).flush();
  if (!slot.error.empty()) throw pjrt::PjrtError("fused execution", slot.error, -1);
}

void forget_pending(Slot& slot) {
  if (slot.pending) fusion(slot.device).forget(&slot);
}

}  // namespace ttpu::runtime
