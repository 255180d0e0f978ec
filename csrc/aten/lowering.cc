#include "aten/lowering.h"

#include "aten/copy.h"
#include "aten/growing_views.h"
#include "runtime/compile_pool.h"
#include "runtime/fusion.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_set>
#include <optional>

namespace ttpu::aten {
namespace {

bool is_contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t numel_of(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

// The permutation that orders dims by decreasing stride, if applying it makes the
// view contiguous; empty otherwise.
std::vector<int64_t> contiguous_permutation(const std::vector<int64_t>& sizes,
                                            const std::vector<int64_t>& strides) {
  std::vector<int64_t> perm(sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  std::vector<int64_t> ps, pst;
  for (int64_t p : perm) {
    ps.push_back(sizes[p]);
    pst.push_back(strides[p]);
  }
  if (!is_contiguous(ps, pst)) return {};
  return perm;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// Storage element index of every element of a strided view: offset + sum(i_k * s_k).
// `offset` is a 0-d i64 value.
ir::Value flat_indices(ir::Graph& g, const std::vector<int64_t>& sizes,
                       const std::vector<int64_t>& strides, ir::Value offset) {
  ir::TensorType t{ir::DType::kI64, sizes};
  ir::Value idx = g.broadcast_in_dim(offset, sizes, {});
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] == 1 || strides[k] == 0) continue;
    ir::Value term =
        g.binary(ir::Op::kMul, g.iota(t, static_cast<int64_t>(k)), g.constant_int(strides[k], t));
    idx = g.binary(ir::Op::kAdd, idx, term);
  }
  int64_t n = numel_of(sizes);
  return g.reshape(idx, {n, 1});
}

ir::ScatterDims element_scatter() {
  ir::ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  return d;
}

template <typename T>
uint64_t bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

uint64_t scalar_bits(const c10::Scalar& s, ir::DType d) {
  switch (d) {
    case ir::DType::kBool: return bits<uint8_t>(s.toBool() ? 1 : 0);
    case ir::DType::kU8: return bits(s.to<uint8_t>());
    case ir::DType::kI8: return bits(s.to<int8_t>());
    case ir::DType::kI16: return bits(s.to<int16_t>());
    case ir::DType::kI32: return bits(s.to<int32_t>());
    case ir::DType::kI64: return bits(s.to<int64_t>());
    case ir::DType::kU32: return bits(s.to<uint32_t>());
    case ir::DType::kU64: return bits(s.to<uint64_t>());
    case ir::DType::kU16: return bits(s.to<uint16_t>());
    case ir::DType::kF16: return bits(s.to<c10::Half>().x);
    case ir::DType::kBF16: return bits(s.to<c10::BFloat16>().x);
    case ir::DType::kF32: return bits(s.to<float>());
    case ir::DType::kF64: return bits(s.to<double>());
    case ir::DType::kC64:
    case ir::DType::kC128:
      break;  // LoweringContext::scalar builds them from parts
    // c10's own conversions: float8 rounding is PyTorch's (ir/float8.h).
    case ir::DType::kF8E4M3FN: return bits(s.to<c10::Float8_e4m3fn>().x);
    case ir::DType::kF8E5M2: return bits(s.to<c10::Float8_e5m2>().x);
    case ir::DType::kF8E4M3FNUZ: return bits(s.to<c10::Float8_e4m3fnuz>().x);
    case ir::DType::kF8E5M2FNUZ: return bits(s.to<c10::Float8_e5m2fnuz>().x);
    case ir::DType::kF8E8M0FNU: return bits(s.to<c10::Float8_e8m0fnu>().x);
  }
  TORCH_CHECK(false, "unknown dtype");
}

}  // namespace

ir::GatherDims element_gather() {
  ir::GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.slice_sizes = {1};
  d.index_vector_dim = 1;
  return d;
}

std::optional<at::Tensor> Args::opt_tensor(size_t i) const {
  if (is_none(i)) return std::nullopt;
  return v_[i].toTensor();
}
std::optional<std::vector<int64_t>> Args::opt_ints(size_t i) const {
  if (is_none(i)) return std::nullopt;
  return v_[i].toIntVector();
}
std::optional<int64_t> Args::opt_integer(size_t i) const {
  if (is_none(i)) return std::nullopt;
  return v_[i].toInt();
}
std::optional<c10::ScalarType> Args::opt_dtype(size_t i) const {
  if (is_none(i)) return std::nullopt;
  return v_[i].toScalarType();
}

namespace {

// Strict mode with background compiles (runtime/compile_pool.h): pending
// values are bound, not computed first, and an op may be recorded.
bool defers_pending() {
  return runtime::Runtime::get().mode() == runtime::EagerMode::kStrict &&
         runtime::background_compile();
}

}  // namespace

ir::Value LoweringContext::param(std::shared_ptr<pjrt::Buffer> buffer, const ir::TensorType& type,
                                 runtime::Slot* slot) {
  args_.push_back({std::move(buffer), slot});
  return graph_.parameter(type);
}

LoweringContext::SlotUse& LoweringContext::use(runtime::Slot& slot, ir::DType dtype) {
  for (auto& u : slots_) {
    if (u.slot == &slot) return u;
  }
  TORCH_CHECK(slot.device == device_,
              "Expected all tensors to be on the same device, but "
              "found at least two devices, tpu:",
              device_, " and tpu:", slot.device, "! (in ", op_, ")");
  TORCH_CHECK(slot.error.empty(), op_, ": an input was never computed: ", slot.error);
  const bool fused =
      runtime::Runtime::get().mode() == runtime::EagerMode::kFused || defers_pending();
  // A pending value read with another element size (a complex64 storage read
  // through view_as_real) is computed first: only a buffer can be reinterpreted.
  const bool resized = ir::byte_size(slot.dtype) != ir::byte_size(dtype);
  if (slot.pending || slot.buffer == nullptr || resized) replayable_ = false;
  if (slot.pending && (!fused || resized)) {
    try {
      runtime::materialize(slot);
    } catch (const pjrt::PjrtError& e) {
      TORCH_CHECK(false, op_, ": an input failed: ", e.what());
    }
  }
  if (slot.pending) {
    // Bound to the slot's pending value when the op is recorded.
    slots_.push_back({&slot, param(nullptr, {slot.dtype, {slot.numel()}}, &slot)});
  } else if (slot.buffer == nullptr) {
    // Never written: adopt this dtype, contents read as zeros.
    slot.dtype = dtype;
    ir::Value zeros = graph_.constant(0, {dtype, {slot.numel()}});
    slots_.push_back({&slot, zeros});
  } else {
    if (ir::byte_size(slot.dtype) != ir::byte_size(dtype) &&
        slot.nbytes % ir::byte_size(dtype) == 0) {
      reinterpret_slot(slot, dtype);
    }
    slots_.push_back({&slot, param(slot.buffer, {slot.dtype, {slot.numel()}}, &slot)});
  }
  return slots_.back();
}

void LoweringContext::compute_pending_inputs() {
  for (auto& a : args_) {
    if (a.slot == nullptr || a.buffer != nullptr) continue;
    try {
      runtime::materialize(*a.slot);
    } catch (const pjrt::PjrtError& e) {
      TORCH_CHECK(false, op_, ": an input failed: ", e.what());
    }
    a.buffer = a.slot->buffer;
  }
}

namespace {

// Float to integer as CPU PyTorch converts on x86 (cvtt* instructions): NaN,
// infinities and values outside int32 (int64 for an int64 target) become that
// width's minimum; 8- and 16-bit targets go through int32 and keep its low
// bits (300.0 -> uint8 44, -1.0 -> 255). XLA's convert saturates instead, so
// a NaN index read element 0 where CPU raises IndexError.
ir::Value convert_as_cpu(ir::Graph& g, ir::Value v, ir::DType to) {
  const ir::DType from = g.type(v).dtype;
  if (ir::is_float8(from) && !ir::is_float8(to)) {
    // Graph::convert follows PyTorch for float and bool targets; integers go
    // float8 -> float -> the cvtt rules below, as PyTorch converts.
    if (!ir::is_integral(to)) return g.convert(v, to);
    v = g.convert(v, ir::DType::kF32);
    if (ir::is_integral(to) && from != ir::DType::kF8E4M3FN && from != ir::DType::kF8E5M2) {
      // CPU gives 0 for the NaN of the FNUZ types and e8m0 (measured over all
      // codes), the integer minimum for the other NaNs.
      const ir::TensorType t = g.type(v);
      return g.select(g.compare(ir::Cmp::kNE, v, v), g.constant(0, {to, t.dims}),
                      convert_as_cpu(g, v, to));
    }
  }
  const ir::TensorType t = g.type(v);
  const bool via_cvtt = ir::is_float(t.dtype) && ir::is_integral(to) && to != ir::DType::kU32 &&
                        to != ir::DType::kU64;
  if (!via_cvtt) return g.convert(v, to);
  const ir::DType wide = to == ir::DType::kI64 ? ir::DType::kI64 : ir::DType::kI32;
  const double limit = wide == ir::DType::kI64 ? 9223372036854775808.0 : 2147483648.0;
  ir::Value in_range = g.binary(ir::Op::kAnd, g.compare(ir::Cmp::kGE, v, g.constant(-limit, t)),
                                g.compare(ir::Cmp::kLT, v, g.constant(limit, t)));
  ir::Value w = g.select(in_range, g.convert(v, wide), g.constant(-limit, {wide, t.dims}));
  return g.convert(w, to);
}

}  // namespace

ir::Value LoweringContext::tensor(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), op_, ": expected a defined tensor");
  if (t.device().is_cpu()) {
    // Its value becomes a scalar parameter: a buffer the value fixes (the
    // dispatch cache keys a host 0-d tensor by its value).
    TORCH_CHECK(t.dim() == 0,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, tpu:",
                device_, " and cpu! (in ", op_, ")");
    return scalar(t.item(), to_ir(t.scalar_type()));
  }
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two "
              "devices, tpu:",
              device_, " and ", t.device(), "! (in ", op_, ")");
  ir::DType dtype = to_ir(t.scalar_type());
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  if (t.numel() == 0) return graph_.constant(0, {dtype, sizes});
  auto& slot = slot_of(t);
  if (t.numel() * static_cast<int64_t>(t.element_size()) < static_cast<int64_t>(slot.nbytes) &&
      op_ != kGrowingViewRead && runtime::Runtime::get().mode() != runtime::EagerMode::kFused &&
      view_base_varies(op_, sizes, dtype, static_cast<int64_t>(slot.nbytes))) {
    // A part of a storage whose size keeps changing (growing_views.h): read
    // into a buffer of its own, so this op's program is keyed on the view.
    LoweringContext read(kGrowingViewRead, device_);
    at::Tensor own = read.run({read.tensor(t)})[0];
    replayable_ = false;  // the buffer bound is not the argument's storage
    pending_storages_.push_back(own.storage());
    return tensor(own);
  }
  ir::Value flat = storage_value(t, slot, dtype);
  int64_t offset = t.storage_offset();
  // The common case, a contiguous tensor that is its whole storage: the
  // general path below would come to the same reshape, through five
  // temporary vectors (measurable per eager op).
  if (offset == 0 && t.is_contiguous() && graph_.type(flat).dims.size() == 1 &&
      graph_.type(flat).dims[0] == t.numel()) {
    return graph_.reshape(flat, sizes);
  }
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());

  // Broadcast (stride 0) dims are read once and expanded.
  std::vector<int64_t> in_sizes, in_strides, bdims;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 1 && strides[i] == 0) continue;
    in_sizes.push_back(sizes[i]);
    in_strides.push_back(strides[i]);
    bdims.push_back(static_cast<int64_t>(i));
  }
  int64_t n = numel_of(in_sizes);
  // The n elements from the view's offset: a parameter unless 0, so slicing
  // batch after batch out of one tensor reuses one program.
  auto dense_range = [&]() {
    // The whole storage (the common case) needs no slice node: one IR node
    // fewer per input is measurable per eager op (about 3.4K instructions).
    if (offset == 0 && graph_.type(flat).dims == std::vector<int64_t>{n}) return flat;
    if (offset == 0) return graph_.slice(flat, {0}, {n}, {1});
    return graph_.dynamic_slice(flat, {storage_offset(offset)}, {n});
  };
  ir::Value v;
  if (is_contiguous(in_sizes, in_strides)) {
    v = graph_.reshape(dense_range(), in_sizes);
  } else if (auto perm = contiguous_permutation(in_sizes, in_strides); !perm.empty()) {
    std::vector<int64_t> ps;
    for (int64_t p : perm) ps.push_back(in_sizes[p]);
    v = graph_.reshape(dense_range(), ps);
    v = graph_.transpose(v, inverse(perm));
  } else {
    ir::Value idx = flat_indices(graph_, in_sizes, in_strides, storage_offset(offset));
    v = graph_.gather(flat, idx, element_gather(), {n});
    v = graph_.reshape(v, in_sizes);
  }
  if (in_sizes.size() != sizes.size()) v = graph_.broadcast_in_dim(v, sizes, bdims);
  return v;
}

