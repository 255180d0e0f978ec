// One program over several local devices, through the PJRT layer: replicated
// collectives (num_replicas = N) and SPMD-partitioned programs (num_partitions
// = N with GSPMD or Shardy), executed with num_devices = N. Real compiles on
// the CPU plugin with 4 devices; no torch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"
#include "tests/test_plugin.h"
#include "pjrt/signature.h"

namespace ttpu::pjrt {
namespace {

using ttpu::testing::plugin_path;

std::shared_ptr<Client> client() {
  static std::shared_ptr<Client> c = load_plugin(plugin_path())->create_client(4);
  return c;
}

// "dense<[[0, 1, ..., n-1]]> : tensor<1xNxi64>": one group of every replica.
std::string all_replicas(int n) {
  std::string ids;
  for (int i = 0; i < n; ++i) ids += (i ? ", " : "") + std::to_string(i);
  return "dense<[[" + ids + "]]> : tensor<1x" + std::to_string(n) + "xi64>";
}

std::string all_reduce_program(int n, const std::string& combiner) {
  return R"(module @m {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "stablehlo.all_reduce"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = )" +
         combiner + R"( %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = )" +
         all_replicas(n) + R"(} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
})";
}

// One buffer per device: device d holds values(d).
std::vector<std::shared_ptr<Buffer>> upload_per_device(
    const std::vector<int>& devices, const std::vector<int64_t>& dims,
    const std::function<std::vector<float>(int)>& values) {
  std::vector<std::shared_ptr<Buffer>> out;
  for (int d : devices) {
    std::vector<float> v = values(d);
    out.push_back(client()->buffer_from_host(v.data(), ElementType::kF32, dims, d));
  }
  return out;
}

std::vector<std::vector<Buffer*>> one_arg_each(const std::vector<std::shared_ptr<Buffer>>& bufs) {
  std::vector<std::vector<Buffer*>> lists;
  for (const auto& b : bufs) lists.push_back({b.get()});
  return lists;
}

std::vector<float> read(const Buffer& b, size_t n) {
  std::vector<float> out(n);
  b.to_host(out.data(), static_cast<int64_t>(n * sizeof(float)));
  return out;
}

class AllReduce : public ::testing::TestWithParam<int> {};

TEST_P(AllReduce, SumIsOnEveryDevice) {
  const int n = GetParam();
  MultiDeviceOptions options;
  options.num_replicas = n;
  auto exe = client()->compile(all_reduce_program(n, "stablehlo.add"), options);
  ASSERT_EQ(exe->addressable_devices().size(), static_cast<size_t>(n));

  auto bufs = upload_per_device(exe->addressable_devices(), {3}, [](int d) {
    return std::vector<float>{float(d + 1), float(10 * (d + 1)), -1.0f};
  });
  auto outs = exe->execute_multi(one_arg_each(bufs));
  ASSERT_EQ(outs.size(), static_cast<size_t>(n));
  const float s = n * (n + 1) / 2.0f;  // 1 + 2 + ... + n
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(outs[d].size(), 1u);
    EXPECT_EQ(read(*outs[d][0], 3), (std::vector<float>{s, 10 * s, -float(n)})) << "device " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Replicas, AllReduce, ::testing::Values(2, 4));

TEST(AllReduceMax, OnChosenDevices) {
  // Replicas on devices 3 and 1, in that order: execute_multi takes the lists
  // in the executable's device order.
  MultiDeviceOptions options;
  options.num_replicas = 2;
  options.device_ids = {client()->device_id(3), client()->device_id(1)};
  auto exe = client()->compile(all_reduce_program(2, "stablehlo.maximum"), options);
  ASSERT_EQ(exe->addressable_devices(), (std::vector<int>{3, 1}));
  auto bufs = upload_per_device(exe->addressable_devices(), {3}, [](int d) {
    return d == 3 ? std::vector<float>{5, -2, 0} : std::vector<float>{1, 7, 0};
  });
  auto outs = exe->execute_multi(one_arg_each(bufs));
  for (const auto& out : outs) EXPECT_EQ(read(*out[0], 3), (std::vector<float>{5, 7, 0}));
}

TEST(AllGather, ConcatenatesInReplicaOrder) {
  const std::string program = R"(module @m {
  func.func public @main(%a: tensor<2xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64, replica_groups = )" +
                              all_replicas(4) + R"(} : (tensor<2xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
})";
  MultiDeviceOptions options;
  options.num_replicas = 4;
  auto exe = client()->compile(program, options);
  auto bufs = upload_per_device(exe->addressable_devices(), {2}, [](int d) {
    return std::vector<float>{float(d), float(d) + 0.5f};
  });
  auto outs = exe->execute_multi(one_arg_each(bufs));
  ASSERT_EQ(outs.size(), 4u);
  for (const auto& out : outs) {
    EXPECT_EQ(read(*out[0], 8), (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f}));
  }
}

