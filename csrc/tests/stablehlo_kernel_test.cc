// User kernels (stablehlo/kernel_module.h and Op::kCall): parsing a JAX-style
// module, renaming its functions, errors naming the kernel, and calls of two
// kernels (one of them twice, with a private helper) compiled and run on the
// CPU plugin.
#include <gtest/gtest.h>

#include <memory>

#include "stablehlo/kernel_module.h"
#include "stablehlo_run_util.h"

namespace ttpu::testing {
namespace {

using ir::DType;
using ir::TensorType;

// What jax.jit(f).lower(...).as_text() prints for f(x) = (sort(x) * 2, x + 1),
// trimmed: module attributes, result attributes, a private helper.
const char* kJaxLike =
    R"(module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32> {mhlo.layout_mode = "default"}) -> (tensor<4xf32> {jax.result_info = "result[0]"}, tensor<4xf32> {jax.result_info = "result[1]"}) {
    %0 = call @sort(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
    %1 = stablehlo.multiply %0, %cst : tensor<4xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
    %2 = stablehlo.add %arg0, %cst_0 : tensor<4xf32>
    return %1, %2 : tensor<4xf32>, tensor<4xf32>
  }
  func.func private @sort(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // a comment naming @sort stays as it is
    %0 = "stablehlo.sort"(%arg0) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)";

const char* kSquare = R"(func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
})";

const std::string kKeyA = "0123456789abcdef0123";
const std::string kKeyB = "fedcba98765432100000";

TEST(KernelModule, PreparesJaxLikeModule) {
  ir::UserFunction f = stablehlo::prepare_kernel(kJaxLike, "f", kKeyA);
  EXPECT_EQ(f.entry, "ttpu_k0123456789abcdef_main");
  ASSERT_EQ(f.params.size(), 1u);
  EXPECT_EQ(f.params[0], (TensorType{DType::kF32, {4}}));
  ASSERT_EQ(f.results.size(), 2u);
  EXPECT_NE(f.funcs.find("func.func private @ttpu_k0123456789abcdef_sort("), std::string::npos);
  EXPECT_NE(f.funcs.find("call @ttpu_k0123456789abcdef_sort(%arg0)"), std::string::npos);
  EXPECT_NE(f.funcs.find("a comment naming @sort"), std::string::npos);
  // a string literal is not renamed either
  ir::UserFunction g = stablehlo::prepare_kernel(
      "func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = stablehlo.custom_call @main(%x) {backend_config = \"@main\"} : "
      "(tensor<f32>) -> tensor<f32>\n  return %0 : tensor<f32>\n}",
      "g", kKeyA);
  EXPECT_NE(
      g.funcs.find("custom_call @ttpu_k0123456789abcdef_main(%x) {backend_config = \"@main\"}"),
      std::string::npos)
      << g.funcs;
  EXPECT_EQ(f.funcs.find("jax.result_info"), std::string::npos);
  EXPECT_EQ(f.funcs.find("mhlo.layout_mode"), std::string::npos);
  EXPECT_EQ(f.funcs.find("public"), std::string::npos);
}

TEST(KernelModule, ErrorsNameTheKernel) {
  auto error = [](const std::string& text) {
    try {
      stablehlo::prepare_kernel(text, "mine", kKeyA);
    } catch (const stablehlo::KernelTextError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("module { func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {")
                .find("kernel 'mine': unbalanced"),
            std::string::npos);
  EXPECT_NE(error("module {}").find("defines no function"), std::string::npos);
  EXPECT_NE(error("module { sdy.mesh @m = <[\"x\"=1]> }").find("only func.func"),
            std::string::npos);
  EXPECT_NE(error("func.func @main(%x: tensor<?xf32>) -> tensor<4xf32> { return %x }")
                .find("dynamic dimensions"),
            std::string::npos);
  EXPECT_NE(error("func.func @main(%x: tensor<4xf4E2M1FN>) -> tensor<4xf32> { return %x }")
                .find("f4E2M1FN"),
            std::string::npos);
  EXPECT_NE(error("func.func private @a(%x: tensor<4xf32>) -> tensor<4xf32> { return %x }")
                .find("no @main"),
            std::string::npos);
  EXPECT_NE(
      error(std::string(kSquare) + "\n#map = affine_map<(d0) -> (d0)>").find("only func.func"),
      std::string::npos);
}

TEST(KernelModule, DropsDebugLocations) {
  // What jax.export's mlir_module() prints: aliases before and after, loc(...)
  // on operations and functions.
  const char* text = R"(#loc1 = loc("f.py":3:17)
module @jit_f {
  func.func public @main(%arg0: tensor<4xf32> loc("x")) -> (tensor<4xf32>) {
    %0 = stablehlo.sine %arg0 : tensor<4xf32> loc(#loc2)
    return %0 : tensor<4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("jit(f)/sin"(#loc1))
)";
  ir::UserFunction f = stablehlo::prepare_kernel(text, "f", kKeyA);
  EXPECT_EQ(f.funcs.find("loc"), std::string::npos) << f.funcs;
  EXPECT_EQ(f.params.size(), 1u);
}

TEST(KernelModule, CallChecksArgumentTypes) {
  auto fn =
      std::make_shared<const ir::UserFunction>(stablehlo::prepare_kernel(kSquare, "square", kKeyB));
  ir::Graph g;
  ir::Value p = g.parameter({DType::kF64, {4}});
  try {
    g.call(fn, {p});
    FAIL() << "no error";
  } catch (const ir::IrError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'square'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tensor<4xf64>"), std::string::npos) << e.what();
  }
}

TEST(KernelModule, TwoKernelsRunInOneProgram) {
  auto f =
      std::make_shared<const ir::UserFunction>(stablehlo::prepare_kernel(kJaxLike, "f", kKeyA));
  auto sq =
      std::make_shared<const ir::UserFunction>(stablehlo::prepare_kernel(kSquare, "square", kKeyB));
  ir::Graph g;
  ir::Value x = g.parameter({DType::kF32, {4}});
  auto r = g.call(f, {x});               // (sort(x) * 2, x + 1)
  ir::Value s1 = g.call(sq, {r[1]})[0];  // (x + 1)^2
  ir::Value s2 = g.call(sq, {s1})[0];    // (x + 1)^4: the same kernel twice
  g.set_outputs({r[0], s2});
  const std::string text = stablehlo::emit(g, "k");
  size_t count = 0;
  for (size_t p = text.find("func.func private @ttpu_kfedcba9876543210_main");
       p != std::string::npos;
       p = text.find("func.func private @ttpu_kfedcba9876543210_main", p + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << text;
  auto out = run(g, {array<float>(DType::kF32, {4}, {3, -1, 2, 0})});
  EXPECT_EQ(out[0].as<float>(), (std::vector<float>{-2, 0, 4, 6}));
  EXPECT_EQ(out[1].as<float>(), (std::vector<float>{256, 0, 81, 1}));
}

TEST(KernelModule, FingerprintHoldsTheKey) {
  auto a = std::make_shared<const ir::UserFunction>(stablehlo::prepare_kernel(kSquare, "a", kKeyA));
  auto b = std::make_shared<const ir::UserFunction>(stablehlo::prepare_kernel(kSquare, "b", kKeyB));
  auto build = [](std::shared_ptr<const ir::UserFunction> fn) {
    ir::Graph g;
    g.set_outputs(g.call(fn, {g.parameter({DType::kF32, {4}})}));
    return g.fingerprint();
  };
  EXPECT_EQ(build(a), build(a));
  EXPECT_NE(build(a), build(b));
}

}  // namespace
}  // namespace ttpu::testing