namespace {

// A storage's elements read as another dtype of the same size (x.view(dtype)).
// XLA cannot bitcast i1: a bool storage read as uint8/int8 holds 0 or 1 (as
// its bytes do on CPU), and bytes read as bool are true when nonzero.
ir::Value reinterpret(ir::Graph& g, ir::Value v, ir::DType to) {
  if (g.type(v).dtype == ir::DType::kBool || to == ir::DType::kBool) return g.convert(v, to);
  return g.bitcast_convert(v, to);
}

}  // namespace

ir::Value LoweringContext::storage_value(const at::Tensor& t, runtime::Slot& slot,
                                         ir::DType dtype) {
  // Held for this context's life, pending or not: slots_ knows a storage by its
  // Slot's address, and a temporary a rule read and dropped (a CPU index
  // uploaded by read_index) would free its Slot for the next temporary to
  // reuse, which then read as the first one's value.
  pending_storages_.push_back(t.storage());
  SlotUse& u = use(slot, dtype);
  if (slot.dtype == dtype) return u.flat;
  TORCH_CHECK(ir::byte_size(slot.dtype) == ir::byte_size(dtype), op_,
              ": reading a tpu storage of one element size as another (", t.scalar_type(),
              ") is not supported yet");
  return reinterpret(graph_, u.flat, dtype);
}

