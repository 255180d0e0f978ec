// Golden StableHLO text for small graphs, so a refactor of the emitter shows its
// diff. The end-to-end suite (every Op compiled and run on the plugin) is in
// stablehlo_run_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

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

TEST(Dump, All) {
  {
    Graph g;
    Value a = g.parameter({DType::kF32, {3}});
    Value b = g.parameter({DType::kF32, {3}});
    g.set_outputs({g.binary(Op::kAdd, a, b)});
    std::cout << emit(g, "add") << "\n";
  }
  {
    Graph g;
    Value x = g.parameter({DType::kF32, {2, 3}});
    Value zero = g.constant(0, {DType::kF32, {}});
    g.set_outputs({g.reduce({x}, {zero}, {1}, Reducer::kAdd)[0]});
    std::cout << emit(g, "sum") << "\n";
  }
  {
    Graph g;
    Value x = g.parameter({DType::kBF16, {4, 2, 3}});
    Value w = g.parameter({DType::kBF16, {4, 3, 5}});
    g.set_outputs({g.dot_general(x, w, {0}, {0}, {2}, {1})});
    std::cout << emit(g, "bmm") << "\n";
  }
  {
    Graph g;
    Value x = g.parameter({DType::kF32, {2, 3}});
    Value i = g.iota({DType::kI64, {2, 3}}, 1);
    auto r = g.reduce({x, i}, {g.constant(-INFINITY, {DType::kF32, {}}), g.constant_int(0, {DType::kI64, {}})}, {1}, Reducer::kArgMax);
    auto s = g.sort({x, i}, 1, Cmp::kGT);
    g.set_outputs({r[1], s[0], g.unary(Op::kAtan, x)});
    std::cout << emit(g, "argmax") << "\n";
  }
}

}  // namespace
}  // namespace ttpu::stablehlo
