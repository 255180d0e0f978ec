// torchtpu._C: the bindings, one translation unit. Python reaches the core only
// through these functions; everything here is a thin conversion.
#include <optional>

#include <Python.h>
#include <pythread.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ops/empty.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/autograd.h>

#include "aten/compiled_call.h"
#include "aten/copy.h"
#include "aten/deferred_check.h"
#include "aten/device.h"
#include "aten/fallback.h"
#include "aten/growing_buckets.h"
#include "aten/host_staging.h"
#include "aten/lowering.h"
#include "aten/memory.h"
#include "aten/profiler.h"
#include "aten/user_kernel.h"
#include "cache/store.h"
#include "distributed/python_bind.h"
#include "python/settings_bind.h"
#include "python/spmd_bind.h"
#include "runtime/event.h"
#include "runtime/fusion.h"
#include "runtime/fusion_guard.h"
#include "runtime/compile_pool.h"
#include "runtime/fusion_hybrid.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace py = pybind11;
using ttpu::runtime::Runtime;

namespace {

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
    py::module_::import("torchtpu._recompile").attr("on_new_graph")(g.start, g.count,
                                                                    g.difference,
                                                                    g.shape_changes);
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
  m.def("_drain_autograd_threads", [] { guarded([] { drain_autograd_device_threads(); return 0; }); });
  m.def("_init", [](const std::string& path, int n) {
    guarded([&] { Runtime::init(path, n); return 0; });
  });
  m.def("_ensure_initialized", [] { guarded([] { Runtime::get(); return 0; }); });
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
  m.def("_set_background_compile", &ttpu::runtime::set_background_compile);
  m.def("_get_background_compile", &ttpu::runtime::background_compile);
  m.def("_set_growing_buckets", &ttpu::aten::set_growing_buckets);
  m.def("_set_fused_hybrid", &ttpu::runtime::set_fused_hybrid);
  m.def("_get_fused_hybrid", &ttpu::runtime::fused_hybrid);
  m.def("_resolve_plugin_path", [] { return guarded([] { return Runtime::resolve_plugin_path(); }); });
  m.def("_plugin_path", [] { return guarded([] { return Runtime::get().plugin_path(); }); });
  m.def("_platform_name", [] { return guarded([] { return Runtime::get().client().platform_name(); }); });
  m.def("_device_count", [] { return ttpu::aten::device_count_or_zero(); });
  // Fused mode: flushes made by reads (the step hook tells them from cuts).
  m.def("_fused_read_flushes", &ttpu::runtime::read_flushes);
  // Fused mode: the pending graph of `device` (-1: every device) becomes an
  // enqueued program; nothing waits (the end of a training step,
  // torchtpu/_step_flush.py).
  m.def("_flush", [](int device) {
    py::gil_scoped_release release;
    guarded([device] {
      if (device < 0) {
        ttpu::runtime::flush_all();
      } else {
        ttpu::runtime::fusion(device).flush();
      }
      return 0;
    });
  }, py::arg("device") = -1);
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
  // torch.compile graphs run as one execute (aten/compiled_call.h).
  using ttpu::aten::CompiledCall;
  py::class_<CompiledCall, std::shared_ptr<CompiledCall>>(m, "_CompiledCall");
  m.def("_capture_begin", &CompiledCall::begin);
  m.def("_capture_end", &CompiledCall::end);
  m.def("_capture_abort", &CompiledCall::abort);
  m.def("_compiled_replay",
        [](const std::vector<std::shared_ptr<CompiledCall>>& calls,
           const std::vector<at::Tensor>& inputs)
            -> std::optional<std::vector<std::optional<at::Tensor>>> {
          for (const auto& c : calls) {
            if (auto out = c->replay(inputs)) return out;
          }
          return std::nullopt;
        });
  m.def("_compiled_raw_execute_ns", &CompiledCall::raw_execute_ns);
  // torchtpu.spmd: the captured program, to compile again over several devices.
  m.def("_compiled_describe", [](const CompiledCall& call) {
    auto d = call.describe();
    py::list params, outs, prog;
    for (auto& p : d.params) {
      params.append(py::make_tuple(p.source, p.index, p.dtype, p.dims, p.constant));
    }
    for (auto& o : d.program_outputs) prog.append(py::make_tuple(o.first, o.second));
    for (auto& o : d.outputs) {
      outs.append(py::make_tuple(o.from, o.index, o.dtype, o.sizes, o.strides, o.offset));
    }
    return py::make_tuple(d.text, d.device, params, prog, outs);
  });
  m.def("_set_eager_mode", [](const std::string& mode) {
    auto& rt = guarded([]() -> Runtime& { return Runtime::get(); });
    // Whatever the old mode recorded runs before the new mode takes over.
    guarded([] { ttpu::runtime::flush_all(); return 0; });
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
    guarded([] { Runtime::get().metrics().reset(); return 0; });
    ttpu::aten::reset_fallback_counts();
  });
  m.def("_fallback_counts", &ttpu::aten::fallback_counts);
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
  m.def("_current_device", [] {
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  });
  m.def("_set_device", [](int index) {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, index));
  });
  // Memory accounting (aten/memory.cc), keyed as torch.cuda.memory_stats keys
  // its "<stat>.all.<current|peak|allocated|freed>" entries.
  m.def("_memory_stats", [](int device) {
    auto stats = ttpu::aten::tpu_device_allocator()->getDeviceStats(device);
    py::dict out;
    auto put = [&](const char* name, const c10::CachingAllocator::StatArray& a) {
      const auto& s = a[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      std::string base = std::string(name) + ".all.";
      out[py::str(base + "current")] = s.current;
      out[py::str(base + "peak")] = s.peak;
      out[py::str(base + "allocated")] = s.allocated;
      out[py::str(base + "freed")] = s.freed;
    };
    put("allocation", stats.allocation);
    put("segment", stats.segment);
    put("active", stats.active);
    put("allocated_bytes", stats.allocated_bytes);
    put("reserved_bytes", stats.reserved_bytes);
    put("active_bytes", stats.active_bytes);
    put("requested_bytes", stats.requested_bytes);
    out["num_alloc_retries"] = stats.num_alloc_retries;
    out["num_ooms"] = stats.num_ooms;
    return out;
  });
  m.def("_reset_peak_memory_stats", [](int device) {
    ttpu::aten::tpu_device_allocator()->resetPeakStats(device);
  });
  m.def("_reset_accumulated_memory_stats", [](int device) {
    ttpu::aten::tpu_device_allocator()->resetAccumulatedStats(device);
  });
  m.def("_mem_get_info", [](int device) {
    return guarded([&] { return ttpu::aten::tpu_device_allocator()->getMemoryInfo(device); });
  });
  m.def("_device_kind", [](int device) {
    return guarded([&] { return Runtime::get().client().device_kind(device); });
  });
  // Event.elapsed_time for torch.tpu.Event (torch.Event's own accepts only an
  // exact torch.Event as the end). The ids are c10::Event::eventId(): our
  // runtime::DeviceEvent pointers, 0 until recorded.
  m.def("_event_elapsed_ms", [](uintptr_t start, uintptr_t end) {
    TORCH_CHECK_VALUE(start != 0 && end != 0,
                      "Both events must be recorded before calculating elapsed time.");
    auto* a = reinterpret_cast<ttpu::runtime::DeviceEvent*>(start);
    auto* b = reinterpret_cast<ttpu::runtime::DeviceEvent*>(end);
    TORCH_CHECK_VALUE(a->timing() && b->timing(),
                      "Both events must be created with argument 'enable_timing=True'.");
    py::gil_scoped_release release;
    return a->elapsed_ms(*b);
  });
  m.def("_device_copy_supported", [] { return Runtime::get().device_copy_supported(); });
  m.def("_manual_seed", [](uint64_t seed, int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  });
  m.def("_seed", [](int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.seed();
  });
  m.def("_initial_seed", [](int device) {
    return ttpu::aten::default_generator(device).current_seed();
  });
  m.def("_get_rng_state", [](int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return at::Tensor(gen.get_state());
  });
  m.def("_set_rng_state", [](const at::Tensor& state, int device) {
    auto gen = ttpu::aten::default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  });
  // For tests: the error path of a program the plugin rejects.
  m.def("_compile_stablehlo", [](const std::string& text, const std::string& op) {
    guarded([&] { Runtime::get().compile_text(text, op); return 0; });
  });
  m.def("_storage_producer", [](const at::Tensor& t) { return ttpu::aten::slot_of(t).producer; });
  // For tests: a new tensor whose storage is a copy made by the tpu allocator
  // (Allocator::clone, the path copy-on-write materialisation takes), which
  // shares the source's PJRT buffer.
  m.def("_allocator_clone", [](const at::Tensor& t) {
    const c10::Storage& src = t.storage();
    c10::Allocator* alloc = ttpu::aten::tpu_allocator();
    c10::DeviceGuard guard(t.device());
    c10::Storage copy(c10::Storage::use_byte_size_t(), src.nbytes(),
                      alloc->clone(src.data(), src.nbytes()), alloc, /*resizable=*/true);
    auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(copy), t.key_set(), t.dtype());
    out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    return out;
  });
  // For tests: identifies the PJRT buffer behind a storage (0: none yet), to
  // tell storages that share one buffer.
  m.def("_storage_buffer_id", [](const at::Tensor& t) {
    return reinterpret_cast<uintptr_t>(ttpu::aten::slot_of(t).buffer.get());
  });
  // User kernels (torchtpu/kernels.py): register StableHLO text -> (handle,
  // argument types, result types), each type a (shape, MLIR element type) pair.
  m.def("_kernel_register", [](const std::string& name, const std::string& text) {
    auto sig = guarded([&] { return ttpu::aten::register_kernel(name, text); });
    auto types = [](const std::vector<ttpu::ir::TensorType>& ts) {
      std::vector<std::pair<std::vector<int64_t>, std::string>> out;
      for (const auto& t : ts) out.emplace_back(t.dims, std::string(ttpu::ir::mlir_name(t.dtype)));
      return out;
    };
    return py::make_tuple(sig.handle, types(sig.params), types(sig.results));
  });
  m.def("_kernel_run", [](const std::string& handle, const std::vector<at::Tensor>& args) {
    return guarded([&] { return ttpu::aten::run_kernel(handle, args); });
  });
}
