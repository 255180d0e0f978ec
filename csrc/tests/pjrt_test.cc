// Conformance suite for the PJRT layer (csrc/pjrt) against a real plugin.
//
// Needs no torch. The plugin is $TORCHTPU_TEST_PLUGIN, else the path CMake baked
// in (the xla-cpu-pjrt plugin of the project venv).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <cstdlib>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"
#include "tests/test_plugin.h"

namespace ttpu::pjrt {
namespace {

using ttpu::testing::plugin_path;

// One client for the whole suite: each client starts thread pools, and the C
// API wants one per process.
std::shared_ptr<Client> client() {
  static std::shared_ptr<Client> c = load_plugin(plugin_path())->create_client(2);
  return c;
}

constexpr char kAdd[] = R"(module @m {
  func.func public @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %a, %b : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
})";

constexpr char kTwoOutputs[] = R"(module @m {
  func.func public @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
    %0 = stablehlo.multiply %a, %a : tensor<2xf32>
    %1 = stablehlo.negate %a : tensor<2xf32>
    return %0, %1 : tensor<2xf32>, tensor<2xf32>
  }
})";

template <typename T>
std::vector<T> round_trip(const std::vector<T>& in, ElementType type, std::vector<int64_t> dims,
                          int device = 0) {
  auto buf = client()->buffer_from_host(in.data(), type, dims, device);
  EXPECT_EQ(buf->element_type(), type);
  EXPECT_EQ(buf->dims(), dims);
  std::vector<T> out(in.size());
  buf->to_host(out.data(), static_cast<int64_t>(out.size() * sizeof(T)));
  return out;
}

TEST(Plugin, BadPathNamesPathAndFix) {
  const std::string bad = "/nonexistent/dir/not_a_plugin.so";
  try {
    load_plugin(bad);
    FAIL() << "expected PluginError";
  } catch (const PluginError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
    EXPECT_NE(msg.find("TORCHTPU_PLUGIN"), std::string::npos) << msg;
  }
}

TEST(Plugin, NotAPluginIsRejected) {
  // A real shared library without GetPjrtApi.
  EXPECT_THROW(load_plugin("libm.so.6"), PluginError);
}

TEST(Plugin, LoadTwiceReturnsSamePlugin) {
  auto a = load_plugin(plugin_path());
  auto b = load_plugin(plugin_path());
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->api_major(), 0);
  EXPECT_GE(a->api_minor(), 57);
}

TEST(Client, CpuDeviceCount) {
  EXPECT_EQ(client()->device_count(), 2);
  EXPECT_EQ(client()->platform_name(), "cpu");
  EXPECT_THROW(client()->device(2), PjrtError);
}

TEST(Buffer, RoundTripF32) {
  std::vector<float> in = {1.5f, -2.25f, 3.0f, 0.0f, 1e30f, -1e-30f};
  EXPECT_EQ(round_trip(in, ElementType::kF32, {2, 3}), in);
}

TEST(Buffer, RoundTripS64Above32Bits) {
  std::vector<int64_t> in = {0, -1, (int64_t{1} << 33) + 7, INT64_MAX, INT64_MIN};
  EXPECT_EQ(round_trip(in, ElementType::kS64, {5}), in);
}

TEST(Buffer, RoundTripPred) {
  std::vector<uint8_t> in = {1, 0, 0, 1};
  EXPECT_EQ(round_trip(in, ElementType::kPred, {2, 2}), in);
}

TEST(Buffer, RoundTripScalarOnSecondDevice) {
  std::vector<double> in = {3.25};
  EXPECT_EQ(round_trip(in, ElementType::kF64, {}, /*device=*/1), in);
}

TEST(Buffer, CopyToOtherDevice) {
  std::vector<float> in = {1.0f, -2.0f, 3.5f};
  auto src = client()->buffer_from_host(in.data(), ElementType::kF32, {3}, 0);
  auto dst = src->copy_to_device(1);
  EXPECT_EQ(dst->dims(), std::vector<int64_t>{3});
  std::vector<float> out(3);
  dst->to_host(out.data(), 12);
  EXPECT_EQ(out, in);
  EXPECT_THROW(src->copy_to_device(2), PjrtError);  // no such device: caught before the plugin
}

