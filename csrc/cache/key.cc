#include "cache/key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "cache/sha256.h"

#ifndef TORCHTPU_VERSION
#error "TORCHTPU_VERSION must be defined by the build (csrc/cache/CMakeLists.txt)"
#endif

namespace ttpu::cache {
namespace {

// Bytes hashed at each end of the plugin file.
constexpr int64_t kPluginSample = 1 << 20;

void append_len_prefixed(Sha256& h, std::string_view s) {
  uint64_t n = s.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  h.update(len, sizeof(len));
  h.update(s);
}

std::string sha256_tag(std::string_view data) { return "sha256:" + to_hex(sha256(data)); }

// Reads exactly `size` bytes at `offset`; false on a short read or an error.
bool pread_all(int fd, char* dst, int64_t size, int64_t offset) {
  while (size > 0) {
    ssize_t n = ::pread(fd, dst, static_cast<size_t>(size), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    dst += n;
    size -= n;
    offset += n;
  }
  return true;
}

// The plugin is about 260 MB (xla-cpu-pjrt 0.0.1). A full SHA-256 of it costs
// 0.2-0.45 s per process start with the file in the page cache (more from disk);
// the sample costs 2-6 ms (both measured on a busy 2-core machine by cache_test's
// PluginIdentityIsCheapAndStable). So we hash a sample: the first MiB
// holds the ELF and program headers and the start of the dynamic symbol tables,
// the last MiB the section header table and the end of .symtab/.strtab, whose
// offsets and sizes move with any change of code; size and mtime catch a
// reinstall, the path a second installation. A false "same plugin" would need a
// rebuild of equal size with identical first and last MiB and an equal mtime.
std::string compute_plugin_identity(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("cannot read the PJRT plugin '" + path +
                             "' to key the compile cache: " + std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot stat the PJRT plugin '" + path + "': " + std::strerror(err));
  }
  const int64_t size = st.st_size;
  const int64_t head = std::min<int64_t>(size, kPluginSample);
  const int64_t tail = std::min<int64_t>(size - head, kPluginSample);
  std::string buf(static_cast<size_t>(head + tail), '\0');
  bool ok =
      pread_all(fd, buf.data(), head, 0) && pread_all(fd, buf.data() + head, tail, size - tail);
  ::close(fd);
  if (!ok) throw std::runtime_error("short read of the PJRT plugin '" + path + "'");
  const int64_t mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return "path=" + path + " size=" + std::to_string(size) +
         " mtime_ns=" + std::to_string(mtime_ns) + " sample_sha256=" + to_hex(sha256(buf));
}

std::string compute_cpu_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "flags\t\t: fpu vme ..." on x86, "Features\t: fp asimd ..." on Arm.
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return sha256_tag(line.substr(colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

Key::Key(std::vector<KeyPart> parts) : parts_(std::move(parts)) {
  Sha256 h;
  append_len_prefixed(h, std::to_string(parts_.size()));
  for (const auto& p : parts_) {
    append_len_prefixed(h, p.name);
    append_len_prefixed(h, p.value);
  }
  digest_ = to_hex(h.finish());
}

std::string Key::describe_difference(const std::vector<KeyPart>& other) const {
  std::string out;
  const size_t n = std::max(parts_.size(), other.size());
  for (size_t i = 0; i < n; ++i) {
    const KeyPart* mine = i < parts_.size() ? &parts_[i] : nullptr;
    const KeyPart* theirs = i < other.size() ? &other[i] : nullptr;
    if (mine != nullptr && theirs != nullptr && *mine == *theirs) continue;
    if (!out.empty()) out += "; ";
    out += (theirs ? theirs->name : mine->name) + ": " + (theirs ? theirs->value : "(missing)") +
           " (entry) vs " + (mine ? mine->value : "(missing)") + " (this process)";
  }
  return out;
}

KeyBuilder::KeyBuilder(const std::string& plugin_path, int api_major, int api_minor,
                       std::string_view compile_options) {
  process_parts_ = {
      {"compile_options", sha256_tag(compile_options)},
      {"plugin", plugin_identity(plugin_path)},
      {"pjrt_api", std::to_string(api_major) + "." + std::to_string(api_minor)},
      {"cpu", host_cpu_features()},
      {"torchtpu", torchtpu_version()},
      {"xla_env", xla_environment()},
  };
}

Key KeyBuilder::key(std::string_view program_text) const {
  std::vector<KeyPart> parts;
  parts.reserve(process_parts_.size() + 1);
  parts.push_back({"program", sha256_tag(program_text)});
  parts.insert(parts.end(), process_parts_.begin(), process_parts_.end());
  return Key(std::move(parts));
}

Key KeyBuilder::key(std::string_view program_text, std::string_view compile_options) const {
  Key base = key(program_text);
  std::vector<KeyPart> parts = base.parts();
  for (auto& p : parts) {
    if (p.name == "compile_options") p.value = sha256_tag(compile_options);
  }
  return Key(std::move(parts));
}

std::string plugin_identity(const std::string& path) { return compute_plugin_identity(path); }

const std::string& host_cpu_features() {
  static const std::string features = compute_cpu_features();
  return features;
}

const char* torchtpu_version() { return TORCHTPU_VERSION; }

std::string xla_environment() {
  std::string out;
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    if (!out.empty()) out += " ";
    out += std::string(name) + "=" + value;
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace ttpu::cache
