#include "pjrt/pjrt.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "pjrt/compile_options.h"
#include "pjrt/gate.h"
#include "pjrt/kv_callbacks.h"
#include "pjrt_c_api.h"

namespace ttpu::pjrt {

static_assert(static_cast<int>(ElementType::kPred) == PJRT_Buffer_Type_PRED);
static_assert(static_cast<int>(ElementType::kS64) == PJRT_Buffer_Type_S64);
static_assert(static_cast<int>(ElementType::kF32) == PJRT_Buffer_Type_F32);
static_assert(static_cast<int>(ElementType::kBF16) == PJRT_Buffer_Type_BF16);
static_assert(static_cast<int>(ElementType::kC64) == PJRT_Buffer_Type_C64);
static_assert(static_cast<int>(ElementType::kC128) == PJRT_Buffer_Type_C128);
static_assert(static_cast<int>(ElementType::kF8E5M2) == PJRT_Buffer_Type_F8E5M2);
static_assert(static_cast<int>(ElementType::kF8E4M3FN) == PJRT_Buffer_Type_F8E4M3FN);
static_assert(static_cast<int>(ElementType::kF8E5M2FNUZ) == PJRT_Buffer_Type_F8E5M2FNUZ);
static_assert(static_cast<int>(ElementType::kF8E4M3FNUZ) == PJRT_Buffer_Type_F8E4M3FNUZ);
static_assert(static_cast<int>(ElementType::kF8E8M0FNU) == PJRT_Buffer_Type_F8E8M0FNU);

using namespace detail;

namespace {

// 0.57 rearranged the PJRT_Api slots without a major bump (xla/pjrt/c/
// CHANGELOG.md), so slot offsets from our 0.81 header are wrong below it.
constexpr int kMinApiMinor = 57;

constexpr char kPluginHint[] =
    "set TORCHTPU_PLUGIN to the path of a PJRT plugin .so, or 'cpu' for the "
    "xla-cpu-pjrt package";

// Fork state (see in_forked_child() in pjrt.h). Set by the pthread_atfork child
// handler, which runs in the child before fork() returns there.
std::atomic<bool> g_client_created{false};
std::atomic<bool> g_forked_child{false};
void on_fork_child() {
  if (g_client_created.load()) g_forked_child.store(true);
}

std::function<void()>& wait_poll() {
  static std::function<void()> poll;
  return poll;
}

// Owns a PJRT_Event. Await blocks and returns the event's status; the C API
// defines that status through PJRT_Event_Error, so it is read there as well.
class Event {
 public:
  Event(const PJRT_Api* api, PJRT_Event* event) : api_(api), event_(event) {}
  ~Event() {
    if (event_ == nullptr) return;
    auto args = TTPU_ARGS(PJRT_Event_Destroy_Args);
    args.event = event_;
    TTPU_CALL_NOTHROW(api_, PJRT_Event_Destroy, &args);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // `method` names the call that produced the event, so an async failure is
  // reported against it (the message keeps the event method for context).
  // `interruptible`: wait in slices, calling the wait poll between them.
  void await(const char* method, bool interruptible = false) {
    if (event_ == nullptr) return;
    if (interruptible && wait_poll()) wait_polling();
    try {
      auto await_args = TTPU_ARGS(PJRT_Event_Await_Args);
      await_args.event = event_;
      TTPU_CALL(api_, PJRT_Event_Await, &await_args);
      auto error_args = TTPU_ARGS(PJRT_Event_Error_Args);
      error_args.event = event_;
      TTPU_CALL(api_, PJRT_Event_Error, &error_args);
    } catch (const PjrtError& e) {
      throw PjrtError(method, e.what(), e.code());
    }
  }

 private:
  // Shared by the waiter and the plugin's callback: a waiter that is
  // interrupted returns while the callback may still come later.
  struct Ready {
    const PJRT_Api* api;
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
  };
  static void on_ready(PJRT_Error* error, void* arg) {
    auto* holder = static_cast<std::shared_ptr<Ready>*>(arg);
    std::shared_ptr<Ready> state = std::move(*holder);
    delete holder;
    if (error != nullptr) destroy_error(state->api, error);  // read again by Await
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->ready = true;
    }
    state->cv.notify_all();
  }

