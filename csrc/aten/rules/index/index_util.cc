// Index reading, range checks and advanced-indexing resolution shared by the
// indexing lowerings. See index_util.h.
#include "aten/rules/index/index_util.h"

#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include "aten/copy.h"
#include "aten/deferred_check.h"

namespace ttpu::aten {
namespace {

using ir::DType;

// {min, max} of a non-empty tpu index tensor as an i64 [2] tpu tensor, and
// whether all of it lies in [min_ok, size) as a bool 0-d tpu tensor (in fused
// mode recorded into the pending graph, not yet computed). min_ok and size are
// parameters, so other sizes reuse the program.
std::pair<at::Tensor, at::Tensor> index_extremes(LoweringContext& ctx, const at::Tensor& index,
                                                 int64_t min_ok, int64_t size) {
  LoweringContext probe(ctx.op() + " (index range check)", ctx.device());
  auto& g = probe.g();
  ir::Value v = g.reshape(read_index(probe, index), {index.numel()});
  ir::Value lo = reduce(probe, v, {0}, false, ir::Reducer::kMin);
  ir::Value hi = reduce(probe, v, {0}, false, ir::Reducer::kMax);
  ir::Value ok =
      g.binary(ir::Op::kAnd, g.compare(ir::Cmp::kGE, lo, probe.scalar(min_ok, DType::kI64)),
               g.compare(ir::Cmp::kLT, hi, probe.scalar(size, DType::kI64)));
  auto out = probe.run({g.concatenate({g.reshape(lo, {1}), g.reshape(hi, {1})}, 0), ok});
  return {out[0], out[1]};
}

// A mask tensor as a flat bool value (uint8 masks count non-zero as true).
ir::Value flat_mask(LoweringContext& ctx, const at::Tensor& mask) {
  auto& g = ctx.g();
  ir::Value m = g.reshape(ctx.tensor(mask), {mask.numel()});
  if (dtype(ctx, m) != DType::kBool) m = g.compare(ir::Cmp::kNE, m, full_like(ctx, m, 0));
  return m;
}

// The coordinates of the true elements of `mask`, one i64 [count] vector per
// mask dim, in row-major order (what mask.nonzero() gives, column by column).
std::vector<ir::Value> mask_coordinates(LoweringContext& ctx, const at::Tensor& mask) {
  auto& g = ctx.g();
  const int64_t k = mask.dim();
  std::vector<ir::Value> out;
  if (mask.device().is_cpu()) {
    at::Tensor nz = mask.nonzero();
    for (int64_t j = 0; j < k; ++j) out.push_back(read_index(ctx, nz.select(1, j).contiguous()));
    return out;
  }
  const int64_t n = mask.numel();
  int64_t count = 0;
  if (n > 0) {
    // The count fixes the result shape, so it must be known here: a sync.
    LoweringContext probe(ctx.op() + " (mask count)", ctx.device());
    ir::Value m = probe.g().convert(flat_mask(probe, mask), DType::kI64);
    ir::Value total = reduce(probe, m, {0}, false, ir::Reducer::kAdd);
    count = to_host(probe.run({total})[0]).item<int64_t>();
  }
  if (count == 0) {
    for (int64_t j = 0; j < k; ++j) out.push_back(g.constant(0, {DType::kI64, {0}}));
    return out;
  }
  // Sorting the keys "position if true, else n" puts the true positions first,
  // in increasing order; the first `count` are the flat positions wanted.
  ir::TensorType flat{DType::kI64, {n}};
  ir::Value key = g.select(flat_mask(ctx, mask), g.iota(flat, 0), g.constant_int(n, flat));
  ir::Value pos = g.slice(g.sort({key}, 0, ir::Cmp::kLT)[0], {0}, {count}, {1});
  ir::TensorType t{DType::kI64, {count}};
  int64_t stride = n;
  for (int64_t j = 0; j < k; ++j) {
    stride /= mask.size(j);
    ir::Value c = stride == 1 ? pos : g.binary(ir::Op::kDiv, pos, g.constant_int(stride, t));
    if (j > 0) c = g.binary(ir::Op::kRem, c, g.constant_int(mask.size(j), t));
    out.push_back(c);
  }
  return out;
}

bool is_mask(const at::Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

std::string shapes_str(const std::vector<std::vector<int64_t>>& shapes) {
  std::ostringstream os;
  for (size_t i = 0; i < shapes.size(); ++i) os << (i ? ", " : "") << c10::IntArrayRef(shapes[i]);
  return os.str();
}

}  // namespace

ir::Value read_index(LoweringContext& ctx, const at::Tensor& index) {
  at::Tensor t = index;
  if (t.device().is_cpu() && t.dim() > 0) {
    t = t.to(at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(ctx.device())));
  }
  return ctx.g().convert(ctx.tensor(t), DType::kI64);
}

void check_index_range(LoweringContext& ctx, const at::Tensor& index, int64_t dim, int64_t size,
                       bool allow_negative, RangeError err, const char* prefix,
                       bool at_op_in_strict) {
  if (index.numel() == 0) return;
  std::string text = prefix;
  auto report = [=](int64_t lo, int64_t hi) {
    const int64_t min_ok = allow_negative ? -size : 0;
    if (lo >= min_ok && hi < size) return;
    const int64_t bad = hi >= size ? hi : lo;
    switch (err) {
      case RangeError::kInSelf: TORCH_CHECK_INDEX(false, "index out of range in self");
      case RangeError::kBoundsIndex:
        TORCH_CHECK_INDEX(false, text, "index ", bad, " is out of bounds for dimension ", dim,
                          " with size ", size);
      case RangeError::kBoundsRuntime:
        TORCH_CHECK(false, text, "index ", bad, " is out of bounds for dimension ", dim,
                    " with size ", size);
    }
  };
  if (index.device().is_cpu()) {
    at::Tensor l = index.to(at::kLong);
    report(l.min().item<int64_t>(), l.max().item<int64_t>());
    return;
  }
  if (size == 0) {
    // No value is in range: raise at the op, as CPU does. A deferred check
    // would come too late: the op's gather/scatter over a size-0 dim cannot be
    // built, and its shape error would be raised instead (and the check left
    // pending for an unrelated later read). The first value is read for the
    // message (a wait, on this error path only).
    const int64_t first = index.reshape({-1})[0].item<int64_t>();
    report(first, first);
    return;
  }
  auto [extremes, ok] = index_extremes(ctx, index, allow_negative ? -size : 0, size);
  auto check = [report](const at::Tensor& host) {
    report(host[0].item<int64_t>(), host[1].item<int64_t>());
  };
  if (at_op_in_strict && runtime::Runtime::get().mode() == runtime::EagerMode::kStrict) {
    check(to_host(extremes));
    return;
  }
  check_device_values(extremes, ok, check);
}

ir::Value along_dim_coords(LoweringContext& ctx, ir::Value index, int64_t dim) {
  auto& g = ctx.g();
  const std::vector<int64_t> s = dims(ctx, index);
  const int64_t r = static_cast<int64_t>(s.size());
  std::vector<int64_t> column = s;
  column.push_back(1);
  std::vector<ir::Value> cols;
  for (int64_t k = 0; k < r; ++k) {
    ir::Value v = k == dim ? index : g.iota({DType::kI64, s}, k);
    cols.push_back(g.reshape(v, column));
  }
  return r == 1 ? cols[0] : g.concatenate(cols, r);
}

std::vector<at::Tensor> optional_tensors(const c10::IValue& list) {
  std::vector<at::Tensor> out;
  for (const auto& v : list.toListRef()) out.push_back(v.isNone() ? at::Tensor() : v.toTensor());
  return out;
}

int64_t AdvancedIndex::result_numel() const {
  int64_t n = 1;
  for (int64_t s : result_sizes) n *= s;
  return n;
}

ir::GatherDims AdvancedIndex::gather_dims() const {
  ir::GatherDims d;
  d.offset_dims = offset_dims;
  d.collapsed_slice_dims = dims;
  d.start_index_map = dims;
  d.slice_sizes = slice_sizes;
  d.index_vector_dim = static_cast<int64_t>(batch.size());
  return d;
}

ir::ScatterDims AdvancedIndex::scatter_dims() const {
  ir::ScatterDims d;
  d.update_window_dims = offset_dims;
  d.inserted_window_dims = dims;
  d.scatter_dims_to_operand_dims = dims;
  d.index_vector_dim = static_cast<int64_t>(batch.size());
  return d;
}

namespace {

// ATen's checks of the index tensors (dtype, 0-d masks, how many dims they
// index), with its deprecation warning for uint8 masks.
void check_index_tensors(const at::Tensor& self, const std::vector<at::Tensor>& indices) {
  int64_t consumed = 0;
  for (const auto& t : indices) {
    if (!t.defined()) {
      ++consumed;
      continue;
    }
    auto st = t.scalar_type();
    TORCH_CHECK_INDEX(st == at::kLong || st == at::kInt || is_mask(t),
                      "tensors used as indices must be long, int, byte or bool tensors");
    if (st == at::kByte) {
      // ATen's expandTensors warns on every uint8 mask (tests count the warnings).
      TORCH_WARN(
          "indexing with dtype torch.uint8 is now deprecated, please use a dtype "
          "torch.bool instead.");
    }
    TORCH_CHECK_NOT_IMPLEMENTED(!is_mask(t) || t.dim() > 0,
                                "tpu: indexing with a 0-d mask "
                                "is not supported; use a 1-d mask or unsqueeze");
    consumed += is_mask(t) ? t.dim() : 1;
  }
  TORCH_CHECK_INDEX(consumed <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim());
}

}  // namespace

AdvancedIndex advanced_index(LoweringContext& ctx, const at::Tensor& self, const c10::IValue& list,
                             bool check_bounds) {
  auto& g = ctx.g();
  std::vector<at::Tensor> indices = optional_tensors(list);
  check_index_tensors(self, indices);

  // One entry per indexed dim of self: the index values and their shape.
  struct Part {
    int64_t dim;
    ir::Value idx;
    std::vector<int64_t> shape;
    bool from_mask;
    at::Tensor index;  // the index tensor (undefined for a mask's coordinates)
  };
  std::vector<Part> parts;
  int64_t d = 0;
  for (const auto& t : indices) {
    if (!t.defined()) {
      ++d;
    } else if (is_mask(t)) {
      for (int64_t j = 0; j < t.dim(); ++j) {
        TORCH_CHECK_INDEX(t.size(j) == self.size(d + j), "The shape of the mask ", t.sizes(),
                          " at index ", j, " does not match the shape of the indexed tensor ",
                          self.sizes(), " at index ", d + j);
      }
      auto coords = mask_coordinates(ctx, t);
      for (int64_t j = 0; j < t.dim(); ++j) {
        parts.push_back({d + j, coords[j], dims(ctx, coords[j]), true, at::Tensor()});
      }
      d += t.dim();
    } else {
      parts.push_back({d, read_index(ctx, t), t.sizes().vec(), false, t});
      ++d;
    }
  }

  AdvancedIndex ai;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : parts) shapes.push_back(p.shape);
  try {
    for (size_t i = 0; i < shapes.size(); ++i) {
      ai.batch = i == 0 ? shapes[0] : at::infer_size(ai.batch, shapes[i]);
    }
  } catch (const c10::Error&) {
    TORCH_CHECK_INDEX(false,
                      "shape mismatch: indexing tensors could not be broadcast "
                      "together with shapes ",
                      shapes_str(shapes));
  }
  const int64_t nb = static_cast<int64_t>(ai.batch.size());
  std::vector<int64_t> column = ai.batch;
  column.push_back(1);
  std::vector<ir::Value> cols;
  for (const auto& p : parts) {
    ir::Value v = broadcast_to(ctx, p.idx, ai.batch);
    if (!p.from_mask) {
      // Python-style negative indices count from the end.
      ir::Value size = g.constant_int(self.size(p.dim), {DType::kI64, ai.batch});
      ir::Value neg = g.compare(ir::Cmp::kLT, v, full_like(ctx, v, 0));
      v = g.select(neg, g.binary(ir::Op::kAdd, v, size), v);
    }
    ai.dims.push_back(p.dim);
    cols.push_back(g.reshape(v, column));
  }
  if (!cols.empty()) ai.coords = cols.size() == 1 ? cols[0] : g.concatenate(cols, nb);

