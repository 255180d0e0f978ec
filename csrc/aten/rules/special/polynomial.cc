// Lowerings of the orthogonal polynomials of torch.special: Chebyshev T/U/V/W
// (plain and shifted to [0, 1]), Hermite H/He, Laguerre L and Legendre P, each
// evaluated at x for a per-element degree n (a tensor, truncated to an integer).
//
// ATen's scalar code (aten/src/ATen/native/Math.h, *_polynomial_*_forward)
// runs the three-term recurrence n times per element, and for Chebyshev with
// |x| < 1 and a large n uses the trigonometric form instead. Here the
// recurrence is a stablehlo.while (stablehlo/loop_kernels.h) up to the
// largest degree that needs it, found on the device, and each element keeps
// the term of its own degree. Degrees above kMaxDegree (2^20: about a second
// of loop on 2 cores; CPU would loop n times per element) take the term of
// degree kMaxDegree: a documented limit of this lowering.
#include <cmath>

#include "aten/rules/elementwise/unary_util.h"
#include "stablehlo/loop_kernels.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

constexpr int64_t kMaxDegree = int64_t{1} << 20;

enum class Family { kChebT, kChebU, kChebV, kChebW, kHermiteH, kHermiteHe, kLaguerre, kLegendre };

struct Poly {
  const char* kernel;  // CPU kernel name, for the dtype error
  Family family;
  bool shifted;        // Chebyshev on [0, 1]: evaluated at 2x - 1
  int64_t trig_above;  // Chebyshev: trigonometric form for n > this and |y| < 1
};

stablehlo::PolynomialRecurrence recurrence(Family f) {
  using R = stablehlo::PolynomialRecurrence;
  switch (f) {
    case Family::kHermiteH: return R::kHermiteH;
    case Family::kHermiteHe: return R::kHermiteHe;
    case Family::kLaguerre: return R::kLaguerre;
    case Family::kLegendre: return R::kLegendre;
    default: return R::kChebyshev;  // T, U, V, W differ in p1 only
  }
}

ValueList polynomial(LoweringContext& ctx, const Args& a, const Poly& p) {
  DType dt = pointwise::float_result(to_ir(result_type(a[0], a[1])));
  if (dt != DType::kF32 && dt != DType::kF64) pointwise::not_implemented(p.kernel, dt);
  auto& g = ctx.g();
  auto [x, nf] = broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
  // n as an integer, truncated as ATen's static_cast<int64_t>(n) does.
  ir::Value n = g.convert(nf, DType::kI64);
  auto k = [&](double v) { return full_like(ctx, x, v); };
  auto nk = [&](int64_t v) { return full_like(ctx, n, static_cast<double>(v)); };
  auto add = [&](ir::Value l, ir::Value r) { return g.binary(Op::kAdd, l, r); };
  auto sub = [&](ir::Value l, ir::Value r) { return g.binary(Op::kSub, l, r); };
  auto mul = [&](ir::Value l, ir::Value r) { return g.binary(Op::kMul, l, r); };
  auto div = [&](ir::Value l, ir::Value r) { return g.binary(Op::kDiv, l, r); };
  // y: the Chebyshev argument (x, or 2x - 1 when shifted).
  ir::Value y = p.shifted ? sub(add(x, x), k(1)) : x;
  ir::Value p0 = k(1);
  ir::Value p1;
  switch (p.family) {
    case Family::kChebT: p1 = y; break;
    case Family::kChebU: p1 = add(y, y); break;
    case Family::kChebV: p1 = sub(add(y, y), k(1)); break;
    case Family::kChebW: p1 = add(add(y, y), k(1)); break;
    case Family::kHermiteH: p1 = add(x, x); break;
    case Family::kHermiteHe: p1 = x; break;
    case Family::kLaguerre: p1 = sub(k(1), x); break;
    case Family::kLegendre: p1 = x; break;
  }
  ir::Value result = g.select(g.compare(Cmp::kEQ, n, nk(1)), p1, p0);
  // Elements the trigonometric form serves need no recurrence.
  ir::Value trig_use;
  if (p.trig_above > 0) {
    trig_use = g.binary(Op::kAnd, g.compare(Cmp::kGT, n, nk(p.trig_above)),
                        g.compare(Cmp::kLT, g.unary(Op::kAbs, y), k(1)));
  }
  const ir::TensorType t = g.type(x);
  if (t.numel() > 0) {
    ir::Value degree = g.select(g.compare(Cmp::kLT, n, nk(0)), nk(0), n);
    if (p.trig_above > 0) degree = g.select(trig_use, nk(0), degree);
    ir::Value count = loop_count(ctx, g.binary(Op::kAdd, degree, nk(1)), 1, kMaxDegree + 1);
    result = g.call(stablehlo::polynomial_loop(recurrence(p.family), t),
                    {x, y, n, p0, p1, result, count})[0];
  }
  if (p.trig_above > 0) {
    // The trigonometric forms with theta = acos(y) (Math.h), where CPU uses them.
    ir::Value theta = g.unary(Op::kAcos, y);
    ir::Value nn = g.convert(n, dt);
    ir::Value half = div(theta, k(2));
    ir::Value trig;
    switch (p.family) {
      case Family::kChebT: trig = g.unary(Op::kCos, mul(nn, theta)); break;
      case Family::kChebU:
        trig = div(g.unary(Op::kSin, mul(add(nn, k(1)), theta)), g.unary(Op::kSin, theta));
        break;
      case Family::kChebV:
        trig = div(g.unary(Op::kCos, mul(add(nn, k(0.5)), theta)), g.unary(Op::kCos, half));
        break;
      default:
        trig = div(g.unary(Op::kSin, mul(add(nn, k(0.5)), theta)), g.unary(Op::kSin, half));
        break;
    }
    result = g.select(trig_use, trig, result);
  }
  return {g.select(g.compare(Cmp::kLT, n, nk(0)), k(0), result)};
}

#define POLY(name, kernel, family, shifted, trig)                          \
  {name, [](LoweringContext& c, const Args& a) {                           \
     return polynomial(c, a, Poly{kernel, Family::family, shifted, trig}); \
   }}

RegisterLowering kPolynomialRules[] = {
    POLY("special_chebyshev_polynomial_t", "chebyshev_polynomial_t_cpu", kChebT, false, 6),
    POLY("special_chebyshev_polynomial_u", "chebyshev_polynomial_u_cpu", kChebU, false, 8),
    POLY("special_chebyshev_polynomial_v", "chebyshev_polynomial_v_cpu", kChebV, false, 8),
    POLY("special_chebyshev_polynomial_w", "chebyshev_polynomial_w_cpu", kChebW, false, 8),
    POLY("special_shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_t_cpu", kChebT,
         true, 6),
    POLY("special_shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_u_cpu", kChebU,
         true, 6),
    POLY("special_shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_v_cpu", kChebV,
         true, 6),
    POLY("special_shifted_chebyshev_polynomial_w", "shifted_chebyshev_polynomial_w_cpu", kChebW,
         true, 4),
    POLY("special_hermite_polynomial_h", "hermite_polynomial_h_cpu", kHermiteH, false, 0),
    POLY("special_hermite_polynomial_he", "hermite_polynomial_he_cpu", kHermiteHe, false, 0),
    POLY("special_laguerre_polynomial_l", "laguerre_polynomial_l_cpu", kLaguerre, false, 0),
    POLY("special_legendre_polynomial_p", "legendre_polynomial_p_cpu", kLegendre, false, 0),
};

#undef POLY

}  // namespace
}  // namespace ttpu::aten