  // Returns once the event is ready, or when the poll throws. A plugin without
  // OnReady gets the plain (uninterruptible) Await that follows.
  void wait_polling() {
    auto is_ready = TTPU_ARGS(PJRT_Event_IsReady_Args);
    is_ready.event = event_;
    try {
      TTPU_CALL(api_, PJRT_Event_IsReady, &is_ready);
      if (is_ready.is_ready) return;
    } catch (const PjrtError&) {
      return;
    }
    auto state = std::make_shared<Ready>();
    state->api = api_;
    auto* holder = new std::shared_ptr<Ready>(state);
    auto args = TTPU_ARGS(PJRT_Event_OnReady_Args);
    args.event = event_;
    args.callback = &Event::on_ready;
    args.user_arg = holder;
    try {
      TTPU_CALL(api_, PJRT_Event_OnReady, &args);
    } catch (const PjrtError&) {
      delete holder;  // not registered: the callback will never run
      return;
    }
    std::unique_lock<std::mutex> lock(state->mu);
    while (!state->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return state->ready; })) {
      lock.unlock();
      wait_poll()();  // may throw: the callback still owns `holder`
      lock.lock();
    }
  }

  const PJRT_Api* api_;
  PJRT_Event* event_;
};

bool is_known_type(ElementType type) {
  const int t = static_cast<int>(type);
  return (t >= static_cast<int>(ElementType::kPred) && t <= static_cast<int>(ElementType::kC128)) ||
         type == ElementType::kF8E5M2 || type == ElementType::kF8E4M3FN ||
         type == ElementType::kF8E5M2FNUZ || type == ElementType::kF8E4M3FNUZ ||
         type == ElementType::kF8E8M0FNU;
}

}  // namespace

bool in_forked_child() { return g_forked_child.load(); }

const char* fork_message() {
  return "cannot use the tpu device in a forked subprocess: this process was forked "
         "after its parent had initialised tpu, and the device runtime's threads do not "
         "survive fork. To use tpu with multiprocessing, you must use the 'spawn' start "
         "method (multiprocessing.get_context('spawn'), or DataLoader(..., "
         "multiprocessing_context='spawn'))";
}

void set_wait_poll(std::function<void()> poll) { wait_poll() = std::move(poll); }

bool has_wait_poll() { return static_cast<bool>(wait_poll()); }

void poll_wait() {
  if (wait_poll()) wait_poll()();
}

PjrtError::PjrtError(std::string method, std::string message, int code)
    : std::runtime_error(method + ": " + message), method_(std::move(method)), code_(code) {}

int64_t element_size(ElementType type) {
  // Indexed by PJRT_Buffer_Type, PRED (1) through C128 (15); 0 is INVALID.
  static constexpr int64_t kSizes[] = {0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2, 8, 16};
  if (!is_known_type(type)) {
    throw PjrtError("element_size",
                    "unknown element type " + std::to_string(static_cast<int>(type)), -1);
  }
  if (static_cast<int>(type) > static_cast<int>(ElementType::kC128)) return 1;  // float8
  return kSizes[static_cast<int>(type)];
}

// ---------------------------------------------------------------------------
// Plugin