  // Result layout (NumPy's rule, as ATen's index): the broadcast dims replace the
  // indexed ones in place when those are adjacent, else they come first.
  bool adjacent = true;
  for (size_t i = 1; i < ai.dims.size(); ++i) adjacent &= ai.dims[i] == ai.dims[i - 1] + 1;
  std::vector<int64_t> before, after;
  for (int64_t k = 0; k < self.dim(); ++k) {
    bool indexed = std::find(ai.dims.begin(), ai.dims.end(), k) != ai.dims.end();
    ai.slice_sizes.push_back(indexed ? 1 : self.size(k));
    if (indexed) continue;
    (adjacent && !ai.dims.empty() && k < ai.dims[0] ? before : after).push_back(self.size(k));
  }
  ai.result_sizes = before;
  ai.result_sizes.insert(ai.result_sizes.end(), ai.batch.begin(), ai.batch.end());
  ai.result_sizes.insert(ai.result_sizes.end(), after.begin(), after.end());
  if (check_bounds) {
    // ATen's order: an indexed dim of size 0 under a non-empty index shape has
    // no valid index at all (IndexError, whatever the values); otherwise the
    // values are checked only when the result has elements (CPU's kernel reads
    // no index for an empty result: x[1] of a [1, 4, 0] tensor is fine). ATen
    // numbers the dimension among the indexed ones, not self's.
    bool empty_dim = false;
    for (const auto& p : parts) empty_dim = empty_dim || self.size(p.dim) == 0;
    const bool empty_batch = std::find(ai.batch.begin(), ai.batch.end(), 0) != ai.batch.end();
    TORCH_CHECK_INDEX(!empty_dim || empty_batch,
                      "index is out of bounds for dimension with size 0");
    if (ai.result_numel() > 0) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].from_mask) continue;
        check_index_range(ctx, parts[i].index, static_cast<int64_t>(i), self.size(parts[i].dim),
                          true, RangeError::kBoundsIndex, "", /*at_op_in_strict=*/true);
      }
    }
  }
  const int64_t nbefore = static_cast<int64_t>(before.size());
  for (int64_t k = 0; k < nbefore; ++k) ai.offset_dims.push_back(k);
  for (size_t k = 0; k < after.size(); ++k) {
    ai.offset_dims.push_back(nbefore + nb + static_cast<int64_t>(k));
  }
  return ai;
}

}  // namespace ttpu::aten
