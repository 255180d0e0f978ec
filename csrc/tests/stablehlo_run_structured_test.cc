// End-to-end emitter suite, part 2: gather/scatter, reductions and windows,
// sort, dot_general, convolution, rng_bit_generator on the CPU plugin, checked
// against host references; then the check that every Op kind was run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "stablehlo_run_util.h"

namespace ttpu::testing {
namespace {

using ir::Cmp;
using ir::ConvDims;
using ir::DType;
using ir::GatherDims;
using ir::Graph;
using ir::Op;
using ir::Reducer;
using ir::ScatterDims;
using ir::TensorType;
using ir::Value;
using Dims = std::vector<int64_t>;
using Doubles = std::vector<double>;

Doubles iota_values(int64_t n, double start = 0) {
  Doubles v;
  for (int64_t i = 0; i < n; ++i) v.push_back(start + static_cast<double>(i));
  return v;
}

// Deterministic values in [-1, 1) without a RNG: a fixed quadratic sequence.
Doubles pseudo(int64_t n, int seed) {
  Doubles v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(static_cast<double>((i * i * 7 + i * 13 + seed * 31) % 97) / 48.5 - 1);
  return v;
}

// ---------------------------------------------------------------- gather/scatter

// A concatenate of more than 64 parts is written in groups of 64, each behind
// an optimization_barrier (XLA:CPU compiled 3,000 parts feeding a sum for
// 147 s); the values are those of one concatenate.
TEST(RunStructured, ManyPartConcatenateIsGrouped) {
  Graph g;
  std::vector<Value> parts;
  std::vector<Array> args;
  std::vector<double> want;
  for (int i = 0; i < 130; ++i) {
    const int64_t len = 1 + i % 3;
    parts.push_back(g.parameter({DType::kF32, {len}}));
    std::vector<double> v;
    for (int64_t k = 0; k < len; ++k) v.push_back(i + 0.25 * static_cast<double>(k));
    args.push_back(array_of(DType::kF32, {len}, v));
    want.insert(want.end(), v.begin(), v.end());
  }
  g.set_outputs({g.concatenate(parts, 0)});
  const std::string text = stablehlo::emit(g, "m");
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("\"stablehlo.concatenate\""), 4u);  // 64 + 64 + 2 parts, then the 3 groups
  EXPECT_EQ(count("\"stablehlo.optimization_barrier\""), 3u);
  auto out = run(g, args);
  EXPECT_EQ(out[0].doubles(), want);
}

TEST(RunIndexing, Gather) {
  Graph g;
  Value table = g.parameter({DType::kF32, {5, 4}});
  Value rows = g.parameter({DType::kI32, {3}});
  Value points = g.parameter({DType::kI64, {2, 2}});
  // Embedding lookup, index vector implicit (index_vector_dim == rank of indices).
  Value emb = g.gather(table, rows, GatherDims{{1}, {0}, {0}, {1, 4}, 1}, {3, 4});
  // Point lookup table[r, c] for each (r, c) row of `points`.
  Value pts = g.gather(table, points, GatherDims{{}, {0, 1}, {0, 1}, {1, 1}, 1}, {2});
  g.set_outputs({emb, pts});
  auto out = run(g, {array_of(DType::kF32, {5, 4}, iota_values(20)),
                     array<int32_t>(DType::kI32, {3}, {4, 0, 2}),
                     array<int64_t>(DType::kI64, {2, 2}, {0, 1, 4, 3})});
  EXPECT_EQ(out[0].doubles(), (Doubles{16, 17, 18, 19, 0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(out[1].doubles(), (Doubles{1, 19}));
}

TEST(RunIndexing, ScatterEveryReducer) {
  const ScatterDims dims{{1}, {0}, {0}, 1};
  auto scatter = [&](Reducer r, const std::vector<int32_t>& idx, DType t, const Doubles& base,
                     const Doubles& upd) {
    Graph g;
    Value x = g.parameter({t, {4, 2}});
    Value i = g.parameter({DType::kI32, {3, 1}});
    Value u = g.parameter({t, {3, 2}});
    g.set_outputs({g.scatter(x, i, u, dims, r)});
    return run(g, {array_of(t, {4, 2}, base), array<int32_t>(DType::kI32, {3, 1}, idx),
                   array_of(t, {3, 2}, upd)})[0]
        .doubles();
  };
  const Doubles base{1, 1, 2, 2, 3, 3, 4, 4};
  const Doubles upd{10, 20, 30, 40, 5, 6};
  const std::vector<int32_t> dup{1, 3, 1};  // row 1 receives two updates
  EXPECT_EQ(scatter(Reducer::kAdd, dup, DType::kF32, base, upd),
            (Doubles{1, 1, 17, 28, 3, 3, 34, 44}));
  EXPECT_EQ(scatter(Reducer::kMul, dup, DType::kF32, base, upd),
            (Doubles{1, 1, 100, 240, 3, 3, 120, 160}));
  EXPECT_EQ(scatter(Reducer::kMax, dup, DType::kI32, base, upd),
            (Doubles{1, 1, 10, 20, 3, 3, 30, 40}));
  EXPECT_EQ(scatter(Reducer::kMin, dup, DType::kI32, base, upd), (Doubles{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(scatter(Reducer::kReplace, {1, 3, 0}, DType::kF32, base, upd),
            (Doubles{5, 6, 10, 20, 3, 3, 30, 40}));
  const Doubles bits{0, 1, 0, 1, 0, 1, 0, 1};
  const Doubles ubits{1, 1, 0, 0, 1, 0};
  EXPECT_EQ(scatter(Reducer::kOr, dup, DType::kBool, bits, ubits),
            (Doubles{0, 1, 1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(scatter(Reducer::kAnd, dup, DType::kBool, bits, ubits),
            (Doubles{0, 1, 0, 0, 0, 1, 0, 0}));
}

// ---------------------------------------------------------------- reductions

TEST(RunReduce, SimpleReducers) {
  Graph g;
  Value x = g.parameter({DType::kF32, {2, 3}});
  Value b = g.parameter({DType::kBool, {2, 3}});
  Value h = g.parameter({DType::kBF16, {4}});
  Value i = g.parameter({DType::kI32, {2, 3}});
  auto f = [&](double v) { return g.constant(v, {DType::kF32, {}}); };
  auto p = [&](double v) { return g.constant(v, {DType::kBool, {}}); };
  Value zi = g.constant_int(0, {DType::kI32, {}});
  auto two = g.reduce({x, i}, {f(0), zi}, {1}, Reducer::kAdd);  // variadic, independent
  g.set_outputs(
      {g.reduce({x}, {f(0)}, {1}, Reducer::kAdd)[0],
       g.reduce({x}, {f(-kInf)}, {0}, Reducer::kMax)[0],
       g.reduce({x}, {f(kInf)}, {0, 1}, Reducer::kMin)[0],
       g.reduce({x}, {f(1)}, {0}, Reducer::kMul)[0], g.reduce({b}, {p(1)}, {1}, Reducer::kAnd)[0],
       g.reduce({b}, {p(0)}, {1}, Reducer::kOr)[0], g.reduce({b}, {p(0)}, {0}, Reducer::kAdd)[0],
       g.reduce({h}, {g.constant(0, {DType::kBF16, {}})}, {0}, Reducer::kAdd)[0], two[0], two[1]});
  auto out = run(g, {array_of(DType::kF32, {2, 3}, {1, -2, 3, 4, 5, -6}),
                     array_of(DType::kBool, {2, 3}, {1, 1, 1, 0, 1, 0}),
                     array_of(DType::kBF16, {4}, {0.5, 0.25, 2, -1}),
                     array<int32_t>(DType::kI32, {2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(out[0].doubles(), (Doubles{2, 3}));
  EXPECT_EQ(out[1].doubles(), (Doubles{4, 5, 3}));
  EXPECT_EQ(out[2].doubles(), (Doubles{-6}));
  EXPECT_EQ(out[3].doubles(), (Doubles{4, -10, -18}));
  EXPECT_EQ(out[4].doubles(), (Doubles{1, 0}));
  EXPECT_EQ(out[5].doubles(), (Doubles{1, 1}));
  EXPECT_EQ(out[6].doubles(), (Doubles{1, 1, 1}));
  EXPECT_EQ(out[7].doubles(), (Doubles{1.75}));
  EXPECT_EQ(out[8].doubles(), (Doubles{2, 3}));
  EXPECT_EQ(out[9].doubles(), (Doubles{6, 15}));
}

// PyTorch's amax/amin, max_pool and scatter_reduce("amax") propagate NaN; the
// plugin's fast min/max alone would drop it (see emit.cc).
TEST(RunReduce, MaxMinPropagateNan) {
  Graph g;
  Value x = g.parameter({DType::kF32, {4}});
  auto f = [&](double v) { return g.constant(v, {DType::kF32, {}}); };
  Value zeros = g.constant(0, {DType::kF32, {3}});
  Value idx = g.constant_int(1, {DType::kI32, {1, 1}});
  g.set_outputs({g.reduce({x}, {f(-kInf)}, {0}, Reducer::kMax)[0],
                 g.reduce({x}, {f(kInf)}, {0}, Reducer::kMin)[0],
                 g.reduce_window(x, f(-kInf), {2}, {1}, {}, {}, {}, {}, Reducer::kMax),
                 g.scatter(zeros, idx, g.slice(x, {1}, {2}, {1}), ScatterDims{{}, {0}, {0}, 1},
                           Reducer::kMax)});
  auto out = run(g, {array_of(DType::kF32, {4}, {1, kNan, -3, 2})});
  expect_near(out[0].doubles(), {kNan}, 0, 0, "reduce max");
  expect_near(out[1].doubles(), {kNan}, 0, 0, "reduce min");
  expect_near(out[2].doubles(), {kNan, kNan, 2}, 0, 0, "reduce_window max");
  expect_near(out[3].doubles(), {0, kNan, 0}, 0, 0, "scatter max");
}

// Runs an argmax/argmin reduce over the last dimension of `values` (f32 or i32).
std::pair<Doubles, Doubles> arg_reduce(Reducer r, DType t, Dims dims, const Doubles& values) {
  Graph g;
  Value x = g.parameter({t, dims});
  const int64_t last = static_cast<int64_t>(dims.size()) - 1;
  Value idx = g.iota({DType::kI64, dims}, last);
  const double init = r == Reducer::kArgMax ? -kInf : kInf;
  Value vinit = ir::is_float(t)
                    ? g.constant(init, {t, {}})
                    : g.constant_int(r == Reducer::kArgMax ? INT32_MIN : INT32_MAX, {t, {}});
  auto res = g.reduce({x, idx}, {vinit, g.constant_int(0, {DType::kI64, {}})}, {last}, r);
  g.set_outputs({res[0], res[1]});
  auto out = run(g, {array_of(t, dims, values)});
  return {out[0].doubles(), out[1].doubles()};
}

TEST(RunReduce, ArgMaxArgMinNanAndTies) {
  const Doubles v{1, 3, 7, 3, 7, /*row 1*/ 5, kNan, 2, kNan, 9, /*row 2*/ 4, 4, 4, 4, 4};
  auto [mx, imx] = arg_reduce(Reducer::kArgMax, DType::kF32, {3, 5}, v);
  expect_near(mx, {7, kNan, 4}, 0, 0, "max value");
  EXPECT_EQ(imx, (Doubles{2, 1, 0}));
  auto [mn, imn] = arg_reduce(Reducer::kArgMin, DType::kF32, {3, 5}, v);
  expect_near(mn, {1, kNan, 4}, 0, 0, "min value");
  EXPECT_EQ(imn, (Doubles{0, 1, 0}));

  // Long rows, so XLA splits the reduction: ties and NaN must still pick the
  // first index whatever order the partial results combine in.
  Doubles longv;
  for (int i = 0; i < 4096; ++i) longv.push_back(i % 7);
  longv[2500] = kNan;
  longv[3000] = kNan;
  EXPECT_EQ(arg_reduce(Reducer::kArgMax, DType::kF32, {4096}, longv).second, (Doubles{2500}));
  longv[2500] = longv[3000] = 0;
  EXPECT_EQ(arg_reduce(Reducer::kArgMax, DType::kF32, {4096}, longv).second, (Doubles{6}));
  EXPECT_EQ(arg_reduce(Reducer::kArgMin, DType::kI32, {4096}, longv).second, (Doubles{0}));
  longv[0] = 1;
  EXPECT_EQ(arg_reduce(Reducer::kArgMin, DType::kI32, {4096}, longv).second, (Doubles{7}));
}

TEST(RunReduce, ReduceWindow) {
  Graph g;
  Value img = g.parameter({DType::kF32, {1, 1, 5, 5}});
  Value v = g.parameter({DType::kF32, {5}});
  Value ninf = g.constant(-kInf, {DType::kF32, {}});
  Value zero = g.constant(0, {DType::kF32, {}});
  g.set_outputs({
      // 2x2 max pool, stride 2, padded high so the last row/column form windows.
      g.reduce_window(img, ninf, {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {0, 0, 0, 0}, {0, 0, 1, 1},
                      Reducer::kMax),
      // Base dilation 2: [1 0 2 0 3 0 4 0 5] (holes = init), window 2 -> 8 sums.
      g.reduce_window(v, zero, {2}, {1}, {2}, {1}, {0}, {0}, Reducer::kAdd),
      // Window dilation 2: pairs (i, i+2), stride 1, padded low by 1 with init.
      g.reduce_window(v, zero, {2}, {1}, {1}, {2}, {1}, {0}, Reducer::kAdd),
      g.reduce_window(v, g.constant(1, {DType::kF32, {}}), {3}, {2}, {}, {}, {}, {}, Reducer::kMul),
      g.reduce_window(v, g.constant(kInf, {DType::kF32, {}}), {2}, {3}, {}, {}, {}, {},
                      Reducer::kMin),
  });
  auto out = run(g, {array_of(DType::kF32, {1, 1, 5, 5}, iota_values(25)),
                     array_of(DType::kF32, {5}, {1, 2, 3, 4, 5})});
  EXPECT_EQ(out[0].type.dims, (Dims{1, 1, 3, 3}));
  EXPECT_EQ(out[0].doubles(), (Doubles{6, 8, 9, 16, 18, 19, 21, 23, 24}));
  EXPECT_EQ(out[1].doubles(), (Doubles{1, 2, 2, 3, 3, 4, 4, 5}));
  EXPECT_EQ(out[2].doubles(), (Doubles{2, 4, 6, 8}));
  EXPECT_EQ(out[3].doubles(), (Doubles{6, 60}));
  EXPECT_EQ(out[4].doubles(), (Doubles{1, 4}));
}

TEST(RunReduce, SelectAndScatterMaxPoolGrad) {
  Graph g;
  Value x = g.parameter({DType::kF32, {1, 1, 4, 5}});
  Value src = g.parameter({DType::kF32, {1, 1, 2, 3}});
  Value zero = g.constant(0, {DType::kF32, {}});
  // Windows 2x2, stride 2, the last column padded; GE picks the first maximum.
  g.set_outputs({g.select_and_scatter(x, src, zero, {1, 1, 2, 2}, {1, 1, 2, 2}, {0, 0, 0, 0},
                                      {0, 0, 0, 1}, Cmp::kGE)});
  Doubles xv = iota_values(20);
  xv[0] = 100;  // window (0, 0): the max moves to the corner
  auto out = run(g, {array_of(DType::kF32, {1, 1, 4, 5}, xv),
                     array_of(DType::kF32, {1, 1, 2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(out[0].doubles(), (Doubles{1, 0, 0, 0, 0,  //
                                       0, 0, 0, 2, 3,  //
                                       0, 0, 0, 0, 0,  //
                                       0, 4, 0, 5, 6}));
}

TEST(RunReduce, SortStableWithNan) {
  Graph g;
  Value x = g.parameter({DType::kF32, {6}});
  Value i = g.iota({DType::kI32, {6}}, 0);
  Value u = g.parameter({DType::kU8, {2, 3}});
  auto asc = g.sort({x, i}, 0, Cmp::kLT);
  auto desc = g.sort({x, i}, 0, Cmp::kGT);
  g.set_outputs(
      {asc[0], asc[1], desc[0], desc[1], g.sort({u}, 0, Cmp::kGT)[0], g.sort({u}, 1, Cmp::kLT)[0]});
  auto out = run(g, {array_of(DType::kF32, {6}, {3, kNan, -1, 2, kNan, -1}),
                     array_of(DType::kU8, {2, 3}, {200, 5, 255, 7, 128, 0})});
  expect_near(out[0].doubles(), {-1, -1, 2, 3, kNan, kNan}, 0, 0, "ascending");
  EXPECT_EQ(out[1].doubles(), (Doubles{2, 5, 3, 0, 1, 4}));
  expect_near(out[2].doubles(), {kNan, kNan, 3, 2, -1, -1}, 0, 0, "descending");
  EXPECT_EQ(out[3].doubles(), (Doubles{1, 4, 0, 3, 2, 5}));
  EXPECT_EQ(out[4].doubles(), (Doubles{200, 128, 255, 7, 5, 0}));
  EXPECT_EQ(out[5].doubles(), (Doubles{5, 200, 255, 0, 7, 128}));
}

// ---------------------------------------------------------------- linear algebra

TEST(RunLinalg, DotGeneral) {
  Graph g;
  Value a = g.parameter({DType::kF32, {2, 3}});
  Value b = g.parameter({DType::kF32, {3, 2}});
  Value ba = g.parameter({DType::kI32, {2, 2, 3}});
  Value bb = g.parameter({DType::kI32, {2, 3, 1}});
  Value v = g.parameter({DType::kF64, {3}});
  g.set_outputs({g.dot_general(a, b, {}, {}, {1}, {0}), g.dot_general(ba, bb, {0}, {0}, {2}, {1}),
                 g.dot_general(v, v, {}, {}, {0}, {0}),
                 g.dot_general(a, a, {}, {}, {0}, {0})});  // a^T a
  auto out = run(g, {array_of(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                     array_of(DType::kF32, {3, 2}, {1, 0, 0, 1, 1, 1}),
                     array<int32_t>(DType::kI32, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 1, 1, 2, 2, 2}),
                     array<int32_t>(DType::kI32, {2, 3, 1}, {1, 1, 1, 1, 2, 3}),
                     array_of(DType::kF64, {3}, {0.5, 2, -1})});
  EXPECT_EQ(out[0].doubles(), (Doubles{4, 5, 10, 11}));
  EXPECT_EQ(out[1].type.dims, (Dims{2, 2, 1}));
  EXPECT_EQ(out[1].doubles(), (Doubles{6, 15, 6, 12}));
  EXPECT_EQ(out[2].type.dims, Dims{});
  EXPECT_EQ(out[2].doubles(), (Doubles{5.25}));
  EXPECT_EQ(out[3].doubles(), (Doubles{17, 22, 27, 22, 29, 36, 27, 36, 45}));
}

// EmitOptions::materialize_transposed_rhs: x @ W^T with a large W (M*K + M*N
// <= N*K) is written as transpose(W @ x^T) behind barriers; a dot where that
// moves more, or a small W, keeps the plain form. The two forms are different
// XLA:CPU kernels: their values agree bit for bit on some CPUs (the Intel hosts
// of earlier stops) and not on others (an AMD EPYC with AVX2: 114 of 32768
// elements one rounding apart at 64x512x512). So each form is checked against
// a double reference, element by element, within the float32 dot's error
// bound (K * 2^-24 * sum |x||w|, Higham's gamma_K), and the rewritten form's
// largest error may not exceed twice the plain form's.
TEST(RunLinalg, DotTransposedRhsFormIsWithinTheDotsRounding) {
  stablehlo::EmitOptions fast;
  fast.materialize_transposed_rhs = true;
  for (const auto& [m, k, n, rewritten] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {64, 512, 512, true}, {1024, 256, 256, false}, {8, 64, 64, false}}) {
    Graph g;
    Value x = g.parameter({DType::kF32, {m, k}});
    Value w = g.parameter({DType::kF32, {n, k}});
    g.set_outputs({g.dot_general(x, w, {}, {}, {1}, {1})});
    const std::string text = stablehlo::emit(g, "run", fast);
    EXPECT_EQ(text.find("optimization_barrier") != std::string::npos, rewritten) << text;
    std::vector<float> xv(static_cast<size_t>(m * k)), wv(static_cast<size_t>(n * k));
    uint32_t state = 12345;  // an LCG: varied signs and magnitudes, reproducible
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / (1 << 21);
    };
    for (float& v : xv) v = next();
    for (float& v : wv) v = next();
    std::vector<Array> args = {array<float>(DType::kF32, {m, k}, xv),
                               array<float>(DType::kF32, {n, k}, wv)};
    const auto plain = run(g, args)[0].doubles();
    const auto transposed_out = run(g, args, fast);
    EXPECT_EQ(transposed_out[0].type.dims, (Dims{m, n}));
    const auto transposed = transposed_out[0].doubles();
    double worst_plain = 0, worst_transposed = 0;
    const double gamma = static_cast<double>(k) * std::ldexp(1.0, -24);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0, magnitude = 0;
        for (int64_t t = 0; t < k; ++t) {
          const double p = double{xv[i * k + t]} * double{wv[j * k + t]};
          want += p;
          magnitude += std::abs(p);
        }
        const auto at = static_cast<size_t>(i * n + j);
        const double bound = gamma * magnitude;
        ASSERT_LE(std::abs(plain[at] - want), bound) << i << "," << j;
        ASSERT_LE(std::abs(transposed[at] - want), bound) << i << "," << j;
        worst_plain = std::max(worst_plain, std::abs(plain[at] - want));
        worst_transposed = std::max(worst_transposed, std::abs(transposed[at] - want));
      }
    }
    EXPECT_LE(worst_transposed, 2 * worst_plain) << m << "x" << k << "x" << n;
  }
}

// Naive NCHW / OIHW convolution straight from the StableHLO spec's definition
// (dilate, pad, window, stride; feature and batch groups split and concatenate).
Doubles conv_ref(const Doubles& x, const Dims& xd, const Doubles& w, const Dims& wd,
                 const ConvDims& c, const Dims& od) {
  const int64_t fg = c.feature_group_count, bg = c.batch_group_count;
  const int64_t O = wd[0], I = wd[1], KH = wd[2], KW = wd[3];
  const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3];
  Doubles out(static_cast<size_t>(od[0] * od[1] * od[2] * od[3]), 0.0);
  for (int64_t n = 0; n < od[0]; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < od[2]; ++oy)
        for (int64_t ox = 0; ox < od[3]; ++ox) {
          const int64_t nb = (o / (O / bg)) * (N / bg) + n;
          double sum = 0;
          for (int64_t ci = 0; ci < I; ++ci)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t cin = (o / (O / fg)) * I + ci;
                const int64_t py =
                    oy * c.window_strides[0] + ky * c.rhs_dilation[0] - c.padding_low[0];
                const int64_t px =
                    ox * c.window_strides[1] + kx * c.rhs_dilation[1] - c.padding_low[1];
                if (py < 0 || px < 0 || py % c.lhs_dilation[0] || px % c.lhs_dilation[1]) continue;
                const int64_t iy = py / c.lhs_dilation[0], ix = px / c.lhs_dilation[1];
                if (iy >= H || ix >= W) continue;
                sum +=
                    x[((nb * C + cin) * H + iy) * W + ix] * w[((o * I + ci) * KH + ky) * KW + kx];
              }
          out[((n * O + o) * od[2] + oy) * od[3] + ox] = sum;
        }
  return out;
}

TEST(RunLinalg, Convolution) {
  struct Case {
    Dims xd, wd;
    ConvDims c;
    DType t;
  };
  auto conv = [](Dims strides, Dims lo, Dims hi, Dims lhs, Dims rhs, int64_t fg, int64_t bg) {
    ConvDims c;
    c.window_strides = strides;
    c.padding_low = lo;
    c.padding_high = hi;
    c.lhs_dilation = lhs;
    c.rhs_dilation = rhs;
    c.feature_group_count = fg;
    c.batch_group_count = bg;
    return c;
  };
  const Case cases[] = {
      {{2, 3, 7, 6}, {4, 3, 3, 2}, conv({2, 1}, {1, 0}, {1, 1}, {1, 1}, {1, 2}, 1, 1), DType::kF64},
      {{1, 2, 4, 4}, {3, 2, 3, 3}, conv({1, 1}, {2, 2}, {2, 2}, {2, 2}, {1, 1}, 1, 1), DType::kF64},
      {{1, 6, 5, 5}, {6, 2, 3, 3}, conv({1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3, 1), DType::kF64},
      {{2, 4, 5, 5}, {4, 1, 3, 3}, conv({2, 2}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 4, 1), DType::kF64},
      {{4, 3, 5, 5}, {6, 3, 3, 3}, conv({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1, 2), DType::kF64},
      {{2, 3, 6, 6}, {5, 3, 3, 3}, conv({1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1), DType::kF32},
  };
  for (const Case& k : cases) {
    Graph g;
    Value x = g.parameter({k.t, k.xd});
    Value w = g.parameter({k.t, k.wd});
    Value y = g.convolution(x, w, k.c);
    g.set_outputs({y});
    const Doubles xv = pseudo(TensorType{k.t, k.xd}.numel(), 1);
    const Doubles wv = pseudo(TensorType{k.t, k.wd}.numel(), 2);
    auto out = run(g, {array_of(k.t, k.xd, stored(k.t, xv)), array_of(k.t, k.wd, stored(k.t, wv))});
    const Dims od = g.type(y).dims;
    const double tol = k.t == DType::kF64 ? 1e-12 : 1e-5;
    expect_near(out[0].doubles(), conv_ref(stored(k.t, xv), k.xd, stored(k.t, wv), k.wd, k.c, od),
                tol, tol, "conv " + g.type(x).mlir() + " * " + g.type(w).mlir());
  }
}

TEST(RunLinalg, Convolution1d) {
  Graph g;
  Value x = g.parameter({DType::kF32, {1, 2, 8}});
  Value w = g.parameter({DType::kF32, {3, 2, 3}});
  ConvDims c;
  c.window_strides = {2};
  Value y = g.convolution(x, w, c);
  g.set_outputs({y});
  const Doubles xv = stored(DType::kF32, pseudo(16, 3)), wv = stored(DType::kF32, pseudo(18, 4));
  auto out = run(g, {array_of(DType::kF32, {1, 2, 8}, xv), array_of(DType::kF32, {3, 2, 3}, wv)});
  ConvDims c2 = c;  // the same problem as 2-D with a height of 1
  c2.window_strides = {1, 2};
  c2.padding_low = c2.padding_high = {0, 0};
  c2.lhs_dilation = c2.rhs_dilation = {1, 1};
  expect_near(out[0].doubles(), conv_ref(xv, {1, 2, 1, 8}, wv, {3, 2, 1, 3}, c2, {1, 3, 1, 3}),
              1e-5, 1e-5, "conv1d");
}

// ---------------------------------------------------------------- random

TEST(RunRandom, RngBitGeneratorThreeFry) {
  Graph g;
  Value s = g.parameter({DType::kU64, {2}});
  auto [s1, bits32] = g.rng_bit_generator(s, {DType::kU32, {64}});
  auto [s2, bits64] = g.rng_bit_generator(s1, {DType::kU64, {2, 3}});
  g.set_outputs({s1, bits32, s2, bits64});
  const Array seed = array<uint64_t>(DType::kU64, {2}, {42, 0});
  auto a = run(g, {seed});
  auto b = run(g, {seed});
  EXPECT_EQ(a[1].bytes, b[1].bytes);  // deterministic in the state
  EXPECT_NE(a[0].as<uint64_t>(), seed.as<uint64_t>());
  EXPECT_NE(a[2].as<uint64_t>(), a[0].as<uint64_t>());
  const auto v = a[1].as<uint32_t>();
  std::set<uint32_t> distinct(v.begin(), v.end());
  EXPECT_GT(distinct.size(), 60u);
  EXPECT_EQ(a[3].type, (TensorType{DType::kU64, {2, 3}}));
  auto c = run(g, {array<uint64_t>(DType::kU64, {2}, {43, 0})});
  EXPECT_NE(a[1].bytes, c[1].bytes);
}

// ---------------------------------------------------------------- coverage

// After the whole suite: every Op kind must have been compiled and run. Checked
// only for an unfiltered run (a filtered run skips most ops by design).
class CoverageCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    if (GTEST_FLAG_GET(filter) != "*") return;
    for (int i = 0; i <= static_cast<int>(Op::kRngBitGenerator); ++i) {
      const Op op = static_cast<Op>(i);
      EXPECT_TRUE(covered_ops().count(op)) << "no end-to-end test ran " << ir::op_name(op);
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kCoverage =
    ::testing::AddGlobalTestEnvironment(new CoverageCheck);

}  // namespace
}  // namespace ttpu::testing
