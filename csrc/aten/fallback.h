#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ttpu::aten {

// Per-op counts of CPU fallback calls since the last reset ("aten::name.overload").
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace ttpu::aten
