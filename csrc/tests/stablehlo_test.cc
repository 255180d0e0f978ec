// Golden StableHLO text for small graphs, so a refactor of the emitter shows its
// diff, plus the attribute syntax of the structured ops. The end-to-end suites
// (every Op compiled and run on the plugin) are stablehlo_run_test.cc and
// stablehlo_run_structured_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ir/graph.h"
#include "stablehlo/emit.h"

namespace ttpu::stablehlo {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Graph;
using ir::Op;
using ir::Reducer;
using ir::TensorType;
using ir::Value;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\nin:\n" << text;
}

TEST(Golden, Add) {
  Graph g;
  Value a = g.parameter({DType::kF32, {3}});
  Value b = g.parameter({DType::kF32, {3}});
  g.set_outputs({g.binary(Op::kAdd, a, b)});
  EXPECT_EQ(emit(g, "add"), R"(module @add {
  func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> (tensor<3xf32>) {
    %2 = "stablehlo.add"(%arg0, %arg1) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%2) : (tensor<3xf32>) -> ()
  }
}
)");
}

// Buffer donation: the donated parameter carries the output it is aliased to.
TEST(Golden, DonatedParameter) {
  Graph g;
  Value w = g.parameter({DType::kF32, {3}});
  Value lr = g.parameter({DType::kF32, {}});
  Value grad = g.parameter({DType::kF32, {3}});
  Value step = g.binary(Op::kMul, g.broadcast_in_dim(lr, {3}, {}), grad);
  g.set_outputs({g.binary(Op::kAdd, grad, grad), g.binary(Op::kSub, w, step)});
  g.donate(0, 1);
  EXPECT_EQ(emit(g, "sgd"), R"(module @sgd {
  func.func public @main(%arg0: tensor<3xf32> {tf.aliasing_output = 1 : i32}, %arg1: tensor<f32>, %arg2: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    %3 = "stablehlo.broadcast_in_dim"(%arg1) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3xf32>
    %4 = "stablehlo.multiply"(%3, %arg2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %5 = "stablehlo.add"(%arg2, %arg2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %6 = "stablehlo.subtract"(%arg0, %4) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%5, %6) : (tensor<3xf32>, tensor<3xf32>) -> ()
  }
}
)");
}

TEST(Golden, ReduceSum) {
  Graph g;
  Value x = g.parameter({DType::kF32, {2, 3}});
  Value zero = g.constant(0, {DType::kF32, {}});
  g.set_outputs({g.reduce({x}, {zero}, {1}, Reducer::kAdd)[0]});
  EXPECT_EQ(emit(g, "sum"), R"(module @sum {
  func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<2xf32>) {
    %1 = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>} : () -> tensor<f32>
    %2 = "stablehlo.reduce"(%arg0, %1) ({
      ^bb0(%r0: tensor<f32>, %r1: tensor<f32>):
        %r2 = "stablehlo.add"(%r0, %r1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%r2) : (tensor<f32>) -> ()
      }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    "func.return"(%2) : (tensor<2xf32>) -> ()
  }
}
)");
}

TEST(Golden, DotGeneral) {
  Graph g;
  Value x = g.parameter({DType::kBF16, {4, 2, 3}});
  Value w = g.parameter({DType::kBF16, {4, 3, 5}});
  g.set_outputs({g.dot_general(x, w, {0}, {0}, {2}, {1})});
  EXPECT_EQ(emit(g, "bmm"), R"(module @bmm {
  func.func public @main(%arg0: tensor<4x2x3xbf16>, %arg1: tensor<4x3x5xbf16>) -> (tensor<4x2x5xbf16>) {
    %2 = "stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>} : (tensor<4x2x3xbf16>, tensor<4x3x5xbf16>) -> tensor<4x2x5xbf16>
    "func.return"(%2) : (tensor<4x2x5xbf16>) -> ()
  }
}
)");
}

TEST(Golden, MultiResultAndNoOutputs) {
  Graph g;
  Value s = g.parameter({DType::kU64, {2}});
  auto [state, bits] = g.rng_bit_generator(s, {DType::kU32, {3}});
  g.set_outputs({bits, state, s});
  EXPECT_EQ(emit(g, "rng"), R"(module @rng {
  func.func public @main(%arg0: tensor<2xui64>) -> (tensor<3xui32>, tensor<2xui64>, tensor<2xui64>) {
    %1:2 = "stablehlo.rng_bit_generator"(%arg0) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>)
    "func.return"(%1#1, %1#0, %arg0) : (tensor<3xui32>, tensor<2xui64>, tensor<2xui64>) -> ()
  }
}
)");
  Graph empty;
  EXPECT_EQ(emit(empty, "my-module"), R"(module @"my-module" {
  func.func public @main() -> () {
    "func.return"() : () -> ()
  }
}
)");
}

TEST(Syntax, ConstantsAreExact) {
  Graph g;
  std::vector<Value> outs = {
      g.constant(INFINITY, {DType::kF32, {2}}), g.constant(-0.0, {DType::kF64, {}}),
      g.constant(1.0, {DType::kBF16, {}}),      g.constant(65504, {DType::kF16, {}}),
      g.constant(-1, {DType::kI8, {}}),         g.constant_int(-1, {DType::kU64, {}}),
      g.constant(1, {DType::kBool, {}}),        g.constant(0, {DType::kBool, {}})};
  g.set_outputs(outs);
  const std::string text = emit(g);
  expect_contains(text, "dense<0x7F800000> : tensor<2xf32>");
  expect_contains(text, "dense<0x8000000000000000> : tensor<f64>");
  expect_contains(text, "dense<0x3F80> : tensor<bf16>");
  expect_contains(text, "dense<0x7BFF> : tensor<f16>");
  expect_contains(text, "dense<-1> : tensor<i8>");
  expect_contains(text, "dense<18446744073709551615> : tensor<ui64>");
  expect_contains(text, "dense<true> : tensor<i1>");
  expect_contains(text, "dense<false> : tensor<i1>");
}

