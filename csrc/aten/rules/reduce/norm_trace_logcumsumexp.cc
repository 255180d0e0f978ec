// Lowerings of the reductions built from other reductions: the legacy norm
// overloads (torch.norm, delegated to linalg_vector_norm as ATen's own
// norm kernels do), trace, and logcumsumexp.
#include <cmath>

#include "aten/rules/elementwise/unary_util.h"
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// norm.ScalarOpt_dim(self, Scalar? p, int[1] dim, bool keepdim=False) and
// norm.ScalarOpt_dim_dtype(..., *, ScalarType dtype): ATen's norm is
// linalg_vector_norm with p defaulting to 2 (ReduceOps.cpp, norm_out); its
// errors are linalg_vector_norm's, as on CPU.
ValueList norm(LoweringContext& ctx, const Args& a, bool with_dtype) {
  std::vector<c10::IValue> args{a[0], a.is_none(1) ? c10::IValue(c10::Scalar(2.0)) : a[1], a[2],
                                a[3], with_dtype ? a[4] : c10::IValue()};
  return lowering_table().at("linalg_vector_norm")(ctx, Args(args));
}

// trace(Tensor self): the diagonal of a matrix read as a strided slice of the
// flattened matrix (elements 0, m + 1, 2(m + 1), ...), summed; integral and
// bool-free inputs sum to int64 as sum() does.
ValueList trace_rule(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  DType dt = to_ir(self.scalar_type());
  if (dt == DType::kBool) pointwise::not_implemented("trace", dt);
  DType out = ir::is_float(dt) ? dt : DType::kI64;
  auto& g = ctx.g();
  int64_t n = self.size(0), m = self.size(1), k = std::min(n, m);
  if (k == 0) return {g.constant(0, {out, {}})};
  ir::Value flat = g.reshape(ctx.tensor(self), {n * m});
  ir::Value diag = g.slice(flat, {0}, {(k - 1) * (m + 1) + 1}, {m + 1});
  diag = g.convert(g.convert(diag, out), acc_dtype(out));
  return {g.convert(reduce(ctx, diag, {0}, false, ir::Reducer::kAdd), out)};
}

// log(exp(a) + exp(b)) with the larger one factored out; -inf/-inf stays -inf.
ir::Value log_add_exp(LoweringContext& ctx, ir::Value a, ir::Value b) {
  auto& g = ctx.g();
  ir::Value m = g.binary(Op::kMax, a, b);
  ir::Value gap = g.unary(Op::kNeg, g.unary(Op::kAbs, g.binary(Op::kSub, a, b)));
  ir::Value r = g.binary(Op::kAdd, m, g.unary(Op::kLog1p, g.unary(Op::kExp, gap)));
  ir::Value same_inf =
      g.binary(Op::kAnd, g.compare(Cmp::kEQ, a, b),
               g.compare(Cmp::kEQ, g.unary(Op::kAbs, a), full_like(ctx, a, INFINITY)));
  return g.select(same_inf, a, r);
}

// _logcumsumexp(Tensor self, int dim): an inclusive scan with logaddexp as
// the combiner, by doubling (Hillis-Steele): step s combines each element
// with the one s before it (or -inf, the identity), so log2(n) steps.
ValueList logcumsumexp(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  DType dt = to_ir(self.scalar_type());
  if (!ir::is_float(dt)) pointwise::not_implemented("logcumsumexp_out_cpu", dt);
  int64_t dim = wrap_dim(a.integer(1), std::max<int64_t>(self.dim(), 1));
  auto& g = ctx.g();
  ir::Value x = g.convert(ctx.tensor(self), acc_dtype(dt));
  if (self.dim() == 0 || self.numel() == 0) return {g.convert(x, dt)};
  std::vector<int64_t> shape = dims(ctx, x);
  int64_t n = shape[dim];
  size_t rank = shape.size();
  ir::Value neg_inf = ctx.constant(-INFINITY, acc_dtype(dt));
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<int64_t> lo(rank, 0), hi(rank, 0), interior(rank, 0);
    std::vector<int64_t> limit = shape, zeros(rank, 0), strides(rank, 1);
    limit[dim] = n - s;
    lo[dim] = s;
    ir::Value head = g.slice(x, zeros, limit, strides);
    ir::Value shifted = g.pad(head, neg_inf, lo, hi, interior);
    x = log_add_exp(ctx, x, shifted);
  }
  return {g.convert(x, dt)};
}

RegisterLowering kNormTraceLogcumsumexpRules[] = {
    {"norm.ScalarOpt_dim", [](LoweringContext& c, const Args& a) { return norm(c, a, false); }},
    {"norm.ScalarOpt_dim_dtype",
     [](LoweringContext& c, const Args& a) { return norm(c, a, true); }},
    {"trace", trace_rule},
    {"_logcumsumexp", logcumsumexp},
};

}  // namespace
}  // namespace ttpu::aten
