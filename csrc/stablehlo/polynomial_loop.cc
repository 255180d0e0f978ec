// The three-term recurrences of torch.special's orthogonal polynomials as a
// loop up to the largest degree present (loop_kernels.h). Unrolled to a
// degree read on the host, they needed a sync per call and a cap (256) past
// which every result was 1.
#include <string>
#include <vector>

#include "stablehlo/loop_body.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::stablehlo {
namespace {

using namespace loop_names;  // NOLINT(google-build-using-namespace): loop_body.h

// The term of degree j + 1 from those of degrees j (cur) and j - 1 (prev), as
// ATen's Math.h writes each recurrence; jf is j as a float (exact below 2^53).
V next_term(Body& b, PolynomialRecurrence r, const V& x, const V& y, const V& prev, const V& cur,
            const V& jf) {
  auto add = [&](const V& l, const V& rr) { return b.binary("stablehlo.add", l, rr); };
  auto sub = [&](const V& l, const V& rr) { return b.binary("stablehlo.subtract", l, rr); };
  auto mul = [&](const V& l, const V& rr) { return b.binary("stablehlo.multiply", l, rr); };
  auto div = [&](const V& l, const V& rr) { return b.binary("stablehlo.divide", l, rr); };
  const V one = b.constant(1, x.type);
  switch (r) {
    case PolynomialRecurrence::kChebyshev: return sub(mul(add(y, y), cur), prev);
    case PolynomialRecurrence::kHermiteH: return sub(mul(add(x, x), cur), mul(add(jf, jf), prev));
    case PolynomialRecurrence::kHermiteHe: return sub(mul(x, cur), mul(jf, prev));
    case PolynomialRecurrence::kLaguerre:
      return div(sub(mul(add(add(jf, jf), sub(one, x)), cur), mul(jf, prev)), add(jf, one));
    case PolynomialRecurrence::kLegendre:
      return div(sub(mul(mul(add(add(jf, jf), one), x), cur), mul(jf, prev)), add(jf, one));
  }
  throw ir::IrError("polynomial_loop: unknown recurrence");
}

std::string polynomial_text(PolynomialRecurrence r, const TensorType& t) {
  const TensorType ti{DType::kI64, t.dims}, index{DType::kI64, {}};
  int regions = 0;
  Body outer("%v", &regions);
  const V x{"%x", t}, y{"%y", t}, n{"%n", ti}, p0{"%p0", t}, p1{"%p1", t}, r0{"%r0", t};
  const V count{"%count", index};
  const std::string params = "%x: " + t.mlir() + ", %y: " + t.mlir() + ", %n: " + ti.mlir() +
                             ", %p0: " + t.mlir() + ", %p1: " + t.mlir() + ", %r0: " + t.mlir() +
                             ", %count: " + index.mlir();
  auto step = [&](Body& b, const std::vector<V>& s) -> std::vector<V> {
    const V &j = s[0], &xs = s[1], &ys = s[2], &ns = s[3], &prev = s[4], &cur = s[5], &res = s[6];
    const V j1 = b.binary("stablehlo.subtract", j, b.constant(1, index));
    const V jf = b.op("stablehlo.convert", {b.broadcast(j1, t.dims, {})}, t);
    const V next = next_term(b, r, xs, ys, prev, cur, jf);
    const V reached = b.compare(Cmp::kGE, ns, b.broadcast(j, t.dims, {}));
    return {xs, ys, ns, cur, next, b.select(reached, next, res)};
  };
  return detail::counted_loop(params, t.mlir(), outer, {x, y, n, p0, p1, r0}, 2, count, {5},
                              &regions, step);
}

}  // namespace

std::shared_ptr<const ir::UserFunction> polynomial_loop(PolynomialRecurrence r,
                                                        const ir::TensorType& t) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF64) {
    throw ir::IrError("polynomial_loop: " + t.mlir() + " is not f32 or f64");
  }
  const std::string key = std::to_string(static_cast<int>(r)) + " " + t.mlir();
  return detail::cached_loop(key, "polynomial", [&] { return polynomial_text(r, t); });
}

}  // namespace ttpu::stablehlo
