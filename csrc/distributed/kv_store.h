// The PJRT plugin's key-value store backed by torch.distributed's c10d Store.
//
// A plugin that runs one XLA program across processes (the GPU plugin with the
// node_id/num_nodes create options) exchanges its topology and collective ids
// through the kv_get/kv_put/kv_try_get callbacks of PJRT_Client_Create_Args
// (pjrt/kv_store.h). Across processes those need a store every process
// reaches: the one init_process_group already made (TCPStore, FileStore, ...).
// Keys live under "ttpu_pjrt_kv/" in it, apart from c10d's own.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "pjrt/kv_store.h"

namespace ttpu::distributed {

class C10dKeyValueStore : public pjrt::KeyValueStore {
 public:
  explicit C10dKeyValueStore(c10::intrusive_ptr<c10d::Store> store);

  // Waits for the key with the store's own wait (nullopt once `timeout`
  // passed without it; a negative or zero timeout does not wait). Other store
  // failures (a closed connection) throw: the plugin gets them as errors.
  std::optional<std::string> get(const std::string& key,
                                 std::chrono::milliseconds timeout) override;
  std::optional<std::string> try_get(const std::string& key) override;
  void put(const std::string& key, const std::string& value) override;

  static constexpr const char* kPrefix = "ttpu_pjrt_kv/";

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

// Calls one of the three callbacks through the C function pointers
// PJRT_Client_Create receives, as a plugin does, on a C10dKeyValueStore over
// `store`: op "put" (key, value), "get" (key, timeout_ms) or "try_get" (key).
// Returns (PJRT_Error_Code, bytes): 0 and the value (empty for put), or the
// error's code and message. For tests: the plugin here never calls them.
std::pair<int, std::string> call_kv_callback(c10::intrusive_ptr<c10d::Store> store,
                                             const std::string& op, const std::string& key,
                                             const std::string& value, int timeout_ms);

}  // namespace ttpu::distributed