TEST(ReduceScatter, EachDeviceGetsItsSlice) {
  const std::string program = R"(module @m {
  func.func public @main(%a: tensor<8xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.reduce_scatter"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {scatter_dimension = 0 : i64, replica_groups = )" +
                              all_replicas(4) + R"(} : (tensor<8xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
})";
  MultiDeviceOptions options;
  options.num_replicas = 4;
  auto exe = client()->compile(program, options);
  // Device d holds i + 100 d at index i; the sum over devices is 4 i + 600.
  auto bufs = upload_per_device(exe->addressable_devices(), {8}, [](int d) {
    std::vector<float> v(8);
    for (int i = 0; i < 8; ++i) v[i] = float(i + 100 * d);
    return v;
  });
  auto outs = exe->execute_multi(one_arg_each(bufs));
  for (int r = 0; r < 4; ++r) {
    const float i0 = 2.0f * r;
    EXPECT_EQ(read(*outs[r][0], 2), (std::vector<float>{4 * i0 + 600, 4 * (i0 + 1) + 600}))
        << "replica " << r;
  }
}

// sum(a * a, axis 0) of an 8x4 array split by rows over 4 partitions: the
// partitioner must add the cross-device reduction itself.
void expect_sharded_sum_of_squares(const std::string& program, Partitioner partitioner) {
  MultiDeviceOptions options;
  options.num_partitions = 4;
  options.partitioner = partitioner;
  auto exe = client()->compile(program, options);
  ASSERT_EQ(exe->addressable_devices().size(), 4u);
  // Partition p holds rows 2p and 2p+1; element (row, col) = row + 0.25 col.
  auto bufs = upload_per_device(exe->addressable_devices(), {2, 4}, [](int p) {
    std::vector<float> v;
    for (int row = 2 * p; row < 2 * p + 2; ++row)
      for (int col = 0; col < 4; ++col) v.push_back(row + 0.25f * col);
    return v;
  });
  std::vector<float> expected(4, 0.0f);
  for (int row = 0; row < 8; ++row)
    for (int col = 0; col < 4; ++col) expected[col] += (row + 0.25f * col) * (row + 0.25f * col);
  auto outs = exe->execute_multi(one_arg_each(bufs));
  for (int p = 0; p < 4; ++p) {
    ASSERT_EQ(outs[p][0]->dims(), (std::vector<int64_t>{4}));
    EXPECT_EQ(read(*outs[p][0], 4), expected) << "partition " << p;
  }
}

constexpr char kSumOfSquaresBody[] = R"(
    %sq = stablehlo.multiply %a, %a : tensor<8x4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %r = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
})";

TEST(Spmd, GspmdShardedArgument) {
  const std::string program =
      std::string(
          R"(module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1]0,1,2,3}"})
      -> (tensor<4xf32> {mhlo.sharding = "{replicated}"}) {)") +
      kSumOfSquaresBody;
  expect_sharded_sum_of_squares(program, Partitioner::kGspmd);
}

