// torchtpu._C's module init: registers the device, the lowerings and the
// hooks, binds the process lifecycle functions, and calls each area's bind
// function (bindings.h). Python reaches the core only through these functions.

#include <Python.h>
#include <pythread.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "aten/copy.h"
#include "aten/device.h"
#include "aten/host_staging.h"
#include "aten/lowering.h"
#include "aten/memory.h"
#include "aten/profiler.h"
#include "distributed/python_bind.h"
#include "python/bindings.h"
#include "python/settings_bind.h"
#include "python/spmd_bind.h"
#include "runtime/fusion.h"
#include "runtime/fusion_guard.h"
#include "runtime/fusion_hybrid.h"
#include "runtime/compile_pool.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using ttpu::python::guarded;
using ttpu::runtime::Runtime;

namespace {

// Python is shutting down: no Python code may run (hooks return quietly).
bool python_unavailable() { return !Py_IsInitialized() || _Py_IsFinalizing(); }

// The recompile guard's hooks (runtime/fusion_guard.h): the runtime asks Python
// for the user's line and hands it every new fused graph. They may be called on
// autograd's device threads, which hold no GIL. A Python exception from the
// handler (RecompileError, or a RecompileWarning that filters turned into an
// error) leaves as py::error_already_set, which torch's and pybind11's
// boundaries restore as the original Python exception.
void install_recompile_hooks() {
  // A thread that must wait for another's fused graph lets go of the GIL
  // meanwhile: the other may need it (its recompile handler runs Python).
  ttpu::runtime::set_blocking_wait([](const std::function<void()>& wait) {
    if (!python_unavailable() && PyGILState_Check()) {
      py::gil_scoped_release release;
      wait();
    } else {
      wait();
    }
  });
  ttpu::runtime::set_source_locator([]() -> std::string {
    if (python_unavailable()) return "";
    py::gil_scoped_acquire gil;
    try {
      return py::module_::import("torchtpu._recompile").attr("user_line")().cast<std::string>();
    } catch (py::error_already_set& e) {
      // The location only improves a message: never fail an op for it. But
      // a Ctrl-C that landed here must not be lost: it is raised again at
      // the next point Python checks for signals.
      if (e.matches(PyExc_KeyboardInterrupt)) PyErr_SetInterrupt();
      return "";
    }
  });
  ttpu::runtime::set_recompile_handler([](const ttpu::runtime::NewGraph& g) {
    if (python_unavailable()) return;
    py::gil_scoped_acquire gil;
    py::module_::import("torchtpu._recompile")
        .attr("on_new_graph")(g.start, g.count, g.difference, g.shape_changes);
  });
}

// Waits on the device (a host read of a long program, torch.tpu.synchronize)
// poll for Python signals, so Ctrl-C raises KeyboardInterrupt there instead
// of being held until the program ends. Python runs signal handlers on its main
// thread only; other threads never poll.
void install_wait_poll() {
  static unsigned long main_ident = static_cast<unsigned long>(
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<uint64_t>());
  ttpu::pjrt::set_wait_poll([] {
    if (python_unavailable() || PyThread_get_thread_ident() != main_ident) return;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  });
}

// Interpreter exit right after a backward: autograd's tpu device thread may
// still hold the last reference to the finished GraphTask, whose saved thread
// state holds Python objects (the contextvars.Context that
// torch.autograd.backward stashes). If it drops them once the main thread is in
// Py_FinalizeEx, taking the GIL ends the thread with a forced unwind through a
// noexcept destructor: std::terminate, exit 134. Called from torchtpu's atexit
// hook (before finalization) with the GIL released: a tiny backward run from
// C++ (so its own GraphTask holds no Python object) is queued on each tpu
// device thread; when it completes, that thread has finished, and dropped, every
// task before it.
void drain_autograd_device_threads() {
  if (!Runtime::initialized() || ttpu::pjrt::in_forked_child()) return;
  const int n = ttpu::aten::device_count_or_zero();
  py::gil_scoped_release release;
  c10::AutoGradMode grad(true);
  // Size-0 tensors and a view: the backward is metadata only, so the drain
  // compiles and runs no program (a process's compile count and its persistent
  // cache stay as the script left them), yet its gradient is a tpu tensor, so
  // the engine still queues the task on the tpu device thread.
  for (int d = 0; d < n; ++d) {
    const auto options = at::TensorOptions().device(
        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(d)));
    auto x = at::empty({0}, options).requires_grad_(true);
    torch::autograd::variable_list outputs{x.view({0, 1})};
    torch::autograd::variable_list grad_outputs{at::empty({0, 1}, options)};
    torch::autograd::variable_list inputs{x};
    torch::autograd::grad(outputs, inputs, grad_outputs);
  }
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchtpu native core";
  ttpu::aten::register_device();
  ttpu::aten::register_lowerings();
  ttpu::aten::register_foreach();
  ttpu::aten::register_profiler();
  install_recompile_hooks();
  install_wait_poll();
  ttpu::distributed::bind(m, &ttpu::aten::adopt_host_retiring, &ttpu::aten::download_later);
  ttpu::python::bind_settings(m);
  ttpu::python::bind_spmd(m);

  m.def("_set_default_plugin", &Runtime::set_default_plugin);
  m.def("_is_in_bad_fork", [] { return ttpu::pjrt::in_forked_child(); });
  m.def("_drain_autograd_threads", [] {
    guarded([] {
      drain_autograd_device_threads();
      return 0;
    });
  });
  m.def("_init", [](const std::string& path, int n) {
    guarded([&] {
      Runtime::init(path, n);
      return 0;
    });
  });
  m.def("_ensure_initialized", [] {
    guarded([] {
      Runtime::get();
      return 0;
    });
  });
  m.def("_is_initialized", &Runtime::initialized);
  // Compiles still running on their own threads (the exit hook waits for them).
  m.def("_compiles_running", [] {
    return (Runtime::initialized() ? Runtime::get().compiles_running() : 0) +
           ttpu::runtime::background_compiles();
  });
  // The exit hook after an uncaught exception: strict ops still waiting for
  // their compiles are dropped, and so are the compiles not started yet.
  m.def("_drop_background_work", [] {
    ttpu::runtime::close_compile_queue();
    py::gil_scoped_release release;
    ttpu::runtime::discard_deferred(
        "the script ended by an exception before this value was computed");
  });
  ttpu::python::bind_runtime(m);
  ttpu::python::bind_programs(m);
  ttpu::python::bind_metrics(m);
  ttpu::python::bind_device(m);
}
