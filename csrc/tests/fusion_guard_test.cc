// The recompile guard of fused mode (csrc/runtime/fusion_guard.h): counts per
// start line, the closest earlier graph, and the one-line explanation of what
// changed. Needs no plugin: the guard only compares graph summaries.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/fusion_guard.h"

namespace ttpu::runtime {
namespace {

using ir::DType;
using ir::TensorType;

// A small fused step: x = randn(batch, 8); act(addmm(x)).sum().
GraphSummary step(int64_t batch, DType dtype = DType::kF32, const std::string& act = "aten::relu") {
  GraphSummary g;
  g.ops = {{"aten::normal_", {{dtype, {batch, 8}}}},
           {"aten::addmm", {{dtype, {batch, 4}}}},
           {act, {{dtype, {batch, 4}}}},
           {"aten::sum", {{dtype, {}}}}};
  g.parameters = {{dtype, {32}}, {dtype, {4}}, {DType::kU64, {2}}};
  return g;
}

TEST(Difference, NamesTheKindAndTheOp) {
  EXPECT_EQ(describe_difference(step(5), step(4)),
            "shape: op 1 of 4 (aten::normal_) produces f32[5,8] here, f32[4,8] in the earlier "
            "graph");
  EXPECT_EQ(describe_difference(step(4, DType::kBF16), step(4)).rfind("dtype: op 1 of 4", 0), 0u);
  EXPECT_EQ(describe_difference(step(4, DType::kF32, "aten::gelu"), step(4)),
            "op sequence: op 3 of 4 is aten::gelu here, aten::relu in the earlier graph");
  GraphSummary longer = step(4);
  longer.ops.push_back({"aten::mul", {{DType::kF32, {}}}});
  EXPECT_EQ(describe_difference(longer, step(4)),
            "op sequence: this graph has 5 ops, the earlier one 4 (op 5 here is aten::mul)");
  EXPECT_EQ(describe_difference(step(4), longer),
            "op sequence: this graph has 4 ops, the earlier one 5 (which went on with aten::mul)");
}

TEST(Difference, InputsDonationAndStructure) {
  GraphSummary wider = step(4);
  wider.parameters[0] = {DType::kF32, {64}};
  EXPECT_EQ(describe_difference(wider, step(4)),
            "shape: input 0 is f32[64] here, f32[32] in the earlier graph");
  GraphSummary donated = step(4);
  donated.donations = {0, -1, -1};
  EXPECT_EQ(describe_difference(donated, step(4)).rfind("donation: input 0 is donated here", 0),
            0u);
  EXPECT_EQ(describe_difference(step(4), step(4)).rfind("structure: ", 0), 0u);
}

TEST(Guard, CountsPerLineAndComparesWithTheClosestGraph) {
  RecompileGuard guard;
  std::vector<NewGraph> seen;
  set_recompile_handler([&](const NewGraph& g) { seen.push_back(g); });
  guard.on_new_graph("train.py:10", step(4));
  guard.on_new_graph("train.py:20", step(4, DType::kF32, "aten::gelu"));
  guard.on_new_graph("train.py:10", step(4, DType::kF32, "aten::gelu"));
  guard.on_new_graph("", step(4));
  set_recompile_handler(nullptr);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].count, 1);
  EXPECT_EQ(seen[0].difference, "");
  EXPECT_EQ(seen[1].count, 1);  // another line counts on its own
  EXPECT_EQ(seen[2].start, "train.py:10");
  EXPECT_EQ(seen[2].count, 2);
  EXPECT_EQ(seen[2].difference.rfind("op sequence: op 3 of 4 is aten::gelu", 0), 0u);
  EXPECT_EQ(seen[3].start, "<unknown>");
  auto counts = guard.counts();
  EXPECT_EQ(counts["train.py:10"], 2);
  EXPECT_EQ(counts["train.py:20"], 1);
  guard.reset();
  EXPECT_TRUE(guard.counts().empty());
}

TEST(Guard, PicksTheGraphWithTheLongestCommonPrefix) {
  RecompileGuard guard;
  std::string last;
  set_recompile_handler([&](const NewGraph& g) { last = g.difference; });
  guard.on_new_graph("l:1", step(4, DType::kF32, "aten::gelu"));
  guard.on_new_graph("l:1", step(8));
  guard.on_new_graph("l:1", step(4));  // closest: the gelu one, 2 ops in common
  set_recompile_handler(nullptr);
  EXPECT_EQ(last, "op sequence: op 3 of 4 is aten::relu here, aten::gelu in the earlier graph");
}

TEST(Guard, AHandlerMayRefuseTheGraph) {
  RecompileGuard guard;
  set_recompile_handler([](const NewGraph& g) {
    if (g.count > 1) throw std::runtime_error("refused");
  });
  guard.on_new_graph("l:1", step(4));
  EXPECT_THROW(guard.on_new_graph("l:1", step(8)), std::runtime_error);
  set_recompile_handler(nullptr);
  EXPECT_EQ(guard.counts()["l:1"], 2);  // still counted: the next one is #3
}

TEST(Guard, CountsShapeChangesAndMarksLinesThatStopFusing) {
  RecompileGuard guard;
  std::vector<int> changes;
  set_recompile_handler([&](const NewGraph& g) { changes.push_back(g.shape_changes); });
  guard.on_new_graph("gen.py:7", step(4));
  guard.on_new_graph("gen.py:7", step(5));                             // shape
  guard.on_new_graph("gen.py:7", step(5, DType::kF32, "aten::gelu"));  // op sequence
  guard.on_new_graph("gen.py:7", step(6));                             // shape
  guard.on_new_graph("gen.py:7", step(7), /*may_stop_fusing=*/false);  // a compiled graph
  set_recompile_handler(nullptr);
  EXPECT_EQ(changes, (std::vector<int>{0, 1, 1, 2, 0}));
  EXPECT_FALSE(guard.stops_fusing("gen.py:7"));
  EXPECT_TRUE(guard.stop_fusing("gen.py:7"));
  EXPECT_TRUE(guard.stops_fusing("gen.py:7"));
  EXPECT_FALSE(guard.stops_fusing("gen.py:8"));
  // Code with no user line is never marked: it would cover unrelated code.
  EXPECT_FALSE(guard.stop_fusing("<unknown>"));
  EXPECT_FALSE(guard.stop_fusing(""));
  EXPECT_FALSE(guard.stops_fusing("<unknown>"));
  guard.reset();
  EXPECT_FALSE(guard.stops_fusing("gen.py:7"));
}

}  // namespace
}  // namespace ttpu::runtime
