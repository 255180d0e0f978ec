// Binds the tpu c10d backend's creator into torchtpu._C.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

namespace ttpu::distributed {

// The two transfers, from torchtpu's core (backend.h: HostToTpuFn, TpuToHostFn):
// `host_to_tpu(dst, host)` writes a host result into a tpu tensor in place,
// may keep `host`'s memory (aten::adopt_host_retiring; the backend hands it
// staging buffers it never touches again) and returns dst's old device buffer;
// `tpu_to_host(src, host)` starts reading src into host and returns the step
// that finishes it on another thread (aten::download_later).
void bind(pybind11::module& m,
          std::shared_ptr<void> (*host_to_tpu)(const at::Tensor& dst, const at::Tensor& host),
          std::function<void()> (*tpu_to_host)(const at::Tensor& src, const at::Tensor& host));

}  // namespace ttpu::distributed
