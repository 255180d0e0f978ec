// torchtpu._C's view of csrc/settings: Python reads its TORCHTPU_* variables
// with the C++ core's rules (torchtpu/config.py, torchtpu/__init__.py).
#pragma once

#include <pybind11/pybind11.h>

namespace ttpu::python {

// _setting_flag(name, default), _setting_integer(name, default, min, max),
// _setting_choice(name, default, choices): settings.h's functions; a bad value
// raises ValueError (std::invalid_argument) naming the variable.
void bind_settings(pybind11::module& m);

}  // namespace ttpu::python
