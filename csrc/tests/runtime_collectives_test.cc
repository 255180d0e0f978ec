// Runtime collectives on the CPU plugin with 4 devices: all_reduce_local (one
// program over several local devices) and the cross-process capability probe.
// Real compiles and executions; no torch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace ttpu::runtime {
namespace {

Runtime& rt() {
  static Runtime* r = [] {
    setenv("TORCHTPU_CACHE", "0", 1);  // no disk cache in a unit test
    const char* env = std::getenv("TORCHTPU_TEST_PLUGIN");
    return &Runtime::init((env && *env) ? env : TORCHTPU_TEST_PLUGIN, 4);
  }();
  return *r;
}

template <typename T>
std::shared_ptr<pjrt::Buffer> put(const std::vector<T>& v, ir::DType dtype, int device) {
  return rt().upload(v.data(), dtype, {static_cast<int64_t>(v.size())}, device);
}

template <typename T>
std::vector<T> get(const pjrt::Buffer& b, size_t n) {
  std::vector<T> out(n);
  rt().download(b, out.data(), static_cast<int64_t>(n * sizeof(T)));
  return out;
}

TEST(Runtime, NoCrossProcessCollectivesOnTheCpuPlugin) {
  ASSERT_EQ(rt().client().platform_name(), "cpu");
  EXPECT_FALSE(rt().supports_cross_process_collectives());
}

TEST(AllReduceLocal, SumOverFourDevices) {
  std::vector<std::shared_ptr<pjrt::Buffer>> in;
  std::vector<pjrt::Buffer*> raw;
  for (int d = 0; d < 4; ++d) {
    in.push_back(put<float>({float(d), 1.5f, -2.0f * d}, ir::DType::kF32, d));
    raw.push_back(in.back().get());
  }
  auto out = rt().all_reduce_local(raw, ReduceOp::kSum);
  ASSERT_EQ(out.size(), 4u);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(get<float>(*out[d], 3), (std::vector<float>{6.0f, 6.0f, -12.0f})) << d;
    EXPECT_EQ(out[d]->device(), rt().client().device(d));
  }
  // The inputs are untouched (results are new buffers).
  EXPECT_EQ(get<float>(*in[3], 3), (std::vector<float>{3.0f, 1.5f, -6.0f}));
}

TEST(AllReduceLocal, OpsAndDevicesInAnyOrder) {
  auto a = put<int32_t>({5, -3, 7}, ir::DType::kI32, 2);
  auto b = put<int32_t>({2, 4, 7}, ir::DType::kI32, 0);
  auto max = rt().all_reduce_local({a.get(), b.get()}, ReduceOp::kMax);
  EXPECT_EQ(max[0]->device(), rt().client().device(2));
  EXPECT_EQ(max[1]->device(), rt().client().device(0));
  for (auto& r : max) EXPECT_EQ(get<int32_t>(*r, 3), (std::vector<int32_t>{5, 4, 7}));
  auto min = rt().all_reduce_local({a.get(), b.get()}, ReduceOp::kMin);
  for (auto& r : min) EXPECT_EQ(get<int32_t>(*r, 3), (std::vector<int32_t>{2, -3, 7}));
  auto prod = rt().all_reduce_local({a.get(), b.get()}, ReduceOp::kProduct);
  for (auto& r : prod) EXPECT_EQ(get<int32_t>(*r, 3), (std::vector<int32_t>{10, -12, 49}));

  auto x = put<double>({1.0, 3.0}, ir::DType::kF64, 1);
  auto y = put<double>({2.0, -4.0}, ir::DType::kF64, 3);
  auto avg = rt().all_reduce_local({x.get(), y.get()}, ReduceOp::kAvg);
  for (auto& r : avg) EXPECT_EQ(get<double>(*r, 2), (std::vector<double>{1.5, -0.5}));
}

TEST(AllReduceLocal, ProgramIsReused) {
  auto a = put<float>({1.0f}, ir::DType::kF32, 0);
  auto b = put<float>({2.0f}, ir::DType::kF32, 1);
  rt().all_reduce_local({a.get(), b.get()}, ReduceOp::kSum);
  const int64_t compiles = rt().metrics().compiles;
  auto out = rt().all_reduce_local({a.get(), b.get()}, ReduceOp::kSum);
  EXPECT_EQ(rt().metrics().compiles, compiles);
  EXPECT_EQ(get<float>(*out[1], 1), (std::vector<float>{3.0f}));
}

void expect_invalid(const std::vector<pjrt::Buffer*>& bufs, ReduceOp op, const std::string& text) {
  try {
    rt().all_reduce_local(bufs, op);
    FAIL() << "expected std::invalid_argument: " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(AllReduceLocal, BadInputIsRefused) {
  auto f0 = put<float>({1.0f, 2.0f}, ir::DType::kF32, 0);
  auto f0b = put<float>({1.0f, 2.0f}, ir::DType::kF32, 0);
  auto f1 = put<float>({1.0f}, ir::DType::kF32, 1);
  auto i1 = put<int32_t>({1, 2}, ir::DType::kI32, 1);
  const bool flags[2] = {true, false};
  auto p0 = rt().upload(flags, ir::DType::kBool, {2}, 0);
  auto p1 = rt().upload(flags, ir::DType::kBool, {2}, 1);
  expect_invalid({}, ReduceOp::kSum, "no buffers");
  expect_invalid({f0.get(), nullptr}, ReduceOp::kSum, "buffer 1 is null");
  expect_invalid({f0.get(), f0b.get()}, ReduceOp::kSum, "one buffer per device");
  expect_invalid({f0.get(), f1.get()}, ReduceOp::kSum, "differs from buffer 0");
  expect_invalid({f0.get(), i1.get()}, ReduceOp::kSum, "differs from buffer 0");
  expect_invalid({p0.get(), p1.get()}, ReduceOp::kMax, "bool buffers");
  auto i0 = put<int32_t>({1, 2}, ir::DType::kI32, 0);
  expect_invalid({i0.get(), i1.get()}, ReduceOp::kAvg, "AVG needs a floating");
}

}  // namespace
}  // namespace ttpu::runtime
