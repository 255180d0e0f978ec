// Moving tensors between CPU and tpu, and between tpu tensors: _copy_from (which
// copy_, .to() and .cpu() reach), _copy_from_and_resize, _local_scalar_dense
// (.item()). Reading a value is the only place the host waits in strict mode.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/copy.h"
#include "aten/deferred_check.h"
#include "aten/host_staging.h"
#include "aten/lowering.h"
#include "aten/memory.h"
#include "aten/ops_util.h"
#include "aten/pinned.h"

namespace ttpu::aten {
namespace {

bool covers_storage(const at::Tensor& t) {
  const auto& slot = slot_of(t);
  return t.storage_offset() == 0 && t.is_contiguous() &&
         t.numel() * static_cast<int64_t>(t.element_size()) == slot.nbytes;
}

// Whether dense host `src` can become tpu `dst`'s whole buffer as one upload
// (same dtype and shape, no lazy conj / neg bits, dst covering its storage).
bool one_upload(const at::Tensor& dst, const at::Tensor& src) {
  return dst.numel() > 0 && src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() &&
         src.is_contiguous() && !src.is_conj() && !src.is_neg() && !dst.is_conj() &&
         !dst.is_neg() && covers_storage(dst);
}

// `dst`'s storage now holds `buffer`, written whole by a copy from the host.
void store_upload(const at::Tensor& dst, std::shared_ptr<pjrt::Buffer> buffer) {
  auto& slot = slot_to_write(dst);
  runtime::forget_pending(slot);  // fully overwritten: a pending value is moot
  // The strings are written only when they change: a collective's write-back
  // runs here on gloo's thread while the caller may read the slot (backend.h).
  if (!slot.error.empty()) slot.error.clear();
  slot.buffer = std::move(buffer);
  slot.dtype = to_ir(dst.scalar_type());
  if (slot.producer != "aten::_copy_from") slot.producer = "aten::_copy_from";
}

// Bytes of a slot's whole buffer on the host, as a 1-D CPU tensor of its dtype.
at::Tensor download_slot(runtime::Slot& slot) {
  run_deferred_checks();
  try {
    runtime::materialize(slot);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", e.what());
  }
  auto cpu =
      at::empty({slot.numel()}, at::TensorOptions().dtype(to_aten(slot.dtype)).device(at::kCPU));
  if (slot.buffer == nullptr) {
    cpu.zero_();
    return cpu;
  }
  try {
    runtime::Runtime::get().download(*slot.buffer, cpu.data_ptr(), slot.nbytes);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", slot.producer.empty() ? "a transfer" : slot.producer,
                " (issued earlier, run asynchronously) failed: ", e.what());
  }
  return cpu;
}

// A whole tpu buffer into a dense CPU tensor of the same dtype and shape: one
// download into dst's own memory. Host staging of collectives (a reused,
// already-touched buffer) goes this way; a temporary would cost its page
// faults each time (5 ms for 1 MB on this machine). False: not that case.
bool download_into(const at::Tensor& src, const at::Tensor& dst) {
  if (src.numel() == 0 || src.is_conj() || src.is_neg() || dst.is_conj() || dst.is_neg() ||
      src.scalar_type() != dst.scalar_type() || src.sizes() != dst.sizes() ||
      !covers_storage(src) || !dst.is_contiguous())
    return false;
  auto& slot = slot_of(src);
  if (slot.dtype != to_ir(src.scalar_type())) return false;
  run_deferred_checks();
  try {
    runtime::materialize(slot);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", e.what());
  }
  if (slot.buffer == nullptr) {
    const_cast<at::Tensor&>(dst).zero_();
    return true;
  }
  try {
    runtime::Runtime::get().download(*slot.buffer, dst.data_ptr(), slot.nbytes);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", slot.producer.empty() ? "a transfer" : slot.producer,
                " (issued earlier, run asynchronously) failed: ", e.what());
  }
  return true;
}

