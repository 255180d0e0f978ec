// The persistent-cache key: a list of named parts, so that a miss can be explained
// part by part ("plugin differs") instead of by one opaque hash.
//
// Parts, in this order:
//   program          SHA-256 of the StableHLO text that is compiled
//   compile_options  SHA-256 of the serialized xla.CompileOptionsProto
//   plugin           path, size, mtime and a SHA-256 of the first and last MiB of
//                    the plugin .so (see plugin_identity())
//   pjrt_api         the plugin's PJRT C API version, "major.minor"
//   cpu              SHA-256 of the host's CPU feature flags (/proc/cpuinfo): XLA:CPU
//                    code is compiled for the host and can SIGILL on another CPU
//   torchtpu         torchtpu's version (entry layout and key meaning may change)
//   xla_env          XLA_FLAGS / LIBTPU_INIT_ARGS as set in the environment: the
//                    plugin takes its debug-option defaults from them
// The digest (SHA-256 over every name and value, length-prefixed) names the entry
// file; the parts themselves are stored in the entry and compared on load.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ttpu::cache {

struct KeyPart {
  std::string name;
  std::string value;
  bool operator==(const KeyPart&) const = default;
};

class Key {
 public:
  explicit Key(std::vector<KeyPart> parts);
  const std::vector<KeyPart>& parts() const { return parts_; }
  // 64 lower-case hex digits; the entry's file name.
  const std::string& digest() const { return digest_; }
  // One line naming the parts that differ from `other` and their two values
  // ("cpu: sha256:ab.. (entry) vs sha256:cd.. (this process)"), or "" if equal.
  std::string describe_difference(const std::vector<KeyPart>& other) const;

 private:
  std::vector<KeyPart> parts_;
  std::string digest_;
};

// Builds keys for one process: everything but the program is computed once, at
// construction (this reads 2 MiB of the plugin file and /proc/cpuinfo).
// Throws std::runtime_error if the plugin file cannot be read.
class KeyBuilder {
 public:
  KeyBuilder(const std::string& plugin_path, int api_major, int api_minor,
             std::string_view compile_options);
  Key key(std::string_view program_text) const;
  // The same with other compile options than the builder's (their SHA-256
  // replaces the "compile_options" part): strict mode's quick per-op programs.
  Key key(std::string_view program_text, std::string_view compile_options) const;
  // The parts shared by every key of this builder (all but "program").
  const std::vector<KeyPart>& process_parts() const { return process_parts_; }

 private:
  std::vector<KeyPart> process_parts_;
};

// "path=<p> size=<bytes> mtime_ns=<t> sample_sha256=<hex>"; reads 2 MiB of the
// file (KeyBuilder calls it once per process). Throws std::runtime_error naming the path if it cannot be read.
std::string plugin_identity(const std::string& path);
// "sha256:<hex>" of the first CPU's feature line in /proc/cpuinfo ("flags" on
// x86, "Features" on Arm), or "unknown" where there is none. Memoized.
const std::string& host_cpu_features();
// torchtpu's version, from pyproject.toml at build time.
const char* torchtpu_version();
// "XLA_FLAGS=<value> LIBTPU_INIT_ARGS=<value>" (those set), or "(none)": the
// plugin reads them once, at load, as defaults for every compile's debug
// options (e.g. --xla_cpu_enable_fast_math changes the code), so an entry
// compiled under other flags is another program.
std::string xla_environment();

}  // namespace ttpu::cache
