#include "aten/device.h"

#include "aten/copy.h"
#include "aten/pinned.h"
#include "aten/memory.h"
#include "runtime/fusion.h"

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>

namespace ttpu::aten {
namespace {

thread_local c10::DeviceIndex t_current_device = 0;

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count_or_zero() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<TpuGenerator>(device < 0 ? t_current_device : device);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return c10::Device(c10::DeviceType::PrivateUse1, static_cast<runtime::Slot*>(data)->device);
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }
  c10::DeviceIndex getCurrentDevice() const override { return t_current_device; }
  void setCurrentDevice(c10::DeviceIndex d) const override { t_current_device = d; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

TpuHooks g_hooks;

}  // namespace

ir::DType to_ir(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: return ir::DType::kBool;
    case c10::kByte: return ir::DType::kU8;
    case c10::kChar: return ir::DType::kI8;
    case c10::kShort: return ir::DType::kI16;
    case c10::kInt: return ir::DType::kI32;
    case c10::kLong: return ir::DType::kI64;
    case c10::kUInt16: return ir::DType::kU16;
    case c10::kUInt32: return ir::DType::kU32;
    case c10::kUInt64: return ir::DType::kU64;
    case c10::kHalf: return ir::DType::kF16;
    case c10::kBFloat16: return ir::DType::kBF16;
    case c10::kFloat: return ir::DType::kF32;
    case c10::kDouble: return ir::DType::kF64;
    case c10::kComplexFloat: return ir::DType::kC64;
    case c10::kComplexDouble: return ir::DType::kC128;
    case c10::kFloat8_e4m3fn: return ir::DType::kF8E4M3FN;
    case c10::kFloat8_e5m2: return ir::DType::kF8E5M2;
    case c10::kFloat8_e4m3fnuz: return ir::DType::kF8E4M3FNUZ;
    case c10::kFloat8_e5m2fnuz: return ir::DType::kF8E5M2FNUZ;
    case c10::kFloat8_e8m0fnu: return ir::DType::kF8E8M0FNU;
    default: break;
  }
  // NotImplementedError, as CPU reports a dtype an op lacks (a TypeError would
  // turn `a + b` into Python's "unsupported operand type(s)").
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu does not support dtype ", t);
}

c10::ScalarType to_aten(ir::DType t) {
  switch (t) {
    case ir::DType::kBool: return c10::kBool;
    case ir::DType::kU8: return c10::kByte;
    case ir::DType::kI8: return c10::kChar;
    case ir::DType::kI16: return c10::kShort;
    case ir::DType::kI32: return c10::kInt;
    case ir::DType::kI64: return c10::kLong;
    case ir::DType::kU16: return c10::kUInt16;
    case ir::DType::kU32: return c10::kUInt32;
    case ir::DType::kU64: return c10::kUInt64;
    case ir::DType::kF16: return c10::kHalf;
    case ir::DType::kBF16: return c10::kBFloat16;
    case ir::DType::kF32: return c10::kFloat;
    case ir::DType::kF64: return c10::kDouble;
    case ir::DType::kC64: return c10::kComplexFloat;
    case ir::DType::kC128: return c10::kComplexDouble;
    case ir::DType::kF8E4M3FN: return c10::kFloat8_e4m3fn;
    case ir::DType::kF8E5M2: return c10::kFloat8_e5m2;
    case ir::DType::kF8E4M3FNUZ: return c10::kFloat8_e4m3fnuz;
    case ir::DType::kF8E5M2FNUZ: return c10::kFloat8_e5m2fnuz;
    case ir::DType::kF8E8M0FNU: return c10::kFloat8_e8m0fnu;
  }
  TORCH_CHECK(false, "unknown IR dtype");
}

ir::TensorType ir_type(const at::Tensor& t) {
  return ir::TensorType{to_ir(t.scalar_type()),
                        std::vector<int64_t>(t.sizes().begin(), t.sizes().end())};
}