ir::Value LoweringContext::storage_offset(int64_t offset) {
  if (offset == 0) return graph_.constant_int(0, {ir::DType::kI64, {}});
  return scalar(c10::Scalar(offset), ir::DType::kI64);
}

ir::Value LoweringContext::scalar(const c10::Scalar& s, ir::DType dtype) {
  if (ir::is_complex(dtype)) {
    // Two real parameters (a 128-bit complex<f64> does not fit a literal).
    const ir::DType part = ir::complex_part(dtype);
    const c10::complex<double> z = s.toComplexDouble();
    return graph_.complex(scalar(c10::Scalar(z.real()), part), scalar(c10::Scalar(z.imag()), part));
  }
  return param(runtime::Runtime::get().scalar(dtype, scalar_bits(s, dtype), device_), {dtype, {}});
}

ir::Value LoweringContext::rng_state(const std::optional<at::Generator>& gen) {
  replayable_ = false;  // a new draw every call
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(device_);
  auto* impl = g.get<TpuGenerator>();
  std::pair<uint64_t, uint64_t> draw;
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    draw = impl->next_draw();
  }
  uint64_t state[2] = {draw.first, draw.second};
  auto& rt = runtime::Runtime::get();
  auto buf = rt.upload(state, ir::DType::kU64, {2}, device_);
  if (rt.mode() == runtime::EagerMode::kFused) {
    const bool is_default = impl == default_generator(device_).get<TpuGenerator>();
    runtime::fusion(device_).note_rng(buf.get(), is_default);
  }
  return param(std::move(buf), {ir::DType::kU64, {2}});
}