// `src`'s values (raw: its conj / neg bits are left to the caller) as a
// contiguous tensor of its shape on tpu:`device`. The buffer moves with the
// plugin's device-to-device copy, or through the host where it has none.
at::Tensor to_other_device(const at::Tensor& src, int device) {
  at::Tensor dense = src;
  auto* slot = &slot_of(src);
  const bool whole = covers_storage(src) && !slot->pending && slot->buffer != nullptr &&
                     slot->dtype == to_ir(src.scalar_type());
  if (!whole) {
    LoweringContext ctx("aten::_copy_from", src.device().index());
    dense = ctx.run({ctx.tensor(src)})[0];
    slot = &slot_of(dense);
    try {
      runtime::materialize(*slot);
    } catch (const pjrt::PjrtError& e) {
      TORCH_CHECK(false, "tpu: ", e.what());
    }
  }
  at::Tensor out = new_tensor(src.sizes(), src.scalar_type(), device);
  auto& dst = slot_of(out);
  try {
    dst.buffer =
        runtime::Runtime::get().copy_to_device(*slot->buffer, slot->dtype, slot->nbytes, device);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: copy from tpu:", src.device().index(), " to tpu:", device,
                " failed: ", e.what());
  }
  dst.dtype = slot->dtype;
  dst.producer = "aten::_copy_from";
  return out;
}

}  // namespace

at::Tensor to_host(const at::Tensor& src) {
  auto& slot = slot_of(src);
  if (src.numel() == 0) {
    return at::empty(src.sizes(), src.options().device(at::kCPU));
  }
  if (auto read = read_with_checks(src)) return *std::move(read);  // (checks pending)
  // A small view of a big storage is materialised on device first, so only
  // its bytes cross.
  if (slot.buffer != nullptr && slot.dtype == to_ir(src.scalar_type()) &&
      2 * src.numel() * static_cast<int64_t>(src.element_size()) < slot.nbytes) {
    LoweringContext ctx("aten::_copy_from", src.device().index());
    auto dense = ctx.run({ctx.tensor(src)})[0];
    return download_slot(slot_of(dense)).view(src.sizes());
  }
  at::Tensor flat = download_slot(slot);
  if (flat.scalar_type() != src.scalar_type()) flat = flat.view(src.scalar_type());
  return flat.as_strided(src.sizes(), src.strides(), src.storage_offset());
}

void from_host(const at::Tensor& dst, const at::Tensor& src_cpu) {
  // The conj / neg bits (x.conj(), x.conj().imag) are lazy: resolve the
  // source's, then store what `dst`'s own bits will undo when read.
  at::Tensor src = src_cpu.resolve_conj().resolve_neg();
  if (dst.is_conj()) src = src.conj().resolve_conj();
  if (dst.is_neg()) src = src.neg();
  src = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  if (dst.numel() == 0) return;
  auto& slot = slot_to_write(dst);
  int device = dst.device().index();
  if (covers_storage(dst)) {
    runtime::forget_pending(slot);  // fully overwritten: a pending value is moot
    slot.error.clear();
    slot.buffer = runtime::Runtime::get().upload(src.data_ptr(), to_ir(dst.scalar_type()),
                                                 {dst.numel()}, device);
    slot.dtype = to_ir(dst.scalar_type());
    slot.producer = "aten::_copy_from";
    return;
  }
  at::Tensor tmp = new_tensor(dst.sizes(), dst.scalar_type(), device);
  from_host(tmp, src);
  LoweringContext ctx("aten::_copy_from", device);
  ctx.write(dst, ctx.tensor(tmp));
  ctx.run({});
}

void adopt_host(const at::Tensor& dst, const at::Tensor& src) {
  TORCH_CHECK(src.device().is_cpu() && dst.device().type() == c10::DeviceType::PrivateUse1,
              "tpu: adopt_host copies a CPU tensor into a tpu tensor");
  if (!one_upload(dst, src)) {
    from_host(dst, src);
    return;
  }
  // The plugin may read (and, for a donated buffer, write) this memory for as
  // long as the buffer lives: the storage stays alive until it says so.
  store_upload(dst,
               runtime::Runtime::get().upload_adopting(
                   src.data_ptr(), to_ir(dst.scalar_type()), {dst.numel()}, dst.device().index(),
                   [keep = src.storage()]() mutable { keep = c10::Storage(); }));
}

std::shared_ptr<void> adopt_host_retiring(const at::Tensor& dst, const at::Tensor& src) {
  // Read on the writing thread: reads elsewhere do not race with it, and the
  // only writer of a collective's output is its own write-back.
  std::shared_ptr<void> old = slot_of(dst).buffer;
  adopt_host(dst, src);
  return old;
}

