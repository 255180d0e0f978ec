// The cross-process half of the PJRT layer, as far as it runs on one machine
// with the CPU plugin: the key-value store callbacks a plugin calls (invoked
// here through the same C function pointers PJRT_Client_Create receives), the
// node_id/num_nodes create options, and the CPU plugin's refusal of programs
// that span processes. No torch.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "pjrt/kv_callbacks.h"
#include "tests/test_plugin.h"
#include "pjrt/pjrt.h"

namespace ttpu::pjrt {
namespace {

using ttpu::testing::plugin_path;

TEST(KvCallbacks, RoundTripThroughTheCFunctionPointers) {
  InMemoryKeyValueStore store;
  KvCaller cb(&store);
  ASSERT_NE(cb.args().kv_get_callback, nullptr);
  ASSERT_NE(cb.args().kv_put_callback, nullptr);
  ASSERT_NE(cb.args().kv_try_get_callback, nullptr);

  // Values are bytes: a NUL inside must survive.
  const std::string value("topology\0bytes", 14);
  EXPECT_EQ(cb.put("gpu:local_topology/0", value).code, 0);
  KvCallResult got = cb.get("gpu:local_topology/0", 1000);
  ASSERT_EQ(got.code, 0) << got.bytes;
  EXPECT_EQ(got.bytes, value);
  got = cb.try_get("gpu:local_topology/0");
  ASSERT_EQ(got.code, 0) << got.bytes;
  EXPECT_EQ(got.bytes, value);
  // What the plugin puts, the store has (the c10d side reads the same keys).
  EXPECT_EQ(store.try_get("gpu:local_topology/0"), value);
  // Empty values are values.
  EXPECT_EQ(cb.put("empty", "").code, 0);
  got = cb.get("empty", 0);
  ASSERT_EQ(got.code, 0) << got.bytes;
  EXPECT_EQ(got.bytes, "");
}

TEST(KvCallbacks, MissingKeysAreErrorsWithTheRightCodes) {
  InMemoryKeyValueStore store;
  KvCaller cb(&store);
  auto not_found = cb.try_get("absent");
  EXPECT_EQ(not_found.code, PJRT_Error_Code_NOT_FOUND);
  EXPECT_NE(not_found.bytes.find("'absent' not found"), std::string::npos);

  const auto start = std::chrono::steady_clock::now();
  auto timeout = cb.get("absent", 50);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(timeout.code, PJRT_Error_Code_DEADLINE_EXCEEDED);
  EXPECT_NE(timeout.bytes.find("not set within 50 ms"), std::string::npos);
  EXPECT_GE(waited, std::chrono::milliseconds(50));
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST(KvCallbacks, GetWaitsForAPutFromAnotherThread) {
  InMemoryKeyValueStore store;
  KvCaller cb(&store);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(cb.put("late", "here").code, 0);
  });
  KvCallResult got = cb.get("late", 10000);
  writer.join();
  EXPECT_EQ(got.code, 0) << got.bytes;
  EXPECT_EQ(got.bytes, "here");
}

// A store that fails, as a c10d store does when its server is gone.
class BrokenStore : public KeyValueStore {
 public:
  std::optional<std::string> get(const std::string&, std::chrono::milliseconds) override {
    throw std::runtime_error("connection reset");
  }
  std::optional<std::string> try_get(const std::string&) override { throw 42; }
  void put(const std::string&, const std::string&) override {
    throw std::runtime_error("store closed");
  }
};

TEST(KvCallbacks, StoreExceptionsBecomePjrtErrorsNotUnwinds) {
  BrokenStore store;
  KvCaller cb(&store);
  auto put = cb.put("k", "v");
  EXPECT_EQ(put.code, PJRT_Error_Code_INTERNAL);
  EXPECT_EQ(put.bytes, "key-value store put failed: store closed");
  auto get = cb.get("k", 10);
  EXPECT_EQ(get.code, PJRT_Error_Code_INTERNAL);
  EXPECT_EQ(get.bytes, "key-value store get failed: connection reset");
  auto try_get = cb.try_get("k");
  EXPECT_EQ(try_get.code, PJRT_Error_Code_INTERNAL);
  EXPECT_EQ(try_get.bytes, "key-value store try_get failed");
}

TEST(KvCallbacks, NoStoreNoCallbacks) {
  KvCaller cb(nullptr);
  EXPECT_EQ(cb.args().kv_get_callback, nullptr);
  EXPECT_EQ(cb.args().kv_put_callback, nullptr);
  EXPECT_EQ(cb.args().kv_try_get_callback, nullptr);
  EXPECT_THROW(cb.put("k", "v"), std::logic_error);  // not a jump to null
  EXPECT_THROW(cb.get("k", 0), std::logic_error);
  EXPECT_THROW(cb.try_get("k"), std::logic_error);
}

TEST(ClientOptions, RejectedBeforeCallingThePlugin) {
  auto plugin = load_plugin(plugin_path());
  ClientOptions o;
  o.num_nodes = 2;
  o.node_id = 0;
  try {
    plugin->create_client(o);
    FAIL() << "expected PjrtError";
  } catch (const PjrtError& e) {
    EXPECT_EQ(e.method(), "PJRT_Client_Create");
    EXPECT_EQ(e.code(), -1);
    EXPECT_NE(std::string(e.what()).find("num_nodes > 1 needs a key-value store"),
              std::string::npos);
  }
  o.kv_store = std::make_shared<InMemoryKeyValueStore>();
  o.node_id = 2;
  EXPECT_THROW(plugin->create_client(o), PjrtError);
  o.node_id = -1;
  EXPECT_THROW(plugin->create_client(o), PjrtError);
  o.num_nodes = -1;
  o.node_id = 0;
  EXPECT_THROW(plugin->create_client(o), PjrtError);
}

constexpr char kAllReduce2[] = R"(module @m {
  func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.all_reduce"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
})";

