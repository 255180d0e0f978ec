#include "runtime/fusion_guard.h"

#include <utility>

namespace ttpu::runtime {
namespace {

std::mutex g_hooks_mu;
SourceLocator& locator() {
  static SourceLocator l;
  return l;
}
RecompileHandler& handler() {
  static RecompileHandler h;
  return h;
}

// "f32[64,16]", "i64[]": PyTorch users read shapes, not MLIR tensor types.
std::string type_str(const ir::TensorType& t) {
  std::string s(ir::mlir_name(t.dtype));
  s += "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? "," : "") + std::to_string(t.dims[i]);
  return s + "]";
}

std::string types_str(const std::vector<ir::TensorType>& ts) {
  if (ts.empty()) return "nothing";
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + type_str(ts[i]);
  return s;
}

// "shape", "dtype" or "shape and dtype": how two type lists of equal length differ.
std::string kind_of(const std::vector<ir::TensorType>& a, const std::vector<ir::TensorType>& b) {
  bool shape = false, dtype = false;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    shape = shape || a[i].dims != b[i].dims;
    dtype = dtype || a[i].dtype != b[i].dtype;
  }
  if (shape && dtype) return "shape and dtype";
  return dtype ? "dtype" : "shape";
}

bool same_op(const OpSummary& a, const OpSummary& b) {
  return a.op == b.op && a.results == b.results;
}

size_t common_prefix(const GraphSummary& a, const GraphSummary& b) {
  size_t i = 0;
  while (i < a.ops.size() && i < b.ops.size() && same_op(a.ops[i], b.ops[i])) ++i;
  return i;
}

size_t size_gap(const GraphSummary& a, const GraphSummary& b) {
  return a.ops.size() > b.ops.size() ? a.ops.size() - b.ops.size() : b.ops.size() - a.ops.size();
}

}  // namespace

void set_source_locator(SourceLocator l) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  locator() = std::move(l);
}

std::string locate_source() {
  SourceLocator l;
  {
    std::lock_guard<std::mutex> lock(g_hooks_mu);
    l = locator();
  }
  return l ? l() : std::string();
}

void set_recompile_handler(RecompileHandler h) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  handler() = std::move(h);
}

std::string describe_difference(const GraphSummary& now, const GraphSummary& before) {
  const size_t n = now.ops.size(), m = before.ops.size();
  const size_t i = common_prefix(now, before);
  if (i < n && i < m) {
    const OpSummary& a = now.ops[i];
    const OpSummary& b = before.ops[i];
    std::string where = "op " + std::to_string(i + 1) + " of " + std::to_string(n);
    if (a.op != b.op) {
      return "op sequence: " + where + " is " + a.op + " here, " + b.op + " in the earlier graph";
    }
    std::string kind =
        a.results.size() == b.results.size() ? kind_of(a.results, b.results) : "structure";
    return kind + ": " + where + " (" + a.op + ") produces " + types_str(a.results) + " here, " +
           types_str(b.results) + " in the earlier graph";
  }
  if (n > m) {
    return "op sequence: this graph has " + std::to_string(n) + " ops, the earlier one " +
           std::to_string(m) + " (op " + std::to_string(m + 1) + " here is " + now.ops[m].op + ")";
  }
  if (n < m) {
    return "op sequence: this graph has " + std::to_string(n) + " ops, the earlier one " +
           std::to_string(m) + " (which went on with " + before.ops[n].op + ")";
  }
  if (now.parameters.size() != before.parameters.size()) {
    return "structure: same ops, but " + std::to_string(now.parameters.size()) + " inputs here, " +
           std::to_string(before.parameters.size()) + " in the earlier graph";
  }
  for (size_t k = 0; k < now.parameters.size(); ++k) {
    if (now.parameters[k] == before.parameters[k]) continue;
    return kind_of({now.parameters[k]}, {before.parameters[k]}) + ": input " + std::to_string(k) +
           " is " + type_str(now.parameters[k]) + " here, " + type_str(before.parameters[k]) +
           " in the earlier graph";
  }
  auto donated = [](const GraphSummary& g, size_t k) {
    return k < g.donations.size() && g.donations[k] >= 0;
  };
  for (size_t k = 0; k < now.parameters.size(); ++k) {
    if (donated(now, k) == donated(before, k)) continue;
    return "donation: input " + std::to_string(k) + " is " +
           (donated(now, k) ? "donated here but not in the earlier graph"
                            : "not donated here but was in the earlier graph") +
           " (another tensor shares its buffer in one of them)";
  }
  return "structure: same ops, result types and inputs; the programs differ in how values "
         "are wired (views, constants or where the graph was cut)";
}

void RecompileGuard::on_new_graph(const std::string& start, GraphSummary summary,
                                  bool may_stop_fusing) {
  NewGraph event;
  event.start = start.empty() ? "<unknown>" : start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Line& line = lines_[event.start];
    event.count = ++line.count;
    const GraphSummary* closest = nullptr;
    size_t best = 0;
    // Newest first, so of equally close graphs the most recent one is named.
    for (auto it = line.recent.rbegin(); it != line.recent.rend(); ++it) {
      size_t p = common_prefix(summary, *it);
      if (closest == nullptr || p > best ||
          (p == best && size_gap(summary, *it) < size_gap(summary, *closest))) {
        closest = &*it;
        best = p;
      }
    }
    if (closest != nullptr) {
      event.difference = describe_difference(summary, *closest);
      if (event.difference.rfind("shape", 0) == 0) ++line.shape_changes;
    }
    event.shape_changes = may_stop_fusing ? line.shape_changes : 0;
    line.recent.push_back(std::move(summary));
    if (line.recent.size() > kKeptPerLine) line.recent.pop_front();
  }
  RecompileHandler h;
  {
    std::lock_guard<std::mutex> lock(g_hooks_mu);
    h = handler();
  }
  if (h) h(event);
}

std::map<std::string, int> RecompileGuard::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int> out;
  for (const auto& [start, line] : lines_) out[start] = line.count;
  return out;
}

bool RecompileGuard::stop_fusing(const std::string& start) {
  if (start.empty() || start == "<unknown>") return false;
  std::lock_guard<std::mutex> lock(mu_);
  lines_[start].strict = true;
  return true;
}

bool RecompileGuard::stops_fusing(const std::string& start) const {
  if (start.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lines_.find(start);
  return it != lines_.end() && it->second.strict;
}

void RecompileGuard::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  lines_.clear();
}

RecompileGuard& recompile_guard() {
  static RecompileGuard g;
  return g;
}

}  // namespace ttpu::runtime
