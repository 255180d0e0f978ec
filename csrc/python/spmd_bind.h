// torchtpu._C's view of csrc/aten/spmd.h: programs over several tpu devices
// for torchtpu.spmd.
#pragma once

#include <pybind11/pybind11.h>

namespace ttpu::python {

// _spmd_run(text, devices, args, out_dtypes, name) and
// _all_reduce_local(tensors, op): aten/spmd.h's functions.
void bind_spmd(pybind11::module& m);

}  // namespace ttpu::python
