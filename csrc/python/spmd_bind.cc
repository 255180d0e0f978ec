#include "python/spmd_bind.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/spmd.h"

namespace ttpu::python {

void bind_spmd(pybind11::module& m) {
  m.def("_spmd_run", [](const std::string& text, const std::vector<int64_t>& devices,
                        const std::vector<std::vector<at::Tensor>>& args,
                        const std::vector<c10::ScalarType>& out_dtypes, const std::string& name) {
    pybind11::gil_scoped_release no_gil;
    return ttpu::aten::run_spmd(text, devices, args, out_dtypes, name);
  });
  m.def("_all_reduce_local", [](const std::vector<at::Tensor>& tensors, const std::string& op) {
    pybind11::gil_scoped_release no_gil;
    return ttpu::aten::all_reduce_local(tensors, op);
  });
}

}  // namespace ttpu::python
