// Euclid's algorithm for torch.gcd / lcm as a loop (loop_kernels.h).
// Unrolled to the Fibonacci bound (93 steps for int64), one int64 gcd
// program took 0.8 s to compile on XLA:CPU.
#include <string>
#include <vector>

#include "stablehlo/loop_body.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::stablehlo {
namespace {

using namespace loop_names;  // NOLINT(google-build-using-namespace): loop_body.h

std::string gcd_text(const TensorType& t) {
  const TensorType index{DType::kI64, {}};
  int regions = 0;
  Body outer("%v", &regions);
  const V a{"%a", t}, b{"%b", t}, count{"%count", index};
  const std::string params = "%a: " + t.mlir() + ", %b: " + t.mlir() + ", %count: " + index.mlir();
  auto step = [&](Body& body, const std::vector<V>& st) -> std::vector<V> {
    // ATen's calc_gcd: while (a != 0) { c = a; a = b % a; b = c; }
    const V &x = st[1], &y = st[2];
    const V live = body.compare(Cmp::kNE, x, body.constant(0, t));
    const V r = body.binary("stablehlo.remainder", y, body.select(live, x, body.constant(1, t)));
    return {body.select(live, r, x), body.select(live, x, y)};
  };
  return detail::counted_loop(params, t.mlir(), outer, {a, b}, 0, count, {1}, &regions, step);
}

}  // namespace

std::shared_ptr<const ir::UserFunction> gcd_loop(const ir::TensorType& t) {
  if (!ir::is_integral(t.dtype) || t.dtype == DType::kBool) {
    throw ir::IrError("gcd_loop: " + t.mlir() + " is not an integer type");
  }
  return detail::cached_loop(t.mlir(), "gcd", [&] { return gcd_text(t); });
}

}  // namespace ttpu::stablehlo
