// Lowerings of ATen's statistical reductions and scans: var/std (and their
// _mean pairs), logsumexp, linalg_vector_norm, nansum, cumsum/cumprod.
//
// All accumulate in f32 for bf16/f16 inputs and round once at the end, as
// ATen's CPU kernels do.
#include <cmath>
#include <limits>
#include <sstream>

#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

// var/std over `rdims`: (variance or standard deviation, mean), both in the
// input dtype. Two passes (mean, then squared deviations) as ATen's CPU kernel
// (Welford) is accurate where sum(x^2) - n*mean^2 is not. The divisor is
// max(N - correction, 0) (ATen's std_var_kernel): N <= correction gives inf or
// NaN, with no warning here.
std::pair<ir::Value, ir::Value> var_mean(LoweringContext& ctx, const Args& a, bool take_sqrt,
                                         const char* name) {
  const at::Tensor& self = a.tensor(0);
  // ATen names var and std together in this error, var_mean/std_mean alone.
  const std::string who = name == std::string("var") || name == std::string("std")
                              ? std::string("std and var")
                              : std::string(name);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), who,
              " only support floating point and complex dtypes");
  auto rdims = reduction_dims(a.opt_ints(1), self.dim());
  double correction = a.is_none(2) ? 1.0 : a.scalar(2).toDouble();
  bool keepdim = a.boolean(3);
  auto& g = ctx.g();
  DType out = to_ir(self.scalar_type());
  ir::Value x = g.convert(ctx.tensor(self), acc_dtype(out));
  ir::Value mean = mean_broadcast(ctx, x, rdims);
  ir::Value dev = g.binary(Op::kSub, x, mean);
  ir::Value ss = reduce(ctx, g.binary(Op::kMul, dev, dev), rdims, keepdim, Reducer::kAdd);
  double n = static_cast<double>(reduced_numel(self.sizes().vec(), rdims));
  // ATen's warning (ReduceOps.cpp, std_var_all / std_var_out); self.numel() is
  // the input numel divided by the output numel only when all dims reduce,
  // so it is computed from the reduced dims.
  if (n - correction <= 0) {
    TORCH_WARN(name,
               "(): degrees of freedom is <= 0. Correction should be strictly less than "
               "the reduction factor (input numel divided by output numel).");
  }
  // The divisor is structural (from the shape and an almost always 0 or 1 correction).
  ir::Value var = g.binary(Op::kDiv, ss, full_like(ctx, ss, std::max(n - correction, 0.0)));
  if (take_sqrt) var = g.unary(Op::kSqrt, var);
  std::vector<int64_t> mean_shape =
      keepdim ? keepdim_shape(self.sizes().vec(), rdims) : dims(ctx, var);
  ir::Value m = reduce(ctx, x, rdims, keepdim, Reducer::kAdd);
  m = g.binary(Op::kDiv, m, full_like(ctx, m, n));
  return {g.convert(var, out), g.convert(g.reshape(m, mean_shape), out)};
}

// logsumexp(self, dim, keepdim): max-shifted so large inputs do not overflow;
// an infinite max is replaced by 0 (ATen's logsumexp_out_impl) so rows of
// -inf give -inf and rows with +inf give +inf instead of NaN. Integer inputs
// give the default float dtype.
ValueList logsumexp(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  auto rdims = reduction_dims(a.ints(1), self.dim());
  bool keepdim = a.boolean(2);
  auto& g = ctx.g();
  DType out = at::isFloatingType(self.scalar_type())
                  ? to_ir(self.scalar_type())
                  : to_ir(c10::get_default_dtype_as_scalartype());
  ir::Value x = g.convert(ctx.tensor(self), acc_dtype(out));
  ir::Value m = reduce(ctx, x, rdims, /*keepdim=*/true, Reducer::kMax);
  ir::Value inf = full_like(ctx, m, std::numeric_limits<double>::infinity());
  m = g.select(g.compare(ir::Cmp::kEQ, g.unary(Op::kAbs, m), inf), full_like(ctx, m, 0), m);
  ir::Value shifted = g.binary(Op::kSub, x, broadcast_to(ctx, m, dims(ctx, x)));
  ir::Value s = reduce(ctx, g.unary(Op::kExp, shifted), rdims, keepdim, Reducer::kAdd);
  ir::Value r = g.binary(Op::kAdd, g.unary(Op::kLog, s), g.reshape(m, dims(ctx, s)));
  return {g.convert(r, out)};
}

