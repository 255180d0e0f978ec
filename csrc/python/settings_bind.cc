#include "python/settings_bind.h"

#include <pybind11/stl.h>

#include "settings/settings.h"

namespace ttpu::python {

void bind_settings(pybind11::module& m) {
  m.def("_setting_flag", [](const std::string& name, bool fallback) {
    return settings::flag(name.c_str(), fallback);
  });
  m.def("_setting_integer", [](const std::string& name, int64_t fallback, int64_t lo, int64_t hi) {
    return settings::integer(name.c_str(), fallback, lo, hi);
  });
  m.def("_setting_choice", [](const std::string& name, const std::string& fallback,
                              const std::vector<std::string>& choices) {
    return settings::choice(name.c_str(), fallback, choices);
  });
}

}  // namespace ttpu::python
