// The direct sum of Cephes' Hurwitz zeta as a loop (loop_kernels.h). Laid
// out along an axis of 41 terms, it stopped there: for q below -31 (negative,
// not an integer), where Cephes sums until q + i > 9, the Euler-Maclaurin
// tail was taken at a negative abscissa and zeta(2, -40.5) came out 2.9e12
// (CPU: 9.85).
#include <string>
#include <vector>

#include "stablehlo/loop_body.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::stablehlo {
namespace {

using namespace loop_names;  // NOLINT(google-build-using-namespace): loop_body.h

constexpr double kMachEp = 1.11022302462515654042E-16;  // Cephes MACHEP (2^-53)

std::string zeta_text(const TensorType& t) {
  const TensorType index{DType::kI64, {}}, tb{DType::kBool, t.dims};
  int regions = 0;
  Body outer("%v", &regions);
  const V x{"%x", t}, q{"%q", t}, count{"%count", index};
  const std::string params = "%x: " + t.mlir() + ", %q: " + t.mlir() + ", %count: " + index.mlir();
  const V s0 = outer.op("stablehlo.power", {q, outer.op("stablehlo.negate", {x}, t)}, t);
  const V zero = outer.constant(0, t);
  const V no = outer.compare(Cmp::kNE, zero, zero);  // all false
  auto step = [&](Body& b, const std::vector<V>& st) -> std::vector<V> {
    const V &j = st[0], &xs = st[1], &a = st[2], &bt = st[3], &s = st[4], &done = st[5];
    // Cephes: while (i < 9 || a <= 9) { i += 1; a += 1; b = a^-x; s += b;
    //   if (-MACHEP * s < b && b < MACHEP * s) return s; }
    const V nine = b.constant(9, t);
    const V counting = b.broadcast(b.compare(Cmp::kLT, j, b.constant(9, index)), t.dims, {});
    const V more = b.binary("stablehlo.or", counting, b.compare(Cmp::kLE, a, nine));
    const V run = b.binary("stablehlo.and", more, b.op("stablehlo.not", {done}, tb));
    const V a1 = b.binary("stablehlo.add", a, b.constant(1, t));
    const V b1 = b.op("stablehlo.power", {a1, b.op("stablehlo.negate", {xs}, t)}, t);
    const V s1 = b.binary("stablehlo.add", s, b1);
    const V eps = b.binary("stablehlo.multiply", b.constant(kMachEp, t), s1);
    const V converged =
        b.binary("stablehlo.and", b.compare(Cmp::kLT, b.op("stablehlo.negate", {eps}, t), b1),
                 b.compare(Cmp::kLT, b1, eps));
    return {xs, b.select(run, a1, a), b.select(run, b1, bt), b.select(run, s1, s),
            b.binary("stablehlo.or", done, b.binary("stablehlo.and", run, converged))};
  };
  const std::string results = t.mlir() + ", " + t.mlir() + ", " + t.mlir() + ", " + tb.mlir();
  return detail::counted_loop(params, results, outer, {x, q, zero, s0, no}, 0, count, {1, 2, 3, 4},
                              &regions, step);
}

}  // namespace

std::shared_ptr<const ir::UserFunction> zeta_direct_sum_loop(const ir::TensorType& t) {
  if (t.dtype != DType::kF64)
    throw ir::IrError("zeta_direct_sum_loop: " + t.mlir() + " is not f64");
  return detail::cached_loop(t.mlir(), "zeta_direct_sum", [&] { return zeta_text(t); });
}

}  // namespace ttpu::stablehlo
