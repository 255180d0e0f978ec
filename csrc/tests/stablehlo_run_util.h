// Test harness for the end-to-end emitter suites: emit a Graph, compile it on
// the CPU plugin ($TORCHTPU_TEST_PLUGIN, else the path CMake baked in), run it
// on host arrays, read the outputs back. Records every Op it ran so the suite
// can check that no Op kind went untested.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "tests/test_plugin.h"
#include "pjrt/pjrt.h"
#include "runtime/runtime.h"
#include "stablehlo/emit.h"

namespace ttpu::testing {

inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A dense row-major host array. f16/bf16 elements are uint16_t bit patterns.
struct Array {
  ir::TensorType type;
  std::vector<uint8_t> bytes;

  template <typename T>
  std::vector<T> as() const {
    if (sizeof(T) != static_cast<size_t>(ir::byte_size(type.dtype))) {
      throw std::runtime_error("Array::as: element size mismatch for " + type.mlir());
    }
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  // Every element as a double (floats decoded, integers converted).
  std::vector<double> doubles() const {
    const size_t n = static_cast<size_t>(ir::byte_size(type.dtype));
    std::vector<double> out;
    for (size_t off = 0; off + n <= bytes.size(); off += n) {
      uint64_t bits = 0;
      std::memcpy(&bits, bytes.data() + off, n);  // little-endian host
      out.push_back(ir::literal_to_double(bits, type.dtype));
    }
    return out;
  }
};

template <typename T>
Array array(ir::DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  Array a{{dtype, std::move(dims)}, {}};
  if (sizeof(T) != static_cast<size_t>(ir::byte_size(dtype)) ||
      static_cast<int64_t>(values.size()) != a.type.numel()) {
    throw std::runtime_error("array: values do not fit " + a.type.mlir());
  }
  a.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  return a;
}

// Values given as doubles, stored in `dtype` (rounded as ir::literal_bits does).
inline Array array_of(ir::DType dtype, std::vector<int64_t> dims, const std::vector<double>& v) {
  Array a{{dtype, std::move(dims)}, {}};
  const size_t n = static_cast<size_t>(ir::byte_size(dtype));
  if (static_cast<int64_t>(v.size()) != a.type.numel()) {
    throw std::runtime_error("array_of: values do not fit " + a.type.mlir());
  }
  a.bytes.resize(v.size() * n);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t bits = ir::literal_bits(v[i], dtype);
    std::memcpy(a.bytes.data() + i * n, &bits, n);
  }
  return a;
}

// The values `v` take once stored in `dtype`.
inline std::vector<double> stored(ir::DType dtype, const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v) out.push_back(ir::literal_to_double(ir::literal_bits(x, dtype), dtype));
  return out;
}

// (the runtime's map: one place says which PJRT type holds each IR dtype)
using runtime::element_type;

using ttpu::testing::plugin_path;

// One client per process (each starts thread pools).
inline std::shared_ptr<pjrt::Client> client() {
  static std::shared_ptr<pjrt::Client> c = pjrt::load_plugin(plugin_path())->create_client(1);
  return c;
}

// Ops that some run() has compiled and executed.
inline std::set<ir::Op>& covered_ops() {
  static std::set<ir::Op> ops;
  return ops;
}

// Emits `g`, compiles and runs it with `args` (in graph.parameters() order) and
// returns its outputs. A compile or run failure throws with the module text.
inline std::vector<Array> run(const ir::Graph& g, const std::vector<Array>& args,
                              const stablehlo::EmitOptions& options = {}) {
  const std::string text = stablehlo::emit(g, "run", options);
  std::vector<Array> outputs;
  try {
    auto exe = client()->compile(text);
    std::vector<std::shared_ptr<pjrt::Buffer>> bufs;
    std::vector<pjrt::Buffer*> raw;
    for (const Array& a : args) {
      bufs.push_back(
          client()->buffer_from_host(a.bytes.data(), element_type(a.type.dtype), a.type.dims, 0));
      raw.push_back(bufs.back().get());
    }
    auto results = exe->execute(raw, 0);
    if (results.size() != g.outputs().size()) throw std::runtime_error("output count differs");
    for (size_t i = 0; i < results.size(); ++i) {
      Array out{g.type(g.outputs()[i]), {}};
      out.bytes.resize(static_cast<size_t>(out.type.numel() * ir::byte_size(out.type.dtype)));
      results[i]->to_host(out.bytes.data(), static_cast<int64_t>(out.bytes.size()));
      outputs.push_back(std::move(out));
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + "\n--- module ---\n" + text);
  }
  for (const ir::Node& n : g.nodes()) covered_ops().insert(n.op);
  return outputs;
}

// |got - want| <= atol + rtol * |want| elementwise; NaN matches NaN, inf matches
// the same inf.
inline void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                        double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " [" << i << "]: got " << g << ", want NaN";
    } else if (std::isinf(w)) {
      EXPECT_EQ(g, w) << what << " [" << i << "]";
    } else {
      EXPECT_LE(std::fabs(g - w), atol + rtol * std::fabs(w))
          << what << " [" << i << "]: got " << g << ", want " << w;
    }
  }
}

}  // namespace ttpu::testing