void LoweringContext::write(const at::Tensor& dst, ir::Value value) {
  // Replayable still: the dispatch cache replays a write only into the
  // storage of the same argument (written_slots()).
  TORCH_CHECK(dst.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two "
              "devices, tpu:",
              device_, " and ", dst.device(), "! (in ", op_, ")");
  // CPU's fill_ (zero_) and threshold_ build their TensorIterator without the
  // overlap check: an expanded tensor takes them (each alias gets one value).
  static const std::unordered_set<std::string> kOverlapAllowed = {
      "aten::fill_.Scalar", "aten::fill_.Tensor", "aten::zero_", "aten::threshold_"};
  TORCH_CHECK(
      at::has_internal_overlap(dst) != at::MemOverlap::Yes || kOverlapAllowed.count(op_) != 0,
      "unsupported operation: more than one element of the written-to tensor "
      "refers to a single memory location. Please clone() the tensor before "
      "performing the operation.");
  if (dst.numel() == 0) return;
  ir::DType dtype = to_ir(dst.scalar_type());
  value = convert_as_cpu(graph_, value, dtype);
  auto& slot = slot_to_write(dst);
  if (slot.pending) pending_storages_.push_back(dst.storage());
  SlotUse& u = use(slot, dtype);
  if (slot.dtype != dtype) {
    TORCH_CHECK(ir::byte_size(slot.dtype) == ir::byte_size(dtype), op_,
                ": writing a tpu storage of one element size as another is not supported");
    value = reinterpret(graph_, value, slot.dtype);
  }
  std::vector<int64_t> sizes, strides;
  for (int64_t i = 0; i < dst.dim(); ++i) {
    if (dst.size(i) == 1) continue;
    sizes.push_back(dst.size(i));
    strides.push_back(dst.stride(i));
  }
  value = graph_.reshape(value, sizes);
  int64_t n = dst.numel();
  int64_t offset = dst.storage_offset();
  int64_t total = slot.numel();
  ir::Value& flat = u.flat;
  auto perm = is_contiguous(sizes, strides) ? std::vector<int64_t>{}
                                            : contiguous_permutation(sizes, strides);
  bool dense = is_contiguous(sizes, strides) || !perm.empty();
  if (dense && !perm.empty()) value = graph_.transpose(value, perm);
  if (dense && offset == 0 && n == total) {
    flat = graph_.reshape(value, {total});
  } else if (dense) {
    flat = graph_.dynamic_update_slice(flat, graph_.reshape(value, {n}), {storage_offset(offset)});
  } else {
    ir::Value idx = flat_indices(graph_, sizes, strides, storage_offset(offset));
    flat = graph_.scatter(flat, idx, graph_.reshape(value, {n}), element_scatter(),
                          ir::Reducer::kReplace);
  }
  u.written = true;
  u.written_as = {to_ir(dst.scalar_type()),
                  std::vector<int64_t>(dst.sizes().begin(), dst.sizes().end())};
}

