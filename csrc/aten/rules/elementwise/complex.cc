// Complex tensors on tpu: the dtype views (view_as_real / view_as_complex),
// construction (complex, polar), conjugation, abs, and the complex variants of
// the basic arithmetic and reductions.
//
// The kernel sends every call with a complex tensor to the CPU fallback unless
// its op is listed in complex_table() (lowering.h). The RegisterComplex lines at
// the end are that list: each names a rule checked against CPU with complex64
// and complex128 inputs (tests/device/test_complex.py). A null rule there means the
// op's ordinary rule already handles complex values (it only moves, selects or
// adds/multiplies elements, which StableHLO defines for complex types).
//
// Conjugation is lazy in PyTorch (x.conj() sets a bit on a view); _copy_from
// (copy.cc) applies the bit, and the kernel declines other ops that would see
// one, so the rules below always read plain values.
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// conj(z) = re - i im.
ir::Value conj(ir::Graph& g, ir::Value z) {
  return g.complex(g.real(z), g.unary(Op::kNeg, g.imag(z)));
}

// |z| as hypot(re, im) = m * sqrt(1 + (s/m)^2), m = max(|re|, |im|), s the
// other: no overflow or underflow in the squares (std::abs of std::complex,
// which CPU PyTorch uses, is hypot). |z| is inf when a part is inf, even if the
// other is NaN (C99 hypot); NaN otherwise when a part is NaN.
ir::Value complex_abs(LoweringContext& ctx, ir::Value z) {
  auto& g = ctx.g();
  ir::Value re = g.unary(Op::kAbs, g.real(z));
  ir::Value im = g.unary(Op::kAbs, g.imag(z));
  ir::Value m = g.binary(Op::kMax, re, im);
  ir::Value s = g.binary(Op::kMin, re, im);
  ir::Value zero = full_like(ctx, m, 0);
  ir::Value one = full_like(ctx, m, 1);
  ir::Value is_zero = g.compare(ir::Cmp::kEQ, m, zero);
  ir::Value r = g.binary(Op::kDiv, s, g.select(is_zero, one, m));
  ir::Value root = g.unary(Op::kSqrt, g.binary(Op::kAdd, one, g.binary(Op::kMul, r, r)));
  ir::Value h = g.binary(Op::kMul, m, root);
  ir::Value inf = full_like(ctx, m, std::numeric_limits<double>::infinity());
  ir::Value any_inf =
      g.binary(Op::kOr, g.compare(ir::Cmp::kEQ, re, inf), g.compare(ir::Cmp::kEQ, im, inf));
  return g.select(any_inf, inf, g.select(is_zero, zero, h));
}

// ---------------------------------------------------------------- construction

// ATen's complex_check_dtype (TensorFactories.cpp), for complex and polar.
DType complex_parts_dtype(const at::Tensor& a, const at::Tensor& b) {
  auto ok = [](c10::ScalarType t) { return t == at::kFloat || t == at::kDouble || t == at::kHalf; };
  TORCH_CHECK(ok(a.scalar_type()) && ok(b.scalar_type()),
              "Expected both inputs to be Half, Float or Double tensors but got ", a.scalar_type(),
              " and ", b.scalar_type());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected object of scalar type ",
              a.scalar_type(), " but got scalar type ", b.scalar_type(), " for second argument");
  return to_ir(a.scalar_type());  // Half: ComplexHalf is not a tpu dtype (to_aten raises)
}

// complex(Tensor real, Tensor imag)
ValueList complex_rule(LoweringContext& ctx, const Args& a) {
  DType part = complex_parts_dtype(a.tensor(0), a.tensor(1));
  TORCH_CHECK_NOT_IMPLEMENTED(part != DType::kF16, "tpu does not support dtype ComplexHalf");
  auto [re, im] = broadcast_pair(ctx, ctx.tensor(a.tensor(0)), ctx.tensor(a.tensor(1)));
  return {ctx.g().complex(re, im)};
}

