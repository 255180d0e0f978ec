// The distributed key-value store a PJRT plugin uses to set up cross-process
// computations (PJRT_Client_Create_Args kv_get/kv_put/kv_try_get callbacks).
//
// A plugin that runs one XLA program across processes (the GPU plugin with the
// node_id/num_nodes create options) exchanges its topology and collective ids
// through this store while the client is created and when it compiles. The
// implementation comes from above: torch.distributed's c10d Store in a later
// layer, InMemoryKeyValueStore within one process. No torch here.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace ttpu::pjrt {

// Must be thread-safe: the plugin calls it from its own threads. It is called
// through C function pointers, so exceptions never escape to the plugin: one
// thrown here reaches the plugin as a PJRT error carrying what() (code
// INTERNAL), and the plugin reports it from the call that needed the value.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Blocks until `key` is set, at most `timeout`; nullopt when it expired
  // (the plugin gets DEADLINE_EXCEEDED).
  virtual std::optional<std::string> get(const std::string& key,
                                         std::chrono::milliseconds timeout) = 0;
  // The value if `key` is set now, else nullopt (the plugin gets NOT_FOUND).
  virtual std::optional<std::string> try_get(const std::string& key) = 0;
  // Sets `key` (overwrites). Values are bytes, not text: may hold NULs.
  virtual void put(const std::string& key, const std::string& value) = 0;
};

// A store inside one process: enough for a single-node client, and the
// reference the callback tests use.
class InMemoryKeyValueStore : public KeyValueStore {
 public:
  std::optional<std::string> get(const std::string& key,
                                 std::chrono::milliseconds timeout) override;
  std::optional<std::string> try_get(const std::string& key) override;
  void put(const std::string& key, const std::string& value) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace ttpu::pjrt
