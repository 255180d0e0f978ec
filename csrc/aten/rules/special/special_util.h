// Helpers for the special-function lowerings (special_*.cc): elementwise
// arithmetic on values of one shape and float dtype, and the polynomial
// evaluators of the Cephes Mathematical Library (S. L. Moshier) that ATen's
// scalar code (aten/src/ATen/native/Math.h) is written with.
//
// The rules evaluate the same expansions as ATen's CPU kernels, in the same
// dtype (the opmath dtype: f32 for f16/bf16/f32, f64 for f64) and the same
// order of operations, with each branch of the scalar code computed for every
// element and chosen by a select. So results agree with CPU to a few ulps,
// including where the formula itself over- or underflows (i0 of 89 is inf on
// CPU in f32 although the true value is finite). NaN and inf are handled where
// the scalar code tests for them; elsewhere they flow through the same
// arithmetic.
#pragma once

#include <cmath>
#include <initializer_list>

#include "aten/rules/elementwise/unary_util.h"

namespace ttpu::aten::special {

using ir::Cmp;
using ir::DType;
using ir::Op;

// Builds arithmetic on values of the shape and dtype of `like`. Numbers given
// as double become splat constants of that type (rounded to nearest, as a C
// cast of ATen's double literals to float rounds them).
class Math {
 public:
  Math(LoweringContext& ctx, ir::Value like)
      : ctx_(ctx), type_{dtype(ctx, like), dims(ctx, like)} {}

  LoweringContext& ctx() { return ctx_; }
  ir::Graph& g() { return ctx_.g(); }
  DType dt() const { return type_.dtype; }

  ir::Value k(double v) { return g().constant(v, type_); }
  ir::Value inf() { return k(INFINITY); }
  ir::Value nan() { return k(NAN); }

  ir::Value add(ir::Value a, ir::Value b) { return g().binary(Op::kAdd, a, b); }
  ir::Value sub(ir::Value a, ir::Value b) { return g().binary(Op::kSub, a, b); }
  ir::Value mul(ir::Value a, ir::Value b) { return g().binary(Op::kMul, a, b); }
  ir::Value div(ir::Value a, ir::Value b) { return g().binary(Op::kDiv, a, b); }
  ir::Value pow(ir::Value a, ir::Value b) { return g().binary(Op::kPow, a, b); }
  ir::Value max(ir::Value a, ir::Value b) { return g().binary(Op::kMax, a, b); }
  ir::Value add(ir::Value a, double b) { return add(a, k(b)); }
  ir::Value sub(ir::Value a, double b) { return sub(a, k(b)); }
  ir::Value sub(double a, ir::Value b) { return sub(k(a), b); }
  ir::Value mul(double a, ir::Value b) { return mul(k(a), b); }
  ir::Value div(ir::Value a, double b) { return div(a, k(b)); }
  ir::Value div(double a, ir::Value b) { return div(k(a), b); }

  ir::Value neg(ir::Value a) { return g().unary(Op::kNeg, a); }
  ir::Value abs(ir::Value a) { return g().unary(Op::kAbs, a); }
  ir::Value exp(ir::Value a) { return g().unary(Op::kExp, a); }
  ir::Value expm1(ir::Value a) { return g().unary(Op::kExpm1, a); }
  ir::Value log(ir::Value a) { return g().unary(Op::kLog, a); }
  ir::Value log1p(ir::Value a) { return g().unary(Op::kLog1p, a); }
  ir::Value sqrt(ir::Value a) { return g().unary(Op::kSqrt, a); }
  ir::Value sin(ir::Value a) { return g().unary(Op::kSin, a); }
  ir::Value cos(ir::Value a) { return g().unary(Op::kCos, a); }
  ir::Value floor(ir::Value a) { return g().unary(Op::kFloor, a); }
  ir::Value erf(ir::Value a) { return g().unary(Op::kErf, a); }
  ir::Value lgamma(ir::Value a) { return g().unary(Op::kLgamma, a); }