namespace {

// The extents of a dense buffer in memory order (dims by decreasing stride)
// whose leading part `strides` address, when they leave gaps (a stride larger
// than the dims inside it need); empty when they are dense; nullopt when they
// are neither (the result then takes the row-major layout, never strides that
// would run past its buffer).
std::optional<std::vector<int64_t>> padded_extents(const std::vector<int64_t>& in_memory,
                                                   const std::vector<int64_t>& order,
                                                   const std::vector<int64_t>& strides) {
  const size_t nd = order.size();
  std::vector<int64_t> padded(in_memory);
  int64_t inner = 1;  // the stride the next dim outwards would have if dense
  bool gaps = false;
  for (size_t j = nd; j-- > 0;) {
    const int64_t stride = strides[order[j]];
    if (in_memory[j] <= 1) continue;  // size-1 dims: any stride
    if (stride < inner) return std::nullopt;
    if (stride != inner) {
      // Pad the nearest inner dim of more than one element to reach it, or
      // else the nearest inner dim (lstsq's [1, k] solution: [k, 1] -> [k, M]).
      if (j + 1 == nd) return std::nullopt;
      size_t k = j + 1;
      while (k < nd && in_memory[k] <= 1) ++k;
      if (k == nd) k = j + 1;
      const int64_t below = inner / padded[k];
      if (below == 0 || stride % below != 0) return std::nullopt;
      padded[k] = stride / below;
      gaps = true;
    }
    inner = stride * in_memory[j];
  }
  return gaps ? padded : std::vector<int64_t>{};
}

}  // namespace

