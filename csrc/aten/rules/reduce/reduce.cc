// Lowerings of ATen's plain reductions: sum, mean, prod, amax/amin, max/min
// (whole tensor and along a dim with indices), argmax/argmin, aminmax, any/all.
//
// Output dtypes follow ATen's CPU kernels (ReduceOps.cpp): sum and prod of
// integral or bool inputs return int64; mean needs a floating input or dtype;
// bf16/f16 inputs accumulate in f32 and round once at the end. Reductions
// without an identity (max, amax, argmax...) raise ATen's errors on an empty
// dim, checked on the host before any IR is built.
#include <ATen/native/ReduceOpsUtils.h>

#include <limits>

#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Reducer;
using ValueList = std::vector<ir::Value>;

// sum/prod's output dtype (ATen's get_dtype_from_self): the requested dtype,
// else int64 for integral and bool inputs, else the input's dtype.
DType sum_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return to_ir(*dtype);
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return DType::kI64;
  return to_ir(self.scalar_type());
}

// The input cast to the output dtype (ATen casts before reducing), reduced in
// the accumulate dtype, then rounded to the output dtype.
ir::Value accumulate(LoweringContext& ctx, const at::Tensor& self,
                     const std::vector<int64_t>& rdims, bool keepdim, Reducer reducer, DType out) {
  ir::Value v = ctx.g().convert(ctx.tensor(self), out);
  v = ctx.g().convert(v, acc_dtype(out));
  return ctx.g().convert(reduce(ctx, v, rdims, keepdim, reducer), out);
}

ValueList sum_dims(LoweringContext& ctx, const at::Tensor& self,
                   const std::optional<std::vector<int64_t>>& dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  auto rdims = reduction_dims(dim, self.dim());
  return {accumulate(ctx, self, rdims, keepdim, Reducer::kAdd, sum_dtype(self, dtype))};
}

ValueList prod_dims(LoweringContext& ctx, const at::Tensor& self, std::vector<int64_t> rdims,
                    bool keepdim, std::optional<c10::ScalarType> dtype) {
  return {accumulate(ctx, self, rdims, keepdim, Reducer::kMul, sum_dtype(self, dtype))};
}

ValueList mean_dims(LoweringContext& ctx, const at::Tensor& self,
                    const std::optional<std::vector<int64_t>>& dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  // ATen's message (ReduceOps.cpp, mean_meta).
  TORCH_CHECK(dtype.has_value() || at::isFloatingType(self.scalar_type()) ||
                  at::isComplexType(self.scalar_type()),
              "mean(): could not infer output dtype. Input dtype must be either a floating "
              "point or complex dtype. Got: ",
              c10::toString(self.scalar_type()));
  DType out = dtype.has_value() ? to_ir(*dtype) : to_ir(self.scalar_type());
  TORCH_CHECK(ir::is_float(out),
              "mean(): could not infer output dtype. Optional dtype must "
              "be either a floating point or complex dtype. Got: ",
              c10::toString(to_aten(out)));
  auto rdims = reduction_dims(dim, self.dim());
  auto& g = ctx.g();
  ir::Value v = g.convert(g.convert(ctx.tensor(self), out), acc_dtype(out));
  ir::Value s = reduce(ctx, v, rdims, keepdim, Reducer::kAdd);
  double n = static_cast<double>(reduced_numel(self.sizes().vec(), rdims));
  // An empty reduction is 0 / 0 = NaN, as on CPU.
  return {g.convert(g.binary(ir::Op::kDiv, s, full_like(ctx, s, n)), out)};
}

// The lowest (for max) or highest (for min) value of `dt`: the identity of the
// reduction, and the initial value of argmax's running best.
ir::Value extreme(LoweringContext& ctx, DType dt, bool lowest) {
  if (ir::is_float(dt)) {
    double inf = std::numeric_limits<double>::infinity();
    return ctx.constant(lowest ? -inf : inf, dt);
  }
  if (dt == DType::kBool) return ctx.constant(lowest ? 0 : 1, dt);
  if (dt == DType::kU64) return ctx.g().constant_int(lowest ? 0 : -1, {dt, {}});
  if (dt == DType::kI64) {
    return ctx.g().constant_int(
        lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(),
        {dt, {}});
  }
  int64_t bits = 8 * ir::byte_size(dt);
  if (ir::is_unsigned(dt)) {
    return ctx.g().constant_int(lowest ? 0 : (int64_t{1} << bits) - 1, {dt, {}});
  }
  int64_t max = (int64_t{1} << (bits - 1)) - 1;
  return ctx.g().constant_int(lowest ? -max - 1 : max, {dt, {}});
}

