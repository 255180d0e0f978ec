// The PJRT plugin the C++ suites run against: $TORCHTPU_TEST_PLUGIN when set,
// else the path CMake found at configure time.
#pragma once

#include <cstdlib>
#include <string>

namespace ttpu::testing {

inline std::string plugin_path() {
  const char* env = std::getenv("TORCHTPU_TEST_PLUGIN");
  return (env && *env) ? env : TORCHTPU_TEST_PLUGIN;
}

}  // namespace ttpu::testing
