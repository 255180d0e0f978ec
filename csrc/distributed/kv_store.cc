// C10dKeyValueStore (kv_store.h) and the callback driver its tests use.
#include "distributed/kv_store.h"

#include <c10/util/Exception.h>

#include "pjrt/kv_callbacks.h"

namespace ttpu::distributed {

C10dKeyValueStore::C10dKeyValueStore(c10::intrusive_ptr<c10d::Store> store)
    : store_(std::move(store)) {
  TORCH_CHECK_VALUE(store_, "C10dKeyValueStore needs a store");
}

std::optional<std::string> C10dKeyValueStore::get(const std::string& key,
                                                  std::chrono::milliseconds timeout) {
  const std::string k = kPrefix + key;
  if (timeout.count() <= 0) return try_get(key);
  try {
    store_->wait({k}, timeout);
  } catch (const c10::DistStoreError&) {
    // TCPStore reports a wait that ran out of time this way; a key that came
    // as it expired still counts, so look once more.
  }
  return try_get(key);
}

std::optional<std::string> C10dKeyValueStore::try_get(const std::string& key) {
  const std::string k = kPrefix + key;
  if (!store_->check({k})) return std::nullopt;
  auto bytes = store_->get(k);
  return std::string(bytes.begin(), bytes.end());
}

void C10dKeyValueStore::put(const std::string& key, const std::string& value) {
  store_->set(kPrefix + key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::pair<int, std::string> call_kv_callback(c10::intrusive_ptr<c10d::Store> store,
                                             const std::string& op, const std::string& key,
                                             const std::string& value, int timeout_ms) {
  C10dKeyValueStore kv(std::move(store));
  pjrt::KvCaller plugin(&kv);
  pjrt::KvCallResult r;
  if (op == "put") {
    r = plugin.put(key, value);
  } else if (op == "get") {
    r = plugin.get(key, timeout_ms);
  } else if (op == "try_get") {
    r = plugin.try_get(key);
  } else {
    TORCH_CHECK_VALUE(false, "call_kv_callback: op must be put, get or try_get, got '", op, "'");
  }
  return {r.code, std::move(r.bytes)};
}

}  // namespace ttpu::distributed
