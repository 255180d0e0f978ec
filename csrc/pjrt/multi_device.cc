// Programs over several devices: compiling with MultiDeviceOptions and
// executing with num_devices = N (pjrt.h, README "One program over several
// devices").
#include <set>
#include <string>
#include <vector>

#include "pjrt/gate.h"
#include "pjrt/pjrt.h"
#include "pjrt/signature.h"

namespace ttpu::pjrt {

using namespace detail;

std::shared_ptr<Executable> Client::compile(const std::string& stablehlo_text,
                                            const MultiDeviceOptions& o) {
  constexpr char kMethod[] = "PJRT_Client_Compile";
  if (o.num_replicas < 1 || o.num_partitions < 1) {
    throw PjrtError(kMethod,
                    "num_replicas and num_partitions must be >= 1, got " +
                        std::to_string(o.num_replicas) + " and " + std::to_string(o.num_partitions),
                    -1);
  }
  const int64_t n = static_cast<int64_t>(o.num_replicas) * o.num_partitions;
  if (o.device_ids.empty()) {
    const int available = global_device_count();
    if (n > available) {
      throw PjrtError(kMethod,
                      std::to_string(o.num_replicas) + " replicas x " +
                          std::to_string(o.num_partitions) + " partitions need " +
                          std::to_string(n) + " devices; the client has " +
                          std::to_string(available),
                      -1);
    }
  } else {
    if (static_cast<int64_t>(o.device_ids.size()) != n) {
      throw PjrtError(kMethod,
                      "device_ids has " + std::to_string(o.device_ids.size()) + " ids for " +
                          std::to_string(n) + " devices",
                      -1);
    }
    std::set<int64_t> seen;
    for (int64_t id : o.device_ids) {
      if (id < 0 || !seen.insert(id).second) {
        throw PjrtError(
            kMethod,
            "device id " + std::to_string(id) + (id < 0 ? " is negative" : " appears twice"), -1);
      }
    }
  }
  auto exe = compile_bytes(stablehlo_text, compile_options_bytes(o));
  if (auto params = main_parameters(stablehlo_text)) {
    exe->params_ = std::make_shared<const std::vector<ParamType>>(std::move(*params));
  }
  exe->params_are_per_device_ = o.partitioner == Partitioner::kNone;
  return exe;
}

std::vector<int> Executable::query_addressable_devices() const {
  auto args = TTPU_ARGS(PJRT_LoadedExecutable_AddressableDevices_Args);
  args.executable = exe_;
  TTPU_CALL(client_->api(), PJRT_LoadedExecutable_AddressableDevices, &args);
  std::vector<int> indices;
  indices.reserve(args.num_addressable_devices);
  for (size_t i = 0; i < args.num_addressable_devices; ++i) {
    int index = -1;
    for (int d = 0; d < client_->device_count(); ++d) {
      if (client_->device(d) == args.addressable_devices[i]) index = d;
    }
    if (index < 0) {
      throw PjrtError("PJRT_LoadedExecutable_AddressableDevices",
                      "executable names a device the client does not list", -1);
    }
    indices.push_back(index);
  }
  return indices;
}

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace

void Executable::check_multi_args(const std::vector<std::vector<Buffer*>>& args) const {
  constexpr char kMethod[] = "PJRT_LoadedExecutable_Execute";
  const size_t num_args = params_ ? params_->size() : args[0].size();
  std::vector<ElementType> types;
  std::vector<std::vector<int64_t>> dims;
  for (size_t d = 0; d < args.size(); ++d) {
    if (args[d].size() != num_args) {
      throw PjrtError(kMethod,
                      "argument list " + std::to_string(d) + " has " +
                          std::to_string(args[d].size()) + " arguments, the program " +
                          (params_ ? "takes " : "list 0 has ") + std::to_string(num_args),
                      -1);
    }
    PJRT_Device* device = client_->device(addressable_devices_[d]);
    for (size_t i = 0; i < num_args; ++i) {
      const Buffer* b = args[d][i];
      const std::string where =
          "argument " + std::to_string(i) + " of device list " + std::to_string(d);
      if (b == nullptr || b->raw() == nullptr) throw PjrtError(kMethod, where + " is null", -1);
      if (b->device() != device) {
        throw PjrtError(kMethod,
                        where + " is not on device " + std::to_string(addressable_devices_[d]) +
                            ", the device that list runs on",
                        -1);
      }
      const ElementType type = b->element_type();
      std::vector<int64_t> shape = b->dims();
      if (d == 0) {
        types.push_back(type);
        dims.push_back(shape);
        const ParamType* p = params_ ? &(*params_)[i] : nullptr;
        if (p && p->known && params_are_per_device_ && (p->type != type || p->dims != shape)) {
          throw PjrtError(kMethod,
                          where + " has type " + std::to_string(static_cast<int>(type)) + " dims " +
                              dims_text(shape) + "; the program takes type " +
                              std::to_string(static_cast<int>(p->type)) + " dims " +
                              dims_text(p->dims),
                          -1);
        }
      } else if (type != types[i] || shape != dims[i]) {
        throw PjrtError(kMethod,
                        where + " has dims " + dims_text(shape) + " (type " +
                            std::to_string(static_cast<int>(type)) + "), list 0 has " +
                            dims_text(dims[i]) + " (type " +
                            std::to_string(static_cast<int>(types[i])) + ")",
                        -1);
      }
    }
  }
}

std::vector<std::vector<std::shared_ptr<Buffer>>> Executable::execute_multi(
    const std::vector<std::vector<Buffer*>>& args) {
  constexpr char kMethod[] = "PJRT_LoadedExecutable_Execute";
  const std::vector<int>& devices = addressable_devices_;
  if (devices.empty()) {
    throw PjrtError(kMethod,
                    "the executable was compiled for one device chosen at "
                    "execute time; compile it with MultiDeviceOptions",
                    -1);
  }
  if (args.size() != devices.size()) {
    throw PjrtError(kMethod,
                    std::to_string(args.size()) +
                        " argument lists for an "
                        "executable over " +
                        std::to_string(devices.size()) + " devices",
                    -1);
  }
  check_multi_args(args);
  std::vector<std::vector<PJRT_Buffer*>> handles(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    for (Buffer* b : args[d]) handles[d].push_back(b->raw());
  }

  auto options = TTPU_ARGS(PJRT_ExecuteOptions);  // dereferenced unchecked
  std::vector<std::vector<PJRT_Buffer*>> outputs(args.size(),
                                                 std::vector<PJRT_Buffer*>(num_outputs_, nullptr));
  std::vector<PJRT_Buffer* const*> argument_lists;
  std::vector<PJRT_Buffer**> output_lists;
  for (size_t d = 0; d < args.size(); ++d) {
    argument_lists.push_back(handles[d].data());
    output_lists.push_back(outputs[d].data());
  }
  auto exec = TTPU_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec.executable = exe_;
  exec.options = &options;
  exec.argument_lists = argument_lists.data();
  exec.num_devices = args.size();
  exec.num_args = args[0].size();
  exec.output_lists = output_lists.data();
  exec.execute_device = nullptr;  // the devices fixed at compile time
  TTPU_CALL(client_->api(), PJRT_LoadedExecutable_Execute, &exec);

  std::vector<std::vector<std::shared_ptr<Buffer>>> result(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    for (PJRT_Buffer* out : outputs[d]) {
      result[d].push_back(std::make_shared<Buffer>(client_, out));
    }
  }
  return result;
}

}  // namespace ttpu::pjrt