std::string ord_string(double ord) {
  std::ostringstream s;
  s << ord;
  return s.str();
}

// linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
// (sum |x|^ord)^(1/ord), with ord 0 (count of nonzeros), 1, 2 and +-inf
// special-cased as ATen does (LinearAlgebra.cpp, linalg_vector_norm). Errors
// and their text follow ATen.
ValueList vector_norm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  double ord = a.scalar(1).toDouble();
  auto dim = a.opt_ints(2);
  bool keepdim = a.boolean(3);
  auto opt_dtype = a.opt_dtype(4);
  c10::ScalarType in_type = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(in_type) || at::isComplexType(in_type),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
              in_type);
  if (opt_dtype.has_value()) {
    TORCH_CHECK(at::isFloatingType(*opt_dtype) || at::isComplexType(*opt_dtype),
                "linalg.vector_norm: dtype should be floating point or complex, but got ",
                *opt_dtype);
    TORCH_CHECK(c10::promoteTypes(in_type, *opt_dtype) == *opt_dtype,
                "linalg.vector_norm: the dtype of the input (", in_type,
                ") should be "
                "convertible without narrowing to the specified dtype (",
                *opt_dtype, ")");
  }
  auto rdims = reduction_dims(dim, self.dim());
  if (self.numel() == 0 && (ord < 0 || std::isinf(ord))) {
    // No identity for max/min/negative powers over an empty dim.
    TORCH_CHECK(dim.has_value() && !dim->empty(), "linalg.vector_norm cannot compute the ",
                ord_string(ord),
                " norm on an empty tensor because the operation does not "
                "have an identity");
    for (int64_t d : *dim) {
      TORCH_CHECK(self.dim() == 0 || self.size(d) != 0, "linalg.vector_norm cannot compute the ",
                  ord_string(ord), " norm on the dimension ", d,
                  "because this dimension is "
                  "empty and the operation does not have an identity");
    }
  }
  auto& g = ctx.g();
  DType out = to_ir(opt_dtype.value_or(in_type));
  ir::Value x = g.convert(g.convert(ctx.tensor(self), out), acc_dtype(out));
  ir::Value ax = g.unary(Op::kAbs, x);
  ir::Value r;
  if (std::isinf(ord)) {
    r = reduce(ctx, ax, rdims, keepdim, ord > 0 ? Reducer::kMax : Reducer::kMin);
  } else if (ord == 0) {
    ir::Value nz = g.convert(g.compare(ir::Cmp::kNE, ax, full_like(ctx, ax, 0)), dtype(ctx, ax));
    r = reduce(ctx, nz, rdims, keepdim, Reducer::kAdd);
  } else if (ord == 1) {
    r = reduce(ctx, ax, rdims, keepdim, Reducer::kAdd);
  } else if (ord == 2) {
    r = g.unary(Op::kSqrt, reduce(ctx, g.binary(Op::kMul, ax, ax), rdims, keepdim, Reducer::kAdd));
  } else {
    ir::Value p = g.constant(ord, {dtype(ctx, ax), {}});
    ir::Value powed = g.binary(Op::kPow, ax, broadcast_to(ctx, p, dims(ctx, ax)));
    r = reduce(ctx, powed, rdims, keepdim, Reducer::kAdd);
    r = g.binary(Op::kPow, r, full_like(ctx, r, 1.0 / ord));
  }
  return {g.convert(r, out)};
}

