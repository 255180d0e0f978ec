#include <cstring>
#include <exception>
#include <string>

#include "pjrt/kv_callbacks.h"

namespace ttpu::pjrt {

std::optional<std::string> InMemoryKeyValueStore::get(const std::string& key,
                                                      std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  // Negative timeouts (the C API passes an int) mean "do not wait".
  const auto wait = timeout.count() > 0 ? timeout : std::chrono::milliseconds(0);
  const bool found = changed_.wait_for(lock, wait, [&] { return values_.count(key) != 0; });
  if (!found) return std::nullopt;
  return values_.at(key);
}

std::optional<std::string> InMemoryKeyValueStore::try_get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void InMemoryKeyValueStore::put(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  changed_.notify_all();
}

namespace {

// The plugin frees a returned value through the deleter we hand back with it.
void delete_value(char* value) { delete[] value; }

// Copies `value` into memory the plugin releases with delete_value. Never a
// null pointer, even for an empty value, so "no value" cannot be misread.
char* copy_value(const std::string& value) {
  char* out = new char[value.size() + 1];
  std::memcpy(out, value.data(), value.size());
  out[value.size()] = '\0';
  return out;
}

// The PJRT_Error has to be made by the plugin (its type is opaque to us), via
// the callback_error function it passes in each call.
PJRT_Error* make_error(PJRT_CallbackError* callback_error, PJRT_Error_Code code,
                       const std::string& message) {
  if (callback_error == nullptr || *callback_error == nullptr) return nullptr;
  return (*callback_error)(code, message.data(), message.size());
}

// Runs one store call; an exception becomes a PJRT error, never an unwind
// through the plugin's C frames (that would terminate the process).
template <typename Fn>
PJRT_Error* guarded(PJRT_CallbackError* callback_error, const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return make_error(callback_error, PJRT_Error_Code_INTERNAL,
                      std::string("key-value store ") + what + " failed: " + e.what());
  } catch (...) {
    return make_error(callback_error, PJRT_Error_Code_INTERNAL,
                      std::string("key-value store ") + what + " failed");
  }
}

PJRT_Error* kv_get(PJRT_KeyValueGetCallback_Args* args) {
  return guarded(args->callback_error, "get", [&]() -> PJRT_Error* {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    const std::string key(args->key, args->key_size);
    auto value = store->get(key, std::chrono::milliseconds(args->timeout_in_ms));
    if (!value) {
      return make_error(args->callback_error, PJRT_Error_Code_DEADLINE_EXCEEDED,
                        "key-value store: key '" + key + "' not set within " +
                            std::to_string(args->timeout_in_ms) + " ms");
    }
    args->value = copy_value(*value);
    args->value_size = value->size();
    args->value_deleter_callback = &delete_value;
    return nullptr;
  });
}

PJRT_Error* kv_try_get(PJRT_KeyValueTryGetCallback_Args* args) {
  return guarded(args->callback_error, "try_get", [&]() -> PJRT_Error* {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    const std::string key(args->key, args->key_size);
    auto value = store->try_get(key);
    if (!value) {
      return make_error(args->callback_error, PJRT_Error_Code_NOT_FOUND,
                        "key-value store: key '" + key + "' not found");
    }
    args->value = copy_value(*value);
    args->value_size = value->size();
    args->value_deleter_callback = &delete_value;
    return nullptr;
  });
}

PJRT_Error* kv_put(PJRT_KeyValuePutCallback_Args* args) {
  return guarded(args->callback_error, "put", [&]() -> PJRT_Error* {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    store->put(std::string(args->key, args->key_size), std::string(args->value, args->value_size));
    return nullptr;
  });
}

}  // namespace

void set_kv_callbacks(PJRT_Client_Create_Args* args, KeyValueStore* store) {
  args->kv_get_callback = store ? &kv_get : nullptr;
  args->kv_get_user_arg = store;
  args->kv_put_callback = store ? &kv_put : nullptr;
  args->kv_put_user_arg = store;
  args->kv_try_get_callback = store ? &kv_try_get : nullptr;
  args->kv_try_get_user_arg = store;
}

}  // namespace ttpu::pjrt
