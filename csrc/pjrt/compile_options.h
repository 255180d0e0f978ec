// Serialized xla.CompileOptionsProto for PJRT_Client_Compile.
//
// Encoded by hand so this layer needs no protobuf dependency. Field numbers are
// from xla/pjrt/proto/compile_options.proto and xla/xla_data.proto (openxla/xla).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ttpu::pjrt {

// How a program over several partitions is split into per-device programs.
enum class Partitioner {
  kNone,    // every device runs the program as written (replicas, or MPMD by id)
  kGspmd,   // use_spmd_partitioning: `mhlo.sharding` attributes (XLA warns it is deprecated)
  kShardy,  // use_spmd_partitioning + use_shardy_partitioner: `sdy.mesh`/`sdy.sharding`
};

// One program over num_replicas x num_partitions devices, executed with
// PJRT_LoadedExecutable_Execute(num_devices = N). Such an executable is NOT
// portable: its devices are fixed at compile time.
struct MultiDeviceOptions {
  int num_replicas = 1;
  int num_partitions = 1;
  Partitioner partitioner = Partitioner::kNone;
  // Global device ids (PJRT_DeviceDescription_Id), replica-major:
  // device_ids[r * num_partitions + p] runs replica r, partition p. Empty: the
  // plugin's default assignment (on the CPU plugin, the first N devices).
  std::vector<int64_t> device_ids;
};

// How much XLA optimizes a program. kQuick is for strict mode's per-op
// programs: tiny, compiled once per shape and run a few times, so compile time
// is most of their cost. It sets XLA debug options through
// CompileOptionsProto.env_option_overrides (applied by PJRT on top of the
// plugin's defaults, unlike a DebugOptions message, which would replace them
// all): see kQuickOverrides in compile_options.cc for which and why.
// kQuickCpu is kQuick plus options only XLA:CPU has (the runtime keeps it on
// the CPU plugin only: another plugin's XLA may not know them and refuse the
// program).
enum class Optimization { kFull, kQuick, kQuickCpu };

// Options for a portable single-device program: one replica, one partition, the
// device chosen at execute time (PJRT_LoadedExecutable_Execute.execute_device).
// Never empty: an empty options string makes the CPU plugin abort (it reads
// num_replicas = 0 and fails a CHECK).
std::string compile_options_bytes(Optimization level = Optimization::kFull);

// Options for a multi-device program. The caller validates `options` first
// (Client::compile does): counts >= 1, device_ids empty or of size N.
std::string compile_options_bytes(const MultiDeviceOptions& options);

}  // namespace ttpu::pjrt