// polar(Tensor abs, Tensor angle) = abs * (cos(angle) + i sin(angle))
ValueList polar_rule(LoweringContext& ctx, const Args& a) {
  DType part = complex_parts_dtype(a.tensor(0), a.tensor(1));
  TORCH_CHECK_NOT_IMPLEMENTED(part != DType::kF16, "tpu does not support dtype ComplexHalf");
  auto& g = ctx.g();
  auto [r, theta] = broadcast_pair(ctx, ctx.tensor(a.tensor(0)), ctx.tensor(a.tensor(1)));
  return {g.complex(g.binary(Op::kMul, r, g.unary(Op::kCos, theta)),
                    g.binary(Op::kMul, r, g.unary(Op::kSin, theta)))};
}

// _conj_physical(Tensor self): conjugated values, no conj bit; the identity on
// real dtypes.
ValueList conj_physical_rule(LoweringContext& ctx, const Args& a) {
  ir::Value x = ctx.tensor(a.tensor(0));
  if (!ir::is_complex(dtype(ctx, x))) return {x};
  return {conj(ctx.g(), x)};
}

// conj_physical.out(Tensor self, *, Tensor(a!) out): CPU's unary_op_impl_out
// (TensorIterator::unary_op: the out takes self's dtype, resized to its sizes).
ValueList conj_physical_out(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& out = a.tensor(1);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Found dtype ", out.scalar_type(),
              " but expected ", self.scalar_type());
  ir::Value value = conj_physical_rule(ctx, a)[0];
  resize_out(out, self.sizes());
  ctx.write(out, value);
  return {};
}

// conj_physical_(Tensor(a!) self): CompositeExplicitAutograd in ATen, whose
// body runs CPU's kernel stub directly (an internal assert on tpu); the
// identity on real dtypes.
ValueList conj_physical_inplace(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  if (self.is_complex()) ctx.write(self, conj_physical_rule(ctx, a)[0]);
  return {};
}

ValueList complex_abs_rule(LoweringContext& ctx, const Args& a) {
  return {complex_abs(ctx, ctx.tensor(a.tensor(0)))};
}

// sgn(z) = z / |z|, and 0 at 0 (ATen's sgn for complex).
ValueList sgn_rule(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value z = ctx.tensor(a.tensor(0));
  ir::Value m = complex_abs(ctx, z);
  ir::Value zero = full_like(ctx, m, 0);
  ir::Value is_zero = g.compare(ir::Cmp::kEQ, m, zero);
  ir::Value denom = g.complex(g.select(is_zero, full_like(ctx, m, 1), m), zero);
  return {g.select(is_zero, full_like(ctx, z, 0), g.binary(Op::kDiv, z, denom))};
}

// angle(z) = atan2(im, re) (std::arg), a real result.
ValueList angle_rule(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::Value z = ctx.tensor(a.tensor(0));
  return {g.binary(Op::kAtan2, g.imag(z), g.real(z))};
}

// reciprocal(z) = 1 / z.
ValueList reciprocal_rule(LoweringContext& ctx, const Args& a) {
  ir::Value z = ctx.tensor(a.tensor(0));
  return {ctx.g().binary(Op::kDiv, full_like(ctx, z, 1), z)};
}

// The StableHLO elementwise op itself (defined on complex values).
template <Op kOp>
ValueList elementwise(LoweringContext& ctx, const Args& a) {
  return {ctx.g().unary(kOp, ctx.tensor(a.tensor(0)))};
}

// ---------------------------------------------------------------- arithmetic

std::pair<ir::Value, ir::Value> complex_promoted(LoweringContext& ctx, const Args& a, DType* out) {
  *out = to_ir(result_type(a[0], a[1]));
  return broadcast_pair(ctx, operand(ctx, a[0], *out), operand(ctx, a[1], *out));
}