std::shared_ptr<Plugin> load_plugin(const std::string& path) {
  // Plugins live until process exit and are never dlclose'd: that would
  // invalidate every PJRT_Api* and handle already given out.
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Plugin>> by_path;
  static std::map<const PJRT_Api*, std::shared_ptr<Plugin>> by_api;
  std::lock_guard<std::mutex> lock(mu);

  char resolved[PATH_MAX];
  const std::string key = realpath(path.c_str(), resolved) ? resolved : path;
  if (auto it = by_path.find(key); it != by_path.end()) return it->second;

  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw PluginError("cannot load PJRT plugin '" + path + "': " + (why ? why : "dlopen failed") +
                      "; " + kPluginHint);
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw PluginError("'" + path +
                      "' does not export GetPjrtApi, so it is not a "
                      "PJRT plugin (jaxlib's CPU client is not one); " +
                      kPluginHint);
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr ||
      !has_slot(api, offsetof(PJRT_Api, pjrt_api_version), sizeof(PJRT_Api_Version))) {
    throw PluginError("'" + path + "' returned no usable PJRT_Api; " + kPluginHint);
  }
  const int major = api->pjrt_api_version.major_version;
  const int minor = api->pjrt_api_version.minor_version;
  if (major != PJRT_API_MAJOR || minor < kMinApiMinor) {
    throw PluginError("'" + path + "' implements PJRT C API " + std::to_string(major) + "." +
                      std::to_string(minor) + "; torchtpu needs " + std::to_string(PJRT_API_MAJOR) +
                      "." + std::to_string(kMinApiMinor) + " or newer: use a newer plugin");
  }
  // The gate itself reports errors through these three; without them it cannot.
  if (!has_slot(api, offsetof(PJRT_Api, PJRT_Error_GetCode), sizeof(void*)) ||
      !api->PJRT_Error_Destroy || !api->PJRT_Error_Message || !api->PJRT_Error_GetCode) {
    throw PluginError("'" + path + "' lacks the PJRT_Error methods; " + kPluginHint);
  }
  // Two paths (or symlinks) can name one library; initialise it only once.
  if (auto it = by_api.find(api); it != by_api.end()) {
    by_path[key] = it->second;
    return it->second;
  }

  // Initialize may be null; when present it must precede every other call.
  if (has_slot(api, offsetof(PJRT_Api, PJRT_Plugin_Initialize), sizeof(void*)) &&
      api->PJRT_Plugin_Initialize != nullptr) {
    auto args = TTPU_ARGS(PJRT_Plugin_Initialize_Args);
    try {
      TTPU_CALL(api, PJRT_Plugin_Initialize, &args);
    } catch (const PjrtError& e) {
      throw PluginError("'" + path + "' failed to initialise: " + e.what());
    }
  }
  auto plugin = std::make_shared<Plugin>(path, api);
  by_path[key] = plugin;
  by_api[api] = plugin;
  return plugin;
}

int Plugin::api_major() const { return api_->pjrt_api_version.major_version; }
int Plugin::api_minor() const { return api_->pjrt_api_version.minor_version; }

std::shared_ptr<Client> Plugin::create_client(int64_t cpu_device_count) {
  ClientOptions options;
  options.cpu_device_count = cpu_device_count;
  return create_client(options);
}

namespace {

PJRT_NamedValue int64_option(const char* name, size_t name_size, int64_t value) {
  PJRT_NamedValue option{};
  option.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  option.name = name;
  option.name_size = name_size;
  option.type = PJRT_NamedValue_kInt64;
  option.int64_value = value;
  option.value_size = 1;
  return option;
}
#define TTPU_INT64_OPTION(name, value) int64_option(name, sizeof(name) - 1, value)

}  // namespace

