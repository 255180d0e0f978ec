// The C side of KeyValueStore: the three callbacks PJRT_Client_Create takes.
// Internal to the PJRT layer (pjrt.cc), its tests and csrc/distributed's test
// hook, which call the function pointers exactly as a plugin does (KvCaller).
#pragma once

#include <string>

#include "pjrt/kv_store.h"
#include "pjrt_c_api.h"

namespace ttpu::pjrt {

// Points args->kv_get_callback, kv_put_callback, kv_try_get_callback and their
// user args at `store`, which must outlive every use of them (Client keeps it
// alive as long as the PJRT client). A null store clears them.
void set_kv_callbacks(PJRT_Client_Create_Args* args, KeyValueStore* store);

// What one callback call returned: code 0 and the value (empty for put), or
// the PJRT_Error_Code and message of the error it made.
struct KvCallResult {
  int code = 0;
  std::string bytes;
};

// The plugin's side of the three callbacks: calls them through the function
// pointers set_kv_callbacks puts into PJRT_Client_Create_Args, as a plugin
// does, with a callback_error that records code and message, and frees a
// returned value through the deleter handed back with it. For tests (and
// csrc/distributed's cross-process test hook): no plugin here calls them.
class KvCaller {
 public:
  explicit KvCaller(KeyValueStore* store);  // null: no callbacks set
  const PJRT_Client_Create_Args& args() const { return args_; }
  KvCallResult put(const std::string& key, const std::string& value);
  KvCallResult get(const std::string& key, int timeout_ms);
  KvCallResult try_get(const std::string& key);

 private:
  PJRT_Client_Create_Args args_{};
};

}  // namespace ttpu::pjrt
