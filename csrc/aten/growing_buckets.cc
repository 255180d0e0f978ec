#include "aten/growing_buckets.h"

#include <algorithm>
#include <mutex>

#include "aten/device.h"
#include "runtime/runtime.h"

namespace ttpu::aten {
namespace {

struct Setting {
  bool pow2 = false;
  std::vector<int64_t> sizes;  // sorted, positive
};

// The most parts a bucketed cat writes (an append has two: the tensor and
// the new rows).
constexpr size_t kMaxBucketedParts = 4;

std::mutex g_buckets_mu;
Setting g_setting;

int64_t product(const std::vector<int64_t>& sizes, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= sizes[i];
  return n;
}

ir::Value i64(ir::Graph& g, int64_t v, const std::vector<int64_t>& dims = {}) {
  return g.constant_int(v, {ir::DType::kI64, dims});
}

// A 0-d i64 value broadcast to `dims`.
ir::Value splat(ir::Graph& g, ir::Value v, const std::vector<int64_t>& dims) {
  return g.broadcast_in_dim(v, dims, {});
}

// Whether `t` is the contiguous start of a larger tpu storage, as a bucketed
// cat's result is.
bool in_bucket(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || t.numel() == 0 ||
      t.layout() != at::kStrided || t.storage_offset() != 0 || !t.is_contiguous() ||
      !t.has_storage()) {
    return false;
  }
  return static_cast<int64_t>(t.storage().nbytes()) >
         t.numel() * static_cast<int64_t>(t.element_size());
}

}  // namespace

void set_growing_buckets(bool pow2, std::vector<int64_t> sizes) {
  std::sort(sizes.begin(), sizes.end());
  std::lock_guard<std::mutex> lock(g_buckets_mu);
  g_setting = {pow2, std::move(sizes)};
}

std::optional<int64_t> bucket_rows(int64_t n) {
  std::lock_guard<std::mutex> lock(g_buckets_mu);
  if (g_setting.pow2) {
    int64_t b = 1;
    while (b < n) b <<= 1;
    return b;
  }
  if (g_setting.sizes.empty()) return std::nullopt;
  auto it = std::lower_bound(g_setting.sizes.begin(), g_setting.sizes.end(), n);
  return it == g_setting.sizes.end() ? n : *it;
}

int64_t bucket_capacity(const at::Tensor& t, int64_t dim) {
  if (!in_bucket(t)) return 0;
  const std::vector<int64_t> sizes = t.sizes().vec();
  const int64_t rows = product(sizes, 0, dim) * product(sizes, dim + 1, sizes.size());
  const int64_t elements =
      static_cast<int64_t>(t.storage().nbytes()) / static_cast<int64_t>(t.element_size());
  if (elements % rows != 0) return 0;
  // Not past the bucket of t's length: the start of a much larger storage
  // (a short slice of a long tensor) is read as itself, not whole.
  const std::optional<int64_t> bucket = bucket_rows(sizes[dim]);
  return bucket && elements / rows <= *bucket ? elements / rows : 0;
}

LoweringContext::InBucket LoweringContext::read_in_bucket(const at::Tensor& t, int64_t dim) {
  const std::vector<int64_t> sizes = t.sizes().vec();
  const int64_t p = product(sizes, 0, dim), n = sizes[dim];
  const int64_t q = product(sizes, dim + 1, sizes.size());
  const int64_t cap = bucket_capacity(t, dim);
  if (cap == 0) return {graph_.reshape(tensor(t), {p, n, q}), i64(graph_, n), n};
  ir::Value flat = storage_value(t, slot_of(t), to_ir(t.scalar_type()));
  ir::Value length = scalar(c10::Scalar(n), ir::DType::kI64);
  if (p == 1) return {graph_.reshape(flat, {1, cap, q}), length, cap};
  // Element (i, j, k) of the bucket is storage element i*n*q + j*q + k (t is
  // contiguous); rows j >= n read row n - 1 (their values are unspecified).
  const std::vector<int64_t> dims{p, cap, q};
  const ir::TensorType it{ir::DType::kI64, dims};
  ir::Value row =
      graph_.binary(ir::Op::kMin, graph_.iota(it, 1),
                    splat(graph_, graph_.binary(ir::Op::kSub, length, i64(graph_, 1)), dims));
  ir::Value outer =
      graph_.binary(ir::Op::kMul, graph_.iota(it, 0),
                    splat(graph_, graph_.binary(ir::Op::kMul, length, i64(graph_, q)), dims));
  ir::Value idx = graph_.binary(
      ir::Op::kAdd, outer,
      graph_.binary(ir::Op::kAdd, graph_.binary(ir::Op::kMul, row, i64(graph_, q, dims)),
                    graph_.iota(it, 2)));
  ir::Value v =
      graph_.gather(flat, graph_.reshape(idx, {p * cap * q, 1}), element_gather(), {p * cap * q});
  return {graph_.reshape(v, dims), length, cap};
}

