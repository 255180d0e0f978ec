// torchtpu._C's program functions: torch.compile's captured programs
// (aten/compiled_call.h), user kernels (aten/user_kernel.h), and a test hook
// that compiles StableHLO text.
#include "python/bindings.h"

#include <optional>

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/compiled_call.h"
#include "aten/user_kernel.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using ttpu::runtime::Runtime;

namespace ttpu::python {

void bind_programs(py::module& m) {
  // torch.compile graphs run as one execute (aten/compiled_call.h).
  using ttpu::aten::CompiledCall;
  py::class_<CompiledCall, std::shared_ptr<CompiledCall>>(m, "_CompiledCall");
  m.def("_capture_begin", &CompiledCall::begin, py::arg("inputs"), py::arg("writes") = false);
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
    return py::make_tuple(d.text, d.device, params, prog, outs, d.check_outputs);
  });
  m.def("_compiled_defer_checks",
        [](const CompiledCall& call, const std::vector<at::Tensor>& outs) {
          call.spmd_defer_checks(outs);
        });
  // For tests: the error path of a program the plugin rejects.
  m.def("_compile_stablehlo", [](const std::string& text, const std::string& op) {
    guarded([&] {
      Runtime::get().compile_text(text, op);
      return 0;
    });
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

}  // namespace ttpu::python