std::shared_ptr<Client> Plugin::create_client(const ClientOptions& o) {
  constexpr char kMethod[] = "PJRT_Client_Create";
  if (o.num_nodes < 0) {
    throw PjrtError(kMethod, "num_nodes must be >= 0, got " + std::to_string(o.num_nodes), -1);
  }
  if (o.num_nodes > 0 && (o.node_id < 0 || o.node_id >= o.num_nodes)) {
    throw PjrtError(kMethod,
                    "node_id " + std::to_string(o.node_id) + " out of range [0, " +
                        std::to_string(o.num_nodes) + ")",
                    -1);
  }
  // Plugins that read num_nodes build their cross-process topology through the
  // store; without one they would fail later, or wait, less clearly.
  if (o.num_nodes > 1 && o.kv_store == nullptr) {
    throw PjrtError(kMethod, "num_nodes > 1 needs a key-value store", -1);
  }
  std::vector<PJRT_NamedValue> options;
  if (o.cpu_device_count > 0) {
    options.push_back(TTPU_INT64_OPTION("cpu_device_count", o.cpu_device_count));
  }
  if (o.num_nodes > 0) {
    options.push_back(TTPU_INT64_OPTION("node_id", o.node_id));
    options.push_back(TTPU_INT64_OPTION("num_nodes", o.num_nodes));
  }

  // From here on the plugin runs threads a forked child would not have.
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, &on_fork_child); });
  g_client_created.store(true);
  auto args = TTPU_ARGS(PJRT_Client_Create_Args);
  args.create_options = options.empty() ? nullptr : options.data();
  args.num_options = options.size();
  set_kv_callbacks(&args, o.kv_store.get());
  TTPU_CALL(api_, PJRT_Client_Create, &args);
  return std::make_shared<Client>(shared_from_this(), args.client, o.kv_store);
}

// ---------------------------------------------------------------------------
// Client

Client::Client(std::shared_ptr<Plugin> plugin, PJRT_Client* client,
               std::shared_ptr<KeyValueStore> kv_store)
    : kv_store_(std::move(kv_store)),
      plugin_(std::move(plugin)),
      api_(plugin_->api()),
      client_(client) {
  auto args = TTPU_ARGS(PJRT_Client_AddressableDevices_Args);
  args.client = client_;
  try {
    TTPU_CALL(api_, PJRT_Client_AddressableDevices, &args);
  } catch (...) {
    // The destructor does not run for a half-built object; free the handle here.
    auto destroy = TTPU_ARGS(PJRT_Client_Destroy_Args);
    destroy.client = client_;
    TTPU_CALL_NOTHROW(api_, PJRT_Client_Destroy, &destroy);
    throw;
  }
  // The device array is owned by the client and lives as long as it does.
  devices_.assign(args.addressable_devices,
                  args.addressable_devices + args.num_addressable_devices);
}

Client::~Client() {
  auto args = TTPU_ARGS(PJRT_Client_Destroy_Args);
  args.client = client_;
  TTPU_CALL_NOTHROW(api_, PJRT_Client_Destroy, &args);
}

std::string Client::platform_name() const {
  auto args = TTPU_ARGS(PJRT_Client_PlatformName_Args);
  args.client = client_;
  TTPU_CALL(api_, PJRT_Client_PlatformName, &args);
  return std::string(args.platform_name, args.platform_name_size);
}

int Client::device_count() const { return static_cast<int>(devices_.size()); }

PJRT_Device* Client::device(int index) const {
  check_device_index("PJRT_Client_AddressableDevices", index, device_count());
  return devices_[index];
}

PJRT_DeviceDescription* Client::description(int index) const {
  auto desc = TTPU_ARGS(PJRT_Device_GetDescription_Args);
  desc.device = device(index);
  TTPU_CALL(api_, PJRT_Device_GetDescription, &desc);
  return desc.device_description;
}

std::string Client::device_kind(int index) const {
  auto args = TTPU_ARGS(PJRT_DeviceDescription_Kind_Args);
  args.device_description = description(index);
  TTPU_CALL(api_, PJRT_DeviceDescription_Kind, &args);
  return std::string(args.device_kind, args.device_kind_size);
}

bool Client::memory_stats(int index, MemoryStats* out) const {
  auto args = TTPU_ARGS(PJRT_Device_MemoryStats_Args);
  args.device = device(index);
  try {
    TTPU_CALL(api_, PJRT_Device_MemoryStats, &args);
  } catch (const PjrtError&) {
    return false;  // unimplemented (the CPU plugin) or not available
  }
  out->bytes_in_use = args.bytes_in_use;
  out->limit = args.bytes_limit_is_set ? args.bytes_limit : -1;
  return true;
}

int64_t Client::device_id(int index) const {
  auto args = TTPU_ARGS(PJRT_DeviceDescription_Id_Args);
  args.device_description = description(index);
  TTPU_CALL(api_, PJRT_DeviceDescription_Id, &args);
  return args.id;
}

