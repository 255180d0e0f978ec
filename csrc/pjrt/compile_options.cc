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
constexpr int kEnvOptionOverrides = 7;         // map<string, OptionOverrideProto>
// A map entry (protobuf's encoding of map<K, V>: a repeated message of key, value)
constexpr int kMapKey = 1;
constexpr int kMapValue = 2;
// OptionOverrideProto (oneof value)
constexpr int kOverrideBool = 2;  // bool
constexpr int kOverrideInt = 3;   // int64
// ExecutableBuildOptionsProto
constexpr int kNumReplicas = 4;            // int64
constexpr int kNumPartitions = 5;          // int64
constexpr int kUseSpmdPartitioning = 6;    // bool
constexpr int kDeviceAssignment = 9;       // DeviceAssignmentProto
constexpr int kUseShardyPartitioner = 19;  // bool
// DeviceAssignmentProto (xla_data.proto)
constexpr int kReplicaCount = 1;        // int32
constexpr int kComputationCount = 2;    // int32
constexpr int kComputationDevices = 3;  // repeated ComputationDevice
// DeviceAssignmentProto.ComputationDevice
constexpr int kReplicaDeviceIds = 1;  // repeated int64

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

void put_message(std::string& out, int field, const std::string& message) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, message.size());
  out += message;
}

// One env_option_overrides entry: an XLA debug option by its flag name (as in
// XLA_FLAGS, without the dashes) and an int or bool value.
struct Override {
  const char* name;
  int field;  // kOverrideBool or kOverrideInt
  uint64_t value;
};

void put_override(std::string& out, const Override& o) {
  std::string value;
  put_int(value, o.field, o.value);
  std::string entry;
  put_message(entry, kMapKey, o.name);
  put_message(entry, kMapValue, value);
  put_message(out, kEnvOptionOverrides, entry);
}

// Strict mode's small per-op programs. Measured on XLA:CPU (xla-cpu-pjrt
// 0.0.1, 40 strict ops, process CPU seconds per compile): level 1 (LLVM's
// "less" codegen and a lighter IR pipeline) saves about 30% of compile time;
// level 0 saves a little more but runs elementwise ops on 1M elements 5-10x
// slower (no vectorization); xla_llvm_disable_expensive_passes saved nothing
// measurable. The default is 2 or 3 depending on the plugin's XLA version.
constexpr Override kQuickOverrides[] = {
    {"xla_backend_optimization_level", kOverrideInt, 1},
};
// kQuickCpu adds: XLA:CPU's loop emitters instead of its MLIR fusion emitters,
// which saves another ~40% of a small program's compile (a mul, add or sin on
// [n, 3], 120 programs: 28-37 ms a program -> 15-22 ms).
constexpr Override kQuickCpuOverrides[] = {
    {"xla_cpu_use_fusion_emitters", kOverrideBool, 0},
};

// XLA's DeviceAssignment is a (replica, computation) matrix stored per
// computation: computation_devices[p].replica_device_ids[r].
std::string device_assignment(const MultiDeviceOptions& o) {
  std::string da;
  put_int(da, kReplicaCount, o.num_replicas);
  put_int(da, kComputationCount, o.num_partitions);
  for (int p = 0; p < o.num_partitions; ++p) {
    std::string computation;
    for (int r = 0; r < o.num_replicas; ++r) {
      // Negative ids are rejected by Client::compile; the cast is the protobuf
      // int64 encoding (two's complement) either way.
      put_int(computation, kReplicaDeviceIds,
              static_cast<uint64_t>(o.device_ids[r * o.num_partitions + p]));
    }
    put_message(da, kComputationDevices, computation);
  }
  return da;
}

}  // namespace

std::string compile_options_bytes(Optimization level) {
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
  put_message(options, kExecutableBuildOptions, build);
  put_int(options, kCompilePortableExecutable, 1);
  if (level != Optimization::kFull) {
    for (const Override& o : kQuickOverrides) put_override(options, o);
  }
  if (level == Optimization::kQuickCpu) {
    for (const Override& o : kQuickCpuOverrides) put_override(options, o);
  }
  return options;  // kFull: 1a 04 20 01 28 01 20 01
}

std::string compile_options_bytes(const MultiDeviceOptions& o) {
  std::string build;
  put_int(build, kNumReplicas, o.num_replicas);
  put_int(build, kNumPartitions, o.num_partitions);
  if (o.partitioner != Partitioner::kNone) put_int(build, kUseSpmdPartitioning, 1);
  if (!o.device_ids.empty()) put_message(build, kDeviceAssignment, device_assignment(o));
  if (o.partitioner == Partitioner::kShardy) put_int(build, kUseShardyPartitioner, 1);

  // compile_portable_executable stays false (unset): a portable executable has
  // no device assignment, and a collective needs one to know its peers.
  std::string options;
  put_message(options, kExecutableBuildOptions, build);
  return options;
}

}  // namespace ttpu::pjrt
