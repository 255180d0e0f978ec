// Lowerings of the ATen ops that move data into a new shape: cat, flip, roll,
// repeat, constant_pad_nd, tril/triu. (Views such as permute or slice are
// metadata on the same storage and need no lowering; see metadata_ops.cc.)
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/TypeProperties.h>

#include "aten/growing_buckets.h"
#include "aten/ops_util.h"
#include "aten/result_layout.h"

namespace ttpu::aten {
namespace {

using ir::DType;

int64_t shape_numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// cat(tensors, dim): every input promoted to the common result type
// (at::native::result_type over all of them). Legacy empty 1-d tensors (shape
// [0]) take part in type promotion but are otherwise skipped, as on CPU.
std::vector<ir::Value> cat(LoweringContext& ctx, const Args& a) {
  const std::vector<at::Tensor> ts = a.tensors(0);
  TORCH_CHECK_VALUE(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
  at::native::ResultTypeState state{};
  for (size_t i = 0; i < ts.size(); ++i) {
    TORCH_CHECK(ts[i].dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
    state = at::native::update_result_type_state(ts[i], state);
  }
  const DType dt = to_ir(at::native::result_type(state));
  auto skipped = [](const at::Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  const at::Tensor* ref = nullptr;
  for (const auto& t : ts) {
    if (!skipped(t)) {
      ref = &t;
      break;
    }
  }
  auto& g = ctx.g();
  if (ref == nullptr) return {g.constant(0, {dt, {0}})};
  const int64_t dim = wrap_dim(a.integer(1), ref->dim());
  std::vector<int64_t> out = ref->sizes().vec();
  out[dim] = 0;
  std::vector<at::Tensor> nonempty;
  for (size_t i = 0; i < ts.size(); ++i) {
    const at::Tensor& t = ts[i];
    if (skipped(t)) continue;
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ",
                ref->dim(), " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      TORCH_CHECK(d == dim || t.size(d) == ref->size(d),
                  "Sizes of tensors must match except "
                  "in dimension ",
                  dim, ". Expected size ", ref->size(d), " but got size ", t.size(d),
                  " for tensor number ", i, " in the list.");
    }
    out[dim] += t.size(dim);
    if (t.numel() > 0) nonempty.push_back(t);
  }
  if (shape_numel(out) == 0) return {g.constant(0, {dt, out})};
  // A bucketed result is contiguous: only where CPU's is (a channels-last
  // result keeps its layout, result_layout.h).
  if (cat_memory_format(ts) == c10::MemoryFormat::Contiguous) {
    if (ir::Value v = cat_in_bucket(ctx, nonempty, dim, dt, out); v.valid()) return {v};
  }
  std::vector<ir::Value> parts;
  for (const at::Tensor& t : nonempty) parts.push_back(g.convert(ctx.tensor(t), dt));
  return {parts.size() == 1 ? parts[0] : g.concatenate(parts, dim)};
}

std::vector<ir::Value> flip(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  // dim_list_to_bitset raises ATen's errors for an out-of-range or repeated dim.
  auto bits = at::dim_list_to_bitset(a.ints(1), self.dim());
  std::vector<int64_t> rev;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (bits[d] && self.size(d) > 1) rev.push_back(d);
  }
  ir::Value x = ctx.tensor(self);
  if (rev.empty() || self.numel() == 0) return {x};
  return {ctx.g().reverse(x, rev)};
}

// x rolled by `shift` along `d`: the last `shift` elements wrap to the front.
ir::Value roll_dim(LoweringContext& ctx, ir::Value x, int64_t d, int64_t shift) {
  auto& g = ctx.g();
  std::vector<int64_t> sizes = dims(ctx, x);
  const int64_t n = sizes[d];
  if (n == 0) return x;
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  std::vector<int64_t> start(sizes.size(), 0), stride(sizes.size(), 1);
  std::vector<int64_t> mid = sizes;
  mid[d] = n - s;
  ir::Value head = g.slice(x, start, mid, stride);
  start[d] = n - s;
  ir::Value tail = g.slice(x, start, sizes, stride);
  return g.concatenate({tail, head}, d);
}

std::vector<ir::Value> roll(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::vector<int64_t> shifts = a.ints(1);
  const std::vector<int64_t> rdims = a.ints(2);
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (rdims.empty() && shifts.size() == 1) {
    // No dims: roll the flattened tensor, then restore the shape.
    if (self.numel() == 0) return {x};
    ir::Value flat = roll_dim(ctx, g.reshape(x, {self.numel()}), 0, shifts[0]);
    return {g.reshape(flat, self.sizes().vec())};
  }
  TORCH_CHECK(shifts.size() == rdims.size(),
              "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", rdims.size());
  for (size_t i = 0; i < rdims.size(); ++i) {
    // wrap_scalar=false: a 0-d tensor has no dim to roll (IndexError, as on
    // CPU); wrapping it as rank 1 would slice a dim that does not exist.
    x = roll_dim(ctx, x, c10::maybe_wrap_dim(rdims[i], self.dim(), /*wrap_scalar=*/false),
                 shifts[i]);
  }
  return {x};
}

// repeat(self, repeats): self tiled repeats[i] times along dim i (self's shape
// padded with leading 1s to len(repeats)), as a broadcast to [r0, s0, r1, s1, ...]
// and a reshape.
std::vector<ir::Value> repeat(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::vector<int64_t> reps = a.ints(1);
  TORCH_CHECK(static_cast<int64_t>(reps.size()) >= self.dim(),
              "Number of dimensions of repeat "
              "dims can not be smaller than number of dimensions of tensor");
  const size_t n = reps.size();
  std::vector<int64_t> padded(n - static_cast<size_t>(self.dim()), 1);
  padded.insert(padded.end(), self.sizes().begin(), self.sizes().end());
  std::vector<int64_t> target, interleaved, bdims;
  for (size_t i = 0; i < n; ++i) target.push_back(reps[i] * padded[i]);
  for (size_t i = 0; i < n; ++i) {
    TORCH_CHECK(target[i] >= 0, "Trying to create tensor with negative dimension ", target[i], ": ",
                c10::IntArrayRef(target));
  }
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (shape_numel(target) == 0) return {g.constant(0, {dtype(ctx, x), target})};
  for (size_t i = 0; i < n; ++i) {
    interleaved.push_back(reps[i]);
    interleaved.push_back(padded[i]);
    bdims.push_back(static_cast<int64_t>(2 * i + 1));
  }
  ir::Value tiled = g.broadcast_in_dim(g.reshape(x, padded), interleaved, bdims);
  return {g.reshape(tiled, target)};
}

// constant_pad_nd(self, pad, value): pad = (last dim low, last dim high, next
// dim low, ...); negative entries crop. The value is a parameter, so a new
// padding value does not recompile.
std::vector<ir::Value> constant_pad_nd(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::vector<int64_t> pad = a.ints(1);
  const int64_t rank = self.dim();
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  TORCH_CHECK(static_cast<int64_t>(pad.size() / 2) <= rank,
              "Length of pad should be no more "
              "than twice the number of dimensions of the input. Pad length is ",
              pad.size(), "while the input has ", rank, "dimensions.");
  std::vector<int64_t> low(static_cast<size_t>(rank), 0), high(low), interior(low);
  std::vector<int64_t> out = self.sizes().vec();
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = rank - 1 - static_cast<int64_t>(i);
    low[d] = pad[2 * i];
    high[d] = pad[2 * i + 1];
    out[d] += low[d] + high[d];
    // ATen's composite crops with narrow() first; keep its message.
    TORCH_CHECK(
        out[d] >= 0 &&
            self.size(d) + std::min<int64_t>(low[d], 0) + std::min<int64_t>(high[d], 0) >= 0,
        "narrow(): length must be non-negative.");
  }
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  const DType dt = dtype(ctx, x);
  if (shape_numel(out) == 0) return {g.constant(0, {dt, out})};
  ir::Value value = ctx.scalar(a.scalar(2), dt);
  if (self.numel() == 0) return {broadcast_to(ctx, value, out)};
  return {g.pad(x, value, low, high, interior)};
}

// tril / triu: keep the elements on and below (above) the `diagonal`-th
// diagonal of the last two dims, zero the rest.
std::vector<ir::Value> shape_triangle(LoweringContext& ctx, const Args& a, bool lower) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.dim() >= 2, lower ? "tril" : "triu",
              ": input tensor must have at least 2 dimensions");
  const int64_t diagonal = a.integer(1);
  auto& g = ctx.g();
  ir::Value x = ctx.tensor(self);
  if (self.numel() == 0) return {x};
  const int64_t rank = self.dim();
  const ir::TensorType t{DType::kI64, {self.size(-2), self.size(-1)}};
  // col - row compared with the diagonal offset.
  ir::Value offset = g.binary(ir::Op::kSub, g.iota(t, 1), g.iota(t, 0));
  ir::Value keep =
      g.compare(lower ? ir::Cmp::kLE : ir::Cmp::kGE, offset, g.constant_int(diagonal, t));
  keep = g.broadcast_in_dim(keep, self.sizes().vec(), {rank - 2, rank - 1});
  return {g.select(keep, x, full_like(ctx, x, 0))};
}

RegisterLowering r_cat("cat", cat);
RegisterLowering r_flip("flip", flip);
RegisterLowering r_roll("roll", roll);
RegisterLowering r_repeat("repeat", repeat);
RegisterLowering r_constant_pad_nd("constant_pad_nd", constant_pad_nd);
RegisterLowering r_tril("tril", [](LoweringContext& c, const Args& a) {
  return shape_triangle(c, a, /*lower=*/true);
});
RegisterLowering r_triu("triu", [](LoweringContext& c, const Args& a) {
  return shape_triangle(c, a, /*lower=*/false);
});

}  // namespace
}  // namespace ttpu::aten