int Client::global_device_count() const {
  auto args = TTPU_ARGS(PJRT_Client_Devices_Args);
  args.client = client_;
  TTPU_CALL(api_, PJRT_Client_Devices, &args);
  return static_cast<int>(args.num_devices);
}

constexpr char kFromHostMethod[] = "PJRT_Client_BufferFromHostBuffer";

PJRT_Buffer* Client::from_host_raw(const void* data, ElementType type,
                                   const std::vector<int64_t>& dims, int device_index,
                                   int semantics, PJRT_Event** done) const {
  // The plugin aborts on a type it does not know instead of returning an error.
  if (!is_known_type(type)) {
    throw PjrtError(kFromHostMethod,
                    "unsupported element type " + std::to_string(static_cast<int>(type)), -1);
  }
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0) throw PjrtError(kFromHostMethod, "negative dimension " + std::to_string(d), -1);
    elements *= d;
  }
  // The plugin reads `data` without a null check.
  if (data == nullptr && elements > 0) throw PjrtError(kFromHostMethod, "null host data", -1);
  check_device_index(kFromHostMethod, device_index, device_count());
  auto args = TTPU_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client_;
  args.data = data;
  args.type = static_cast<PJRT_Buffer_Type>(type);
  args.dims = dims.data();
  args.num_dims = dims.size();
  // No byte_strides: dense row-major.
  args.host_buffer_semantics = static_cast<PJRT_HostBufferSemantics>(semantics);
  args.device = devices_[device_index];
  TTPU_CALL(api_, PJRT_Client_BufferFromHostBuffer, &args);
  *done = args.done_with_host_buffer;
  return args.buffer;
}

std::shared_ptr<Buffer> Client::buffer_from_host(const void* data, ElementType type,
                                                 const std::vector<int64_t>& dims,
                                                 int device_index) {
  // kImmutableOnlyDuringCall lets the caller free `data` on return; zero-copy
  // modes would tie it to the buffer's life (buffer_adopting_host).
  PJRT_Event* done = nullptr;
  auto buffer = std::make_shared<Buffer>(
      shared_from_this(), from_host_raw(data, type, dims, device_index,
                                        PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, &done));
  // With this semantics the copy should be done already; awaiting keeps the
  // promise in pjrt.h true for any plugin that copies asynchronously.
  Event(api_, done).await(kFromHostMethod);
  return buffer;
}

std::shared_ptr<Executable> Client::compile(const std::string& stablehlo_text, Optimization level) {
  return compile_bytes(stablehlo_text, compile_options_bytes(level));
}

std::shared_ptr<Executable> Client::compile_bytes(const std::string& stablehlo_text,
                                                  const std::string& options) {
  static constexpr char kFormat[] = "mlir";  // StableHLO text or bytecode
  std::string code = stablehlo_text;         // PJRT_Program.code is non-const
  auto program = TTPU_ARGS(PJRT_Program);
  program.code = code.data();
  program.code_size = code.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;

  auto args = TTPU_ARGS(PJRT_Client_Compile_Args);
  args.client = client_;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  TTPU_CALL(api_, PJRT_Client_Compile, &args);
  return std::make_shared<Executable>(shared_from_this(), args.executable);
}

std::shared_ptr<Executable> Client::deserialize(const std::string& bytes) {
  auto args = TTPU_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  TTPU_CALL(api_, PJRT_Executable_DeserializeAndLoad, &args);
  return std::make_shared<Executable>(shared_from_this(), args.loaded_executable);
}

// ---------------------------------------------------------------------------
// Buffer

Buffer::Buffer(std::shared_ptr<Client> client, PJRT_Buffer* buffer)
    : client_(std::move(client)), buffer_(buffer) {}

Buffer::~Buffer() {
  if (buffer_ == nullptr) return;  // released
  // Destroy (not Delete) frees the handle and, once pending uses finish, the
  // memory; it is required on every buffer, donated ones included.
  auto args = TTPU_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buffer_;
  TTPU_CALL_NOTHROW(client_->api(), PJRT_Buffer_Destroy, &args);
}

