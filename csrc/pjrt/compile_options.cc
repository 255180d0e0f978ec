#include "pjrt/compile_options.h"

#include <cstdint>

namespace ttpu::pjrt {
namespace {

// Protobuf wire format: a key is (field_number << 3) | wire_type.
constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

// CompileOptionsProto
constexpr int kExecutableBuildOptions = 3;     // ExecutableBuildOptionsProto
constexpr int kCompilePortableExecutable = 4;  // bool
// ExecutableBuildOptionsProto
constexpr int kNumReplicas = 4;    // int64
constexpr int kNumPartitions = 5;  // int64

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

void put_int(std::string& out, int field, uint64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, value);
}

}  // namespace

std::string compile_options_bytes() {
  // device_ordinal (field 1) stays unset: a portable executable gets its device
  // from PJRT_LoadedExecutable_Execute.execute_device.
  std::string build;
  put_int(build, kNumReplicas, 1);
  put_int(build, kNumPartitions, 1);

  // Portable, because a non-portable executable is bound to the default device
  // assignment (device 0): on the 0.81 CPU plugin, execute_device = device 1
  // fails with "ExecuteShard attempted to execute on device id 1 which is not
  // addressable". The flip side: a portable executable needs execute_device
  // ("Execute expects a non-null device_assignment" without it).
  std::string options;
  put_key(options, kExecutableBuildOptions, kLengthDelimited);
  put_varint(options, build.size());
  options += build;
  put_int(options, kCompilePortableExecutable, 1);
  return options;  // 1a 04 20 01 28 01 20 01
}

}  // namespace ttpu::pjrt
