// End-to-end emitter suite: flat outputs (emit.cc). An output written into a
// donated input that is a 1-D reshape of an elementwise value (a whole
// storage written, as every optimizer update in a fused step) is computed
// 1-D together with the elementwise values feeding it; its bytes are those
// of the same values returned in their own dims (not rewritten), on the CPU
// plugin. Programs without donation keep their form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stablehlo_run_util.h"

namespace ttpu::testing {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Graph;
using ir::Op;
using ir::Value;

// AdamW's exp_avg.lerp_(grad, w) and a parameter update reading it, on flat
// storages (p, m) and a 2-D gradient, as a fused step builds them.
// `flat`: the outputs are 1-D reshapes (rewritten); else the 2-D values.
Graph adam_like(bool flat, Value* mn2d) {
  Graph g;
  const std::vector<int64_t> d = {3, 4};
  Value p = g.parameter({DType::kF32, {12}});
  Value m = g.parameter({DType::kF32, {12}});
  Value grad = g.parameter({DType::kF32, d});
  Value w = g.parameter({DType::kF32, {}});
  Value P = g.reshape(p, d), M = g.reshape(m, d);
  Value bw = g.broadcast_in_dim(w, d, {});
  Value diff = g.binary(Op::kSub, grad, M);
  Value small = g.compare(Cmp::kLT, g.unary(Op::kAbs, bw), g.constant(0.5, {DType::kF32, d}));
  Value one = g.constant(1.0, {DType::kF32, d});
  Value mn =
      g.select(small, g.binary(Op::kAdd, M, g.binary(Op::kMul, bw, diff)),
               g.binary(Op::kSub, grad, g.binary(Op::kMul, diff, g.binary(Op::kSub, one, bw))));
  Value denom = g.binary(Op::kAdd, g.unary(Op::kSqrt, g.binary(Op::kMul, mn, mn)),
                         g.constant(1e-8, {DType::kF32, d}));
  Value pn = g.binary(Op::kSub, P, g.binary(Op::kDiv, mn, denom));
  // An integer output through a convert, and a 2-D user of the moment.
  Value count = g.convert(g.compare(Cmp::kGT, mn, g.constant(0, {DType::kF32, d})), DType::kI32);
  *mn2d = mn;
  Value dot = g.dot_general(mn, P, {}, {}, {1}, {1});
  if (flat) {
    g.set_outputs({g.reshape(pn, {12}), g.reshape(mn, {12}), g.reshape(count, {12}), dot});
    g.donate(0, 0);  // p and m are updated in place, as a fused step donates them
    g.donate(1, 1);
  } else {
    g.set_outputs({pn, mn, count, dot});
  }
  return g;
}

TEST(RunFlatOutputs, ElementwiseOutputsComputedFlatAreBitIdentical) {
  Value mn, mn_plain;
  Graph g = adam_like(true, &mn);
  Graph plain = adam_like(false, &mn_plain);
  const std::string flat_text = stablehlo::emit(g, "run");
  const std::string plain_text = stablehlo::emit(plain, "run");
  // The moment is computed 1-D and returned as is; the integer output (not
  // donated) and the plain form are not rewritten.
  const std::string moment = "%f" + std::to_string(mn.node) + " = \"stablehlo.select\"";
  EXPECT_NE(flat_text.find(moment), std::string::npos) << flat_text;
  EXPECT_NE(flat_text.find("\"func.return\"(%f"), std::string::npos) << flat_text;
  EXPECT_EQ(flat_text.find("\"stablehlo.convert\"(%f"), std::string::npos) << flat_text;
  EXPECT_EQ(plain_text.find("%f"), std::string::npos) << plain_text;
  std::vector<double> pv, mv, gv;
  for (int i = 0; i < 12; ++i) {
    pv.push_back(0.25 * i - 1.3);
    mv.push_back(i % 3 == 0 ? -0.7 * i : 0.11 * i);
    gv.push_back(1.0 / (i + 1) - 0.4);
  }
  for (double w : {0.1, 0.9}) {  // both branches of the lerp
    std::vector<Array> args = {array_of(DType::kF32, {12}, pv), array_of(DType::kF32, {12}, mv),
                               array_of(DType::kF32, {3, 4}, gv), array_of(DType::kF32, {}, {w})};
    auto a = run(g, args);
    auto b = run(plain, args);
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 4u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].type.numel(), b[i].type.numel()) << i;
      EXPECT_EQ(a[i].type.dtype, b[i].type.dtype) << i;
      EXPECT_EQ(a[i].bytes, b[i].bytes) << "output " << i << " w=" << w;
    }
    // Spot check against the formula: w < 0.5 -> m + w (g - m).
    if (w < 0.5) EXPECT_FLOAT_EQ(a[1].doubles()[5], mv[5] + w * (gv[5] - mv[5]));
  }
}

// Nothing to flatten: no donation (a strict per-op program), or a donated
// output that is a reshape of a transpose or of a clamp with 0-d bounds (an
// integer one: a float clamp ends in a select that keeps NaN, which is
// elementwise).
TEST(RunFlatOutputs, OtherGraphsUnchanged) {
  for (bool donated : {false, true}) {
    Graph g;
    Value x = g.parameter({DType::kF32, {2, 3}});
    Value p = g.parameter({DType::kF32, {6}});
    Value q = g.parameter({DType::kI32, {6}});
    Value k = g.parameter({DType::kI32, {2, 3}});
    Value y = g.binary(Op::kMul, x, x);
    Value lo = g.constant_int(-1, {DType::kI32, {}}), hi = g.constant_int(1, {DType::kI32, {}});
    Value sum = g.binary(Op::kAdd, g.reshape(p, {2, 3}), y);
    g.set_outputs({g.reshape(g.transpose(y, {1, 0}), {6}), g.reshape(g.clamp(lo, k, hi), {6}),
                   g.reshape(sum, {6})});
    if (donated) {
      g.donate(1, 0);
      g.donate(2, 1);
    }
    const std::string text = stablehlo::emit(g, "run");
    EXPECT_EQ(text.find("%f"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace ttpu::testing