TEST(Spmd, ShardyShardedArgument) {
  const std::string program =
      std::string(
          R"(module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
      -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {)") +
      kSumOfSquaresBody;
  expect_sharded_sum_of_squares(program, Partitioner::kShardy);
}

// ---------------------------------------------------------------------------
// Misuse: a PjrtError, never an abort or a hang.

void expect_error(const std::function<void()>& fn, const std::string& text, int code = -1) {
  try {
    fn();
    FAIL() << "expected PjrtError containing '" << text << "'";
  } catch (const PjrtError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    if (code != 0) EXPECT_EQ(e.code(), code) << e.what();
  }
}

TEST(Misuse, MoreReplicasThanDevices) {
  MultiDeviceOptions options;
  options.num_replicas = 5;
  expect_error([&] { client()->compile(all_reduce_program(5, "stablehlo.add"), options); },
               "need 5 devices; the client has 4");
  options.num_replicas = 0;
  expect_error([&] { client()->compile(all_reduce_program(2, "stablehlo.add"), options); },
               "must be >= 1");
}

TEST(Misuse, BadDeviceIds) {
  MultiDeviceOptions options;
  options.num_replicas = 2;
  options.device_ids = {0};
  expect_error([&] { client()->compile(all_reduce_program(2, "stablehlo.add"), options); },
               "device_ids has 1 ids for 2 devices");
  options.device_ids = {1, 1};
  expect_error([&] { client()->compile(all_reduce_program(2, "stablehlo.add"), options); },
               "device id 1 appears twice");
  // An id no process has: the plugin's own error.
  options.device_ids = {0, 7};
  expect_error([&] { client()->compile(all_reduce_program(2, "stablehlo.add"), options); },
               "No matching device found for device_id 7", 0);
}

// Each of these, passed to the CPU plugin, fails one device's launch and leaves
// the other device waiting in the all-reduce forever: every later program on
// it hangs (measured). So they are refused before the plugin sees them, and
// the test ends by running the collective on the same devices.
TEST(Misuse, ArgumentsAreCheckedBeforeTheLaunch) {
  MultiDeviceOptions options;
  options.num_replicas = 2;
  auto exe = client()->compile(all_reduce_program(2, "stablehlo.add"), options);
  auto bufs =
      upload_per_device({0, 1}, {3}, [](int d) { return std::vector<float>{1, 2, float(d)}; });
  expect_error([&] { exe->execute_multi({{bufs[0].get()}}); },
               "1 argument lists for an executable over 2 devices");
  expect_error([&] { exe->execute_multi({{bufs[0].get()}, {}}); },
               "argument list 1 has 0 arguments, the program takes 1");
  expect_error(
      [&] { exe->execute_multi({{bufs[0].get(), bufs[0].get()}, {bufs[1].get(), bufs[1].get()}}); },
      "argument list 0 has 2 arguments, the program takes 1");
  expect_error([&] { exe->execute_multi({{bufs[0].get()}, {nullptr}}); },
               "argument 0 of device list 1 is null");
  expect_error([&] { exe->execute_multi({{bufs[1].get()}, {bufs[0].get()}}); },
               "argument 0 of device list 0 is not on device 0");
  expect_error([&] { exe->execute_multi({{bufs[0].get()}, {bufs[0].get()}}); },
               "argument 0 of device list 1 is not on device 1");
  // Wrong size everywhere (the plugin: "expected parameter 0 of size 12 but
  // got buffer with incompatible size 16"), and on one device only.
  auto big = upload_per_device({0, 1}, {4}, [](int) { return std::vector<float>{1, 2, 3, 4}; });
  expect_error(
      [&] { exe->execute_multi(one_arg_each(big)); },
      "argument 0 of device list 0 has type 11 dims [4]; the program takes type 11 dims [3]");
  expect_error([&] { exe->execute_multi({{bufs[0].get()}, {big[1].get()}}); },
               "argument 0 of device list 1 has dims [4] (type 11), list 0 has [3] (type 11)");
  // Same size, other type: the plugin would reinterpret the bytes silently.
  const int32_t ints[3] = {1, 2, 3};
  auto i0 = client()->buffer_from_host(ints, ElementType::kS32, {3}, 0);
  auto i1 = client()->buffer_from_host(ints, ElementType::kS32, {3}, 1);
  expect_error([&] { exe->execute_multi({{i0.get()}, {i1.get()}}); },
               "has type 4 dims [3]; the program takes type 11 dims [3]");
  // Launching one device of a collective would wait forever for the other.
  expect_error([&] { exe->execute({bufs[0].get()}, 0); }, "use execute_multi");

  // Nothing was left stuck: the same devices still run the collective.
  auto outs = exe->execute_multi(one_arg_each(bufs));
  for (const auto& out : outs) EXPECT_EQ(read(*out[0], 3), (std::vector<float>{2, 4, 1}));
}

TEST(Misuse, PortableExecutableIsNotMultiDevice) {
  auto exe = client()->compile(R"(module @m {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
})");
  EXPECT_TRUE(exe->addressable_devices().empty());
  expect_error([&] { exe->execute_multi({}); }, "compile it with MultiDeviceOptions");
}

// The entry signature read from the text, which execute_multi checks against.
TEST(Signature, ParametersOfMain) {
  auto params = main_parameters(R"(module @m attributes {mhlo.num_partitions = 4 : i32} {
  func.func private @helper(%z: tensor<9xf32>) -> tensor<9xf32>
  func.func public @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1]0,1,2,3}"},
                         %b: tensor<i64>, %c: tensor<2xcomplex<f32>> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                         %d: tensor<?x3xf32>, %e: tensor<3xbf16>) -> tensor<4xf32> {)");
  ASSERT_TRUE(params.has_value());
  ASSERT_EQ(params->size(), 5u);
  EXPECT_TRUE((*params)[0].known);
  EXPECT_EQ((*params)[0].type, ElementType::kF32);
  EXPECT_EQ((*params)[0].dims, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ((*params)[1].type, ElementType::kS64);
  EXPECT_TRUE((*params)[1].dims.empty());
  EXPECT_EQ((*params)[2].type, ElementType::kC64);
  EXPECT_EQ((*params)[2].dims, (std::vector<int64_t>{2}));
  EXPECT_FALSE((*params)[3].known);  // dynamic: not checked
  EXPECT_EQ((*params)[4].type, ElementType::kBF16);

  auto none = main_parameters("module @m { func.func public @main() -> tensor<f32> {");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(main_parameters("ML\xefR bytecode").has_value());
}

}  // namespace
}  // namespace ttpu::pjrt
