// The parameter types of a StableHLO text program's entry function, read from
// its text. The PJRT C API has no call that returns them, and a multi-device
// launch must be checked against them before calling the plugin: on the CPU
// plugin, a launch it rejects for one device leaves the other devices' part
// of the program waiting in its collectives forever, so every later program
// on those devices hangs (measured on xla-cpu-pjrt 0.0.1: a buffer of the
// wrong size or device, or a wrong argument count).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"

namespace ttpu::pjrt {

struct ParamType {
  bool known = false;  // false: a type this reader does not parse (dynamic, tuple, ...)
  ElementType type = ElementType::kF32;
  std::vector<int64_t> dims;
};

// The parameters of `func.func ... @main(...)`, in order; nullopt when the
// text has no such signature (bytecode, the generic op form).
std::optional<std::vector<ParamType>> main_parameters(const std::string& text);

}  // namespace ttpu::pjrt