// run()'s result `i`, value `r`: a new tensor laid out as result_sizes_ /
// result_strides_ ask, and the flat value its buffer takes appended to `outs`
// (none for an empty result).
at::Tensor LoweringContext::make_result(size_t i, ir::Value r, std::vector<ir::Value>& outs) {
  const ir::TensorType t = graph_.type(r);  // a copy: adding nodes moves it
  if (auto sized = result_sizes_.find(i); sized != result_sizes_.end()) {
    // A flat value filling a storage larger than the tensor (a bucketed
    // cat's result): the tensor is contiguous at its start.
    TORCH_CHECK(makes_new_results_ && t.dims.size() == 1 && t.numel() >= numel_of(sized->second) &&
                    numel_of(sized->second) > 0,
                "tpu: internal error lowering ", op_, ": a result of ", t.numel(),
                " elements for sizes ", c10::IntArrayRef(sized->second));
    at::Tensor out = new_tensor(t.dims, to_aten(t.dtype), device_);
    out.unsafeGetTensorImpl()->set_sizes_contiguous(sized->second);
    outs.push_back(r);
    return out;
  }
  auto layout = result_strides_.find(i);
  if (layout == result_strides_.end() || layout->second.size() != t.dims.size()) {
    if (t.numel() > 0) outs.push_back(graph_.reshape(r, {t.numel()}));
    return new_tensor(t.dims, to_aten(t.dtype), device_);
  }
  // The buffer holds the value in memory order: dims by decreasing stride
  // (size-1 dims anywhere), i.e. the value transposed to that order.
  const std::vector<int64_t>& strides = layout->second;
  std::vector<int64_t> order(t.dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  std::vector<int64_t> in_memory;
  for (int64_t d : order) in_memory.push_back(t.dims[d]);
  // Strides with gaps (lstsq's solution: the first rows of a taller
  // buffer) name a padded buffer; the value fills its leading part.
  // (no elements: any strides, e.g. nonzero's (1, 0) for a [0, 2] result)
  const std::optional<std::vector<int64_t>> extents =
      t.numel() == 0 ? std::vector<int64_t>{} : padded_extents(in_memory, order, strides);
  if (!extents) {
    if (t.numel() > 0) outs.push_back(graph_.reshape(r, {t.numel()}));
    return new_tensor(t.dims, to_aten(t.dtype), device_);
  }
  const std::vector<int64_t>& padded = *extents;
  at::Tensor out = new_tensor(padded.empty() ? in_memory : padded, to_aten(t.dtype), device_);
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.dims, strides);
  if (t.numel() == 0) return out;
  ir::Value v = graph_.transpose(r, order);
  int64_t flat = t.numel();
  if (!padded.empty()) {
    std::vector<int64_t> low(padded.size(), 0), high(padded.size()), interior(padded.size(), 0);
    for (size_t j = 0; j < padded.size(); ++j) high[j] = padded[j] - in_memory[j];
    v = graph_.pad(v, graph_.constant(0.0, ir::TensorType{t.dtype, {}}), low, high, interior);
    flat = 1;
    for (int64_t e : padded) flat *= e;
  }
  outs.push_back(graph_.reshape(v, {flat}));
  return out;
}

// Strict mode's background compiles: whether the op is recorded to wait for
// its program (compiling on the pool) instead of running now. Sets `key` and
// `level` when it has set the graph's outputs to `outs`.
bool LoweringContext::defer_to_background(const std::vector<ir::Value>& outs, std::string& key,
                                          pjrt::Optimization& level) {
  auto& rt = runtime::Runtime::get();
  bool deferred = false;
  // A pending input: bound with no buffer by use() (background compiles were
  // on then, whatever they are now).
  bool pending_input = false;
  if (rt.mode() != runtime::EagerMode::kFused) {
    for (const auto& a : args_) pending_input = pending_input || (a.slot != nullptr && !a.buffer);
  }
  if (defers_pending() || pending_input) {
    // Strict mode's background compiles (runtime/compile_pool.h): a program
    // that is not loaded compiles on the pool while this op waits, recorded,
    // for its first read; so does an op reading such an op's result.
    graph_.set_outputs(outs);
    key = graph_.fingerprint();
    level = runtime::per_op_optimization(graph_);
    // An op making results of more than kMaxDeferredBytes runs at the op, so
    // that running out of device memory raises there as without background
    // compiles (its time goes to the data anyway): its pending inputs are
    // computed first.
    constexpr int64_t kMaxDeferredBytes = int64_t{256} << 20;
    int64_t bytes = 0;
    for (ir::Value v : outs) {
      bytes += graph_.type(v).numel() * static_cast<int64_t>(ir::byte_size(graph_.type(v).dtype));
    }
    if (pending_input && bytes > kMaxDeferredBytes) {
      compute_pending_inputs();
      pending_input = false;
    }
    deferred = pending_input ||
               (defers_pending() && !rt.program_loaded(key) && bytes <= kMaxDeferredBytes);
    if (deferred) rt.compile_ahead(graph_, op_, key, level);
  }
  return deferred;
}

