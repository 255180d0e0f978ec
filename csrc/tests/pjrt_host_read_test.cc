// read_in_place (pjrt/host_read.h) against the real CPU plugin: the memcpy from
// a buffer's own memory gives the same bytes as PJRT_Buffer_ToHostBuffer for
// every element type, ranks 0-2, and a buffer still being computed; and it
// declines (copying nothing) where it does not apply.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "pjrt/host_read.h"
#include "pjrt/pjrt.h"
#include "tests/test_plugin.h"

namespace ttpu::pjrt {
namespace {

std::shared_ptr<Client> client() {
  static std::shared_ptr<Client> c = load_plugin(ttpu::testing::plugin_path())->create_client(1);
  return c;
}

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(gen());
  return out;
}

// Both reads of one buffer; read_in_place must take it (the CPU plugin).
void expect_same_bytes(const Buffer& buffer, int64_t nbytes) {
  std::vector<uint8_t> by_copy(nbytes, 0xAA), in_place(nbytes, 0x55);
  buffer.to_host(by_copy.data(), nbytes);
  ASSERT_TRUE(read_in_place(*client(), buffer, in_place.data(), nbytes));
  EXPECT_EQ(by_copy, in_place);
}

TEST(HostRead, CpuPluginMemoryIsHostMemory) {
  // Pinned: a plugin upgrade that drops the methods (or moves buffers off the
  // host) shows up here, and the backend then falls back to ToHostBuffer.
  EXPECT_TRUE(device_memory_is_host(*client()));
}

TEST(HostRead, SameBytesAsToHostForEveryType) {
  const ElementType types[] = {ElementType::kPred, ElementType::kS8,  ElementType::kS16,
                               ElementType::kS32,  ElementType::kS64, ElementType::kU8,
                               ElementType::kU16,  ElementType::kU32, ElementType::kU64,
                               ElementType::kF16,  ElementType::kF32, ElementType::kF64,
                               ElementType::kBF16, ElementType::kC64, ElementType::kC128};
  const std::vector<std::vector<int64_t>> shapes = {{}, {7}, {3, 5}, {1 << 16}};
  unsigned seed = 1;
  for (ElementType type : types) {
    for (const auto& dims : shapes) {
      int64_t numel = 1;
      for (int64_t d : dims) numel *= d;
      const int64_t nbytes = numel * element_size(type);
      auto bytes = random_bytes(nbytes, seed++);
      if (type == ElementType::kPred)
        for (auto& b : bytes) b &= 1;  // a pred byte is 0 or 1
      auto buffer = client()->buffer_from_host(bytes.data(), type, dims, 0);
      SCOPED_TRACE(::testing::Message()
                   << "type " << static_cast<int>(type) << " rank " << dims.size());
      expect_same_bytes(*buffer, nbytes);
      std::vector<uint8_t> in_place(nbytes);
      ASSERT_TRUE(read_in_place(*client(), *buffer, in_place.data(), nbytes));
      EXPECT_EQ(in_place, bytes);
    }
  }
}

TEST(HostRead, WaitsForAValueStillBeingComputed) {
  // Three 512x512 products: read at once after the launch, before they finish.
  auto exe = client()->compile(R"(module @m {
  func.func public @main(%a: tensor<512x512xf32>) -> tensor<512x512xf32> {
    %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0] : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %1 = stablehlo.dot_general %0, %a, contracting_dims = [1] x [0] : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %2 = stablehlo.dot_general %1, %a, contracting_dims = [1] x [0] : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    return %2 : tensor<512x512xf32>
  }
})");
  std::vector<float> a(512 * 512);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  for (auto& v : a) v = dist(gen);
  auto in = client()->buffer_from_host(a.data(), ElementType::kF32, {512, 512}, 0);
  const int64_t nbytes = 512 * 512 * 4;
  for (int i = 0; i < 3; ++i) {
    auto out = exe->execute({in.get()}, 0)[0];
    std::vector<uint8_t> in_place(nbytes, 0);
    ASSERT_TRUE(read_in_place(*client(), *out, in_place.data(), nbytes));  // first read
    std::vector<uint8_t> by_copy(nbytes, 1);
    out->to_host(by_copy.data(), nbytes);
    EXPECT_EQ(by_copy, in_place);
  }
}

TEST(HostRead, DeclinesAndCopiesNothing) {
  const std::vector<float> v = {1, 2, 3, 4};
  auto buffer = client()->buffer_from_host(v.data(), ElementType::kF32, {4}, 0);
  std::vector<uint8_t> dst(32, 0xEE);
  EXPECT_FALSE(read_in_place(*client(), *buffer, dst.data(), 12));  // wrong size
  EXPECT_FALSE(read_in_place(*client(), *buffer, dst.data(), 32));
  EXPECT_FALSE(read_in_place(*client(), *buffer, nullptr, 16));
  EXPECT_FALSE(read_in_place(*client(), *buffer, dst.data(), 0));
  EXPECT_EQ(dst, std::vector<uint8_t>(32, 0xEE));
  // The source is untouched by the reads: it still reads back as uploaded.
  std::vector<float> back(4);
  ASSERT_TRUE(read_in_place(*client(), *buffer, back.data(), 16));
  EXPECT_EQ(back, v);
}

}  // namespace
}  // namespace ttpu::pjrt
