// torchtpu.spmd's programs over several tpu devices (spmd.h).
#include "aten/spmd.h"

#include <algorithm>
#include <stdexcept>

#include "aten/device.h"
#include "runtime/fusion.h"
#include "runtime/runtime.h"

namespace ttpu::aten {
namespace {

// The whole buffer of tpu tensor `t` on `device`, its pending value computed.
pjrt::Buffer* shard_buffer(const at::Tensor& t, int64_t device, const std::string& what) {
  TORCH_CHECK_VALUE(
      t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device, what,
      " must be on tpu:", device, ", got ", t.device());
  TORCH_CHECK_VALUE(t.numel() > 0, what, " is empty: shards of zero elements are not passed");
  TORCH_CHECK_VALUE(t.is_contiguous() && t.storage_offset() == 0 &&
                        t.numel() * static_cast<int64_t>(t.element_size()) ==
                            static_cast<int64_t>(t.storage().nbytes()) &&
                        !t.is_conj() && !t.is_neg(),
                    what, " must be contiguous and cover its storage (call .clone())");
  runtime::Slot& slot = slot_of(t);
  runtime::materialize(slot);
  TORCH_CHECK_VALUE(slot.buffer != nullptr, what, " holds no value (an uninitialized storage)");
  TORCH_CHECK_VALUE(slot.dtype == to_ir(t.scalar_type()), what, " is a ", t.scalar_type(),
                    " view of a storage of another element type: pass .clone()");
  return slot.buffer.get();
}

at::Tensor wrap_flat(std::shared_ptr<pjrt::Buffer> buffer, c10::ScalarType dtype, int device,
                     const std::string& name) {
  int64_t numel = 1;
  for (int64_t d : buffer->dims()) numel *= d;
  const ir::DType ir = to_ir(dtype);
  c10::Storage storage = new_storage(numel * ir::byte_size(ir), device);
  runtime::Slot& slot = slot_of(storage);
  slot.buffer = std::move(buffer);
  slot.dtype = ir;
  slot.producer = name;
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_contiguous({numel});
  return t;
}

template <typename F>
decltype(auto) plugin_errors_as_runtime_error(const std::string& name, F f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, name, ": ", e.what());
  }
}

}  // namespace

std::vector<std::vector<at::Tensor>> run_spmd(const std::string& text,
                                              const std::vector<int64_t>& devices,
                                              const std::vector<std::vector<at::Tensor>>& args,
                                              const std::vector<c10::ScalarType>& out_dtypes,
                                              const std::string& name) {
  const int count = runtime::Runtime::get().device_count();
  TORCH_CHECK_VALUE(!devices.empty(), name, ": no devices");
  std::vector<int> devs;
  for (int64_t d : devices) {
    TORCH_CHECK_VALUE(d >= 0 && d < count, name, ": tpu:", d, " is not one of this process's ",
                      count, " tpu devices");
    TORCH_CHECK_VALUE(std::find(devs.begin(), devs.end(), d) == devs.end(), name, ": tpu:", d,
                      " is named twice");
    devs.push_back(static_cast<int>(d));
  }
  std::vector<std::vector<pjrt::Buffer*>> per_device(devices.size());
  for (size_t i = 0; i < args.size(); ++i) {
    TORCH_CHECK_VALUE(args[i].size() == devices.size(), name, ": argument ", i, " has ",
                      args[i].size(), " shards for ", devices.size(), " devices");
    for (size_t d = 0; d < devices.size(); ++d) {
      const at::Tensor& t = args[i][d];
      TORCH_CHECK_VALUE(
          t.scalar_type() == args[i][0].scalar_type() && t.numel() == args[i][0].numel(), name,
          ": argument ", i, "'s shards differ in dtype or size");
      per_device[d].push_back(
          shard_buffer(t, devices[d],
                       name + ": argument " + std::to_string(i) + "'s shard " + std::to_string(d)));
    }
  }
  auto outs = plugin_errors_as_runtime_error(
      name, [&] { return runtime::Runtime::get().run_spmd(text, devs, per_device, name); });
  const size_t n_out = outs.empty() ? 0 : outs[0].size();
  TORCH_CHECK_VALUE(out_dtypes.size() == n_out, name, ": ", out_dtypes.size(),
                    " output dtypes for a program of ", n_out, " outputs");
  std::vector<std::vector<at::Tensor>> results(n_out);
  for (size_t o = 0; o < n_out; ++o) {
    for (size_t d = 0; d < outs.size(); ++d) {
      results[o].push_back(wrap_flat(std::move(outs[d][o]), out_dtypes[o], devs[d], name));
    }
  }
  return results;
}

std::vector<at::Tensor> all_reduce_local(const std::vector<at::Tensor>& tensors,
                                         const std::string& op) {
  using runtime::ReduceOp;
  ReduceOp r;
  if (op == "sum")
    r = ReduceOp::kSum;
  else if (op == "avg")
    r = ReduceOp::kAvg;
  else if (op == "max")
    r = ReduceOp::kMax;
  else if (op == "min")
    r = ReduceOp::kMin;
  else if (op == "product")
    r = ReduceOp::kProduct;
  else
    TORCH_CHECK_VALUE(false, "all_reduce: unknown op '", op, "' (sum, avg, max, min, product)");
  TORCH_CHECK_VALUE(!tensors.empty(), "all_reduce: no tensors");
  std::vector<pjrt::Buffer*> buffers;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1, "all_reduce: tensor ", i,
                      " is on ", t.device(), ", not tpu");
    buffers.push_back(
        shard_buffer(t, t.device().index(), "all_reduce: tensor " + std::to_string(i)));
  }
  auto outs = plugin_errors_as_runtime_error(
      "all_reduce", [&] { return runtime::Runtime::get().all_reduce_local(buffers, r); });
  std::vector<at::Tensor> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    result.push_back(wrap_flat(std::move(outs[i]), tensors[i].scalar_type(),
                               tensors[i].device().index(), "all_reduce")
                         .view(tensors[i].sizes()));
  }
  return result;
}

}  // namespace ttpu::aten
