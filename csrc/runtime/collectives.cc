// Runtime collectives: the cross-process capability probe and the all-reduce
// over several local devices in one program (the PJRT layer's multi-device
// executables, csrc/pjrt/README.md).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace ttpu::runtime {
namespace {

constexpr size_t kMaxCollectivePrograms = 256;

// MLIR element type names of the types all_reduce_local accepts.
const char* mlir_element(pjrt::ElementType t) {
  using E = pjrt::ElementType;
  switch (t) {
    case E::kS8: return "i8";
    case E::kS16: return "i16";
    case E::kS32: return "i32";
    case E::kS64: return "i64";
    case E::kU8: return "ui8";
    case E::kU16: return "ui16";
    case E::kU32: return "ui32";
    case E::kU64: return "ui64";
    case E::kF16: return "f16";
    case E::kBF16: return "bf16";
    case E::kF32: return "f32";
    case E::kF64: return "f64";
    case E::kC64: return "complex<f32>";
    case E::kC128: return "complex<f64>";
    case E::kPred: break;
  }
  return nullptr;
}

bool is_inexact(pjrt::ElementType t) {
  using E = pjrt::ElementType;
  return t == E::kF16 || t == E::kBF16 || t == E::kF32 || t == E::kF64 || t == E::kC64 ||
         t == E::kC128;
}

const char* combiner(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return "stablehlo.add";
    case ReduceOp::kProduct: return "stablehlo.multiply";
    case ReduceOp::kMin: return "stablehlo.minimum";
    case ReduceOp::kMax: return "stablehlo.maximum";
  }
  return "stablehlo.add";
}

std::string all_reduce_text(pjrt::ElementType type, const std::vector<int64_t>& dims, ReduceOp op,
                            int n) {
  const std::string elem = mlir_element(type);
  std::string shape;
  for (int64_t d : dims) shape += std::to_string(d) + "x";
  const std::string t = "tensor<" + shape + elem + ">";
  const std::string scalar = "tensor<" + elem + ">";
  std::string group;
  for (int i = 0; i < n; ++i) group += (i ? ", " : "") + std::to_string(i);

  std::string text = "module @all_reduce {\n  func.func public @main(%a: " + t + ") -> " + t +
                     " {\n    %0 = \"stablehlo.all_reduce\"(%a) ({\n"
                     "      ^bb0(%x: " +
                     scalar + ", %y: " + scalar +
                     "):\n"
                     "        %s = " +
                     combiner(op) + " %x, %y : " + scalar +
                     "\n"
                     "        stablehlo.return %s : " +
                     scalar +
                     "\n"
                     "    }) {replica_groups = dense<[[" +
                     group + "]]> : tensor<1x" + std::to_string(n) + "xi64>} : (" + t + ") -> " +
                     t + "\n";
  std::string result = "%0";
  if (op == ReduceOp::kAvg) {
    // Divided on the device, in the buffer's own type, as c10d's AVG does.
    const std::string count = std::to_string(n) + ".0";
    const bool complex = type == pjrt::ElementType::kC64 || type == pjrt::ElementType::kC128;
    text += "    %n = stablehlo.constant dense<" + (complex ? "(" + count + ", 0.0)" : count) +
            "> : " + t + "\n";
    text += "    %1 = stablehlo.divide %0, %n : " + t + "\n";
    result = "%1";
  }
  return text + "    return " + result + " : " + t + "\n  }\n}\n";
}

// The `mhlo.num_replicas` attribute of the text's module, or 1. Reads only the
// module's first line: run on every run_spmd call, over texts of megabytes.
int module_replicas(const std::string& text) {
  const size_t module = text.find("module");
  if (module == std::string::npos) return 1;
  const std::string_view head(text.data() + module,
                              std::min(text.find('\n', module), text.size()) - module);
  constexpr std::string_view kKey = "mhlo.num_replicas = ";
  const size_t at = head.find(kKey);
  if (at == std::string_view::npos) return 1;
  return std::atoi(std::string(head.substr(at + kKey.size(), 12)).c_str());
}

}  // namespace

bool Runtime::supports_cross_process_collectives() const {
  return client_->global_device_count() > client_->device_count();
}

