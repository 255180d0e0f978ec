// Host staging for torch.distributed's tpu backend (csrc/distributed): the two
// transfers its collectives make, in the forms that let the copies run off the
// caller's thread. Installed into the distributed layer by python/module.cc.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

namespace ttpu::aten {

// Starts reading tpu `src` into the dense host tensor `dst` (same dtype and
// shape, contiguous), for a copy finished later on another thread. Here, on
// the caller's thread: pending checks run, the ops producing `src` are
// launched (fused mode flushes), and `src`'s device buffer is held, so the
// copy reads the values `src` has now even if later ops write it (a held
// buffer is never donated). Returns the step that copies into `dst`: it may
// run on any thread, waits for the producing ops, and raises RuntimeError
// naming the op whose asynchronous execution failed. Returns null when the
// copy was made here already (views, conj / neg bits, other dtypes: the
// ordinary copy_).
std::function<void()> download_later(const at::Tensor& src, const at::Tensor& dst);

// adopt_host (copy.h) for a write that may overlap reads of `dst` on another
// thread (a collective's result written back from gloo's thread while the
// caller touches the output before wait()): returns the device buffer `dst`'s
// storage held before (null if none), which the caller keeps alive until no
// read that began before the write can still be using it. Such a read then
// sees the old or the new buffer, never a freed one.
std::shared_ptr<void> adopt_host_retiring(const at::Tensor& dst, const at::Tensor& src);

}  // namespace ttpu::aten