// nansum(self, dim=None, keepdim=False, *, dtype=None): sum with NaN read as 0.
ValueList nansum(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  auto rdims = reduction_dims(a.opt_ints(1), self.dim());
  auto opt_dtype = a.opt_dtype(3);
  DType out = opt_dtype.has_value()                          ? to_ir(*opt_dtype)
              : at::isIntegralType(self.scalar_type(), true) ? DType::kI64
                                                             : to_ir(self.scalar_type());
  auto& g = ctx.g();
  ir::Value x = g.convert(g.convert(ctx.tensor(self), out), acc_dtype(out));
  if (ir::is_float(dtype(ctx, x))) {
    x = g.select(g.compare(ir::Cmp::kNE, x, x), full_like(ctx, x, 0), x);
  }
  return {g.convert(reduce(ctx, x, rdims, a.boolean(2), Reducer::kAdd), out)};
}

// An inclusive scan along `dim` by Hillis-Steele doubling: log2(n) steps of
// x + (x shifted by 2^k, the identity shifted in), O(n log n) work and no
// sequential loop. Floating results may differ from ATen's sequential sum in
// the last bits.
ir::Value scan(LoweringContext& ctx, ir::Value x, int64_t dim, Reducer reducer) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, x);
  const int64_t n = shape[dim];
  const int64_t rank = static_cast<int64_t>(shape.size());
  ir::Value identity = ctx.constant(reducer == Reducer::kAdd ? 0 : 1, dtype(ctx, x));
  Op op = reducer == Reducer::kAdd ? Op::kAdd : Op::kMul;
  for (int64_t k = 1; k < n; k *= 2) {
    std::vector<int64_t> start(rank, 0), limit = shape, strides(rank, 1);
    limit[dim] = n - k;
    std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
    low[dim] = k;
    ir::Value shifted = g.pad(g.slice(x, start, limit, strides), identity, low, high, interior);
    x = g.binary(op, x, shifted);
  }
  return x;
}

// cumsum/cumprod(self, dim, *, dtype=None): integral and bool inputs give int64.
ValueList cumulative(LoweringContext& ctx, const Args& a, Reducer reducer) {
  const at::Tensor& self = a.tensor(0);
  int64_t dim = wrap_dim(a.integer(1), std::max<int64_t>(self.dim(), 1));
  auto opt_dtype = a.opt_dtype(2);
  DType out = opt_dtype.has_value()                          ? to_ir(*opt_dtype)
              : at::isIntegralType(self.scalar_type(), true) ? DType::kI64
                                                             : to_ir(self.scalar_type());
  auto& g = ctx.g();
  ir::Value x = g.convert(g.convert(ctx.tensor(self), out), acc_dtype(out));
  if (self.dim() == 0 || self.numel() == 0) return {g.convert(x, out)};
  return {g.convert(scan(ctx, x, dim, reducer), out)};
}

// var.correction / std.correction / var_mean.correction / std_mean.correction
// (Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False)
RegisterLowering r_var("var.correction", [](LoweringContext& c, const Args& a) {
  return ValueList{var_mean(c, a, false, "var").first};
});
RegisterLowering r_std("std.correction", [](LoweringContext& c, const Args& a) {
  return ValueList{var_mean(c, a, true, "std").first};
});
RegisterLowering r_var_mean("var_mean.correction", [](LoweringContext& c, const Args& a) {
  auto [v, m] = var_mean(c, a, false, "var_mean");
  return ValueList{v, m};
});
RegisterLowering r_std_mean("std_mean.correction", [](LoweringContext& c, const Args& a) {
  auto [s, m] = var_mean(c, a, true, "std_mean");
  return ValueList{s, m};
});
RegisterLowering r_logsumexp("logsumexp", logsumexp);
RegisterLowering r_vector_norm("linalg_vector_norm", vector_norm);
RegisterLowering r_nansum("nansum", nansum);
RegisterLowering r_cumsum("cumsum", [](LoweringContext& c, const Args& a) {
  return cumulative(c, a, Reducer::kAdd);
});
RegisterLowering r_cumprod("cumprod", [](LoweringContext& c, const Args& a) {
  return cumulative(c, a, Reducer::kMul);
});

}  // namespace
}  // namespace ttpu::aten
