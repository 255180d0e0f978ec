// Binds the tpu c10d backend's creator into torchtpu._C.
#pragma once

#include <pybind11/pybind11.h>

namespace ttpu::distributed {

void bind(pybind11::module& m);

}  // namespace ttpu::distributed