std::function<void()> download_later(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(src.device().type() == c10::DeviceType::PrivateUse1 && dst.device().is_cpu(),
              "tpu: download_later reads a tpu tensor into a CPU tensor");
  const bool plain = src.numel() > 0 && !src.is_conj() && !src.is_neg() && !dst.is_conj() &&
                     !dst.is_neg() && src.scalar_type() == dst.scalar_type() &&
                     src.sizes() == dst.sizes() && dst.is_contiguous() &&
                     slot_of(src).dtype == to_ir(src.scalar_type());
  if (!plain) {
    const_cast<at::Tensor&>(dst).copy_(src);
    return nullptr;
  }
  at::Tensor dense = src;
  if (!covers_storage(src)) {
    // A view: its elements are gathered on the device (launched, not waited
    // for), so only they cross and the copy stays off this thread.
    LoweringContext ctx("aten::_copy_from", src.device().index());
    dense = ctx.run({ctx.tensor(src)})[0];
  }
  auto& slot = slot_of(dense);
  run_deferred_checks();
  try {
    runtime::materialize(slot);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", e.what());
  }
  if (slot.buffer == nullptr) {  // never written: zeros
    const_cast<at::Tensor&>(dst).zero_();
    return nullptr;
  }
  // The step holds the buffer (not the slot, which later ops may refill).
  return [buffer = slot.buffer, nbytes = slot.nbytes, dst,
          producer = slot.producer.empty() ? std::string("a transfer") : slot.producer] {
    try {
      runtime::Runtime::get().download(*buffer, dst.data_ptr(), nbytes);
    } catch (const pjrt::PjrtError& e) {
      TORCH_CHECK(false, "tpu: ", producer,
                  " (issued earlier, run asynchronously) failed: ", e.what());
    }
  };
}

namespace {

// A non_blocking copy from pinned host memory that can go as one upload: started
// here, finished by the plugin after return. False: not that case.
bool from_pinned_async(const at::Tensor& dst, const at::Tensor& src) {
  if (!one_upload(dst, src) || !is_pinned_ptr(src.data_ptr())) return false;
  // The plugin reads the pinned block after this returns: its storage stays
  // alive until the copy is done, even if the caller drops the tensor (as
  // CUDA's pinned allocator holds a freed block until its copies complete).
  store_upload(dst,
               runtime::Runtime::get().upload_async(
                   src.data_ptr(), to_ir(dst.scalar_type()), {dst.numel()}, dst.device().index(),
                   [keep = src.storage()]() mutable { keep = c10::Storage(); }));
  return true;
}

}  // namespace