TEST(Buffer, OnReadyRunsOnceWithStatus) {
  std::vector<float> in = {1.0f};
  auto buf = client()->buffer_from_host(in.data(), ElementType::kF32, {1}, 0);
  std::atomic<int> calls{0};
  std::atomic<bool> ok{false};
  buf->on_ready([&](bool status) {
    ok = status;
    ++calls;
  });
  buf->await_ready();
  for (int i = 0; i < 1000 && calls.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(ok.load());
}

// buffer_adopting_host: the plugin may keep the host memory as the buffer's
// own; `release` says when the caller may reuse it (the tpu collectives'
// staging pool relies on this).
TEST(Buffer, AdoptedHostMemoryIsHeldUntilThePluginLetsGo) {
  float* host = static_cast<float*>(std::aligned_alloc(64, 64));  // 16 floats, aligned
  for (int i = 0; i < 16; ++i) host[i] = static_cast<float>(i);
  std::atomic<int> released{0};
  auto buf = client()->buffer_adopting_host(host, ElementType::kF32, {16}, 0, [&] { ++released; });
  std::vector<float> out(16);
  buf->to_host(out.data(), 64);
  EXPECT_EQ(out[5], 5.0f);
  // The CPU plugin aliases aligned memory: nothing is released while the
  // buffer lives (this pins the zero-copy that makes the host path cheap).
  EXPECT_EQ(released.load(), 0);
  auto exe = client()->compile(R"(module @m {
  func.func public @main(%a: tensor<16xf32> {tf.aliasing_output = 0 : i32}) -> tensor<16xf32> {
    %0 = stablehlo.add %a, %a : tensor<16xf32>
    return %0 : tensor<16xf32>
  }
})");
  auto outs = exe->execute({buf.get()}, 0);  // donated: the output may reuse the memory
  outs[0]->await_ready();
  buf.reset();
  // Once released, the caller may write the memory: the output must not change.
  if (released.load() == 1) std::fill(host, host + 16, -1.0f);
  outs[0]->to_host(out.data(), 64);
  EXPECT_EQ(out[5], 10.0f);
  outs.clear();
  for (int i = 0; i < 1000 && released.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(released.load(), 1);
  std::free(host);
}

TEST(Buffer, AdoptingARejectedCallReleasesAtOnce) {
  std::vector<float> host(4);
  int released = 0;
  EXPECT_THROW(client()->buffer_adopting_host(host.data(), ElementType::kF32, {4}, /*device=*/7,
                                              [&] { ++released; }),
               PjrtError);
  EXPECT_EQ(released, 1);
}

// buffer_from_host_async (non_blocking copies from pinned memory): the copy is
// the buffer's own memory, never an alias, and `release` fires once it is done.
TEST(Buffer, AsyncHostCopyReleasesOnceCopiedAndNeverAliases) {
  const int n = 1 << 18;  // 1 MiB: past the plugin's synchronous small-copy size
  float* host = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  std::atomic<int> released{0};
  auto buf = client()->buffer_from_host_async(host, ElementType::kF32, {n}, 0, [&] { ++released; });
  buf->await_ready();
  for (int i = 0; i < 1000 && released.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(released.load(), 1);  // while the buffer lives: it is a copy
  std::fill(host, host + n, -1.0f);
  std::vector<float> out(n);
  buf->to_host(out.data(), n * sizeof(float));
  EXPECT_EQ(out[12345], 12345.0f);
  std::free(host);
  int rejected = 0;
  EXPECT_THROW(client()->buffer_from_host_async(out.data(), ElementType::kF32, {4}, /*device=*/7,
                                                [&] { ++rejected; }),
               PjrtError);
  EXPECT_EQ(rejected, 1);
}

TEST(Client, DeviceKindAndMemoryStats) {
  EXPECT_FALSE(client()->device_kind(0).empty());
  Client::MemoryStats stats;
  const bool has = client()->memory_stats(0, &stats);
  if (client()->platform_name() == "cpu") {
    // XLA:CPU keeps buffers in host memory and reports no device stats: that
    // is "none" (torch.tpu.mem_get_info then reads /proc/meminfo), not a throw.
    EXPECT_FALSE(has);
  } else if (has) {
    EXPECT_GE(stats.bytes_in_use, 0);
  }
  EXPECT_THROW(client()->device_kind(5), PjrtError);
}

TEST(Buffer, WrongNbytesIsPjrtError) {
  std::vector<float> in = {1, 2, 3};
  auto buf = client()->buffer_from_host(in.data(), ElementType::kF32, {3}, 0);
  std::vector<float> out(4);
  try {
    buf->to_host(out.data(), 16);
    FAIL() << "expected PjrtError";
  } catch (const PjrtError& e) {
    EXPECT_EQ(e.method(), "PJRT_Buffer_ToHostBuffer");
  }
}

TEST(Buffer, InvalidTypeRejectedBeforePlugin) {
  float x = 0;
  EXPECT_THROW(client()->buffer_from_host(&x, static_cast<ElementType>(0), {1}, 0), PjrtError);
  EXPECT_THROW(client()->buffer_from_host(&x, ElementType::kF32, {1}, 5), PjrtError);
  EXPECT_THROW(client()->buffer_from_host(nullptr, ElementType::kF32, {1}, 0), PjrtError);
  EXPECT_THROW(client()->buffer_from_host(&x, ElementType::kF32, {-1}, 0), PjrtError);
}

TEST(Buffer, EmptyArray) {
  auto buf = client()->buffer_from_host(nullptr, ElementType::kF32, {0, 4}, 0);
  EXPECT_EQ(buf->dims(), (std::vector<int64_t>{0, 4}));
  buf->to_host(nullptr, 0);
}

// kAdd compiled as `exe` adds [1, 2, 3] and [10, 20, 30] on every device.
void expect_add_on_every_device(Executable& exe) {
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  for (int device = 0; device < client()->device_count(); ++device) {
    auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {3}, device);
    auto bb = client()->buffer_from_host(b.data(), ElementType::kF32, {3}, device);
    auto outs = exe.execute({ba.get(), bb.get()}, device);
    ASSERT_EQ(outs.size(), 1u);
    outs[0]->await_ready();
    EXPECT_EQ(outs[0]->dims(), std::vector<int64_t>{3});
    std::vector<float> out(3);
    outs[0]->to_host(out.data(), 12);
    EXPECT_EQ(out, (std::vector<float>{11, 22, 33})) << "device " << device;
  }
}

TEST(Executable, CompileAndExecuteAdd) {
  auto exe = client()->compile(kAdd);
  EXPECT_EQ(exe->num_outputs(), 1);
  expect_add_on_every_device(*exe);
}

// Strict mode's quick per-op settings (env_option_overrides): the plugin
// accepts them, and the program computes the same on every device.
TEST(Executable, QuickOptimizationCompilesAndRuns) {
  const std::string full = compile_options_bytes(Optimization::kFull);
  const std::string quick = compile_options_bytes(Optimization::kQuick);
  EXPECT_EQ(quick.compare(0, full.size(), full), 0);  // the same options, plus overrides
  EXPECT_NE(quick.find("xla_backend_optimization_level"), std::string::npos);
  auto exe = client()->compile(kAdd, Optimization::kQuick);
  expect_add_on_every_device(*exe);
  // kQuickCpu: the quick options plus XLA:CPU's own.
  const std::string cpu = compile_options_bytes(Optimization::kQuickCpu);
  EXPECT_EQ(cpu.compare(0, quick.size(), quick), 0);
  EXPECT_NE(cpu.find("xla_cpu_use_fusion_emitters"), std::string::npos);
  expect_add_on_every_device(*client()->compile(kAdd, Optimization::kQuickCpu));
}

TEST(Executable, MalformedStableHloIsCompileError) {
  try {
    client()->compile("module @m { func.func public @main( this is not mlir");
    FAIL() << "expected PjrtError";
  } catch (const PjrtError& e) {
    EXPECT_EQ(e.method(), "PJRT_Client_Compile");
    EXPECT_NE(e.code(), 0);
  }
}

TEST(Executable, TwoOutputs) {
  auto exe = client()->compile(kTwoOutputs);
  ASSERT_EQ(exe->num_outputs(), 2);
  std::vector<float> a = {3, -4};
  auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {2}, 0);
  auto outs = exe->execute({ba.get()}, 0);
  ASSERT_EQ(outs.size(), 2u);
  std::vector<float> sq(2), neg(2);
  outs[0]->to_host(sq.data(), 8);
  outs[1]->to_host(neg.data(), 8);
  EXPECT_EQ(sq, (std::vector<float>{9, 16}));
  EXPECT_EQ(neg, (std::vector<float>{-3, 4}));
}