  ir::Value lt(ir::Value a, ir::Value b) { return g().compare(Cmp::kLT, a, b); }
  ir::Value le(ir::Value a, ir::Value b) { return g().compare(Cmp::kLE, a, b); }
  ir::Value gt(ir::Value a, ir::Value b) { return g().compare(Cmp::kGT, a, b); }
  ir::Value ge(ir::Value a, ir::Value b) { return g().compare(Cmp::kGE, a, b); }
  ir::Value eq(ir::Value a, ir::Value b) { return g().compare(Cmp::kEQ, a, b); }
  ir::Value ne(ir::Value a, ir::Value b) { return g().compare(Cmp::kNE, a, b); }
  ir::Value lt(ir::Value a, double b) { return lt(a, k(b)); }
  ir::Value le(ir::Value a, double b) { return le(a, k(b)); }
  ir::Value gt(ir::Value a, double b) { return gt(a, k(b)); }
  ir::Value ge(ir::Value a, double b) { return ge(a, k(b)); }
  ir::Value eq(ir::Value a, double b) { return eq(a, k(b)); }
  ir::Value is_nan(ir::Value a) { return ne(a, a); }
  ir::Value is_inf(ir::Value a) { return eq(abs(a), inf()); }

  ir::Value and_(ir::Value a, ir::Value b) { return g().binary(Op::kAnd, a, b); }
  ir::Value or_(ir::Value a, ir::Value b) { return g().binary(Op::kOr, a, b); }
  ir::Value not_(ir::Value a) { return g().unary(Op::kNot, a); }
  ir::Value sel(ir::Value pred, ir::Value a, ir::Value b) { return g().select(pred, a, b); }
  ir::Value sel(ir::Value pred, double a, ir::Value b) { return sel(pred, k(a), b); }
  ir::Value no() { return g().constant(0, {DType::kBool, type_.dims}); }

  // Cephes polevl: c[0] x^n + c[1] x^(n-1) + ... + c[n], by Horner's rule
  // (highest degree first, as the tables are printed).
  ir::Value polevl(ir::Value x, std::initializer_list<double> c) {
    auto it = c.begin();
    ir::Value r = k(*it++);
    for (; it != c.end(); ++it) r = add(mul(r, x), k(*it));
    return r;
  }

  // Cephes chbevl: the Chebyshev series sum' c[i] T_i(x/2) by Clenshaw's
  // recurrence, the zero-order coefficient last (Math.h chbevl). `x` must
  // already be mapped onto [-2, 2] (2 * the Chebyshev argument).
  ir::Value chbevl(ir::Value x, const double* c, size_t n) {
    ir::Value b0 = k(c[0]), b1 = k(0), b2 = k(0);
    for (size_t i = 1; i < n; ++i) {
      b2 = b1;
      b1 = b0;
      b0 = add(sub(mul(x, b1), b2), k(c[i]));
    }
    return mul(0.5, sub(b0, b2));
  }
  template <size_t N>
  ir::Value chbevl(ir::Value x, const double (&c)[N]) {
    return chbevl(x, c, N);
  }

 private:
  LoweringContext& ctx_;
  ir::TensorType type_;
};

// A unary special function's rule: the input read as a tensor, integer and
// bool inputs promoted to the default float dtype, the math in the opmath
// dtype, the result rounded to the result dtype. `kernel` names the CPU
// kernel for the NotImplementedError of a dtype it lacks; `halves` says
// whether it takes f16/bf16.
template <ir::Value (*Fn)(Math&, ir::Value)>
std::vector<ir::Value> unary_rule(LoweringContext& ctx, const Args& a, const char* kernel,
                                  bool halves) {
  ir::Value x = ctx.tensor(a.tensor(0));
  DType out = pointwise::float_result(dtype(ctx, x));
  if (!halves && (out == DType::kF16 || out == DType::kBF16)) {
    pointwise::not_implemented(kernel, out);
  }
  x = ctx.g().convert(x, pointwise::opmath(out));
  Math m(ctx, x);
  return {ctx.g().convert(Fn(m, x), out)};
}

}  // namespace ttpu::aten::special