ir::Value cat_in_bucket(LoweringContext& ctx, const std::vector<at::Tensor>& parts, int64_t dim,
                        ir::DType dt, const std::vector<int64_t>& sizes) {
  // Each part is one dynamic_update_slice, which XLA:CPU compiles as a
  // kernel of its own (about 12 ms each): a cat of many parts (torch.stack
  // of a list) is never bucketed.
  if (!ctx.makes_new_results() || ir::is_complex(dt) || parts.empty() ||
      parts.size() > kMaxBucketedParts) {
    return {};
  }
  const std::optional<int64_t> rows = bucket_rows(sizes[dim]);
  if (!rows) return {};
  const int64_t cap = *rows;
  const bool any_bucketed = std::any_of(
      parts.begin(), parts.end(), [&](const at::Tensor& t) { return bucket_capacity(t, dim) > 0; });
  // A new bucket only for an append: the last part at most half as long as
  // the longest other part (a token, a KV entry), not for a cat of similar
  // parts (autograd's backward of split and chunk, torch.stack).
  const int64_t last = parts.back().size(dim);
  int64_t longest = 0;
  for (size_t i = 0; i + 1 < parts.size(); ++i) longest = std::max(longest, parts[i].size(dim));
  const bool appends = 2 * last <= longest;
  if (!any_bucketed && (cap == sizes[dim] || !appends)) return {};
  auto& g = ctx.g();
  const int64_t p = product(sizes, 0, dim), q = product(sizes, dim + 1, sizes.size());
  // Each part written at the running length: a part's unspecified rows past
  // its length are overwritten by the next part's (or lie past the result).
  // The work buffer holds every part's whole bucket, so no write is clamped.
  std::vector<LoweringContext::InBucket> reads;
  int64_t width = 0;
  for (const at::Tensor& t : parts) {
    reads.push_back(ctx.read_in_bucket(t, dim));
    width += reads.back().cap;
  }
  ir::Value work = g.constant(0, {dt, {p, width, q}});
  ir::Value zero = i64(g, 0), start = zero;
  for (const auto& r : reads) {
    work = g.dynamic_update_slice(work, g.convert(r.value, dt), {zero, start, zero});
    start = g.binary(ir::Op::kAdd, start, r.length);
  }
  if (width > cap) work = g.slice(work, {0, 0, 0}, {p, cap, q}, {1, 1, 1});
  if (width < cap) {
    work = g.pad(work, g.constant(0, {dt, {}}), {0, 0, 0}, {0, cap - width, 0}, {0, 0, 0});
  }
  const int64_t total = p * cap * q;
  ir::Value flat = g.reshape(work, {total});
  if (p > 1) {
    // The contiguous result of `start` rows per outer index: element e is
    // bucket element o*cap*q + (e - o*start*q) with o = e / (start*q); the
    // elements past the result read clamped indices (unspecified values).
    const std::vector<int64_t> dims{total};
    ir::Value e = g.iota({ir::DType::kI64, dims}, 0);
    ir::Value stride = splat(g, g.binary(ir::Op::kMul, start, i64(g, q)), dims);
    ir::Value o = g.binary(ir::Op::kMin, g.binary(ir::Op::kDiv, e, stride), i64(g, p - 1, dims));
    ir::Value idx = g.binary(ir::Op::kAdd, g.binary(ir::Op::kMul, o, i64(g, cap * q, dims)),
                             g.binary(ir::Op::kSub, e, g.binary(ir::Op::kMul, o, stride)));
    idx = g.clamp(i64(g, 0, dims), idx, i64(g, total - 1, dims));
    flat = g.gather(flat, g.reshape(idx, {total, 1}), element_gather(), {total});
  }
  ctx.set_result_sizes(0, sizes);
  return flat;
}

}  // namespace ttpu::aten
