// End-to-end emitter suite, part 1: leaves, elementwise and movement ops are
// emitted, compiled on the CPU plugin, run, and checked against host math.
// Part 2 (structured ops and the every-Op coverage check) is
// stablehlo_run_structured_test.cc.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "stablehlo_run_util.h"

namespace ttpu::testing {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Graph;
using ir::Op;
using ir::TensorType;
using ir::Value;
using Dims = std::vector<int64_t>;
using Doubles = std::vector<double>;

// Runs op(x) on `in` stored in `dtype`; returns the outputs as doubles.
Doubles run_unary(Op op, DType dtype, const Doubles& in) {
  Graph g;
  const Dims dims{static_cast<int64_t>(in.size())};
  Value x = g.parameter({dtype, dims});
  g.set_outputs({g.unary(op, x)});
  return run(g, {array_of(dtype, dims, in)})[0].doubles();
}

Doubles run_binary(Op op, DType dtype, const Doubles& a, const Doubles& b) {
  Graph g;
  const Dims dims{static_cast<int64_t>(a.size())};
  Value x = g.parameter({dtype, dims});
  Value y = g.parameter({dtype, dims});
  g.set_outputs({g.binary(op, x, y)});
  return run(g, {array_of(dtype, dims, a), array_of(dtype, dims, b)})[0].doubles();
}

Doubles linspace(double lo, double hi, int n) {
  Doubles v;
  for (int i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * i / (n - 1));
  return v;
}

// ---------------------------------------------------------------- references

double digamma_ref(double x) {  // x > 0: recurrence up to 6, then the asymptotic series
  double r = 0;
  for (; x < 6; x += 1) r -= 1 / x;
  const double f = 1 / (x * x);
  return r + std::log(x) - 0.5 / x -
         f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}
double erfinv_ref(double y) {  // Newton on std::erf
  double x = 0;
  for (int i = 0; i < 60; ++i) x -= (std::erf(x) - y) / (2 / std::sqrt(M_PI) * std::exp(-x * x));
  return x;
}
double sign_ref(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }

struct UnaryCase {
  Op op;
  double (*ref)(double);
  double lo, hi;
  double rtol32;  // f32 relative tolerance (XLA's polynomial approximations)
};

const UnaryCase kUnaryCases[] = {
    {Op::kNeg, [](double x) { return -x; }, -3, 3, 0},
    {Op::kAbs, [](double x) { return std::fabs(x); }, -3, 3, 0},
    {Op::kExp, [](double x) { return std::exp(x); }, -5, 5, 1e-6},
    {Op::kExpm1, [](double x) { return std::expm1(x); }, -2, 2, 1e-6},
    {Op::kLog, [](double x) { return std::log(x); }, 0.1, 10, 1e-6},
    {Op::kLog1p, [](double x) { return std::log1p(x); }, -0.5, 10, 1e-6},
    {Op::kSqrt, [](double x) { return std::sqrt(x); }, 0, 9, 1e-6},
    {Op::kRsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.1, 9, 1e-6},
    {Op::kCbrt, [](double x) { return std::cbrt(x); }, -8, 8, 1e-6},
    {Op::kTanh, [](double x) { return std::tanh(x); }, -4, 4, 1e-6},
    {Op::kLogistic, [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6, 1e-6},
    {Op::kSin, [](double x) { return std::sin(x); }, -3, 3, 1e-6},
    {Op::kCos, [](double x) { return std::cos(x); }, -3, 3, 1e-6},
    {Op::kTan, [](double x) { return std::tan(x); }, -1.2, 1.2, 1e-6},
    {Op::kFloor, [](double x) { return std::floor(x); }, -2.5, 2.5, 0},
    {Op::kCeil, [](double x) { return std::ceil(x); }, -2.5, 2.5, 0},
    {Op::kRoundNearestEven, [](double x) { return std::nearbyint(x); }, -2.5, 2.5, 0},
    {Op::kSign, sign_ref, -2, 2, 0},
    {Op::kErf, [](double x) { return std::erf(x); }, -3, 3, 1e-6},
    {Op::kAtan, [](double x) { return std::atan(x); }, -5, 5, 1e-6},
    {Op::kAsin, [](double x) { return std::asin(x); }, -0.95, 0.95, 1e-6},
    {Op::kAcos, [](double x) { return std::acos(x); }, -0.95, 0.95, 1e-6},
    {Op::kSinh, [](double x) { return std::sinh(x); }, -3, 3, 1e-6},
    {Op::kCosh, [](double x) { return std::cosh(x); }, -3, 3, 1e-6},
    {Op::kAsinh, [](double x) { return std::asinh(x); }, -5, 5, 1e-6},
    {Op::kAcosh, [](double x) { return std::acosh(x); }, 1, 10, 1e-6},
    {Op::kAtanh, [](double x) { return std::atanh(x); }, -0.95, 0.95, 1e-6},
    {Op::kLgamma, [](double x) { return std::lgamma(x); }, 0.1, 10, 1e-5},
    {Op::kDigamma, digamma_ref, 0.1, 10, 1e-5},
    {Op::kErfInv, erfinv_ref, -0.95, 0.95, 1e-5},
};

// Every float unary op in f32 and f64 (and, for the CHLO-lowered and the
// approximated ones, f16 and bf16) against libm.
TEST(RunElementwise, FloatUnary) {
  for (const UnaryCase& c : kUnaryCases) {
    const Doubles in = linspace(c.lo, c.hi, 11);
    for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
      const Doubles x = stored(t, in);
      Doubles want;
      for (double v : x) want.push_back(c.ref(v));
      double rtol = 0, atol = 0;
      switch (t) {
        case DType::kF32:
          rtol = c.rtol32 * 4;
          atol = c.rtol32;
          break;
        case DType::kF64:
          rtol = c.rtol32 ? 1e-9 : 0;
          atol = rtol;
          break;
        case DType::kF16:
          rtol = 2e-3;
          atol = 2e-3;
          want = stored(t, want);
          break;
        default:
          rtol = 1.6e-2;
          atol = 1.6e-2;
          want = stored(t, want);
          break;
      }
      expect_near(run_unary(c.op, t, x), want, rtol, atol,
                  std::string(ir::op_name(c.op)) + " " + std::string(ir::mlir_name(t)));
    }
  }
}

TEST(RunElementwise, FloatSpecialValues) {
  const Doubles x{kInf, -kInf, kNan, 0.0, -0.0, 1.0};
  Graph g;
  Value p = g.parameter({DType::kF32, {6}});
  g.set_outputs({g.unary(Op::kIsFinite, p), g.unary(Op::kSign, p), g.unary(Op::kAtan, p)});
  auto out = run(g, {array_of(DType::kF32, {6}, x)});
  EXPECT_EQ(out[0].doubles(), (Doubles{0, 0, 0, 1, 1, 1}));
  expect_near(out[1].doubles(), {1, -1, kNan, 0, 0, 1}, 0, 0, "sign");
  expect_near(out[2].doubles(), {M_PI / 2, -M_PI / 2, kNan, 0, 0, M_PI / 4}, 1e-6, 1e-7, "atan");
}

TEST(RunElementwise, IntegerUnary) {
  const Doubles x{-5, -1, 0, 3, 7};
  EXPECT_EQ(run_unary(Op::kNeg, DType::kI32, x), (Doubles{5, 1, 0, -3, -7}));
  EXPECT_EQ(run_unary(Op::kAbs, DType::kI64, x), (Doubles{5, 1, 0, 3, 7}));
  EXPECT_EQ(run_unary(Op::kSign, DType::kI8, x), (Doubles{-1, -1, 0, 1, 1}));
  EXPECT_EQ(run_unary(Op::kNot, DType::kI32, x), (Doubles{4, 0, -1, -4, -8}));
  EXPECT_EQ(run_unary(Op::kPopcnt, DType::kI32, x), (Doubles{31, 32, 0, 2, 3}));
  EXPECT_EQ(run_unary(Op::kPopcnt, DType::kU8, {255, 128, 0, 3, 7}), (Doubles{8, 1, 0, 2, 3}));
  EXPECT_EQ(run_unary(Op::kNot, DType::kBool, {1, 0}), (Doubles{0, 1}));
}

TEST(RunElementwise, FloatBinary) {
  const Doubles a{-3.5, -1, 0.5, 2, 7.25};
  const Doubles b{2, 3, -0.25, 0.5, 2};
  struct Case {
    Op op;
    double (*ref)(double, double);
  };
  const Case cases[] = {
      {Op::kAdd, [](double x, double y) { return x + y; }},
      {Op::kSub, [](double x, double y) { return x - y; }},
      {Op::kMul, [](double x, double y) { return x * y; }},
      {Op::kDiv, [](double x, double y) { return x / y; }},
      {Op::kRem, [](double x, double y) { return std::fmod(x, y); }},
      {Op::kMax, [](double x, double y) { return std::max(x, y); }},
      {Op::kMin, [](double x, double y) { return std::min(x, y); }},
      {Op::kAtan2, [](double x, double y) { return std::atan2(x, y); }},
  };
  for (const Case& c : cases) {
    Doubles want;
    for (size_t i = 0; i < a.size(); ++i) want.push_back(c.ref(a[i], b[i]));
    expect_near(run_binary(c.op, DType::kF32, a, b), want, 1e-6, 1e-7, ir::op_name(c.op));
  }
  expect_near(run_binary(Op::kPow, DType::kF64, {2, 9, 0.5, 10}, {10, 0.5, -1, -2}),
              {1024, 3, 2, 0.01}, 1e-12, 0, "power");
  // maximum/minimum propagate NaN (PyTorch's max/min do too).
  expect_near(run_binary(Op::kMax, DType::kF32, {kNan, 1}, {1, kNan}), {kNan, kNan}, 0, 0, "max");
  expect_near(run_binary(Op::kMin, DType::kBF16, {kNan, 1}, {1, kNan}), {kNan, kNan}, 0, 0, "min");
}

TEST(RunElementwise, IntegerBinary) {
  const Doubles a{-7, 7, 12, -16, 1};
  const Doubles b{2, -2, 10, 2, 3};
  auto i32 = [&](Op op) { return run_binary(op, DType::kI32, a, b); };
  EXPECT_EQ(i32(Op::kAdd), (Doubles{-5, 5, 22, -14, 4}));
  EXPECT_EQ(i32(Op::kSub), (Doubles{-9, 9, 2, -18, -2}));
  EXPECT_EQ(i32(Op::kMul), (Doubles{-14, -14, 120, -32, 3}));
  EXPECT_EQ(i32(Op::kDiv), (Doubles{-3, -3, 1, -8, 0}));  // truncates toward zero
  EXPECT_EQ(i32(Op::kRem), (Doubles{-1, 1, 2, 0, 1}));    // sign of the dividend
  EXPECT_EQ(run_binary(Op::kPow, DType::kI64, {2, 3, -2}, {10, 0, 3}), (Doubles{1024, 1, -8}));
  EXPECT_EQ(i32(Op::kMax), (Doubles{2, 7, 12, 2, 3}));
  EXPECT_EQ(i32(Op::kMin), (Doubles{-7, -2, 10, -16, 1}));
  EXPECT_EQ(i32(Op::kAnd), (Doubles{0, 6, 8, 0, 1}));
  EXPECT_EQ(i32(Op::kOr), (Doubles{-5, -1, 14, -14, 3}));
  EXPECT_EQ(i32(Op::kXor), (Doubles{-5, -7, 6, -14, 2}));
  EXPECT_EQ(i32(Op::kShiftLeft), (Doubles{-28, 0, 12288, -64, 8}));
  EXPECT_EQ(i32(Op::kShiftRightArithmetic), (Doubles{-2, 0, 0, -4, 0}));
  EXPECT_EQ(i32(Op::kShiftRightLogical), (Doubles{1073741822, 0, 0, 1073741820, 0}));
  // Unsigned arithmetic wraps; division is unsigned.
  EXPECT_EQ(run_binary(Op::kSub, DType::kU8, {1, 200}, {2, 100}), (Doubles{255, 100}));
  EXPECT_EQ(run_binary(Op::kDiv, DType::kU32, {4294967295.0, 7}, {2, 2}), (Doubles{2147483647, 3}));
}

TEST(RunElementwise, BoolBinary) {
  const Doubles a{0, 0, 1, 1};
  const Doubles b{0, 1, 0, 1};
  EXPECT_EQ(run_binary(Op::kAnd, DType::kBool, a, b), (Doubles{0, 0, 0, 1}));
  EXPECT_EQ(run_binary(Op::kOr, DType::kBool, a, b), (Doubles{0, 1, 1, 1}));
  EXPECT_EQ(run_binary(Op::kXor, DType::kBool, a, b), (Doubles{0, 1, 1, 0}));
  EXPECT_EQ(run_binary(Op::kAdd, DType::kBool, a, b), (Doubles{0, 1, 1, 1}));
  EXPECT_EQ(run_binary(Op::kMul, DType::kBool, a, b), (Doubles{0, 0, 0, 1}));
  EXPECT_EQ(run_binary(Op::kMax, DType::kBool, a, b), (Doubles{0, 1, 1, 1}));
  EXPECT_EQ(run_binary(Op::kMin, DType::kBool, a, b), (Doubles{0, 0, 0, 1}));
}

// compare_type follows the dtype: 200 > 100 as ui8, -1 < 1 as i32, NaN unordered.
TEST(RunElementwise, Compare) {
  struct Case {
    DType t;
    Doubles a, b;
  };
  const Case cases[] = {{DType::kF32, {1, 2, kNan, -0.0}, {2, 2, 1, 0.0}},
                        {DType::kU8, {200, 5, 0, 255}, {100, 5, 1, 0}},
                        {DType::kI32, {-1, 5, 0, -9}, {1, 5, 1, 9}},
                        {DType::kBool, {1, 0, 0, 1}, {0, 0, 1, 1}}};
  for (const Case& c : cases) {
    Graph g;
    Value x = g.parameter({c.t, {4}});
    Value y = g.parameter({c.t, {4}});
    std::vector<Value> outs;
    for (int k = 0; k <= static_cast<int>(Cmp::kGE); ++k) outs.push_back(g.compare(Cmp(k), x, y));
    g.set_outputs(outs);
    auto out = run(g, {array_of(c.t, {4}, c.a), array_of(c.t, {4}, c.b)});
    for (int k = 0; k < 6; ++k) {
      Doubles want;
      for (size_t i = 0; i < 4; ++i) {
        const double p = c.a[i], q = c.b[i];
        const bool r[] = {p == q, p != q, p<q, p <= q, p> q, p >= q};
        want.push_back(r[k]);
      }
      EXPECT_EQ(out[k].doubles(), want) << ir::mlir_name(c.t) << " direction " << k;
    }
  }
}

TEST(RunElementwise, SelectClamp) {
  Graph g;
  Value p = g.parameter({DType::kBool, {4}});
  Value x = g.parameter({DType::kF32, {4}});
  Value y = g.parameter({DType::kF32, {4}});
  Value lo = g.constant(-1, {DType::kF32, {}});
  Value hi = g.constant(1, {DType::kF32, {}});
  Value scalar_pred = g.constant(0, {DType::kBool, {}});
  g.set_outputs({g.select(p, x, y), g.select(scalar_pred, x, y), g.clamp(lo, x, hi),
                 g.clamp(y, x, g.binary(Op::kAdd, y, g.constant(1, {DType::kF32, {4}})))});
  auto out = run(
      g, {array_of(DType::kBool, {4}, {1, 0, 1, 0}), array_of(DType::kF32, {4}, {-3, 0.5, 2, 7}),
          array_of(DType::kF32, {4}, {10, 20, 30, 4})});
  EXPECT_EQ(out[0].doubles(), (Doubles{-3, 20, 2, 4}));
  EXPECT_EQ(out[1].doubles(), (Doubles{10, 20, 30, 4}));
  EXPECT_EQ(out[2].doubles(), (Doubles{-1, 0.5, 1, 1}));
  EXPECT_EQ(out[3].doubles(), (Doubles{10, 20, 30, 5}));
}

TEST(RunElementwise, ConvertAndBitcast) {
  Graph g;
  Value f = g.parameter({DType::kF32, {4}});
  Value i = g.parameter({DType::kI64, {4}});
  Value h = g.parameter({DType::kF16, {2}});
  g.set_outputs({g.convert(f, DType::kI32), g.convert(f, DType::kBool),
                 g.convert(g.convert(f, DType::kBool), DType::kF32), g.convert(i, DType::kF16),
                 g.convert(f, DType::kBF16), g.bitcast_convert(f, DType::kU32),
                 g.bitcast_convert(h, DType::kI16), g.convert(i, DType::kU8)});
  const float bf16_tie = 1.0f + 1.0f / 256;  // halfway between two bf16 values
  auto out = run(g, {array_of(DType::kF32, {4}, {2.7, -2.7, 0, bf16_tie}),
                     array_of(DType::kI64, {4}, {2049, -3, 65504, 300}),
                     array_of(DType::kF16, {2}, {1.0, -2.0})});
  EXPECT_EQ(out[0].doubles(), (Doubles{2, -2, 0, 1}));
  EXPECT_EQ(out[1].doubles(), (Doubles{1, 1, 0, 1}));
  EXPECT_EQ(out[2].doubles(), (Doubles{1, 1, 0, 1}));
  EXPECT_EQ(out[3].doubles(), (Doubles{2048, -3, 65504, 300}));
  EXPECT_EQ(out[4].as<uint16_t>()[3], ir::bf16_bits(1.0));  // ties to even
  EXPECT_EQ(out[5].as<uint32_t>()[0], std::bit_cast<uint32_t>(2.7f));
  EXPECT_EQ(out[6].as<int16_t>(), (std::vector<int16_t>{0x3C00, static_cast<int16_t>(0xC000)}));
  EXPECT_EQ(out[7].doubles()[3], 44);  // 300 wraps in ui8
}

// ---------------------------------------------------------------- leaves

TEST(RunLeaves, ConstantsRoundTripExactly) {
  Graph g;
  std::vector<std::pair<TensorType, double>> cases = {
      {{DType::kF32, {2}}, kInf},  {{DType::kF32, {}}, -kInf},  {{DType::kF32, {}}, kNan},
      {{DType::kF64, {}}, 0.1},    {{DType::kF16, {3}}, 0.1},   {{DType::kBF16, {}}, -3.3},
      {{DType::kF32, {}}, 1e-45},  {{DType::kF64, {}}, -0.0},   {{DType::kI8, {2}}, -128},
      {{DType::kU8, {}}, 255},     {{DType::kI16, {}}, -32768}, {{DType::kU32, {}}, 4294967295.0},
      {{DType::kU16, {2}}, 65535}, {{DType::kBool, {2}}, 1},    {{DType::kBool, {}}, 0},
      {{DType::kF32, {0, 3}}, 1}};
  std::vector<Value> outs;
  for (const auto& [t, v] : cases) outs.push_back(g.constant(v, t));
  outs.push_back(g.constant_int(std::numeric_limits<int64_t>::min(), {DType::kI64, {}}));
  outs.push_back(g.constant_int(-1, {DType::kU64, {}}));  // wraps to 2^64 - 1
  g.set_outputs(outs);
  auto out = run(g, {});
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& [t, v] = cases[k];
    const uint64_t want = ir::literal_bits(v, t.dtype);
    const size_t n = static_cast<size_t>(ir::byte_size(t.dtype));
    ASSERT_EQ(out[k].bytes.size(), static_cast<size_t>(t.numel()) * n) << t.mlir();
    for (size_t off = 0; off < out[k].bytes.size(); off += n) {
      uint64_t got = 0;
      std::memcpy(&got, out[k].bytes.data() + off, n);
      EXPECT_EQ(got, want) << t.mlir() << " constant " << v;
    }
  }
  EXPECT_EQ(out[cases.size()].as<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out[cases.size() + 1].as<uint64_t>()[0], ~uint64_t{0});
}

