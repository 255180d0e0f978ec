// Binds the tpu c10d backend's creator into torchtpu._C.
#pragma once

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

namespace ttpu::distributed {

// `host_to_tpu(dst, host)` writes a host result into a tpu tensor in place and
// may keep `host`'s memory (aten::adopt_host); the backend hands it staging
// buffers it never touches again.
void bind(pybind11::module& m, void (*host_to_tpu)(const at::Tensor& dst, const at::Tensor& host));

}  // namespace ttpu::distributed
