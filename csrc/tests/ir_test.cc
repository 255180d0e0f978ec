// Conformance suite for the IR layer (csrc/ir): literal conversion, result-type
// inference per the StableHLO spec, builder errors, fingerprint identity.
// Needs no plugin and no torch.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "ir/float8.h"
#include "ir/graph.h"

namespace ttpu::ir {
namespace {

using Dims = std::vector<int64_t>;

TensorType f32(Dims d) { return {DType::kF32, std::move(d)}; }
TensorType i64(Dims d) { return {DType::kI64, std::move(d)}; }

// Runs `fn` and checks it throws IrError whose message contains every `parts`.
template <typename Fn>
void expect_ir_error(Fn fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected IrError";
  } catch (const IrError& e) {
    const std::string msg = e.what();
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
  }
}

// ---------------------------------------------------------------- types

TEST(Types, NamesAndSizes) {
  EXPECT_EQ(mlir_name(DType::kBool), "i1");
  EXPECT_EQ(mlir_name(DType::kU8), "ui8");
  EXPECT_EQ(mlir_name(DType::kBF16), "bf16");
  EXPECT_EQ(byte_size(DType::kBool), 1);
  EXPECT_EQ(byte_size(DType::kBF16), 2);
  EXPECT_EQ(byte_size(DType::kU64), 8);
  EXPECT_TRUE(is_unsigned(DType::kBool));
  EXPECT_FALSE(is_integral(DType::kBool));
  EXPECT_TRUE(is_integral(DType::kU32));
  EXPECT_EQ(mlir_name(DType::kU16), "ui16");
  EXPECT_EQ(byte_size(DType::kU16), 2);
  EXPECT_TRUE(is_unsigned(DType::kU16));
  EXPECT_EQ(literal_bits(65535.0, DType::kU16), 0xFFFFu);
  EXPECT_EQ(literal_to_double(0xFFFF, DType::kU16), 65535.0);  // unsigned: no sign extension
  EXPECT_EQ(f32({2, 3}).mlir(), "tensor<2x3xf32>");
  EXPECT_EQ(i64({}).mlir(), "tensor<i64>");
  EXPECT_EQ(f32({2, 0}).numel(), 0);
  EXPECT_EQ(i64({}).numel(), 1);
}

TEST(Literal, Float8AsPyTorch) {
  // Values checked against CPU PyTorch 2.13 (tensor.to(dtype).view(uint8)).
  EXPECT_TRUE(is_float(DType::kF8E4M3FN));
  EXPECT_TRUE(is_float8(DType::kF8E8M0FNU));
  EXPECT_FALSE(is_float8(DType::kC128));
  EXPECT_EQ(byte_size(DType::kF8E5M2), 1);
  EXPECT_EQ(mlir_name(DType::kF8E4M3FNUZ), "f8E4M3FNUZ");
  EXPECT_EQ(literal_bits(448.0, DType::kF8E4M3FN), 0x7Eu);
  EXPECT_EQ(literal_bits(499.8, DType::kF8E4M3FN), 0x7Eu);  // saturates
  EXPECT_EQ(literal_bits(-INFINITY, DType::kF8E4M3FN), 0xFEu);
  EXPECT_EQ(literal_bits(NAN, DType::kF8E4M3FN), 0x7Fu);
  EXPECT_EQ(literal_bits(1.0625 + 0x1p-40, DType::kF8E4M3FN), 0x38u);  // via float: a tie
  EXPECT_EQ(literal_bits(61439.0, DType::kF8E5M2), 0x7Bu);
  EXPECT_EQ(literal_bits(61440.0, DType::kF8E5M2), 0x7Cu);  // ties to even: infinity
  EXPECT_EQ(literal_bits(-0.0, DType::kF8E5M2), 0x80u);
  EXPECT_EQ(literal_bits(244.0, DType::kF8E4M3FNUZ), 0x7Fu);
  EXPECT_EQ(literal_bits(248.0, DType::kF8E4M3FNUZ), 0x80u);  // overflow: NaN
  EXPECT_EQ(literal_bits(-0.0, DType::kF8E4M3FNUZ), 0u);
  EXPECT_EQ(literal_bits(3.0, DType::kF8E8M0FNU), 129u);   // ties up
  EXPECT_EQ(literal_bits(-4.0, DType::kF8E8M0FNU), 129u);  // sign dropped
  EXPECT_EQ(literal_bits(0.0, DType::kF8E8M0FNU), 0u);
  EXPECT_EQ(literal_to_double(0x7E, DType::kF8E4M3FN), 448.0);
  EXPECT_EQ(literal_to_double(0x01, DType::kF8E4M3FN), 0x1p-9);
  EXPECT_EQ(literal_to_double(0x7B, DType::kF8E5M2FNUZ), 28672.0);
  EXPECT_EQ(literal_to_double(127, DType::kF8E8M0FNU), 1.0);
  EXPECT_EQ(float8_to_f32_bits(0x7F, DType::kF8E4M3FN), 0x7FF00000u);
  EXPECT_EQ(float8_to_f32_bits(0xFD, DType::kF8E5M2), 0xFFE00000u);
  EXPECT_EQ(float8_to_f32_bits(0x80, DType::kF8E5M2FNUZ), 0x7F800001u);
  EXPECT_EQ(float8_to_f32_bits(0, DType::kF8E8M0FNU), 0x00400000u);
}

TEST(Literal, HalfRoundsToNearestEven) {
  EXPECT_EQ(f16_bits(1.0), 0x3C00);
  EXPECT_EQ(f16_bits(-2.0), 0xC000);
  EXPECT_EQ(f16_bits(65504.0), 0x7BFF);
  EXPECT_EQ(f16_bits(65520.0), 0x7C00);  // halfway to 2^16 rounds to even: inf
  EXPECT_EQ(f16_bits(65519.0), 0x7BFF);
  EXPECT_EQ(f16_bits(1.0 + std::ldexp(1.0, -11)), 0x3C00);      // tie -> even (down)
  EXPECT_EQ(f16_bits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(f16_bits(std::ldexp(1.0, -24)), 0x0001);            // smallest subnormal
  EXPECT_EQ(f16_bits(std::ldexp(1.0, -25)), 0x0000);            // tie -> even zero
  EXPECT_EQ(f16_bits(std::ldexp(1.5, -25)), 0x0001);
  EXPECT_EQ(f16_bits(-0.0), 0x8000);
  EXPECT_EQ(f16_bits(INFINITY), 0x7C00);
  EXPECT_EQ(f16_bits(-INFINITY), 0xFC00);
  EXPECT_EQ(f16_bits(NAN) & 0x7E00, 0x7E00);
  EXPECT_EQ(f16_value(0x3555), 0.333251953125);
  EXPECT_EQ(f16_value(0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isnan(f16_value(0x7E00)));
}

TEST(Literal, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0), 0x3F80);
  EXPECT_EQ(bf16_bits(3.140625), 0x4049);
  EXPECT_EQ(bf16_bits(1.0 + std::ldexp(1.0, -8)), 0x3F80);          // tie -> even
  EXPECT_EQ(bf16_bits(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);      // tie -> even
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(bf16_bits(-INFINITY), 0xFF80);
  EXPECT_EQ(bf16_value(0x4049), 3.140625);
  // Direct from double: no double rounding through f32.
  const double just_above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(bf16_bits(just_above_tie), 0x3F81);
}

TEST(Literal, IntegersAndBools) {
  EXPECT_EQ(literal_bits(-1.0, DType::kI8), 0xFFu);
  EXPECT_EQ(literal_bits(2.9, DType::kI32), 2u);
  EXPECT_EQ(literal_bits(-2.9, DType::kI64), static_cast<uint64_t>(-2));
  EXPECT_EQ(literal_bits(300.0, DType::kU8), 44u);  // wraps like a C++ conversion chain
  EXPECT_EQ(literal_bits(1.8446744073709550e19, DType::kU64), 18446744073709549568ull);
  EXPECT_EQ(literal_bits(0.5, DType::kBool), 1u);
  EXPECT_EQ(literal_bits(NAN, DType::kBool), 1u);
  EXPECT_EQ(literal_bits(0.0, DType::kBool), 0u);
  EXPECT_EQ(literal_bits(1.0 / 3, DType::kF32), std::bit_cast<uint32_t>(1.0f / 3));
  EXPECT_EQ(literal_bits(0.1, DType::kF64), std::bit_cast<uint64_t>(0.1));
  expect_ir_error([] { literal_bits(INFINITY, DType::kI32); }, {"i32"});
  expect_ir_error([] { literal_bits(NAN, DType::kU8); }, {"ui8"});
  expect_ir_error([] { literal_bits(1e30, DType::kI64); }, {"i64"});

  const int64_t big = (int64_t{1} << 62) + 1;  // not a double
  EXPECT_EQ(literal_bits_int(big, DType::kI64), static_cast<uint64_t>(big));
  EXPECT_EQ(literal_bits_int(INT64_MIN, DType::kI64), uint64_t{1} << 63);
  EXPECT_EQ(literal_bits_int(-1, DType::kI16), 0xFFFFu);
  EXPECT_EQ(literal_bits_int(2049, DType::kF16), 0x6800u);  // 2049 -> 2048 (tie to even)
  EXPECT_EQ(literal_bits_int(2051, DType::kF16), 0x6802u);  // 2051 -> 2052 (tie to even)
  EXPECT_EQ(literal_bits_int(-3, DType::kBF16), bf16_bits(-3.0));
  EXPECT_EQ(literal_bits_int(INT64_MIN, DType::kBF16), bf16_bits(-9223372036854775808.0));
  EXPECT_EQ(literal_bits_int(7, DType::kBool), 1u);
  EXPECT_EQ(literal_to_int(0xFFu, DType::kI8), -1);
  EXPECT_EQ(literal_to_int(0xFFu, DType::kU8), 255);
  EXPECT_EQ(literal_to_double(0x8000u, DType::kI16), -32768.0);
  EXPECT_EQ(literal_to_double(bf16_bits(-3.0), DType::kBF16), -3.0);
}

// ---------------------------------------------------------------- builders

TEST(Builders, LeavesAndElementwise) {
  Graph g;
  Value x = g.parameter(f32({2, 3}));
  Value c = g.constant(2.5, f32({2, 3}));
  EXPECT_EQ(g.nodes()[c.node].attrs.literal, std::bit_cast<uint32_t>(2.5f));
  Value s = g.binary(Op::kAdd, x, c);
  EXPECT_EQ(g.type(s), f32({2, 3}));
  EXPECT_EQ(g.type(g.unary(Op::kIsFinite, s)), (TensorType{DType::kBool, {2, 3}}));
  EXPECT_EQ(g.type(g.compare(Cmp::kLT, x, c)).dtype, DType::kBool);
  EXPECT_EQ(g.type(g.convert(x, DType::kBF16)), (TensorType{DType::kBF16, {2, 3}}));
  EXPECT_EQ(g.type(g.bitcast_convert(x, DType::kI32)).dtype, DType::kI32);
  EXPECT_EQ(g.type(g.iota(i64({4, 2}), 1)), i64({4, 2}));
  Value p = g.compare(Cmp::kGT, x, c);
  EXPECT_EQ(g.type(g.select(p, x, c)), f32({2, 3}));
  Value scalar = g.constant(0, f32({}));
  EXPECT_EQ(g.type(g.clamp(scalar, x, scalar)), f32({2, 3}));
  EXPECT_EQ(g.parameters(), std::vector<int32_t>{x.node});
}

TEST(Builders, NoNodeWhenNothingChanges) {
  Graph g;
  Value x = g.parameter(f32({2, 3}));
  const size_t n = g.nodes().size();
  EXPECT_EQ(g.convert(x, DType::kF32).node, x.node);
  EXPECT_EQ(g.reshape(x, {2, 3}).node, x.node);
  EXPECT_EQ(g.nodes().size(), n);
  EXPECT_NE(g.reshape(x, {3, 2}).node, x.node);
}

TEST(Builders, ElementwiseErrorsNameOpAndTypes) {
  Graph g;
  Value x = g.parameter(f32({3}));
  Value y = g.parameter(f32({4}));
  Value i = g.parameter(i64({3}));
  Value b = g.parameter({DType::kBool, {3}});
  expect_ir_error([&] { g.binary(Op::kAdd, x, y); }, {"add", "tensor<3xf32>", "tensor<4xf32>"});
  expect_ir_error([&] { g.binary(Op::kAnd, x, x); }, {"and", "tensor<3xf32>"});
  expect_ir_error([&] { g.binary(Op::kSub, b, b); }, {"subtract", "i1"});
  expect_ir_error([&] { g.binary(Op::kNeg, x, x); }, {"negate", "not a binary op"});
  expect_ir_error([&] { g.unary(Op::kAdd, x); }, {"add", "not a unary op"});
  expect_ir_error([&] { g.unary(Op::kExp, i); }, {"exponential", "tensor<3xi64>", "float"});
  expect_ir_error([&] { g.unary(Op::kAbs, g.parameter({DType::kU8, {2}})); }, {"abs", "ui8"});
  expect_ir_error([&] { g.select(x, x, x); }, {"select", "i1"});
  expect_ir_error([&] { g.compare(Cmp::kEQ, x, i); }, {"compare", "tensor<3xi64>"});
  expect_ir_error([&] { g.bitcast_convert(x, DType::kF16); }, {"bitcast_convert", "f16"});
  expect_ir_error([&] { g.unary(Op::kNeg, Value{99, 0}); }, {"negate", "%99"});
  expect_ir_error([&] { g.iota(f32({2}), 1); }, {"iota", "tensor<2xf32>"});
  expect_ir_error([&] { g.unary(Op::kNot, x); }, {"not"});
  EXPECT_NO_THROW(g.unary(Op::kNot, b));
  EXPECT_NO_THROW(g.unary(Op::kPopcnt, i));
}

TEST(Builders, Movement) {
  Graph g;
  Value x = g.parameter(f32({2, 3}));
  EXPECT_EQ(g.type(g.broadcast_in_dim(x, {4, 2, 3}, {1, 2})), f32({4, 2, 3}));
  EXPECT_EQ(g.type(g.transpose(x, {1, 0})), f32({3, 2}));
  EXPECT_EQ(g.type(g.slice(x, {0, 1}, {2, 3}, {1, 2})), f32({2, 1}));
  EXPECT_EQ(g.type(g.slice(x, {0, 0}, {2, 3}, {2, 2})), f32({1, 2}));
  EXPECT_EQ(g.type(g.concatenate({x, x, x}, 1)), f32({2, 9}));
  Value zero = g.constant(0, f32({}));
  EXPECT_EQ(g.type(g.pad(x, zero, {1, -1}, {0, 2}, {1, 1})), f32({4, 6}));
  EXPECT_EQ(g.type(g.reverse(x, {0, 1})), f32({2, 3}));
  Value i = g.constant_int(1, TensorType{DType::kI32, {}});
  EXPECT_EQ(g.type(g.dynamic_slice(x, {i, i}, {1, 2})), f32({1, 2}));
  EXPECT_EQ(g.type(g.dynamic_update_slice(x, g.parameter(f32({1, 3})), {i, i})), f32({2, 3}));

  expect_ir_error([&] { g.reshape(x, {4}); }, {"reshape", "tensor<2x3xf32>", "tensor<4xf32>"});
  expect_ir_error([&] { g.broadcast_in_dim(x, {2, 4}, {0, 1}); },
                  {"broadcast_in_dim", "tensor<2x4xf32>"});
  expect_ir_error([&] { g.transpose(x, {0, 0}); }, {"transpose", "repeats"});
  expect_ir_error([&] { g.slice(x, {0, 0}, {3, 3}, {1, 1}); }, {"slice", "tensor<2x3xf32>"});
  expect_ir_error([&] { g.concatenate({x, g.parameter(f32({3, 3}))}, 1); }, {"concatenate"});
  expect_ir_error([&] { g.pad(x, i, {0, 0}, {0, 0}, {0, 0}); }, {"pad", "tensor<i32>"});
  expect_ir_error([&] { g.dynamic_slice(x, {i}, {1, 1}); }, {"dynamic_slice", "1 start indices"});
  expect_ir_error([&] { g.dynamic_slice(x, {i, zero}, {1, 1}); }, {"dynamic_slice", "tensor<f32>"});
}

TEST(Builders, GatherAndScatter) {
  Graph g;
  Value table = g.parameter(f32({5, 4}));
  Value idx = g.parameter(i64({3, 1}));
  // Embedding lookup: rows of `table` at idx -> [3, 4].
  GatherDims gd{{1}, {0}, {0}, {1, 4}, 1};
  EXPECT_EQ(g.type(g.gather(table, idx, gd, {3, 4})), f32({3, 4}));
  expect_ir_error([&] { g.gather(table, idx, gd, {3, 4, 1}); }, {"gather", "rank 2"});
  expect_ir_error([&] { g.gather(table, idx, gd, {4, 3}); }, {"gather", "[3, 4]"});
  GatherDims bad = gd;
  bad.slice_sizes = {2, 4};
  expect_ir_error([&] { g.gather(table, idx, bad, {3, 4}); }, {"gather", "collapsed"});

  ScatterDims sd{{1}, {0}, {0}, 1};
  Value upd = g.parameter(f32({3, 4}));
  EXPECT_EQ(g.type(g.scatter(table, idx, upd, sd, Reducer::kAdd)), f32({5, 4}));
  expect_ir_error([&] { g.scatter(table, idx, g.parameter(f32({2, 4})), sd, Reducer::kAdd); },
                  {"scatter", "tensor<2x4xf32>"});
  expect_ir_error([&] { g.scatter(table, idx, upd, sd, Reducer::kArgMax); },
                  {"scatter", "reducer"});
}

TEST(Builders, Reductions) {
  Graph g;
  Value x = g.parameter(f32({2, 3, 4}));
  Value zero = g.constant(0, f32({}));
  auto r = g.reduce({x}, {zero}, {0, 2}, Reducer::kAdd);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(g.type(r[0]), f32({3}));
  Value idx = g.iota(i64({2, 3, 4}), 1);
  auto am = g.reduce({x, idx}, {zero, g.constant_int(0, i64({}))}, {1}, Reducer::kArgMax);
  ASSERT_EQ(am.size(), 2u);
  EXPECT_EQ(g.type(am[0]), f32({2, 4}));
  EXPECT_EQ(g.type(am[1]), i64({2, 4}));
  EXPECT_EQ(am[1].index, 1);
  expect_ir_error([&] { g.reduce({x}, {zero}, {3}, Reducer::kAdd); }, {"reduce", "[3]"});
  expect_ir_error([&] { g.reduce({x}, {g.constant(0, f32({1}))}, {0}, Reducer::kAdd); },
                  {"reduce", "tensor<1xf32>"});
  expect_ir_error([&] { g.reduce({x}, {zero}, {0}, Reducer::kAnd); },
                  {"reduce", "tensor<2x3x4xf32>"});
  expect_ir_error([&] { g.reduce({x}, {zero}, {0}, Reducer::kArgMax); }, {"reduce", "argmax"});

  // reduce_window: 2x2 max pool, stride 2, on [1, 1, 5, 5] padded high by 1 -> 3x3.
  Value img = g.parameter(f32({1, 1, 5, 5}));
  Value ninf = g.constant(-INFINITY, f32({}));
  Value pool = g.reduce_window(img, ninf, {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {0, 0, 0, 0},
                               {0, 0, 1, 1}, Reducer::kMax);
  EXPECT_EQ(g.type(pool), f32({1, 1, 3, 3}));
  EXPECT_EQ(g.nodes()[pool.node].attrs.ints[2], (Dims{1, 1, 1, 1}));  // defaults filled in
  // Base dilation 2 on 5 -> 9, window 3 dilated 2 -> 5, stride 1 -> 5.
  EXPECT_EQ(g.type(g.reduce_window(img, ninf, {1, 1, 3, 3}, {}, {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {},
                                   Reducer::kMax)),
            f32({1, 1, 5, 5}));
  expect_ir_error([&] { g.reduce_window(img, ninf, {2, 2}, {}, {}, {}, {}, {}, Reducer::kMax); },
                  {"reduce_window", "window"});
  Value src = g.parameter(f32({1, 1, 3, 3}));
  EXPECT_EQ(g.type(g.select_and_scatter(img, src, zero, {1, 1, 2, 2}, {1, 1, 2, 2}, {},
                                        {0, 0, 1, 1}, Cmp::kGE)),
            f32({1, 1, 5, 5}));
  expect_ir_error(
      [&] { g.select_and_scatter(img, src, zero, {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, Cmp::kGE); },
      {"select_and_scatter", "tensor<1x1x2x2xf32>"});

  auto sorted = g.sort({x, idx}, 2, Cmp::kLT);
  EXPECT_EQ(g.type(sorted[1]), i64({2, 3, 4}));
  expect_ir_error([&] { g.sort({x}, 0, Cmp::kEQ); }, {"sort"});
}

TEST(Builders, DotGeneral) {
  Graph g;
  Value a = g.parameter(f32({8, 2, 3}));
  Value b = g.parameter(f32({8, 3, 5}));
  EXPECT_EQ(g.type(g.dot_general(a, b, {0}, {0}, {2}, {1})), f32({8, 2, 5}));
  // Batch first, then lhs free, then rhs free, whatever the operand order.
  Value c = g.parameter(f32({3, 7, 8}));
  EXPECT_EQ(g.type(g.dot_general(a, c, {0}, {2}, {2}, {0})), f32({8, 2, 7}));
  expect_ir_error([&] { g.dot_general(a, b, {0}, {0}, {1}, {1}); },
                  {"dot_general", "tensor<8x2x3xf32>", "tensor<8x3x5xf32>"});
  expect_ir_error([&] { g.dot_general(a, g.parameter(i64({3, 5})), {}, {}, {2}, {0}); },
                  {"dot_general", "dtypes"});
}

TEST(Builders, Convolution) {
  Graph g;
  Value x = g.parameter(f32({2, 4, 9, 9}));
  Value w = g.parameter(f32({6, 4, 3, 3}));
  ConvDims d;
  d.window_strides = {2, 2};
  d.padding_low = {1, 1};
  d.padding_high = {1, 1};
  EXPECT_EQ(g.type(g.convolution(x, w, d)), f32({2, 6, 5, 5}));
  ConvDims dil;
  dil.rhs_dilation = {2, 2};  // effective window 5 -> 9 - 5 + 1
  EXPECT_EQ(g.type(g.convolution(x, w, dil)), f32({2, 6, 5, 5}));
  ConvDims tr;
  tr.lhs_dilation = {2, 2};  // transposed-conv style: 9 -> 17, window 3 -> 15
  EXPECT_EQ(g.type(g.convolution(x, w, tr)), f32({2, 6, 15, 15}));
  ConvDims grouped;
  grouped.feature_group_count = 2;
  Value wg = g.parameter(f32({6, 2, 3, 3}));
  EXPECT_EQ(g.type(g.convolution(x, wg, grouped)), f32({2, 6, 7, 7}));
  expect_ir_error([&] { g.convolution(x, wg, ConvDims{}); },
                  {"convolution", "tensor<6x2x3x3xf32>"});
  ConvDims short_strides;
  short_strides.window_strides = {1};
  expect_ir_error([&] { g.convolution(x, w, short_strides); }, {"convolution", "window_strides"});
}

TEST(Builders, RngBitGenerator) {
  Graph g;
  Value s = g.parameter({DType::kU64, {2}});
  auto [state, bits] = g.rng_bit_generator(s, {DType::kU32, {3, 4}});
  EXPECT_EQ(state.node, bits.node);
  EXPECT_EQ(g.type(state), (TensorType{DType::kU64, {2}}));
  EXPECT_EQ(g.type(bits), (TensorType{DType::kU32, {3, 4}}));
  expect_ir_error([&] { g.rng_bit_generator(g.parameter({DType::kU32, {2}}), {DType::kU32, {2}}); },
                  {"rng_bit_generator", "tensor<2xui32>"});
  expect_ir_error([&] { g.rng_bit_generator(s, f32({2})); }, {"rng_bit_generator", "f32"});
}

TEST(OpName, EveryOpHasAName) {
  for (int i = 0; i <= static_cast<int>(Op::kRngBitGenerator); ++i) {
    EXPECT_STRNE(op_name(static_cast<Op>(i)), "unknown_op") << i;
  }
  EXPECT_STREQ(op_name(Op::kDotGeneral), "dot_general");
}

// ---------------------------------------------------------------- fingerprint

Graph mlp(double bias, DType dtype = DType::kF32, Cmp cmp = Cmp::kGT) {
  Graph g;
  Value x = g.parameter({dtype, {4, 3}});
  Value w = g.parameter({dtype, {3, 2}});
  Value y = g.dot_general(x, w, {}, {}, {1}, {0});
  Value b = g.constant(bias, {dtype, {4, 2}});
  Value z = g.binary(Op::kAdd, y, b);
  Value zero = g.constant(0, {dtype, {4, 2}});
  g.set_outputs({g.select(g.compare(cmp, z, zero), z, zero)});
  return g;
}

TEST(Fingerprint, EqualForEqualGraphs) {
  EXPECT_EQ(mlp(1.5).fingerprint(), mlp(1.5).fingerprint());
  EXPECT_LT(mlp(1.5).fingerprint().size(), 200u);  // compact
}

TEST(Fingerprint, DiffersForAnyChange) {
  const std::string base = mlp(1.5).fingerprint();
  EXPECT_NE(base, mlp(2.5).fingerprint());                         // literal
  EXPECT_NE(base, mlp(1.5, DType::kBF16).fingerprint());           // dtype
  EXPECT_NE(base, mlp(1.5, DType::kF32, Cmp::kGE).fingerprint());  // attribute
  Graph g = mlp(1.5);
  g.set_outputs({g.outputs()[0], Value{0, 0}});
  EXPECT_NE(base, g.fingerprint());  // outputs

  // Operand wiring: a - b vs b - a.
  auto sub = [](bool swap) {
    Graph h;
    Value a = h.parameter(f32({2}));
    Value b = h.parameter(f32({2}));
    h.set_outputs({swap ? h.binary(Op::kSub, b, a) : h.binary(Op::kSub, a, b)});
    return h.fingerprint();
  };
  EXPECT_NE(sub(false), sub(true));
  // Shapes, and structured attributes (gather dims, conv dims).
  auto conv = [](int64_t stride, int64_t size) {
    Graph h;
    Value x = h.parameter(f32({1, 1, size, size}));
    Value w = h.parameter(f32({1, 1, 2, 2}));
    ConvDims d;
    d.window_strides = {stride, stride};
    h.set_outputs({h.convolution(x, w, d)});
    return h.fingerprint();
  };
  EXPECT_EQ(conv(1, 6), conv(1, 6));
  EXPECT_NE(conv(1, 6), conv(2, 6));
  EXPECT_NE(conv(1, 6), conv(1, 7));
}

// A donated parameter compiles to a different program (its memory is the
// output's), so donation is part of the key.
TEST(Fingerprint, IncludesDonation) {
  auto axpy = [](int donate_param) {
    Graph h;
    Value a = h.parameter(f32({3}));
    Value b = h.parameter(f32({3}));
    h.set_outputs({h.binary(Op::kAdd, a, b)});
    if (donate_param >= 0) h.donate(static_cast<size_t>(donate_param), 0);
    return h;
  };
  EXPECT_EQ(axpy(0).fingerprint(), axpy(0).fingerprint());
  EXPECT_NE(axpy(-1).fingerprint(), axpy(0).fingerprint());
  EXPECT_NE(axpy(0).fingerprint(), axpy(1).fingerprint());
  EXPECT_EQ(axpy(1).donations(), (std::vector<int32_t>{-1, 0}));
  EXPECT_TRUE(axpy(-1).donations().empty());
}

TEST(Donation, RejectsMismatchesAndDoubles) {
  Graph h;
  Value a = h.parameter(f32({3}));
  Value b = h.parameter(f32({2}));
  Value s = h.binary(Op::kAdd, a, a);
  h.set_outputs({s, s});
  EXPECT_THROW(h.donate(1, 0), IrError);  // f32[2] into f32[3]
  EXPECT_THROW(h.donate(2, 0), IrError);  // no such parameter
  EXPECT_THROW(h.donate(0, 2), IrError);  // no such output
  h.donate(0, 1);
  EXPECT_THROW(h.donate(0, 0), IrError);  // parameter already donated
  h.set_outputs({s});                     // outputs reset: donations with them
  EXPECT_TRUE(h.donations().empty());
  (void)b;
}

// ---------------------------------------------------------------- decompositions

TEST(Builders, CholeskyAndTriangularSolve) {
  Graph g;
  Value a = g.parameter(f32({2, 3, 3}));
  Value b = g.parameter(f32({2, 3, 4}));
  EXPECT_EQ(g.type(g.cholesky(a, true)), f32({2, 3, 3}));
  LinalgFlags left;
  left.left_side = true;
  left.lower = true;
  EXPECT_EQ(g.type(g.triangular_solve(a, b, left)), f32({2, 3, 4}));
  Value c = g.parameter(f32({2, 4, 3}));
  EXPECT_EQ(g.type(g.triangular_solve(a, c, LinalgFlags{})), f32({2, 4, 3}));
  expect_ir_error([&] { g.cholesky(g.parameter(f32({2, 3})), true); }, {"cholesky", "square"});
  expect_ir_error([&] { g.cholesky(g.parameter(i64({3, 3})), true); }, {"cholesky", "float"});
  expect_ir_error([&] { g.triangular_solve(a, c, left); }, {"triangular_solve", "rows"});
  expect_ir_error([&] { g.triangular_solve(a, g.parameter(f32({3, 3, 4})), left); },
                  {"triangular_solve", "tensor<3x3x4xf32>"});
}

TEST(Builders, CustomCall) {
  Graph g;
  Value a = g.parameter(f32({4, 3}));
  auto r = g.custom_call({"Qr", ""}, {a}, {f32({4, 3}), f32({3})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].node, r[1].node);
  EXPECT_EQ(g.type(r[1]), f32({3}));
  expect_ir_error([&] { g.custom_call({"", ""}, {a}, {f32({3})}); }, {"custom_call", "empty"});
  expect_ir_error([&] { g.custom_call({"Qr", ""}, {a}, {}); }, {"custom_call", "Qr"});
}

TEST(Fingerprint, IncludesDecompositionAttributes) {
  auto solve = [](bool lower, bool transpose) {
    Graph h;
    Value a = h.parameter(f32({3, 3}));
    LinalgFlags f;
    f.lower = lower;
    f.transpose_a = transpose;
    h.set_outputs({h.triangular_solve(a, a, f)});
    return h.fingerprint();
  };
  EXPECT_EQ(solve(true, false), solve(true, false));
  EXPECT_NE(solve(true, false), solve(false, false));
  EXPECT_NE(solve(true, false), solve(true, true));
  auto eigh = [](const char* config) {
    Graph h;
    Value a = h.parameter(f32({3, 3}));
    h.set_outputs(h.custom_call({"Eigh", config}, {a}, {f32({3, 3}), f32({3})}));
    return h.fingerprint();
  };
  EXPECT_EQ(eigh("1,1,100,1e-6"), eigh("1,1,100,1e-6"));
  EXPECT_NE(eigh("1,1,100,1e-6"), eigh("0,1,100,1e-6"));
}

// ---------------------------------------------------------------- complex

TEST(Types, Complex) {
  EXPECT_EQ(mlir_name(DType::kC64), "complex<f32>");
  EXPECT_EQ(mlir_name(DType::kC128), "complex<f64>");
  EXPECT_EQ(byte_size(DType::kC64), 8);
  EXPECT_EQ(byte_size(DType::kC128), 16);
  EXPECT_TRUE(is_complex(DType::kC64));
  EXPECT_FALSE(is_float(DType::kC64));
  EXPECT_FALSE(is_integral(DType::kC128));
  EXPECT_EQ(complex_part(DType::kC128), DType::kF64);
  EXPECT_EQ(complex_of(DType::kF32), DType::kC64);
  EXPECT_THROW(complex_of(DType::kI32), IrError);
  // A complex literal is its real part in the part type.
  EXPECT_EQ(literal_bits(1.5, DType::kC64), literal_bits(1.5, DType::kF32));
  EXPECT_EQ(literal_to_double(literal_bits(-2.25, DType::kC128), DType::kC128), -2.25);
  EXPECT_EQ((TensorType{DType::kC64, {2}}).mlir(), "tensor<2xcomplex<f32>>");
}

TEST(Builders, ComplexParts) {
  Graph g;
  Value re = g.parameter(f32({2, 3}));
  Value im = g.parameter(f32({2, 3}));
  Value z = g.complex(re, im);
  EXPECT_EQ(g.type(z), (TensorType{DType::kC64, {2, 3}}));
  EXPECT_EQ(g.type(g.real(z)), f32({2, 3}));
  EXPECT_EQ(g.type(g.imag(z)), f32({2, 3}));
  expect_ir_error([&] { g.real(re); }, {"real", "complex"});
  expect_ir_error([&] { g.complex(re, g.parameter(f32({3}))); }, {"complex", "tensor<3xf32>"});
  expect_ir_error([&] { g.complex(g.parameter(i64({2})), g.parameter(i64({2}))); },
                  {"complex", "i64"});
  // Elementwise ops StableHLO defines on complex values accept them; others do not.
  EXPECT_EQ(g.type(g.unary(Op::kExp, z)), g.type(z));
  EXPECT_EQ(g.type(g.binary(Op::kDiv, z, z)), g.type(z));
  expect_ir_error([&] { g.unary(Op::kFloor, z); }, {"floor", "complex<f32>"});
  expect_ir_error([&] { g.binary(Op::kAnd, z, z); }, {"and", "complex<f32>"});
  EXPECT_STREQ(op_name(Op::kReal), "real");
  EXPECT_STREQ(op_name(Op::kImag), "imag");
  EXPECT_STREQ(op_name(Op::kComplex), "complex");
  EXPECT_STREQ(op_name(Op::kFft), "fft");
}

TEST(Builders, Fft) {
  Graph g;
  Value c = g.parameter({DType::kC64, {4, 6, 8}});
  Value r = g.parameter({DType::kF64, {4, 8}});
  EXPECT_EQ(g.type(g.fft(c, FftType::kFft, {6, 8})), (TensorType{DType::kC64, {4, 6, 8}}));
  EXPECT_EQ(g.type(g.fft(r, FftType::kRfft, {8})), (TensorType{DType::kC128, {4, 5}}));
  Value h = g.parameter({DType::kC64, {4, 5}});
  EXPECT_EQ(g.type(g.fft(h, FftType::kIrfft, {8})), f32({4, 8}));
  EXPECT_EQ(g.type(g.fft(h, FftType::kIrfft, {9})), f32({4, 9}));
  expect_ir_error([&] { g.fft(c, FftType::kFft, {5, 8}); }, {"fft", "fft_length"});
  expect_ir_error([&] { g.fft(r, FftType::kFft, {8}); }, {"fft", "complex"});
  expect_ir_error([&] { g.fft(c, FftType::kFft, {}); }, {"fft", "1 to 3"});
  expect_ir_error([&] { g.fft(h, FftType::kIrfft, {10}); }, {"fft", "IRFFT"});
  // The fft type and length are structure.
  auto one = [](FftType t) {
    Graph k;
    k.set_outputs({k.fft(k.parameter({DType::kC64, {8}}), t, {8})});
    return k.fingerprint();
  };
  EXPECT_NE(one(FftType::kFft), one(FftType::kIfft));
}

}  // namespace
}  // namespace ttpu::ir
