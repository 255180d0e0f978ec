// One SPMD program over this process's tpu devices, on tpu tensors: the
// ATen side of torchtpu.spmd (docs/spmd.md). The program is StableHLO text
// over global shapes with Shardy shardings; XLA partitions it, inserting its
// own collectives. Each argument and result is passed as one flat shard per
// device (a tpu storage's whole buffer): the program's parameter for it is the
// "device-major flat" global value, sharded on its only dimension, and the
// program itself reshapes it to the logical tensor (torchtpu/spmd/program.py
// writes those prologues and epilogues).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace ttpu::aten {

// args[i][d]: argument i on devices[d], a tpu tensor on that device that is
// contiguous and covers its storage (a storage's whole buffer is what the
// program reads), of one dtype and size on every device. Returns results[o][d],
// a 1-D tpu tensor on devices[d] of the program's per-device output size, its
// dtype `out_dtypes[o]`. Throws c10::ValueError for a device list that is
// empty, repeated or names a device this process lacks, ragged or misplaced
// arguments, a wrong dtype count; c10::Error (RuntimeError) with the plugin's
// message for a program it rejects, naming `name`.
std::vector<std::vector<at::Tensor>> run_spmd(const std::string& text,
                                              const std::vector<int64_t>& devices,
                                              const std::vector<std::vector<at::Tensor>>& args,
                                              const std::vector<c10::ScalarType>& out_dtypes,
                                              const std::string& name);

// All-reduces (sum) tensors on distinct tpu devices with one program over
// those devices (stablehlo.all_reduce; runtime::Runtime::all_reduce_local).
// Returns one new tensor per input, on its device. Throws c10::ValueError for
// non-tpu, non-contiguous or mismatched inputs, two on one device.
std::vector<at::Tensor> all_reduce_local(const std::vector<at::Tensor>& tensors,
                                         const std::string& op);

}  // namespace ttpu::aten