// add/sub.Tensor and .Scalar: self op other * alpha (any real or complex alpha).
ValueList complex_add_sub(LoweringContext& ctx, const Args& a, Op op) {
  DType dt;
  auto [x, y] = complex_promoted(ctx, a, &dt);
  if (a.size() > 2 && !a.is_none(2)) {
    const c10::Scalar alpha = a.scalar(2);
    TORCH_CHECK(ir::is_complex(dt) || !alpha.isComplex(),
                "For non-complex input tensors, argument alpha must not be a complex number.");
    // Always multiplied, 1 included: as CPU's a + alpha * b, a non-finite
    // b gives nan ((1+0j) * (-inf-infj) is nan+nanj), which NumPy agrees with.
    y = ctx.g().binary(Op::kMul, y, broadcast_to(ctx, ctx.scalar(alpha, dt), dims(ctx, y)));
  }
  return {ctx.g().binary(op, x, y)};
}

// div.Tensor / div.Scalar without rounding mode: complex true division
// (rounding modes are not defined for complex; CPU raises, so those declined
// calls reach the fallback and its error).
ValueList div_rule(LoweringContext& ctx, const Args& a) {
  DType dt;
  auto [x, y] = complex_promoted(ctx, a, &dt);
  return {ctx.g().binary(Op::kDiv, x, y)};
}

// ---------------------------------------------------------------- reductions

std::vector<int64_t> complex_reduction_dims(const std::optional<std::vector<int64_t>>& dim,
                                            int64_t rank) {
  std::vector<int64_t> out;
  if (!dim.has_value() || dim->empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dim) out.push_back(wrap_dim(d, std::max<int64_t>(rank, 1)));
  return out;
}

// sum / mean of a complex tensor (the result dtype is the input's, or the
// requested complex dtype; a real dtype request for a complex input is CPU's
// error, reached by declining).
ValueList sum_mean(LoweringContext& ctx, const at::Tensor& self,
                   const std::optional<std::vector<int64_t>>& dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype_arg, bool mean) {
  // A real input may get a complex dtype argument; a complex input into a real
  // dtype is CPU's error.
  DType out = to_ir(dtype_arg.value_or(self.scalar_type()));
  TORCH_CHECK(ir::is_complex(out) || !self.is_complex(), mean ? "mean" : "sum",
              "(): a complex input cannot be reduced into dtype ", to_aten(out));
  auto rdims = complex_reduction_dims(dim, self.dim());
  auto& g = ctx.g();
  ir::Value v = g.convert(ctx.tensor(self), out);
  ir::Value s = reduce(ctx, v, rdims, keepdim, ir::Reducer::kAdd);
  if (!mean) return {s};
  int64_t n = 1;
  for (int64_t d : rdims) n *= self.dim() == 0 ? 1 : self.size(d);
  // An empty reduction is 0 / 0 = NaN, as on CPU.
  return {g.binary(Op::kDiv, s, full_like(ctx, s, static_cast<double>(n)))};
}

// ---------------------------------------------------------------- registrations

RegisterLowering r_complex("complex", complex_rule);
RegisterLowering r_polar("polar", polar_rule);
RegisterLowering r_conj_physical("_conj_physical", conj_physical_rule);
// (conj_physical is CompositeImplicitAutograd over _conj_physical, but its
// out= overload has a CPU kernel of its own)
RegisterOutOnly r_conj_physical_out("conj_physical.out", conj_physical_out);
RegisterOutOnly r_conj_physical_inplace("conj_physical_", conj_physical_inplace);

