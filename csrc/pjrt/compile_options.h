// Serialized xla.CompileOptionsProto for PJRT_Client_Compile.
//
// Encoded by hand so this layer needs no protobuf dependency. Field numbers are
// from xla/pjrt/proto/compile_options.proto (openxla/xla).
#pragma once

#include <string>

namespace ttpu::pjrt {

// Options for a portable single-device program: one replica, one partition, the
// device chosen at execute time (PJRT_LoadedExecutable_Execute.execute_device).
// Never empty: an empty options string makes the CPU plugin abort (it reads
// num_replicas = 0 and fails a CHECK).
std::string compile_options_bytes();

}  // namespace ttpu::pjrt