// amax/amin: errors on an empty reduced dim (no identity), NaN propagates
// (stablehlo.maximum/minimum propagate NaN, as ATen's max does).
ValueList extremum(LoweringContext& ctx, const at::Tensor& self, const std::vector<int64_t>& dim,
                   bool keepdim, bool is_max) {
  if (self.numel() == 0) {
    at::native::zero_numel_check_dims(self, dim, is_max ? "amax()" : "amin()");
  }
  auto rdims = reduction_dims(dim, self.dim());
  return {reduce(ctx, ctx.tensor(self), rdims, keepdim, is_max ? Reducer::kMax : Reducer::kMin)};
}

// max()/min() of the whole tensor.
ValueList extremum_all(LoweringContext& ctx, const at::Tensor& self, bool is_max) {
  TORCH_CHECK(self.numel() > 0, is_max ? "max()" : "min()",
              ": Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  auto rdims = reduction_dims(std::nullopt, self.dim());
  return {reduce(ctx, ctx.tensor(self), rdims, false, is_max ? Reducer::kMax : Reducer::kMin)};
}

// (values, int64 indices) of the best element along `dim` of `v`, by the
// argmax/argmin reducer: NaN counts as the extreme, ties keep the first index.
std::pair<ir::Value, ir::Value> arg_reduce(LoweringContext& ctx, ir::Value v, int64_t dim,
                                           bool keepdim, bool is_max) {
  auto& g = ctx.g();
  std::vector<int64_t> shape = dims(ctx, v);
  DType dt = dtype(ctx, v);
  // Bool values compare as 0/1 bytes (the reducer's compare wants numbers).
  ir::Value values = dt == DType::kBool ? g.convert(v, DType::kU8) : v;
  DType vdt = dtype(ctx, values);
  if (shape.empty()) return {v, g.constant_int(0, {DType::kI64, {}})};
  ir::Value idx = g.iota({DType::kI64, shape}, dim);
  // The initial index loses every tie, so a row of all -inf still names its first element.
  ir::Value init_idx = g.constant_int(std::numeric_limits<int64_t>::max(), {DType::kI64, {}});
  auto r = g.reduce({values, idx}, {extreme(ctx, vdt, is_max), init_idx}, {dim},
                    is_max ? Reducer::kArgMax : Reducer::kArgMin);
  ir::Value best = g.convert(r[0], dt);
  ir::Value index = r[1];
  if (keepdim) {
    std::vector<int64_t> kd = keepdim_shape(shape, {dim});
    best = g.reshape(best, kd);
    index = g.reshape(index, kd);
  }
  return {best, index};
}

// max.dim / min.dim: (values, indices).
ValueList extremum_dim(LoweringContext& ctx, const at::Tensor& self, int64_t dim, bool keepdim,
                       bool is_max) {
  const char* name = is_max ? "max()" : "min()";
  int64_t d = wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.numel() == 0) at::native::zero_numel_check_dims(self, dim, name);
  auto [values, indices] = arg_reduce(ctx, ctx.tensor(self), d, keepdim, is_max);
  return {values, indices};
}

// argmax/argmin: dim None flattens (keepdim then gives all-ones dims).
ValueList arg_extremum(LoweringContext& ctx, const at::Tensor& self, std::optional<int64_t> dim,
                       bool keepdim, bool is_max) {
  const char* name = is_max ? "argmax()" : "argmin()";
  TORCH_CHECK(self.scalar_type() != at::kBool, name, ": does not support bool input");
  if (self.numel() == 0) {
    // ATen raises IndexError for both cases (TensorCompare.cpp, argmax_argmin_impl).
    TORCH_CHECK_INDEX(dim.has_value(), name,
                      ": Expected reduction dim to be specified for input.numel() == 0.");
    at::native::zero_numel_check_dims(self, *dim, name);
  }
  ir::Value v = ctx.tensor(self);
  if (dim.has_value()) {
    // TensorIterator's reduction dim mask is 64 bits (ATen's message).
    TORCH_CHECK(self.dim() <= 64, "only tensors with up to 64 dims are supported");
    int64_t d = wrap_dim(*dim, std::max<int64_t>(self.dim(), 1));
    return {arg_reduce(ctx, v, d, keepdim, is_max).second};
  }
  v = ctx.g().reshape(v, {self.numel()});
  ir::Value index = arg_reduce(ctx, v, 0, false, is_max).second;
  if (keepdim) index = ctx.g().reshape(index, std::vector<int64_t>(self.dim(), 1));
  return {index};
}