std::vector<std::shared_ptr<pjrt::Buffer>> Runtime::all_reduce_local(
    const std::vector<pjrt::Buffer*>& buffers, ReduceOp op) {
  if (buffers.empty()) throw std::invalid_argument("all_reduce_local: no buffers");
  std::vector<int> devices;
  std::set<int> seen;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i] == nullptr) {
      throw std::invalid_argument("all_reduce_local: buffer " + std::to_string(i) + " is null");
    }
    PJRT_Device* where = buffers[i]->device();
    int index = -1;
    for (int d = 0; d < client_->device_count(); ++d) {
      if (client_->device(d) == where) index = d;
    }
    if (index < 0 || !seen.insert(index).second) {
      throw std::invalid_argument("all_reduce_local: buffer " + std::to_string(i) +
                                  (index < 0
                                       ? " is not on a device of this runtime"
                                       : " is on device " + std::to_string(index) +
                                             ", as an earlier one is: one buffer per device"));
    }
    devices.push_back(index);
  }
  const pjrt::ElementType type = buffers[0]->element_type();
  const std::vector<int64_t> dims = buffers[0]->dims();
  for (size_t i = 1; i < buffers.size(); ++i) {
    if (buffers[i]->element_type() != type || buffers[i]->dims() != dims) {
      throw std::invalid_argument("all_reduce_local: buffer " + std::to_string(i) +
                                  " differs from buffer 0 in element type or dims");
    }
  }
  if (mlir_element(type) == nullptr) {
    throw std::invalid_argument(
        "all_reduce_local: bool buffers are not reduced; "
        "convert to uint8 first");
  }
  if (op == ReduceOp::kAvg && !is_inexact(type)) {
    throw std::invalid_argument("all_reduce_local: AVG needs a floating or complex type");
  }

  const int n = static_cast<int>(buffers.size());
  pjrt::MultiDeviceOptions options;
  options.num_replicas = n;
  for (int d : devices) options.device_ids.push_back(client_->device_id(d));
  const std::string text = all_reduce_text(type, dims, op, n);

  auto exe = multi_device_program(text, options, "all_reduce_local");
  // The executable's device order is the assignment's: buffers[d] on devices[d].
  std::vector<std::vector<pjrt::Buffer*>> args;
  for (pjrt::Buffer* b : buffers) args.push_back({b});
  auto outs = run_multi(*exe, args, devices, "all_reduce_local");
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  for (auto& out : outs) results.push_back(std::move(out[0]));
  return results;
}

std::shared_ptr<pjrt::Executable> Runtime::multi_device_program(
    const std::string& text, const pjrt::MultiDeviceOptions& options, const char* name) {
  std::string key = text;
  for (int64_t id : options.device_ids) key += "," + std::to_string(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = collectives_.find(key);
    if (it != collectives_.end()) {
      ++metrics_.cache_hits;
      return it->second;
    }
  }
  ++metrics_.cache_misses;
  const auto start = std::chrono::steady_clock::now();
  auto exe = client_->compile(text, options);
  ++metrics_.compiles;
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  metrics_.compile_ns += ns;
  if (trace::active()) {
    trace::Record r;
    r.kind = trace::Kind::kCompile;
    r.name = name;
    r.end_ns = trace::now_ns();
    r.start_ns = r.end_ns - ns;
    trace::add(std::move(r));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (collectives_.size() >= kMaxCollectivePrograms) collectives_.clear();
  collectives_.emplace(key, exe);
  return exe;
}

std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> Runtime::run_multi(
    pjrt::Executable& exe, const std::vector<std::vector<pjrt::Buffer*>>& args,
    const std::vector<int>& devices, const std::string& name) {
  const int64_t queued = trace::active() ? trace::now_ns() : 0;
  auto outs = exe.execute_multi(args);
  ++metrics_.executes;
  for (size_t d = 0; d < outs.size(); ++d) {
    // One execute for the metrics; one record per device on the timeline.
    if (queued != 0) trace::add_execute(outs[d], name, devices[d], queued);
    track(outs[d], name, devices[d]);
  }
  if (mode_ == EagerMode::kDebug) {
    // Interruptible as every debug-mode wait (the results are tracked above).
    for (const auto& out : outs) {
      for (const auto& r : out) r->await_ready(/*interruptible=*/true);
    }
  }
  return outs;
}

std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> Runtime::run_spmd(
    const std::string& text, const std::vector<int>& devices,
    const std::vector<std::vector<pjrt::Buffer*>>& args, const std::string& name) {
  if (devices.empty()) throw std::invalid_argument(name + ": no devices");
  std::set<int> seen;
  pjrt::MultiDeviceOptions options;
  if (module_replicas(text) > 1) {
    // A per-device program run once per device (torchtpu.spmd.shard_map):
    // no partitioner, its collectives name replica ids.
    options.num_replicas = static_cast<int>(devices.size());
  } else {
    options.num_partitions = static_cast<int>(devices.size());
    options.partitioner = pjrt::Partitioner::kShardy;
  }
  for (int d : devices) {
    if (d < 0 || d >= client_->device_count()) {
      throw std::invalid_argument(name + ": device " + std::to_string(d) +
                                  " is not one of this "
                                  "process's " +
                                  std::to_string(client_->device_count()) + " devices");
    }
    if (!seen.insert(d).second) {
      throw std::invalid_argument(name + ": device " + std::to_string(d) + " is named twice");
    }
    options.device_ids.push_back(client_->device_id(d));
  }
  if (args.size() != devices.size()) {
    throw std::invalid_argument(name + ": " + std::to_string(args.size()) + " argument lists for " +
                                std::to_string(devices.size()) + " devices");
  }
  auto exe = multi_device_program(text, options, name.c_str());
  return run_multi(*exe, args, devices, name);
}

}  // namespace ttpu::runtime
