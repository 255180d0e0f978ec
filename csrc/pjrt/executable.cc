// Loaded programs: PJRT_LoadedExecutable's life, one-device execute and
// serialization (multi-device execute is in multi_device.cc).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pjrt/gate.h"
#include "pjrt/pjrt.h"
#include "pjrt_c_api.h"

namespace ttpu::pjrt {

using namespace detail;

namespace {

// Owns the PJRT_Executable that PJRT_LoadedExecutable_GetExecutable allocates.
class UnloadedExecutable {
 public:
  UnloadedExecutable(const PJRT_Api* api, PJRT_LoadedExecutable* loaded) : api_(api) {
    auto args = TTPU_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
    args.loaded_executable = loaded;
    TTPU_CALL(api_, PJRT_LoadedExecutable_GetExecutable, &args);
    exe_ = args.executable;
  }
  ~UnloadedExecutable() {
    auto args = TTPU_ARGS(PJRT_Executable_Destroy_Args);
    args.executable = exe_;
    TTPU_CALL_NOTHROW(api_, PJRT_Executable_Destroy, &args);
  }
  UnloadedExecutable(const UnloadedExecutable&) = delete;
  UnloadedExecutable& operator=(const UnloadedExecutable&) = delete;
  PJRT_Executable* raw() const { return exe_; }

 private:
  const PJRT_Api* api_;
  PJRT_Executable* exe_ = nullptr;
};

}  // namespace

Executable::Executable(std::shared_ptr<Client> client, PJRT_LoadedExecutable* exe)
    : client_(std::move(client)), exe_(exe) {
  try {
    UnloadedExecutable unloaded(client_->api(), exe_);
    auto args = TTPU_ARGS(PJRT_Executable_NumOutputs_Args);
    args.executable = unloaded.raw();
    TTPU_CALL(client_->api(), PJRT_Executable_NumOutputs, &args);
    num_outputs_ = static_cast<int>(args.num_outputs);
    // Empty for a portable executable (measured on the CPU plugin).
    addressable_devices_ = query_addressable_devices();
  } catch (...) {
    // The destructor does not run for a half-built object; free the handle here.
    auto destroy = TTPU_ARGS(PJRT_LoadedExecutable_Destroy_Args);
    destroy.executable = exe_;
    TTPU_CALL_NOTHROW(client_->api(), PJRT_LoadedExecutable_Destroy, &destroy);
    throw;
  }
}

Executable::~Executable() {
  auto args = TTPU_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = exe_;
  TTPU_CALL_NOTHROW(client_->api(), PJRT_LoadedExecutable_Destroy, &args);
}

std::vector<std::shared_ptr<Buffer>> Executable::execute(const std::vector<Buffer*>& args,
                                                         int device_index) {
  constexpr char kMethod[] = "PJRT_LoadedExecutable_Execute";
  check_device_index(kMethod, device_index, client_->device_count());
  // Launching one device of a multi-device program is allowed by the C API,
  // but its collectives would wait forever for the peers never launched.
  if (addressable_devices_.size() > 1) {
    throw PjrtError(kMethod,
                    "the executable runs on " + std::to_string(addressable_devices_.size()) +
                        " devices; use execute_multi",
                    -1);
  }
  // Handles on the stack for the usual few (an eager op's program): two
  // allocations per execute fewer; a heap vector past that.
  constexpr size_t kInline = 8;
  PJRT_Buffer* inline_handles[2 * kInline] = {};
  std::vector<PJRT_Buffer*> heap_handles;
  const size_t num_outputs = static_cast<size_t>(num_outputs_);
  PJRT_Buffer** handles = inline_handles;
  if (args.size() > kInline || num_outputs > kInline) {
    heap_handles.assign(args.size() + num_outputs, nullptr);
    handles = heap_handles.data();
  }
  PJRT_Buffer** arg_handles = handles;
  PJRT_Buffer** outputs = handles + (handles == inline_handles ? kInline : args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == nullptr || args[i]->raw() == nullptr) {
      throw PjrtError(kMethod, "argument " + std::to_string(i) + " is null", -1);
    }
    arg_handles[i] = args[i]->raw();
  }

  // The plugin dereferences `options` without a null check.
  auto options = TTPU_ARGS(PJRT_ExecuteOptions);
  PJRT_Buffer* const* argument_lists[1] = {arg_handles};
  PJRT_Buffer** output_lists[1] = {outputs};

  auto exec = TTPU_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec.executable = exe_;
  exec.options = &options;
  exec.argument_lists = argument_lists;
  exec.num_devices = 1;
  exec.num_args = args.size();
  exec.output_lists = output_lists;
  // A portable executable (compile_options.h) gets its device here; a
  // one-device non-portable one must be given the device it was compiled for.
  exec.execute_device = client_->device(device_index);
  TTPU_CALL(client_->api(), PJRT_LoadedExecutable_Execute, &exec);

  std::vector<std::shared_ptr<Buffer>> result;
  result.reserve(num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    result.push_back(std::make_shared<Buffer>(client_, outputs[i]));
  }
  return result;
}

std::string Executable::serialize() const {
  const PJRT_Api* api = client_->api();
  UnloadedExecutable unloaded(api, exe_);
  auto args = TTPU_ARGS(PJRT_Executable_Serialize_Args);
  args.executable = unloaded.raw();
  TTPU_CALL(api, PJRT_Executable_Serialize, &args);
  // serialized_bytes lives inside serialized_executable, freed by its deleter.
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) {
    args.serialized_executable_deleter(args.serialized_executable);
  }
  return bytes;
}

}  // namespace ttpu::pjrt
