// Python entry of the tpu c10d backend: torchtpu/distributed.py's creator calls
// _C._dist_tpu_backend(store, rank, size, timeout) from torch.distributed.
#include "distributed/python_bind.h"

#include <chrono>

#include <torch/csrc/utils/pybind.h>

#include "distributed/signature_check.h"
#include "distributed/backend.h"
#include "distributed/kv_store.h"
#include "distributed/trace.h"

namespace py = pybind11;

namespace ttpu::distributed {

void bind(py::module& m, std::shared_ptr<void> (*host_to_tpu)(const at::Tensor&, const at::Tensor&),
          std::function<void()> (*tpu_to_host)(const at::Tensor&, const at::Tensor&)) {
  set_host_to_tpu(host_to_tpu);
  set_tpu_to_host(tpu_to_host);
  m.def(
      "_dist_tpu_backend",
      [](py::object store, int rank, int size, py::object timeout) {
        // The inner host backend is torch's ProcessGroupGloo, built through its
        // Python constructor: torch ships no gloo headers to build it from C++.
        py::module dist = py::module::import("torch.distributed");
        py::object gloo_cls = dist.attr("ProcessGroupGloo");
        py::object gloo = gloo_cls(store, rank, size, timeout);
        auto inner = gloo.cast<c10::intrusive_ptr<c10d::Backend>>();
        // The signature exchanges' own group (backend.h): a second gloo
        // group on the same ranks, its keys apart in the same store.
        py::object signatures =
            gloo_cls(dist.attr("PrefixStore")("ttpu_signatures", store), rank, size, timeout);
        auto control = signatures.cast<c10::intrusive_ptr<c10d::Backend>>();
        double ms = timeout.attr("total_seconds")().cast<double>() * 1000.0;
        const std::chrono::milliseconds limit(static_cast<int64_t>(ms));
        // Or, in small groups, its queues in the same store (signature_exchange.h).
        py::object queues = dist.attr("PrefixStore")("ttpu_signature_queues", store);
        auto base = c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(
            queues.cast<c10d::Store*>());
        c10::intrusive_ptr<c10d::Backend> backend = c10::make_intrusive<TpuBackend>(
            inner, control, signature_store(base, control, limit), rank, size, limit);
        return backend;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"));
  // The PJRT key-value callbacks over a c10d store (kv_store.h), called as a
  // plugin calls them: _pjrt_kv_call(store, op, key, value, timeout_ms) ->
  // (PJRT_Error_Code, bytes). For tests across processes.
  m.def(
      "_pjrt_kv_call",
      [](py::object store, const std::string& op, const std::string& key, const std::string& value,
         int timeout_ms) {
        auto s = c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(
            store.cast<c10d::Store*>());
        std::pair<int, std::string> out;
        {
          py::gil_scoped_release no_gil;  // get may wait for another process
          out = call_kv_callback(s, op, key, value, timeout_ms);
        }
        return py::make_tuple(out.first, py::bytes(out.second));
      },
      py::arg("store"), py::arg("op"), py::arg("key"), py::arg("value") = std::string(),
      py::arg("timeout_ms") = 0);
  // Stage marks for bench/profile_distributed.py (trace.h): _dist_trace(True)
  // starts recording, _dist_trace(False) stops; both return (and clear) the
  // marks so far as (stage, wall ns, thread CPU ns, thread) tuples.
  m.def(
      "_dist_trace",
      [](bool on) {
        auto marks = trace::take();
        trace::enable(on);
        py::list out;
        for (const auto& k : marks)
          out.append(py::make_tuple(k.what, k.wall_ns, k.thread_ns, k.thread));
        return out;
      },
      py::arg("on"));
}

}  // namespace ttpu::distributed
