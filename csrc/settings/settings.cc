#include "settings/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace ttpu::settings {
namespace {

// The value, or nullopt when unset or empty.
std::optional<std::string> value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

[[noreturn]] void bad(const char* name, const std::string& v, const std::string& accepted) {
  throw std::invalid_argument(std::string(name) + "='" + v + "' is not valid: " + accepted);
}

}  // namespace

bool flag(const char* name, bool fallback) {
  auto v = value(name);
  if (!v) return fallback;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  bad(name, *v, "expected 1, true, on, yes or 0, false, off, no");
}

int64_t integer(const char* name, int64_t fallback, int64_t min, int64_t max) {
  auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  const bool starts_well = std::isdigit(static_cast<unsigned char>((*v)[0])) || (*v)[0] == '-';
  if (!starts_well || errno != 0 || *end != '\0' || n < min || n > max) {
    bad(name, *v, "expected an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

std::string choice(const char* name, const std::string& fallback,
                   const std::vector<std::string>& choices) {
  auto v = value(name);
  if (!v) return fallback;
  std::string accepted;
  for (const std::string& c : choices) {
    if (*v == c) return *v;
    accepted += (accepted.empty() ? "" : ", ") + c;
  }
  bad(name, *v, "expected one of " + accepted);
}

std::optional<std::string> text(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace ttpu::settings
