// torchtpu's environment variables, parsed by one set of rules. Every
// TORCHTPU_* variable the C++ core reads goes through these functions (callers
// keep the value in a static where it must not change within a process); the
// list with defaults is docs/environment.md, which tests/project/test_docs.py checks
// against the code.
//
// Rules, the same for every variable:
// - unset or empty: the caller's default;
// - flags: 1, true, on, yes turn on; 0, false, off, no turn off (any case);
// - integers: decimal, within the caller's bounds;
// - choices: one of the listed words.
// Anything else throws std::invalid_argument naming the variable, its value and
// what it accepts, so a typo is an error at first use, never a silent default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ttpu::settings {

bool flag(const char* name, bool fallback);
int64_t integer(const char* name, int64_t fallback, int64_t min, int64_t max);
std::string choice(const char* name, const std::string& fallback,
                   const std::vector<std::string>& choices);
// The raw value (a path); nullopt when unset. An empty value is returned as "".
std::optional<std::string> text(const char* name);

}  // namespace ttpu::settings