namespace {

// The slot at a tpu storage's DataPtr address: the address, not the context,
// since a copy-on-write DataPtr's context is c10's. `write`: through
// mutable_data_ptr(), which materializes a copy-on-write storage first (a
// no-op otherwise).
runtime::Slot& slot_at(const c10::Storage& s, bool write) {
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1,
              "expected a tpu storage, got one on ", s.device());
  if (!addresses_a_slot(s.data_ptr()) && s.data_ptr().get() != nullptr) own_storage_slice(s);
  auto* slot = static_cast<runtime::Slot*>(write ? s.mutable_data_ptr().get() : s.data_ptr().get());
  TORCH_CHECK(slot != nullptr, "tpu storage without a slot");
  return *slot;
}

const c10::Storage& tpu_storage(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "expected a tpu tensor, got one on ", t.device());
  return t.storage();
}

}  // namespace

runtime::Slot& slot_of(const c10::Storage& s) { return slot_at(s, /*write=*/false); }
runtime::Slot& slot_of(const at::Tensor& t) { return slot_at(tpu_storage(t), false); }
runtime::Slot& slot_to_write(const c10::Storage& s) { return slot_at(s, /*write=*/true); }
runtime::Slot& slot_to_write(const at::Tensor& t) { return slot_at(tpu_storage(t), true); }

at::Tensor new_tensor(c10::IntArrayRef sizes, c10::ScalarType dtype, int device) {
  c10::DeviceIndex saved = t_current_device;
  t_current_device = static_cast<c10::DeviceIndex>(device);
  auto t = at::detail::empty_generic(sizes, tpu_allocator(),
                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype,
                                     std::nullopt);
  t_current_device = saved;
  return t;
}

c10::Storage new_storage(int64_t nbytes, int device) {
  c10::DeviceIndex saved = t_current_device;
  t_current_device = static_cast<c10::DeviceIndex>(device);
  c10::DataPtr data = tpu_allocator()->allocate(static_cast<size_t>(nbytes));
  t_current_device = saved;
  return c10::Storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes), std::move(data),
                      tpu_allocator(), /*resizable=*/true);
}

int current_device() { return t_current_device; }

void set_current_device(int device) { t_current_device = static_cast<c10::DeviceIndex>(device); }

void TpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resize_storage_bytes(storage, static_cast<int64_t>(newsize));
}

// --- generator

TpuGenerator::TpuGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  auto s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == at::kByte,
              "tpu RNG state must be a uint8 tensor of 16 bytes (seed, offset)");
  std::memcpy(&seed_, new_state.data(), 8);
  std::memcpy(&offset_, static_cast<const char*>(new_state.data()) + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  std::memcpy(t.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<char*>(t.data_ptr()) + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

std::pair<uint64_t, uint64_t> TpuGenerator::next_draw() { return {seed_, offset_++}; }

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::vector<at::Generator> gens;
  std::lock_guard<std::mutex> lock(mu);
  if (gens.empty()) {
    int n = std::max(1, device_count_or_zero());
    for (int i = 0; i < n; ++i) gens.push_back(at::make_generator<TpuGenerator>(i));
  }
  int idx = device < 0 ? t_current_device : device;
  TORCH_CHECK_INDEX(idx < static_cast<int>(gens.size()), "tpu device index ", idx,
                    " is out of range");
  return gens[idx];
}

int device_count_or_zero() noexcept {
  // A forked child may ask how many devices there are (DataLoader workers do),
  // though it may not use them.
  if (pjrt::in_forked_child()) return runtime::Runtime::device_count_if_started();
  try {
    return runtime::Runtime::get().device_count();
  } catch (...) {
    return 0;
  }
}

void check_device_index(int index) {
  const int n = device_count_or_zero();
  TORCH_CHECK_INDEX(index < n, "tpu device index ", index, " is out of range: this process has ", n,
                    " tpu device(s). On the CPU plugin, TORCHTPU_CPU_DEVICES=N (or "
                    "torchtpu.init(cpu_devices=N)) before the first tpu use gives a process N "
                    "devices; each process that names tpu:i needs i + 1 of them");
}

void register_device() {
  static bool done = false;
  if (done) return;
  done = true;
  static c10::impl::DeviceGuardImplRegistrar guard_reg(c10::DeviceType::PrivateUse1,
                                                       new_guard_impl());
  c10::SetAllocator(c10::DeviceType::PrivateUse1, tpu_allocator());
  at::RegisterPrivateUse1HooksInterface(&g_hooks);
}

}  // namespace ttpu::aten
