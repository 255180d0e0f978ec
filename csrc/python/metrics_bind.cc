// torchtpu._C's counters: the runtime's metrics, the persistent cache's
// info, fallback and recompile counts, the lowered ops (torchtpu/metrics.py,
// torchtpu/cache.py).
#include "python/bindings.h"

#include <optional>

#include <pybind11/stl.h>

#include "aten/fallback.h"
#include "aten/lowering.h"
#include "cache/store.h"
#include "runtime/fusion_guard.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using ttpu::runtime::Runtime;

namespace ttpu::python {

void bind_metrics(py::module& m) {
  m.def("_metrics", [] {
    auto& mt = guarded([]() -> ttpu::runtime::Metrics& { return Runtime::get().metrics(); });
    py::dict d;
    d["compiles"] = mt.compiles.load();
    d["compile_seconds"] = mt.compile_ns.load() * 1e-9;
    d["executes"] = mt.executes.load();
    d["cache_hits"] = mt.cache_hits.load();
    d["cache_misses"] = mt.cache_misses.load();
    d["persistent_hits"] = mt.persistent_hits.load();
    d["persistent_misses"] = mt.persistent_misses.load();
    d["persistent_rejected"] = mt.persistent_rejected.load();
    d["persistent_load_seconds"] = mt.persistent_load_ns.load() * 1e-9;
    d["bytes_to_device"] = mt.bytes_to_device.load();
    d["bytes_to_host"] = mt.bytes_to_host.load();
    d["donations"] = mt.donations.load();
    d["donated_bytes"] = mt.donated_bytes.load();
    d["fused_flushes"] = mt.fused_flushes.load();
    d["fused_strict_ops"] = mt.fused_strict_ops.load();
    d["dispatch_cache_hits"] = mt.dispatch_cache_hits.load();
    d["deferred_ops"] = mt.deferred_ops.load();
    d["background_compiles_peak"] = mt.background_compiles_peak.load();
    d["cached_programs"] = Runtime::get().cached_programs();
    return d;
  });
  // The persistent compile cache: the runtime's store once it is initialised,
  // else the directory the environment names (so info works before any tpu op).
  m.def("_cache_info", [] {
    py::dict d;
    std::optional<ttpu::cache::DiskStore> from_env;
    const ttpu::cache::DiskStore* store = nullptr;
    int64_t hits = 0, misses = 0, rejected = 0;
    if (Runtime::initialized()) {
      auto& rt = Runtime::get();
      store = rt.disk_cache();
      hits = rt.metrics().persistent_hits.load();
      misses = rt.metrics().persistent_misses.load();
      rejected = rt.metrics().persistent_rejected.load();
    } else if (std::string dir = ttpu::cache::cache_dir_from_env(); !dir.empty()) {
      try {
        store = &from_env.emplace(dir);
      } catch (const ttpu::cache::StoreError&) {
        // Reported as disabled; the runtime warns when it starts.
      }
    }
    ttpu::cache::StoreInfo info;
    if (store != nullptr) info = store->info();
    d["enabled"] = store != nullptr;
    d["dir"] = store != nullptr ? py::object(py::str(info.dir)) : py::object(py::none());
    d["entries"] = info.entries;
    d["bytes"] = info.bytes;
    d["hits"] = hits;
    d["misses"] = misses;
    d["rejected"] = rejected;
    return d;
  });
  m.def("_cache_clear", []() -> int64_t {
    if (Runtime::initialized()) {
      auto* store = Runtime::get().disk_cache();
      return store != nullptr ? store->clear() : 0;
    }
    std::string dir = ttpu::cache::cache_dir_from_env();
    if (dir.empty()) return 0;
    try {
      return ttpu::cache::DiskStore(dir).clear();
    } catch (const ttpu::cache::StoreError&) {
      return 0;
    }
  });
  m.def("_reset_metrics", [] {
    guarded([] {
      Runtime::get().metrics().reset();
      return 0;
    });
    ttpu::aten::reset_fallback_counts();
  });
  m.def("_fallback_counts", &ttpu::aten::fallback_counts);
  m.def("_set_native_functions_yaml", &ttpu::aten::set_native_functions_yaml);
  m.def("_recompile_counts", [] { return ttpu::runtime::recompile_guard().counts(); });
  m.def("_reset_recompile_counts", [] { ttpu::runtime::recompile_guard().reset(); });
  m.def("_stop_fusing", [](const std::string& start) {
    return ttpu::runtime::recompile_guard().stop_fusing(start);
  });
  m.def("_lowered_ops", [] {
    std::vector<std::string> names;
    for (const auto& [k, v] : ttpu::aten::lowering_table()) names.push_back(k);
    return names;
  });
}

}  // namespace ttpu::python
