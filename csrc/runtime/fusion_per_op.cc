// Fused mode in a recompile storm (fusion.h): the ops of a graph whose start
// line stopped fusing, kept next to the fused graph, and run without compiling
// that graph. An op whose program is the same as the op at the same position
// of the previous such graph from the line ("stable": its shapes did not move)
// joins its stable neighbours in one segment program, compiled once and then
// cached; an op whose shapes moved (the few a growing dimension reaches) runs
// as its own program, strict mode's. Results are the same either way: each
// value is computed by the same op program or by a copy of it in a segment.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/fusion.h"

namespace ttpu::runtime {

void Fusion::keep_op(const ir::Graph& op_graph, const std::vector<RecordedArg>& args,
                     const std::vector<ir::Value>& bound, const std::vector<ir::Value>& values,
                     const std::vector<ir::Value>& mapped, const std::string& op) {
  OpProgram p{op_graph, {}, op};
  p.graph.set_outputs(values);
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].slot != nullptr && args[k].slot->pending) {
      auto it = producers_.find({bound[k].node, bound[k].index});
      if (it == producers_.end()) {
        // Not an op's result (cannot happen: every pending value is one): the
        // graph then compiles as usual rather than run on a wrong input.
        per_op_ = false;
        per_op_ops_.clear();
        producers_.clear();
        return;
      }
      p.inputs.push_back({nullptr, it->second.op, it->second.result});
    } else {
      p.inputs.push_back(
          {args[k].slot != nullptr ? args[k].slot->buffer.get() : args[k].buffer.get()});
    }
  }
  for (size_t i = 0; i < mapped.size(); ++i) {
    producers_[{mapped[i].node, mapped[i].index}] = {per_op_ops_.size(), i};
  }
  per_op_ops_.push_back(std::move(p));
}

using Results = std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>>;

bool Fusion::per_op_at_hand(const std::vector<OpProgram>& ops) {
  Runtime& rt = Runtime::get();
  for (const OpProgram& p : ops) {
    if (!rt.program_at_hand(p.graph, per_op_optimization(p.graph))) return false;
  }
  return true;
}

// One program for ops [begin, end): an input from outside the range is a
// parameter (one per buffer of one type, one per earlier result), and every
// result of every op is an output, so the segment's structure depends only on
// its ops' programs and how they are wired.
void Fusion::run_segment(const std::vector<OpProgram>& ops, size_t begin, size_t end,
                         Results& results) {
  ir::Graph g;
  std::vector<pjrt::Buffer*> raw;
  std::map<std::pair<size_t, size_t>, ir::Value> inside, outside;
  std::vector<std::pair<pjrt::Buffer*, ir::Value>> buffers;
  std::vector<ir::Value> outs;
  for (size_t m = begin; m < end; ++m) {
    const ir::Graph& og = ops[m].graph;
    std::vector<ir::Value> bound;
    for (size_t q = 0; q < ops[m].inputs.size(); ++q) {
      const OpInput& in = ops[m].inputs[q];
      const ir::TensorType& type = og.type(ir::Value{og.parameters()[q], 0});
      if (in.buffer == nullptr && in.op >= begin) {
        bound.push_back(inside.at({in.op, in.result}));
        continue;
      }
      ir::Value* known = nullptr;
      if (in.buffer != nullptr) {
        for (auto& [b, v] : buffers) {
          if (b == in.buffer && g.type(v) == type) known = &v;
        }
      } else if (auto it = outside.find({in.op, in.result}); it != outside.end()) {
        known = &it->second;
      }
      if (known != nullptr) {
        bound.push_back(*known);
        continue;
      }
      ir::Value p = g.parameter(type);
      if (in.buffer != nullptr) {
        buffers.push_back({in.buffer, p});
        raw.push_back(in.buffer);
      } else {
        outside[{in.op, in.result}] = p;
        raw.push_back(results[in.op][in.result].get());
      }
      bound.push_back(p);
    }
    std::vector<ir::Value> mapped = g.append(og, bound, og.outputs());
    for (size_t i = 0; i < mapped.size(); ++i) {
      inside[{m, i}] = mapped[i];
      outs.push_back(mapped[i]);
    }
  }
  g.set_outputs(outs);
  std::string name =
      "fused segment of " + std::to_string(end - begin) + " ops (first: " + ops[begin].op + ")";
  std::vector<std::shared_ptr<pjrt::Buffer>> got = Runtime::get().run(g, raw, device_, name);
  size_t k = 0;
  for (size_t m = begin; m < end; ++m) {
    results[m].assign(got.begin() + k, got.begin() + k + ops[m].graph.outputs().size());
    k += ops[m].graph.outputs().size();
  }
}

