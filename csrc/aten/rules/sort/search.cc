// Lowerings of the membership and sorted-search ops: isin, bucketize and
// searchsorted.
//
// All compare every value with every candidate (a [values, candidates]
// comparison reduced over the candidates) instead of a binary search: no
// data-dependent control flow, O(n * m) work. For a sorted sequence, "the
// insertion point" is the number of entries the value belongs after, which is
// what ATen's binary search returns, NaN included: its comparisons are
// !(entry >= value) (left) and !(entry > value) (right), both true for a NaN
// value, so a NaN goes to the end, as here.
#include <algorithm>

#include "aten/rules/elementwise/unary_util.h"
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::Cmp;
using ir::DType;
using ValueList = std::vector<ir::Value>;

// A value of shape `s` with one dim of size `n` added at the end, broadcast.
ir::Value with_last(LoweringContext& ctx, ir::Value v, int64_t n) {
  std::vector<int64_t> shape = dims(ctx, v);
  std::vector<int64_t> bd;
  for (size_t k = 0; k < shape.size(); ++k) bd.push_back(static_cast<int64_t>(k));
  shape.push_back(n);
  return ctx.g().broadcast_in_dim(v, shape, bd);
}

// isin(elements, test_elements, *, assume_unique=False, invert=False) for the
// Tensor/Tensor, Tensor/Scalar and Scalar/Tensor overloads.
ValueList isin(LoweringContext& ctx, const Args& a) {
  const bool invert = a.boolean(3);
  // CPU's isin has no bool kernel for either operand (an empty one included).
  auto is_bool = [](const c10::IValue& v) {
    return v.isTensor() ? v.toTensor().scalar_type() == at::kBool : v.isBool();
  };
  TORCH_CHECK(!is_bool(a[0]) && !is_bool(a[1]),
              "Unsupported input type encountered for isin(): Bool");
  DType dt = to_ir(result_type(a[0], a[1]));
  auto& g = ctx.g();
  ir::Value e = operand(ctx, a[0], dt);
  ir::Value t = operand(ctx, a[1], dt);
  std::vector<int64_t> out = dims(ctx, e);
  int64_t ne = 1, nt = 1;
  for (int64_t s : out) ne *= s;
  for (int64_t s : dims(ctx, t)) nt *= s;
  if (ne == 0 || nt == 0) return {g.constant(invert ? 1 : 0, {DType::kBool, out})};
  ir::Value ev = with_last(ctx, g.reshape(e, {ne}), nt);
  ir::Value tv = g.broadcast_in_dim(g.reshape(t, {nt}), {ne, nt}, {1});
  ir::Value hit = reduce(ctx, g.compare(Cmp::kEQ, ev, tv), {1}, false, ir::Reducer::kOr);
  if (invert) hit = g.unary(ir::Op::kNot, hit);
  return {g.reshape(hit, out)};
}

// The insertion points of `values` (shape [lead..., m] or any shape when
// `seq` is 1-d) in `seq` ([lead..., k], sorted along the last dim).
ir::Value insertion_points(LoweringContext& ctx, ir::Value seq, ir::Value values, bool right,
                           DType out) {
  auto& g = ctx.g();
  std::vector<int64_t> sshape = dims(ctx, seq);
  std::vector<int64_t> vshape = dims(ctx, values);
  const int64_t k = sshape.back();
  ir::Value v = with_last(ctx, values, k);
  std::vector<int64_t> pair = vshape;
  pair.push_back(k);
  std::vector<int64_t> bd;
  if (sshape.size() == 1) {
    bd = {static_cast<int64_t>(pair.size()) - 1};
  } else {
    for (size_t i = 0; i + 1 < sshape.size(); ++i) bd.push_back(static_cast<int64_t>(i));
    bd.push_back(static_cast<int64_t>(pair.size()) - 1);
  }
  ir::Value s = g.broadcast_in_dim(seq, pair, bd);
  // entry belongs before the value: !(entry >= value) / !(entry > value).
  ir::Value before = g.unary(ir::Op::kNot, g.compare(right ? Cmp::kGT : Cmp::kGE, s, v));
  ir::Value count = reduce(ctx, g.convert(before, DType::kI64),
                           {static_cast<int64_t>(vshape.size())}, false, ir::Reducer::kAdd);
  return g.convert(count, out);
}

// searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter) for
// the Tensor and Scalar overloads. Checks and messages from ATen's
// searchsorted_pre_check (Bucketization.cpp / BucketizationUtils.h).
ValueList searchsorted(LoweringContext& ctx, const Args& a) {
  const at::Tensor& seq = a.tensor(0);
  const bool out_int32 = a.boolean(2);
  bool right = a.boolean(3);
  std::optional<std::string> side;
  if (!a.is_none(4)) side = a[4].toStringRef();
  std::optional<at::Tensor> sorter = a.opt_tensor(5);
  if (side.has_value()) {
    TORCH_CHECK(*side == "left" || *side == "right",
                "torch.searchsorted(): side can only be "
                "'left' or 'right' but got ",
                *side);
    TORCH_CHECK(!right || *side == "right",
                "torch.searchsorted(): side and right can't be set "
                "to opposites, got side of ",
                *side, " while right was True");
    right = *side == "right";
  }
  TORCH_CHECK(seq.dim() != 0,
              "torch.searchsorted(): boundaries tensor should have positive "
              "dimension, but got 0 dimension");
  std::vector<int64_t> vshape;
  if (a[1].isTensor()) vshape = a.tensor(1).sizes().vec();
  if (seq.dim() > 1) {
    bool ok = static_cast<int64_t>(vshape.size()) == seq.dim();
    for (int64_t i = 0; ok && i + 1 < seq.dim(); ++i) ok = vshape[i] == seq.size(i);
    TORCH_CHECK(ok,
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first "
                "N-1 dimensions of boundaries tensor and input value tensor must match, but we "
                "got boundaries tensor ",
                seq.sizes(), " and input value tensor ", c10::IntArrayRef(vshape));
  }
  if (sorter.has_value()) {
    TORCH_CHECK(sorter->scalar_type() == at::kLong,
                "torch.searchsorted(): sorter must be a "
                "tensor of long dtype but got dtype ",
                sorter->scalar_type());
    TORCH_CHECK(sorter->sizes() == seq.sizes(),
                "torch.searchsorted(): boundary and sorter must "
                "have the same size, but got boundary tensor ",
                seq.sizes(), "and got sorter tensor ", sorter->sizes());
  }
  DType dt = to_ir(result_type(a[0], a[1]));
  // CPU's kernel dispatches on the common dtype and has no bool instance.
  TORCH_CHECK_NOT_IMPLEMENTED(dt != DType::kBool,
                              "\"searchsorted_out_cpu\" not implemented for 'Bool'");
  auto& g = ctx.g();
  ir::Value s = g.convert(ctx.tensor(seq), dt);
  if (sorter.has_value() && seq.numel() > 0) {
    // seq reordered by sorter along the last dim (take_along_dim).
    std::vector<c10::IValue> args{seq, static_cast<int64_t>(seq.dim() - 1), *sorter, false};
    s = g.convert(lowering_table().at("gather")(ctx, Args(args))[0], dt);
  }
  ir::Value v = operand(ctx, a[1], dt);
  DType out = out_int32 ? DType::kI32 : DType::kI64;
  if (seq.size(-1) == 0) {
    return {g.constant(0, {out, dims(ctx, v)})};
  }
  return {insertion_points(ctx, s, v, right, out)};
}

// bucketize(self, boundaries, *, out_int32=False, right=False) for the Tensor
// and Scalar overloads: searchsorted with a 1-d boundaries tensor.
ValueList bucketize(LoweringContext& ctx, const Args& a) {
  const at::Tensor& boundaries = a.tensor(1);
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  DType dt = to_ir(result_type(a[0], a[1]));
  auto& g = ctx.g();
  ir::Value v = operand(ctx, a[0], dt);
  // As searchsorted's, except that CPU returns an empty input first.
  const std::vector<int64_t> vdims = dims(ctx, v);
  const bool v_empty = std::find(vdims.begin(), vdims.end(), 0) != vdims.end();
  TORCH_CHECK_NOT_IMPLEMENTED(dt != DType::kBool || v_empty,
                              "\"searchsorted_out_cpu\" not implemented for 'Bool'");
  DType out = a.boolean(2) ? DType::kI32 : DType::kI64;
  if (boundaries.numel() == 0) return {g.constant(0, {out, dims(ctx, v)})};
  return {insertion_points(ctx, g.convert(ctx.tensor(boundaries), dt), v, a.boolean(3), out)};
}

RegisterLowering kSearchRules[] = {
    {"isin.Tensor_Tensor", isin},          {"isin.Tensor_Scalar", isin},
    {"isin.Scalar_Tensor", isin},          {"searchsorted.Tensor", searchsorted},
    {"searchsorted.Scalar", searchsorted}, {"bucketize.Tensor", bucketize},
    {"bucketize.Scalar", bucketize},
};

}  // namespace
}  // namespace ttpu::aten
