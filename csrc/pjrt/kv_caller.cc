// KvCaller (kv_callbacks.h): the plugin's side of the key-value callbacks.
#include <memory>
#include <stdexcept>

#include "pjrt/kv_callbacks.h"

namespace ttpu::pjrt {
namespace {

// What a plugin's PJRT_CallbackError makes: here a heap record standing in
// for its opaque PJRT_Error, read back and freed by result().
struct RecordedError {
  PJRT_Error_Code code;
  std::string message;
};

PJRT_Error* record_error(PJRT_Error_Code code, const char* message, size_t size) {
  return reinterpret_cast<PJRT_Error*>(new RecordedError{code, std::string(message, size)});
}

PJRT_CallbackError g_record_error = &record_error;

KvCallResult result(PJRT_Error* error) {
  std::unique_ptr<RecordedError> e(reinterpret_cast<RecordedError*>(error));
  return {static_cast<int>(e->code), e->message};
}

// A value handed to the plugin: copied out, then freed as the plugin must.
template <typename Args>
KvCallResult value_of(PJRT_Error* error, Args& a, const char* what) {
  if (error != nullptr) return result(error);
  if (a.value == nullptr || a.value_deleter_callback == nullptr)
    throw std::logic_error(std::string("kv ") + what +
                           " callback returned neither value nor error");
  KvCallResult out{0, std::string(a.value, a.value_size)};
  a.value_deleter_callback(a.value);
  return out;
}

// Calling a cleared callback would jump to null: refuse instead.
template <typename Callback>
void require(Callback callback, const char* what) {
  if (callback == nullptr)
    throw std::logic_error(std::string("KvCaller::") + what + ": no store, no callbacks");
}

}  // namespace

KvCaller::KvCaller(KeyValueStore* store) {
  args_.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  set_kv_callbacks(&args_, store);
}

KvCallResult KvCaller::put(const std::string& key, const std::string& value) {
  require(args_.kv_put_callback, "put");
  PJRT_KeyValuePutCallback_Args a{};
  a.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
  a.key = key.data();
  a.key_size = key.size();
  a.value = value.data();
  a.value_size = value.size();
  a.callback_error = &g_record_error;
  a.user_arg = args_.kv_put_user_arg;
  PJRT_Error* error = args_.kv_put_callback(&a);
  return error == nullptr ? KvCallResult{} : result(error);
}

KvCallResult KvCaller::get(const std::string& key, int timeout_ms) {
  require(args_.kv_get_callback, "get");
  PJRT_KeyValueGetCallback_Args a{};
  a.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
  a.key = key.data();
  a.key_size = key.size();
  a.timeout_in_ms = timeout_ms;
  a.callback_error = &g_record_error;
  a.user_arg = args_.kv_get_user_arg;
  return value_of(args_.kv_get_callback(&a), a, "get");
}

KvCallResult KvCaller::try_get(const std::string& key) {
  require(args_.kv_try_get_callback, "try_get");
  PJRT_KeyValueTryGetCallback_Args a{};
  a.struct_size = PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE;
  a.key = key.data();
  a.key_size = key.size();
  a.callback_error = &g_record_error;
  a.user_arg = args_.kv_try_get_user_arg;
  return value_of(args_.kv_try_get_callback(&a), a, "try_get");
}

}  // namespace ttpu::pjrt