// Fused mode, or a deferred strict op: the op's graph joins the device's
// pending graph (runtime/fusion.h); `tensors` take its values when it runs.
void LoweringContext::record(const std::vector<ir::Value>& results,
                             const std::vector<at::Tensor>& tensors,
                             const std::vector<ir::Value>& outs, bool deferred) {
  std::vector<runtime::Slot*> out_slots;
  for (auto& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    auto& slot = slot_of(t);
    slot.dtype = to_ir(t.scalar_type());
    out_slots.push_back(&slot);
  }
  // What the op produced, as the recompile guard reports it: results with
  // their shapes, then the storages written.
  std::vector<ir::TensorType> produced;
  for (ir::Value r : results) {
    if (r.valid()) produced.push_back(graph_.type(r));
  }
  for (auto& u : slots_) {
    if (!u.written) continue;
    out_slots.push_back(u.slot);
    produced.push_back(u.written_as);
  }
  try {
    if (deferred) {
      replayable_ = false;  // no program yet for the dispatch cache
      runtime::record_deferred(runtime::fusion(device_), graph_, args_, outs, out_slots, op_,
                               std::move(produced));
    } else {
      runtime::fusion(device_).record(graph_, args_, outs, out_slots, op_, std::move(produced));
    }
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", e.what());
  } catch (const ir::IrError& e) {
    TORCH_CHECK(false, "tpu: internal error lowering ", op_, ": ", e.what());
  }
}

// Strict (or debug) mode: compiles (cached) and runs the op's program (its
// outputs set); `tensors` and the written storages take its buffers.
void LoweringContext::execute_now(const std::vector<at::Tensor>& tensors, const std::string& key,
                                  pjrt::Optimization level) {
  auto& rt = runtime::Runtime::get();
  std::vector<pjrt::Buffer*> raw;
  raw.reserve(args_.size());
  for (auto& a : args_) raw.push_back(a.buffer.get());
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  try {
    // Runtime::run's two steps, keeping the program for the dispatch cache.
    executable_ = rt.compile(graph_, op_, key.empty() ? nullptr : &key, level);
    buffers = rt.execute(*executable_, raw, device_, op_);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", op_, " failed: ", e.what());
  } catch (const ir::IrError& e) {
    TORCH_CHECK(false, "tpu: internal error lowering ", op_, ": ", e.what());
  }
  size_t k = 0;
  for (auto& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    auto& slot = slot_of(t);
    slot.dtype = to_ir(t.scalar_type());
    slot.buffer = buffers[k++];
    slot.producer = op_;
  }
  for (auto& u : slots_) {
    if (!u.written) continue;
    u.slot->buffer = buffers[k++];
    u.slot->producer = op_;
  }
}

std::vector<at::Tensor> LoweringContext::run(const std::vector<ir::Value>& results) {
  std::vector<ir::Value> outs;
  std::vector<at::Tensor> tensors;
  for (size_t i = 0; i < results.size(); ++i) {
    tensors.push_back(results[i].valid() ? make_result(i, results[i], outs) : at::Tensor());
  }
  for (auto& u : slots_) {
    if (u.written) outs.push_back(u.flat);
  }
  if (outs.empty()) return tensors;
  pjrt::Optimization level = pjrt::Optimization::kFull;
  std::string key;
  const bool deferred = defer_to_background(outs, key, level);
  if (runtime::Runtime::get().mode() == runtime::EagerMode::kFused || deferred) {
    record(results, tensors, outs, deferred);
    return tensors;
  }
  if (key.empty()) {
    graph_.set_outputs(outs);
    level = runtime::per_op_optimization(graph_);
  }
  execute_now(tensors, key, level);
  return tensors;
}

std::unordered_map<std::string, Rule>& lowering_table() {
  static std::unordered_map<std::string, Rule> table;
  return table;
}

std::vector<std::string>& duplicate_lowerings() {
  static std::vector<std::string> names;
  return names;
}

RegisterLowering::RegisterLowering(const char* name, Rule rule) {
  if (!lowering_table().emplace(name, std::move(rule)).second) {
    duplicate_lowerings().push_back(name);
  }
}

std::unordered_map<std::string, Rule>& out_only_table() {
  static std::unordered_map<std::string, Rule> table;
  return table;
}

RegisterOutOnly::RegisterOutOnly(const char* name, Rule rule) {
  if (!out_only_table().emplace(name, std::move(rule)).second) {
    duplicate_lowerings().push_back(name);
  }
}

}  // namespace ttpu::aten