void Fusion::run_per_op(const std::string& start, const std::vector<OpProgram>& ops,
                        const std::map<std::pair<int32_t, int32_t>, Producer>& producers,
                        const std::vector<ir::Value>& outputs, const std::vector<Slot*>& live,
                        bool segments) {
  Runtime& rt = Runtime::get();
  std::vector<size_t> sigs(segments ? ops.size() : 0);
  // A hash is enough: equal hashes of different programs only put an op in a
  // segment that then compiles anew; results come from the ops either way.
  for (size_t j = 0; j < sigs.size(); ++j) {
    sigs[j] = std::hash<std::string>{}(ops[j].graph.fingerprint());
  }
  std::vector<size_t> none;
  std::vector<size_t>& previous = segments ? last_per_op_[start] : none;
  auto stable = [&](size_t j) { return j < previous.size() && previous[j] == sigs[j]; };
  Results results(ops.size());
  size_t j = 0;
  while (j < ops.size()) {
    size_t end = j + 1;
    while (stable(j) && end < ops.size() && stable(end)) ++end;
    if (end - j > 1) {
      run_segment(ops, j, end, results);
    } else {
      std::vector<pjrt::Buffer*> raw;
      raw.reserve(ops[j].inputs.size());
      for (const OpInput& in : ops[j].inputs) {
        raw.push_back(in.buffer != nullptr ? in.buffer : results[in.op][in.result].get());
      }
      // Compiled as strict mode compiles it, so both modes share the program.
      results[j] =
          rt.run(ops[j].graph, raw, device_, ops[j].op, nullptr, per_op_optimization(ops[j].graph));
    }
    j = end;
  }
  if (segments) previous = std::move(sigs);
  for (size_t i = 0; i < live.size(); ++i) {
    if (live[i] == nullptr) continue;
    const Producer& p = producers.at({outputs[i].node, outputs[i].index});
    live[i]->buffer = results[p.op][p.result];
    live[i]->pending = false;
    live[i]->producer = ops[p.op].op;
  }
}

std::string Fusion::run_deferred(const std::vector<OpProgram>& ops,
                                 const std::map<std::pair<int32_t, int32_t>, Producer>& producers,
                                 const std::vector<ir::Value>& outputs,
                                 const std::vector<Slot*>& live, const std::string& name) {
  Runtime& rt = Runtime::get();
  constexpr size_t kNone = static_cast<size_t>(-1);
  // last_reader[op][result]: the last op reading that result (kNone: none).
  std::vector<std::vector<size_t>> last_reader(ops.size());
  for (size_t j = 0; j < ops.size(); ++j) {
    last_reader[j].assign(ops[j].graph.outputs().size(), kNone);
    for (const OpInput& in : ops[j].inputs) {
      if (in.buffer == nullptr) last_reader[in.op][in.result] = j;
    }
  }
  // keeps[op]: (result, index in `live`) of each slot whose final value it computes.
  std::vector<std::vector<std::pair<size_t, size_t>>> keeps(ops.size());
  for (size_t i = 0; i < live.size(); ++i) {
    const Producer& p = producers.at({outputs[i].node, outputs[i].index});
    keeps[p.op].push_back({p.result, i});
  }
  // (`live` entries turn null when forget() drops a slot during this flush)
  auto settle = [&](size_t j, const std::shared_ptr<pjrt::Buffer>* buffers,
                    const std::string& error) {
    for (auto [result, i] : keeps[j]) {
      if (live[i] == nullptr) continue;
      live[i]->buffer = buffers != nullptr ? buffers[result] : nullptr;
      live[i]->pending = false;
      live[i]->error = error;
      live[i]->producer = ops[j].op;
    }
  };
  Results results(ops.size());
  std::vector<std::string> failed(ops.size());  // the error each op's values carry
  std::string first;
  size_t j = 0;
  try {
    for (; j < ops.size(); ++j) {
      // (a failed op has no results: its readers fail without running)
      for (const OpInput& in : ops[j].inputs) {
        if (in.buffer == nullptr && !failed[in.op].empty()) failed[j] = failed[in.op];
      }
      if (failed[j].empty()) {
        std::vector<pjrt::Buffer*> raw;
        raw.reserve(ops[j].inputs.size());
        for (const OpInput& in : ops[j].inputs) {
          raw.push_back(in.buffer != nullptr ? in.buffer : results[in.op][in.result].get());
        }
        try {
          results[j] = rt.run(ops[j].graph, raw, device_, ops[j].op, nullptr,
                              per_op_optimization(ops[j].graph));
        } catch (const std::runtime_error& e) {
          failed[j] = name + ": " + ops[j].op + " failed: " + e.what();
          if (first.empty()) first = ops[j].op + ": " + e.what();
        }
      }
      settle(j, failed[j].empty() ? results[j].data() : nullptr, failed[j]);
      for (const OpInput& in : ops[j].inputs) {
        if (in.buffer == nullptr && last_reader[in.op][in.result] == j && !results[in.op].empty()) {
          results[in.op][in.result].reset();
        }
      }
      for (size_t r = 0; r < results[j].size(); ++r) {
        if (last_reader[j][r] == kNone) results[j][r].reset();
      }
    }
  } catch (...) {
    const std::string lost = name + " was interrupted before " + ops[j].op +
                             " ran; the values of it and the ops after it are lost";
    for (; j < ops.size(); ++j) settle(j, nullptr, lost);
    throw;
  }
  return first;
}

}  // namespace ttpu::runtime