TEST(RunLeaves, Iota) {
  Graph g;
  g.set_outputs({g.iota({DType::kI32, {2, 3}}, 1), g.iota({DType::kF32, {2, 3}}, 0)});
  auto out = run(g, {});
  EXPECT_EQ(out[0].doubles(), (Doubles{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(out[1].doubles(), (Doubles{0, 0, 0, 1, 1, 1}));
}

// ---------------------------------------------------------------- movement

TEST(RunMovement, ReshapeBroadcastTranspose) {
  Graph g;
  Value x = g.parameter({DType::kF32, {2, 3}});
  Value c = g.parameter({DType::kF32, {3, 1}});
  g.set_outputs({g.reshape(x, {3, 2}), g.broadcast_in_dim(g.reshape(x, {6}), {2, 6}, {1}),
                 g.broadcast_in_dim(c, {3, 2}, {0, 1}), g.transpose(x, {1, 0})});
  auto out = run(g, {array_of(DType::kF32, {2, 3}, {0, 1, 2, 3, 4, 5}),
                     array_of(DType::kF32, {3, 1}, {7, 8, 9})});
  EXPECT_EQ(out[0].type.dims, (Dims{3, 2}));
  EXPECT_EQ(out[0].doubles(), (Doubles{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(out[1].doubles(), (Doubles{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(out[2].doubles(), (Doubles{7, 7, 8, 8, 9, 9}));
  EXPECT_EQ(out[3].doubles(), (Doubles{0, 3, 1, 4, 2, 5}));
}

TEST(RunMovement, SliceConcatPadReverse) {
  Graph g;
  Value x = g.parameter({DType::kI32, {2, 4}});
  Value zero = g.constant_int(-1, {DType::kI32, {}});
  g.set_outputs({g.slice(x, {0, 1}, {2, 4}, {1, 2}), g.concatenate({x, x}, 0),
                 g.pad(x, zero, {0, -1}, {1, 1}, {0, 1}), g.reverse(x, {1})});
  auto out = run(g, {array<int32_t>(DType::kI32, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})});
  EXPECT_EQ(out[0].doubles(), (Doubles{1, 3, 5, 7}));
  EXPECT_EQ(out[1].type.dims, (Dims{4, 4}));
  EXPECT_EQ(out[1].doubles(), (Doubles{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7}));
  // Interior 1 -> [0 p 1 p 2 p 3], low -1 drops the 0, high 1 appends p: 3 rows.
  EXPECT_EQ(out[2].type.dims, (Dims{3, 7}));
  EXPECT_EQ(out[2].doubles(), (Doubles{-1, 1, -1, 2,  -1, 3,  -1, -1, 5,  -1, 6,
                                       -1, 7, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(out[3].doubles(), (Doubles{3, 2, 1, 0, 7, 6, 5, 4}));
}

TEST(RunMovement, DynamicSliceAndUpdate) {
  Graph g;
  Value x = g.parameter({DType::kF32, {3, 3}});
  Value i = g.parameter({DType::kI64, {}});
  Value j = g.parameter({DType::kI64, {}});
  Value u = g.constant(-1, {DType::kF32, {2, 2}});
  g.set_outputs({g.dynamic_slice(x, {i, j}, {2, 2}), g.dynamic_update_slice(x, u, {i, j})});
  auto out = run(g, {array_of(DType::kF32, {3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}),
                     array<int64_t>(DType::kI64, {}, {1}),
                     array<int64_t>(DType::kI64, {}, {5})});  // clamped to 1
  EXPECT_EQ(out[0].doubles(), (Doubles{4, 5, 7, 8}));
  EXPECT_EQ(out[1].doubles(), (Doubles{0, 1, 2, 3, -1, -1, 6, -1, -1}));
}

// The emitted donation is honoured by the plugin: the output is right and the
// donated argument is consumed (reading it fails), the other one is not.
TEST(RunProgram, DonatedParameterIsConsumed) {
  Graph g;
  Value w = g.parameter({DType::kF32, {3}});
  Value d = g.parameter({DType::kF32, {3}});
  g.set_outputs({g.binary(Op::kSub, w, d)});
  g.donate(0, 0);
  auto exe = client()->compile(stablehlo::emit(g, "donate"));
  std::vector<float> wv = {5, 6, 7}, dv = {1, 2, 3}, out(3);
  auto bw = client()->buffer_from_host(wv.data(), pjrt::ElementType::kF32, {3}, 0);
  auto bd = client()->buffer_from_host(dv.data(), pjrt::ElementType::kF32, {3}, 0);
  auto outs = exe->execute({bw.get(), bd.get()}, 0);
  outs[0]->to_host(out.data(), 12);
  EXPECT_EQ(out, (std::vector<float>{4, 4, 4}));
  EXPECT_THROW(bw->to_host(out.data(), 12), pjrt::PjrtError);
  bd->to_host(out.data(), 12);
  EXPECT_EQ(out, dv);
}

}  // namespace
}  // namespace ttpu::testing