std::unique_ptr<Buffer> Buffer::release() {
  auto owner = std::make_unique<Buffer>(client_, buffer_);
  buffer_ = nullptr;
  return owner;
}

ElementType Buffer::element_type() const {
  auto args = TTPU_ARGS(PJRT_Buffer_ElementType_Args);
  args.buffer = buffer_;
  TTPU_CALL(client_->api(), PJRT_Buffer_ElementType, &args);
  const auto type = static_cast<ElementType>(args.type);
  if (!is_known_type(type)) {
    throw PjrtError("PJRT_Buffer_ElementType",
                    "unsupported element type " + std::to_string(args.type), -1);
  }
  return type;
}

std::vector<int64_t> Buffer::dims() const {
  auto args = TTPU_ARGS(PJRT_Buffer_Dimensions_Args);
  args.buffer = buffer_;
  TTPU_CALL(client_->api(), PJRT_Buffer_Dimensions, &args);
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

int64_t Buffer::on_device_size_bytes() const {
  auto args = TTPU_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args);
  args.buffer = buffer_;
  TTPU_CALL(client_->api(), PJRT_Buffer_OnDeviceSizeInBytes, &args);
  return static_cast<int64_t>(args.on_device_size_in_bytes);
}

PJRT_Device* Buffer::device() const {
  auto args = TTPU_ARGS(PJRT_Buffer_Device_Args);
  args.buffer = buffer_;
  TTPU_CALL(client_->api(), PJRT_Buffer_Device, &args);
  return args.device;
}

void Buffer::await_ready(bool interruptible) const {
  if (buffer_ == nullptr) return;  // released (see release()): its new owner waits
  auto args = TTPU_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer_;
  TTPU_CALL(client_->api(), PJRT_Buffer_ReadyEvent, &args);
  Event(client_->api(), args.event).await("PJRT_Buffer_ReadyEvent", interruptible);
}

std::shared_ptr<Buffer> Buffer::copy_to_device(int device_index) const {
  auto args = TTPU_ARGS(PJRT_Buffer_CopyToDevice_Args);
  args.buffer = buffer_;
  args.dst_device = client_->device(device_index);
  TTPU_CALL(client_->api(), PJRT_Buffer_CopyToDevice, &args);
  return std::make_shared<Buffer>(client_, args.dst_buffer);
}

namespace {

// PJRT_Event handles whose OnReady callback ran. An event is not destroyed
// inside its own callback (the callback may run inside PJRT_Event_OnReady,
// on the event's own future); the next on_ready call frees them.
std::mutex g_fired_mu;
std::vector<std::pair<const PJRT_Api*, PJRT_Event*>> g_fired;

struct ReadyWaiter {
  const PJRT_Api* api;
  PJRT_Event* event;
  std::function<void(bool)> done;
};

void ready_callback(PJRT_Error* error, void* arg) {
  auto* w = static_cast<ReadyWaiter*>(arg);
  if (error != nullptr) destroy_error(w->api, error);
  w->done(error == nullptr);
  {
    std::lock_guard<std::mutex> lock(g_fired_mu);
    g_fired.emplace_back(w->api, w->event);
  }
  delete w;
}

void free_fired_events() {
  std::vector<std::pair<const PJRT_Api*, PJRT_Event*>> fired;
  {
    std::lock_guard<std::mutex> lock(g_fired_mu);
    fired.swap(g_fired);
  }
  for (auto& [api, event] : fired) {
    Event owner(api, event);  // destroys it
  }
}

}  // namespace