// Rules written here for complex calls of ops lowered elsewhere for real dtypes.
RegisterComplex c_abs("abs", complex_abs_rule);
RegisterComplex c_sgn("sgn", sgn_rule);
RegisterComplex c_angle("angle", angle_rule);
RegisterComplex c_reciprocal("reciprocal", reciprocal_rule);
RegisterComplex c_exp("exp", elementwise<Op::kExp>);
RegisterComplex c_expm1("expm1", elementwise<Op::kExpm1>);
RegisterComplex c_log("log", elementwise<Op::kLog>);
RegisterComplex c_log1p("log1p", elementwise<Op::kLog1p>);
RegisterComplex c_sqrt("sqrt", elementwise<Op::kSqrt>);
RegisterComplex c_rsqrt("rsqrt", elementwise<Op::kRsqrt>);
RegisterComplex c_sin("sin", elementwise<Op::kSin>);
RegisterComplex c_cos("cos", elementwise<Op::kCos>);
RegisterComplex c_tanh("tanh", elementwise<Op::kTanh>);
RegisterComplex c_add("add.Tensor", [](LoweringContext& c, const Args& a) {
  return complex_add_sub(c, a, Op::kAdd);
});
RegisterComplex c_add_s("add.Scalar", [](LoweringContext& c, const Args& a) {
  return complex_add_sub(c, a, Op::kAdd);
});
RegisterComplex c_sub("sub.Tensor", [](LoweringContext& c, const Args& a) {
  return complex_add_sub(c, a, Op::kSub);
});
RegisterComplex c_sub_s("sub.Scalar", [](LoweringContext& c, const Args& a) {
  return complex_add_sub(c, a, Op::kSub);
});
RegisterComplex c_div("div.Tensor", div_rule);
RegisterComplex c_div_s("div.Scalar", div_rule);
// sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)
RegisterComplex c_sum_dim("sum.dim_IntList", [](LoweringContext& c, const Args& a) {
  return sum_mean(c, a.tensor(0), a.opt_ints(1), a.boolean(2), a.opt_dtype(3), false);
});
RegisterComplex c_sum("sum", [](LoweringContext& c, const Args& a) {
  return sum_mean(c, a.tensor(0), std::nullopt, false, a.opt_dtype(1), false);
});
RegisterComplex c_mean_dim("mean.dim", [](LoweringContext& c, const Args& a) {
  return sum_mean(c, a.tensor(0), a.opt_ints(1), a.boolean(2), a.opt_dtype(3), true);
});
RegisterComplex c_mean("mean", [](LoweringContext& c, const Args& a) {
  return sum_mean(c, a.tensor(0), std::nullopt, false, a.opt_dtype(1), true);
});

// Ops whose own rules handle complex values: they move, select or fill
// elements, or use only add/multiply/negate/compare-for-equality, all defined
// on StableHLO complex types; each is checked against CPU in
// tests/device/test_complex.py.
RegisterComplex c_complex("complex");
RegisterComplex c_polar("polar");
RegisterComplex c_conj_physical("_conj_physical");
RegisterComplex c_conj_physical_out("conj_physical.out");
RegisterComplex c_conj_physical_inplace("conj_physical_");
RegisterComplex c_neg("neg");
RegisterComplex c_mul("mul.Tensor");
RegisterComplex c_mul_s("mul.Scalar");
RegisterComplex c_fill("fill.Scalar");
RegisterComplex c_fill_t("fill.Tensor");
RegisterComplex c_zero("zero");
RegisterComplex c_where("where.self");
RegisterComplex c_cat("cat");
RegisterComplex c_flip("flip");
RegisterComplex c_roll("roll");
RegisterComplex c_repeat("repeat");
RegisterComplex c_constant_pad_nd("constant_pad_nd");
RegisterComplex c_eq("eq.Tensor");
RegisterComplex c_ne("ne.Tensor");
RegisterComplex c_eq_s("eq.Scalar");
RegisterComplex c_ne_s("ne.Scalar");
RegisterComplex c_masked_fill("masked_fill.Scalar");
RegisterComplex c_index_select("index_select");
// Products: dot_general multiplies complex values as CPU's kernels do (no
// conjugation; vdot, which conjugates, is left to the fallback).
RegisterComplex c_mm("mm");
RegisterComplex c_bmm("bmm");
RegisterComplex c_addmm("addmm");
RegisterComplex c_baddbmm("baddbmm");
RegisterComplex c_addbmm("addbmm");
RegisterComplex c_mv("mv");
RegisterComplex c_addmv("addmv");
RegisterComplex c_addr("addr");
RegisterComplex c_dot("dot");

}  // namespace

// The dtype views share the storage (as on CPU): a complex64 storage read as
// float32 (or back) is reinterpreted in place by LoweringContext (its slot
// takes the dtype of the latest reader), so writes through either alias are
// seen by the other. ATen's device-generic view kernels build the views.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", &at::native::view_as_real);
  m.impl("view_as_complex", &at::native::view_as_complex);
}

}  // namespace ttpu::aten
