// The gate every PJRT C API call goes through, shared by the layer's .cc
// files (pjrt.cc, executable.cc, multi_device.cc). Internal: nothing outside csrc/pjrt
// includes it.
#pragma once

#include <cstddef>
#include <string>

#include "pjrt/pjrt.h"
#include "pjrt_c_api.h"

namespace ttpu::pjrt::detail {

// Zeroed, so every field we leave alone (extension_start, optional inputs)
// reads as null or 0 to the plugin.
template <typename Args>
Args make_args(size_t struct_size) {
  Args args{};
  args.struct_size = struct_size;
  return args;
}
#define TTPU_ARGS(T) make_args<T>(T##_STRUCT_SIZE)

// A device index outside [0, count) would make the plugin read past its device list.
inline void check_device_index(const char* method, int index, int count) {
  if (index < 0 || index >= count) {
    throw PjrtError(method,
                    "device index " + std::to_string(index) + " out of range [0, " +
                        std::to_string(count) + ")",
                    -1);
  }
}

inline bool has_slot(const PJRT_Api* api, size_t offset, size_t size) {
  return offset + size <= api->struct_size;
}

inline void destroy_error(const PJRT_Api* api, PJRT_Error* error) {
  auto args = TTPU_ARGS(PJRT_Error_Destroy_Args);
  args.error = error;
  api->PJRT_Error_Destroy(&args);
}

// Every PJRT_Error is ours to destroy; its message dies with it, so copy first.
inline std::string take_error(const PJRT_Api* api, PJRT_Error* error, int* code) {
  auto msg = TTPU_ARGS(PJRT_Error_Message_Args);
  msg.error = error;
  api->PJRT_Error_Message(&msg);
  std::string message(msg.message, msg.message_size);

  auto get_code = TTPU_ARGS(PJRT_Error_GetCode_Args);
  get_code.error = error;
  PJRT_Error* code_error = api->PJRT_Error_GetCode(&get_code);
  *code = code_error ? PJRT_Error_Code_UNKNOWN : get_code.code;
  if (code_error) destroy_error(api, code_error);
  destroy_error(api, error);
  return message;
}

// The gate. A plugin built against an older header has a shorter PJRT_Api, so a
// slot past api->struct_size is garbage, not null; newer plugins may also leave
// optional methods null. Either way the caller gets a PjrtError, not a crash.
template <typename Fn, typename Args>
void call(const PJRT_Api* api, Fn* PJRT_Api::* slot, const char* method, Args* args) {
  const size_t offset =
      reinterpret_cast<const char*>(&(api->*slot)) - reinterpret_cast<const char*>(api);
  // A forked child cannot use the parent's client (its threads did not
  // survive fork): refuse before the plugin can block forever.
  if (in_forked_child()) throw PjrtError(method, fork_message(), -1);
  if (!has_slot(api, offset, sizeof(Fn*)) || api->*slot == nullptr) {
    throw PjrtError(method, "not implemented by this PJRT plugin", PJRT_Error_Code_UNIMPLEMENTED);
  }
  if (PJRT_Error* error = (api->*slot)(args)) {
    int code = 0;
    std::string message = take_error(api, error, &code);
    throw PjrtError(method, message, code);
  }
}
#define TTPU_CALL(api, Method, args) call(api, &PJRT_Api::Method, #Method, args)

// For destructors, which must not throw: the handle is gone either way and a
// failure to free it is not something a caller can act on.
template <typename Fn, typename Args>
void call_in_destructor(const PJRT_Api* api, Fn* PJRT_Api::* slot, const char* method,
                        Args* args) noexcept {
  try {
    call(api, slot, method, args);
  } catch (const PjrtError&) {}
}
#define TTPU_CALL_NOTHROW(api, Method, args) \
  call_in_destructor(api, &PJRT_Api::Method, #Method, args)

}  // namespace ttpu::pjrt::detail