// aminmax: (min, max), optionally along one dim.
ValueList aminmax(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  std::optional<int64_t> dim = a.opt_integer(1);
  bool keepdim = a.boolean(2);
  std::vector<int64_t> rdims;
  if (dim.has_value()) {
    if (self.numel() == 0) at::native::zero_numel_check_dims(self, *dim, "aminmax");
    rdims = reduction_dims(std::vector<int64_t>{*dim}, self.dim());
  } else {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension "
                "as the operation has no identity.");
    rdims = reduction_dims(std::nullopt, self.dim());
  }
  ir::Value v = ctx.tensor(self);
  ir::Value lo = reduce(ctx, v, rdims, keepdim, Reducer::kMin);
  ir::Value hi = reduce(ctx, v, rdims, keepdim, Reducer::kMax);
  if (!dim.has_value() && keepdim) {
    // ATen keeps every dim as size 1 when no dim is given.
    std::vector<int64_t> ones(self.dim(), 1);
    lo = ctx.g().reshape(lo, ones);
    hi = ctx.g().reshape(hi, ones);
  }
  return {lo, hi};
}

// any/all: a bool result (uint8 for a uint8 input, as ATen keeps it); NaN is true.
ValueList any_all(LoweringContext& ctx, const at::Tensor& self, const std::vector<int64_t>& rdims,
                  bool keepdim, bool is_any) {
  ir::Value v = ctx.tensor(self);
  if (dtype(ctx, v) != DType::kBool) v = ctx.g().compare(ir::Cmp::kNE, v, full_like(ctx, v, 0));
  ir::Value r = reduce(ctx, v, rdims, keepdim, is_any ? Reducer::kOr : Reducer::kAnd);
  DType out = self.scalar_type() == at::kByte ? DType::kU8 : DType::kBool;
  return {ctx.g().convert(r, out)};
}

// count_nonzero.dim_IntList: int64 count of elements != 0 (an empty list counts all).
ValueList count_nonzero(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  auto rdims = reduction_dims(a.ints(1), self.dim());
  ir::Value v = ctx.tensor(self);
  ir::Value nz = ctx.g().compare(ir::Cmp::kNE, v, full_like(ctx, v, 0));
  return {reduce(ctx, ctx.g().convert(nz, DType::kI64), rdims, false, Reducer::kAdd)};
}

// --- registrations (functional schemas; the in-place and out= variants follow)

// sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)
RegisterLowering r_sum_dim("sum.dim_IntList", [](LoweringContext& c, const Args& a) {
  return sum_dims(c, a.tensor(0), a.opt_ints(1), a.boolean(2), a.opt_dtype(3));
});
// sum(Tensor self, *, ScalarType? dtype=None)
RegisterLowering r_sum("sum", [](LoweringContext& c, const Args& a) {
  return sum_dims(c, a.tensor(0), std::nullopt, false, a.opt_dtype(1));
});
// mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)
RegisterLowering r_mean_dim("mean.dim", [](LoweringContext& c, const Args& a) {
  return mean_dims(c, a.tensor(0), a.opt_ints(1), a.boolean(2), a.opt_dtype(3));
});
// mean(Tensor self, *, ScalarType? dtype=None)
RegisterLowering r_mean("mean", [](LoweringContext& c, const Args& a) {
  return mean_dims(c, a.tensor(0), std::nullopt, false, a.opt_dtype(1));
});
// prod(Tensor self, *, ScalarType? dtype=None)
RegisterLowering r_prod("prod", [](LoweringContext& c, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  return prod_dims(c, self, reduction_dims(std::nullopt, self.dim()), false, a.opt_dtype(1));
});
// prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None)
RegisterLowering r_prod_dim("prod.dim_int", [](LoweringContext& c, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  auto rdims = reduction_dims(std::vector<int64_t>{a.integer(1)}, self.dim());
  return prod_dims(c, self, rdims, a.boolean(2), a.opt_dtype(3));
});
// amax/amin(Tensor self, int[1] dim=[], bool keepdim=False)
RegisterLowering r_amax("amax", [](LoweringContext& c, const Args& a) {
  return extremum(c, a.tensor(0), a.ints(1), a.boolean(2), true);
});
RegisterLowering r_amin("amin", [](LoweringContext& c, const Args& a) {
  return extremum(c, a.tensor(0), a.ints(1), a.boolean(2), false);
});
RegisterLowering r_max("max", [](LoweringContext& c, const Args& a) {
  return extremum_all(c, a.tensor(0), true);
});
RegisterLowering r_min("min", [](LoweringContext& c, const Args& a) {
  return extremum_all(c, a.tensor(0), false);
});
// max.dim/min.dim(Tensor self, int dim, bool keepdim=False) -> (values, indices)
RegisterLowering r_max_dim("max.dim", [](LoweringContext& c, const Args& a) {
  return extremum_dim(c, a.tensor(0), a.integer(1), a.boolean(2), true);
});
RegisterLowering r_min_dim("min.dim", [](LoweringContext& c, const Args& a) {
  return extremum_dim(c, a.tensor(0), a.integer(1), a.boolean(2), false);
});
// argmax/argmin(Tensor self, int? dim=None, bool keepdim=False)
RegisterLowering r_argmax("argmax", [](LoweringContext& c, const Args& a) {
  return arg_extremum(c, a.tensor(0), a.opt_integer(1), a.boolean(2), true);
});
RegisterLowering r_argmin("argmin", [](LoweringContext& c, const Args& a) {
  return arg_extremum(c, a.tensor(0), a.opt_integer(1), a.boolean(2), false);
});
RegisterLowering r_aminmax("aminmax", aminmax);
// any/all(Tensor self); .dim(Tensor self, int dim, bool keepdim);
// .dims(Tensor self, int[]? dim, bool keepdim)
ValueList any_all_all(LoweringContext& c, const Args& a, bool is_any) {
  const at::Tensor& self = a.tensor(0);
  return any_all(c, self, reduction_dims(std::nullopt, self.dim()), false, is_any);
}
ValueList any_all_dim(LoweringContext& c, const Args& a, bool is_any) {
  const at::Tensor& self = a.tensor(0);
  auto rdims = reduction_dims(std::vector<int64_t>{a.integer(1)}, self.dim());
  return any_all(c, self, rdims, a.boolean(2), is_any);
}
// .dims: None reduces every dim but, unlike sum, an empty list reduces none.
ValueList any_all_dims(LoweringContext& c, const Args& a, bool is_any) {
  const at::Tensor& self = a.tensor(0);
  auto dim = a.opt_ints(1);
  auto rdims =
      dim.has_value() && dim->empty() ? std::vector<int64_t>{} : reduction_dims(dim, self.dim());
  return any_all(c, self, rdims, a.boolean(2), is_any);
}
RegisterLowering r_any("any",
                       [](LoweringContext& c, const Args& a) { return any_all_all(c, a, true); });
RegisterLowering r_all("all",
                       [](LoweringContext& c, const Args& a) { return any_all_all(c, a, false); });
RegisterLowering r_any_dim("any.dim", [](LoweringContext& c, const Args& a) {
  return any_all_dim(c, a, true);
});
RegisterLowering r_all_dim("all.dim", [](LoweringContext& c, const Args& a) {
  return any_all_dim(c, a, false);
});
RegisterLowering r_any_dims("any.dims", [](LoweringContext& c, const Args& a) {
  return any_all_dims(c, a, true);
});
RegisterLowering r_all_dims("all.dims", [](LoweringContext& c, const Args& a) {
  return any_all_dims(c, a, false);
});
RegisterLowering r_count_nonzero("count_nonzero.dim_IntList", count_nonzero);

}  // namespace
}  // namespace ttpu::aten