void reinterpret_slot(runtime::Slot& slot, ir::DType dtype) {
  at::Tensor bytes = download_slot(slot);
  slot.buffer = runtime::Runtime::get().upload(bytes.data_ptr(), dtype,
                                               {slot.nbytes / ir::byte_size(dtype)}, slot.device);
  slot.dtype = dtype;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const bool src_tpu = self.device().type() == c10::DeviceType::PrivateUse1;
  const bool dst_tpu = dst.device().type() == c10::DeviceType::PrivateUse1;
  TORCH_CHECK(src_tpu || self.device().is_cpu(), "tpu: copy from ", self.device(),
              " is not supported; copy to cpu first");
  TORCH_CHECK(dst_tpu || dst.device().is_cpu(), "tpu: copy to ", dst.device(),
              " is not supported; copy to cpu first");
  // TensorIterator's check on CPU: the source broadcasts with the destination
  // (an empty dst included: [0, 3].copy_([2, 3]) raises infer_size's message),
  // and the broadcast shape is the destination's.
  const std::vector<int64_t> shape = at::infer_size(dst.sizes(), self.sizes());
  TORCH_CHECK(dst.sizes() == c10::IntArrayRef(shape), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  if (src_tpu && !dst_tpu && download_into(self, dst)) {
    // Downloaded straight into dst (no host temporary).
  } else if (src_tpu && !dst_tpu) {
    // The CPU copy applies the source's conj / neg bits.
    at::Tensor host = to_host(self);
    if (self.is_conj()) host = host.conj();
    if (self.is_neg()) host = at::_neg_view(host);
    dst.copy_(host);
  } else if (!src_tpu && dst_tpu) {
    // From pageable memory the copy is done on return, as CUDA's is.
    if (!non_blocking || !from_pinned_async(dst, self)) from_host(dst, self);
  } else if (dst.numel() > 0) {
    // TensorIterator's check: a source sharing some (not all) of dst's
    // elements (d[0:9].copy_(d[1:10]), x.t().copy_(x)) is refused, as on CPU.
    if (self.device() == dst.device()) at::assert_no_partial_overlap(dst, self);
    at::Tensor src = self;
    if (self.device() != dst.device()) {
      // Only the source's elements cross, then the copy below runs on dst's
      // device; the lazy conj / neg bits travel as bits.
      src = to_other_device(self, dst.device().index());
      if (self.is_conj()) src._set_conj(true);
      if (self.is_neg()) src._set_neg(true);
    }
    LoweringContext ctx("aten::copy_", dst.device().index());
    auto& g = ctx.g();
    ir::Value v = ctx.tensor(src);
    if (ir::is_complex(g.type(v).dtype)) {
      // A conj bit on one side only: the stored values differ by conjugation.
      if (src.is_conj() != dst.is_conj()) {
        v = g.complex(g.real(v), g.unary(ir::Op::kNeg, g.imag(v)));
      }
      // Complex into real keeps the real part (XLA has no complex -> real
      // convert); into bool it is z != 0, either part counting (as on CPU).
      if (dst.scalar_type() == at::kBool) {
        ir::Value re = g.real(v), im = g.imag(v);
        ir::Value zero = ctx.g().constant(0, g.type(re));
        v = g.binary(ir::Op::kOr, g.compare(ir::Cmp::kNE, re, zero),
                     g.compare(ir::Cmp::kNE, im, zero));
      } else if (!dst.is_complex()) {
        v = g.real(v);
      }
    }
    if (src.is_neg() != dst.is_neg()) v = g.unary(ir::Op::kNeg, v);
    ctx.write(dst, broadcast_to(ctx, v, dst.sizes()));
    ctx.run({});
  }
  return dst;
}

namespace {

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_out(dst, self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  return to_host(self).item();
}

// torch.equal: same sizes and every element equal after type promotion (NaN
// never equals). The answer is a host bool, so it is read: a sync, as on CUDA.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "Expected all tensors to be on the same device, "
              "but found at least two devices, ",
              self.device(), " and ", other.device(), "!");
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  LoweringContext ctx("aten::equal", self.device().index());
  auto& g = ctx.g();
  const ir::DType common = to_ir(at::result_type(self, other));
  ir::Value same = g.compare(ir::Cmp::kEQ, g.convert(ctx.tensor(self), common),
                             g.convert(ctx.tensor(other), common));
  ir::Value all = reduce(ctx, g.reshape(same, {self.numel()}), {0}, false, ir::Reducer::kAnd);
  return to_host(ctx.run({all})[0]).item<bool>();
}

}  // namespace

// copy_ reaches _copy_from for tpu tensors; _copy_from (above) applies the
// conj / neg bits itself. Without these fallthroughs the Conjugate and
// Negative fallbacks would resolve the source by clone, whose copy_ calls
// _copy_from again: an endless recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
  m.impl("equal", &equal);
}

void own_storage_slice(const c10::Storage& storage) {
  const c10::DataPtr& data = storage.data_ptr();
  // Storage slicing is the one maker of a tpu DataPtr the tpu allocator did
  // not make; its context is the parent StorageImpl, checked to be ours.
  auto* parent = static_cast<c10::StorageImpl*>(data.get_context());
  TORCH_CHECK(parent != nullptr && parent->allocator() == tpu_allocator() &&
                  addresses_a_slot(parent->data_ptr()),
              "tpu: a storage whose memory torchtpu did not allocate");
  const int64_t offset =
      static_cast<const char*>(data.get()) - static_cast<const char*>(parent->data_ptr().get());
  const int64_t nbytes = static_cast<int64_t>(storage.nbytes());
  TORCH_CHECK(offset >= 0 && offset + nbytes <= static_cast<int64_t>(parent->nbytes()),
              "tpu: a storage slice outside its storage");
  auto& from = *static_cast<runtime::Slot*>(parent->data_ptr().get());
  const int device = from.device;
  c10::Storage own = new_storage(nbytes, device);
  runtime::Slot& slot = slot_of(own);
  const int64_t size = ir::byte_size(from.dtype);
  slot.dtype = offset % size == 0 && nbytes % size == 0 ? from.dtype : ir::DType::kU8;
  slot.producer = "a slice of a storage";
  if (nbytes > 0) {
    at::Tensor bytes = download_slot(from).view(at::kByte).narrow(0, offset, nbytes).contiguous();
    slot.buffer = runtime::Runtime::get().upload(bytes.data_ptr(), slot.dtype,
                                                 {nbytes / ir::byte_size(slot.dtype)}, device);
  }
  c10::DataPtr moved = own.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr());
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(moved));
}

}  // namespace ttpu::aten