TEST(Syntax, CompareTypeFollowsDtype) {
  for (auto [dtype, type] : {std::pair{DType::kF16, "FLOAT"},
                             {DType::kI32, "SIGNED"},
                             {DType::kU8, "UNSIGNED"},
                             {DType::kBool, "UNSIGNED"}}) {
    Graph g;
    Value a = g.parameter({dtype, {2}});
    g.set_outputs({g.compare(Cmp::kLE, a, a)});
    expect_contains(emit(g),
                    "{comparison_direction = #stablehlo<comparison_direction LE>, "
                    "compare_type = #stablehlo<comparison_type " +
                        std::string(type) + ">}");
  }
}

TEST(Syntax, StructuredAttributes) {
  Graph g;
  Value x = g.parameter({DType::kF32, {1, 2, 5, 5}});
  Value w = g.parameter({DType::kF32, {4, 2, 3, 3}});
  ir::ConvDims c;
  c.window_strides = {2, 1};
  c.padding_low = {1, 0};
  c.padding_high = {1, 2};
  Value y = g.convolution(x, w, c);
  Value ninf = g.constant(-INFINITY, {DType::kF32, {}});
  Value pool = g.reduce_window(y, ninf, {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {}, {}, Reducer::kMax);
  Value idx = g.parameter({DType::kI64, {3, 1}});
  Value table = g.parameter({DType::kF32, {5, 4}});
  Value rows = g.gather(table, idx, ir::GatherDims{{1}, {0}, {0}, {1, 4}, 1}, {3, 4});
  Value back = g.scatter(table, idx, rows, ir::ScatterDims{{1}, {0}, {0}, 1}, Reducer::kAdd);
  Value t = g.transpose(table, {1, 0});
  Value p = g.pad(t, g.constant(0, {DType::kF32, {}}), {1, 0}, {0, 2}, {0, 1});
  g.set_outputs({pool, back, p, g.unary(Op::kErf, t), g.binary(Op::kMax, t, t)});
  const std::string text = emit(g);
  expect_contains(text,
                  "dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>"
                  ", feature_group_count = 1 : i64, batch_group_count = 1 : i64, "
                  "window_strides = array<i64: 2, 1>, padding = dense<[[1, 1], [0, 2]]> : "
                  "tensor<2x2xi64>, lhs_dilation = array<i64: 1, 1>, "
                  "rhs_dilation = array<i64: 1, 1>");
  expect_contains(text,
                  "window_dimensions = array<i64: 1, 1, 2, 2>, window_strides = "
                  "array<i64: 1, 1, 2, 2>, base_dilations = array<i64: 1, 1, 1, 1>, "
                  "window_dilations = array<i64: 1, 1, 1, 1>, padding = dense<[[0, 0], "
                  "[0, 0], [0, 0], [0, 0]]> : tensor<4x2xi64>");
  expect_contains(text,
                  "dimension_numbers = #stablehlo.gather<offset_dims = [1], "
                  "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, "
                  "slice_sizes = array<i64: 1, 4>");
  expect_contains(text,
                  "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
                  "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
                  "index_vector_dim = 1>");
  expect_contains(text, "{permutation = array<i64: 1, 0>}");
  expect_contains(text,
                  "{edge_padding_low = array<i64: 1, 0>, edge_padding_high = "
                  "array<i64: 0, 2>, interior_padding = array<i64: 0, 1>}");
  expect_contains(text, "\"chlo.erf\"");
  expect_contains(text, "\"stablehlo.maximum\"");
}

TEST(Errors, BadGraphsThrowIrError) {
  Graph g;
  Value x = g.parameter({DType::kF32, {2}});
  g.set_outputs({x, Value{7, 0}});
  EXPECT_THROW(emit(g), ir::IrError);
  g.set_outputs({Value{x.node, 1}});
  EXPECT_THROW(emit(g), ir::IrError);
}

// Complex types print as complex<f32>; a complex splat constant is
// real-valued, its parts as hex bit patterns.
TEST(Golden, ComplexAndFft) {
  Graph g;
  Value x = g.parameter({DType::kF32, {4}});
  Value c = g.fft(x, ir::FftType::kRfft, {4});
  Value two = g.constant(2, {DType::kC64, {3}});
  Value y = g.binary(Op::kMul, c, two);
  Value re = g.real(y);
  Value im = g.imag(y);
  g.set_outputs({re, im, g.complex(re, im)});
  EXPECT_EQ(emit(g, "cx"), R"(module @cx {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xcomplex<f32>>) {
    %1 = "stablehlo.fft"(%arg0) {fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 4>} : (tensor<4xf32>) -> tensor<3xcomplex<f32>>
    %2 = "stablehlo.constant"() {value = dense<(0x40000000, 0x00000000)> : tensor<3xcomplex<f32>>} : () -> tensor<3xcomplex<f32>>
    %3 = "stablehlo.multiply"(%1, %2) : (tensor<3xcomplex<f32>>, tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>
    %4 = "stablehlo.real"(%3) : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
    %5 = "stablehlo.imag"(%3) : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
    %6 = "stablehlo.complex"(%4, %5) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xcomplex<f32>>
    "func.return"(%4, %5, %6) : (tensor<3xf32>, tensor<3xf32>, tensor<3xcomplex<f32>>) -> ()
  }
}
)");
}

}  // namespace
}  // namespace ttpu::stablehlo
