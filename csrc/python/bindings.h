// The areas of torchtpu._C's bindings, one function and one file each; module.cc
// (the module's init) calls them. Each binding is a thin conversion.
#pragma once

#include <stdexcept>

#include <pybind11/pybind11.h>

#include "runtime/runtime.h"  // (the PJRT layer's error types)

namespace ttpu::python {

// PJRT and plugin errors become RuntimeError with their own message.
template <typename F>
decltype(auto) guarded(F f) {
  try {
    return f();
  } catch (const ttpu::pjrt::PluginError& e) {
    throw std::runtime_error(e.what());
  } catch (const ttpu::pjrt::PjrtError& e) {
    throw std::runtime_error(e.what());
  }
}

// runtime_bind.cc: the plugin, the eager modes and their settings, flushes,
// synchronize.
void bind_runtime(pybind11::module& m);
// programs_bind.cc: torch.compile's captured programs, user kernels.
void bind_programs(pybind11::module& m);
// metrics_bind.cc: metrics, the persistent cache's info, fallback and
// recompile counts, the lowered ops.
void bind_metrics(pybind11::module& m);
// device_bind.cc: the current device, memory statistics, events, generators,
// storage test hooks.
void bind_device(pybind11::module& m);

}  // namespace ttpu::python