TEST(Executable, NullArgumentRejected) {
  auto exe = client()->compile(kAdd);
  std::vector<float> a = {1, 2, 3};
  auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {3}, 0);
  EXPECT_THROW(exe->execute({ba.get(), nullptr}, 0), PjrtError);
}

TEST(Executable, ArgumentOnOtherDeviceIsPjrtError) {
  auto exe = client()->compile(kAdd);
  std::vector<float> a = {1, 2, 3};
  auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {3}, 0);
  try {
    exe->execute({ba.get(), ba.get()}, 1);
    FAIL() << "expected PjrtError";
  } catch (const PjrtError& e) {
    EXPECT_EQ(e.method(), "PJRT_LoadedExecutable_Execute");
  }
}

TEST(Executable, WrongArgumentCountIsPjrtError) {
  auto exe = client()->compile(kAdd);
  std::vector<float> a = {1, 2, 3};
  auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {3}, 0);
  EXPECT_THROW(exe->execute({ba.get()}, 0), PjrtError);
}

TEST(Executable, DonatedInputIsInvalidAfterwards) {
  auto exe = client()->compile(R"(module @m {
  func.func public @main(%a: tensor<3xf32> {tf.aliasing_output = 0 : i32}) -> tensor<3xf32> {
    %0 = stablehlo.add %a, %a : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
})");
  std::vector<float> a = {1, 2, 3};
  auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {3}, 0);
  auto outs = exe->execute({ba.get()}, 0);
  std::vector<float> out(3);
  outs[0]->to_host(out.data(), 12);
  EXPECT_EQ(out, (std::vector<float>{2, 4, 6}));
  // The error surfaces when the copy's event is awaited, under the copy's name.
  try {
    ba->to_host(out.data(), 12);
    FAIL() << "expected PjrtError";
  } catch (const PjrtError& e) {
    EXPECT_EQ(e.method(), "PJRT_Buffer_ToHostBuffer");
  }
}

TEST(Executable, SerializeDeserializeRoundTrip) {
  auto exe = client()->compile(kAdd);
  const std::string bytes = exe->serialize();
  ASSERT_FALSE(bytes.empty());
  auto loaded = client()->deserialize(bytes);
  EXPECT_EQ(loaded->num_outputs(), 1);
  std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
  auto ba = client()->buffer_from_host(a.data(), ElementType::kF32, {3}, 1);
  auto bb = client()->buffer_from_host(b.data(), ElementType::kF32, {3}, 1);
  auto outs = loaded->execute({ba.get(), bb.get()}, 1);
  std::vector<float> out(3);
  outs[0]->to_host(out.data(), 12);
  EXPECT_EQ(out, (std::vector<float>{5, 7, 9}));
}

}  // namespace
}  // namespace ttpu::pjrt
