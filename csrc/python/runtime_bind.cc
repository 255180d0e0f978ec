// torchtpu._C's runtime functions: the plugin, the eager modes and their
// settings, flushes and synchronize (torchtpu/_modes.py, torchtpu/__init__.py).
#include "python/bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/deferred_check.h"
#include "aten/device.h"
#include "aten/growing_buckets.h"
#include "runtime/compile_pool.h"
#include "runtime/fusion.h"
#include "runtime/fusion_hybrid.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace py = pybind11;
using ttpu::runtime::Runtime;

namespace ttpu::python {

void bind_runtime(py::module& m) {
  m.def("_set_background_compile", &ttpu::runtime::set_background_compile);
  m.def("_get_background_compile", &ttpu::runtime::background_compile);
  m.def("_set_growing_buckets", &ttpu::aten::set_growing_buckets);
  m.def("_set_fused_hybrid", &ttpu::runtime::set_fused_hybrid);
  m.def("_get_fused_hybrid", &ttpu::runtime::fused_hybrid);
  m.def("_resolve_plugin_path",
        [] { return guarded([] { return Runtime::resolve_plugin_path(); }); });
  m.def("_plugin_path", [] { return guarded([] { return Runtime::get().plugin_path(); }); });
  m.def("_platform_name",
        [] { return guarded([] { return Runtime::get().client().platform_name(); }); });
  m.def("_device_count", [] { return ttpu::aten::device_count_or_zero(); });
  // Fused mode: flushes made by reads (the step hook tells them from cuts).
  m.def("_fused_read_flushes", &ttpu::runtime::read_flushes);
  // Fused mode: the pending graph of `device` (-1: every device) becomes an
  // enqueued program; nothing waits (the end of a training step,
  // torchtpu/_step_flush.py).
  m.def(
      "_flush",
      [](int device) {
        py::gil_scoped_release release;
        guarded([device] {
          if (device < 0) {
            ttpu::runtime::flush_all();
          } else {
            ttpu::runtime::fusion(device).flush();
          }
          return 0;
        });
      },
      py::arg("device") = -1);
  m.def("_synchronize", [] {
    py::gil_scoped_release release;
    guarded([] {
      ttpu::runtime::flush_all();
      Runtime::get().synchronize();
      return 0;
    });
    py::gil_scoped_acquire gil;
    ttpu::aten::run_deferred_checks();
  });
  m.def("_set_eager_mode", [](const std::string& mode) {
    auto& rt = guarded([]() -> Runtime& { return Runtime::get(); });
    // Whatever the old mode recorded runs before the new mode takes over.
    guarded([] {
      ttpu::runtime::flush_all();
      return 0;
    });
    if (mode == "strict") {
      rt.set_mode(ttpu::runtime::EagerMode::kStrict);
    } else if (mode == "debug") {
      rt.set_mode(ttpu::runtime::EagerMode::kDebug);
      rt.synchronize();
    } else if (mode == "fused") {
      rt.set_mode(ttpu::runtime::EagerMode::kFused);
    } else {
      throw py::value_error("eager mode must be 'strict', 'debug' or 'fused', got '" + mode + "'");
    }
  });
  m.def("_get_eager_mode", [] {
    return guarded([] {
      switch (Runtime::get().chosen_mode()) {
        case ttpu::runtime::EagerMode::kDebug: return "debug";
        case ttpu::runtime::EagerMode::kFused: return "fused";
        default: return "strict";
      }
    });
  });
  // Whether a torch.profiler session with tpu activities is recording.
  m.def("_profiler_recording", [] { return ttpu::runtime::trace::active(); });
}

}  // namespace ttpu::python