// Pins what xla-cpu-pjrt 0.0.1 (PJRT API 0.81) does with a two-node client:
// it accepts node_id/num_nodes and the store, but builds no cross-process
// topology (it lists only its own devices, never calls the store) and refuses
// to compile a program that names another process's device. If a plugin
// upgrade adds cross-process collectives, this test fails: then the XLA path
// of issue 14 can be tested here, and Runtime::supports_cross_process_
// collectives turns true on its own.
TEST(CrossProcess, CpuPluginRefusesProgramsSpanningProcesses) {
  auto plugin = load_plugin(plugin_path());
  ClientOptions o;
  o.cpu_device_count = 2;
  o.node_id = 0;
  o.num_nodes = 2;
  o.kv_store = std::make_shared<InMemoryKeyValueStore>();
  auto client = plugin->create_client(o);
  ASSERT_EQ(client->platform_name(), "cpu") << "this test pins the CPU plugin";
  EXPECT_EQ(client->device_count(), 2);
  EXPECT_EQ(client->global_device_count(), client->device_count());
  EXPECT_FALSE(o.kv_store->try_get("anything").has_value());

  // XLA:CPU packs the process index into the high bits of a device id
  // (1 << 17 per process in this build, 1 << 11 in newer ones): this id is
  // device 0 of another process under either.
  MultiDeviceOptions m;
  m.num_replicas = 2;
  m.device_ids = {client->device_id(0), int64_t{1} << 17};
  try {
    client->compile(kAllReduce2, m);
    FAIL() << "the CPU plugin compiled a cross-process program: it may now support "
              "cross-process collectives (see issue 14)";
  } catch (const PjrtError& e) {
    EXPECT_EQ(e.method(), "PJRT_Client_Compile");
    EXPECT_EQ(e.code(), PJRT_Error_Code_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(
                  "Multiprocess computations aren't implemented on the CPU backend"),
              std::string::npos)
        << e.what();
  }

  // The same client still runs in-process collectives over its own devices.
  m.device_ids = {client->device_id(0), client->device_id(1)};
  auto exe = client->compile(kAllReduce2, m);
  const float a[2] = {1, 2}, b[2] = {10, 20};
  auto b0 = client->buffer_from_host(a, ElementType::kF32, {2}, 0);
  auto b1 = client->buffer_from_host(b, ElementType::kF32, {2}, 1);
  auto outs = exe->execute_multi({{b0.get()}, {b1.get()}});
  for (const auto& out : outs) {
    float r[2];
    out[0]->to_host(r, sizeof(r));
    EXPECT_EQ(r[0], 11.0f);
    EXPECT_EQ(r[1], 22.0f);
  }
}

}  // namespace
}  // namespace ttpu::pjrt