namespace {

// Calls `done(ok)` once `event` is ready and frees the event afterwards.
void notify_when_ready(const PJRT_Api* api, PJRT_Event* event, const char* method,
                       std::function<void(bool ok)> done) {
  auto* w = new ReadyWaiter{api, event, std::move(done)};
  auto on = TTPU_ARGS(PJRT_Event_OnReady_Args);
  on.event = event;
  on.callback = &ready_callback;
  on.user_arg = w;
  try {
    TTPU_CALL(api, PJRT_Event_OnReady, &on);
  } catch (const PjrtError&) {
    // No callback registered: wait here instead, so `done` runs exactly once.
    bool ok = true;
    try {
      Event(api, event).await(method);
    } catch (const PjrtError&) {
      ok = false;
    }
    auto fn = std::move(w->done);
    delete w;
    fn(ok);
  }
}

}  // namespace

void Buffer::on_ready(std::function<void(bool ok)> done) const {
  if (buffer_ == nullptr) {  // released (see release())
    done(true);
    return;
  }
  free_fired_events();
  const PJRT_Api* api = client_->api();
  auto args = TTPU_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer_;
  TTPU_CALL(api, PJRT_Buffer_ReadyEvent, &args);
  notify_when_ready(api, args.event, "PJRT_Buffer_ReadyEvent", std::move(done));
}

std::shared_ptr<Buffer> Client::from_host_released(const void* data, ElementType type,
                                                   const std::vector<int64_t>& dims,
                                                   int device_index, int semantics,
                                                   std::function<void()> release) {
  free_fired_events();
  PJRT_Event* done = nullptr;
  PJRT_Buffer* raw = nullptr;
  try {
    raw = from_host_raw(data, type, dims, device_index, semantics, &done);
  } catch (...) {
    release();
    throw;
  }
  auto buffer = std::make_shared<Buffer>(shared_from_this(), raw);
  // The event fires when the plugin is done with `data`: when the copy has
  // read it, or at the buffer's end if it aliased. A plugin without OnReady
  // (none known: it is core C API) would make notify_when_ready wait here,
  // which for an alias lasts until the buffer is gone: do not adopt on such one.
  notify_when_ready(api_, done, kFromHostMethod,
                    [release = std::move(release)](bool) { release(); });
  return buffer;
}

std::shared_ptr<Buffer> Client::buffer_adopting_host(void* data, ElementType type,
                                                     const std::vector<int64_t>& dims,
                                                     int device_index,
                                                     std::function<void()> release) {
  return from_host_released(data, type, dims, device_index,
                            PJRT_HostBufferSemantics_kMutableZeroCopy, std::move(release));
}

std::shared_ptr<Buffer> Client::buffer_from_host_async(const void* data, ElementType type,
                                                       const std::vector<int64_t>& dims,
                                                       int device_index,
                                                       std::function<void()> release) {
  return from_host_released(data, type, dims, device_index,
                            PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
                            std::move(release));
}

void Buffer::to_host(void* dst, int64_t nbytes) const {
  constexpr char kMethod[] = "PJRT_Buffer_ToHostBuffer";
  const PJRT_Api* api = client_->api();
  // The long wait (for the program computing this buffer) is the
  // interruptible one; a failed computation is reported by the copy below,
  // with its own method name.
  try {
    await_ready(/*interruptible=*/true);
  } catch (const PjrtError&) {}
  // dst = null asks for the size of the dense row-major host copy.
  auto query = TTPU_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  query.src = buffer_;
  TTPU_CALL(api, PJRT_Buffer_ToHostBuffer, &query);
  Event(api, query.event).await(kMethod);
  if (nbytes < 0 || static_cast<size_t>(nbytes) != query.dst_size) {
    throw PjrtError(kMethod,
                    "host buffer has " + std::to_string(nbytes) +
                        " bytes, the device buffer needs " + std::to_string(query.dst_size),
                    -1);
  }
  if (nbytes == 0) return;
  if (dst == nullptr) throw PjrtError(kMethod, "null destination", -1);

  auto args = TTPU_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = query.dst_size;
  TTPU_CALL(api, PJRT_Buffer_ToHostBuffer, &args);
  // The copy is asynchronous: `dst` is written only once the event is ready.
  Event(api, args.event).await(kMethod);
}

}  // namespace ttpu::pjrt
