// The PJRT layer: a PJRT C API plugin behind RAII C++ types.
//
// Every call into the plugin goes through one gate (call() in pjrt.cc) that
// checks the plugin's PJRT_Api struct is large enough to hold the method and turns
// a returned PJRT_Error into a PjrtError tagged with the method name. Nothing here
// includes torch; the layer builds and tests with GoogleTest alone.
//
// Lifetimes: a Plugin is loaded once per process and never unloaded (a dlclose
// invalidates the PJRT_Api table). A Client owns the plugin's thread pools; every
// Buffer and Executable keeps a shared_ptr to its Client so the client is destroyed
// last, as the C API requires.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pjrt/compile_options.h"
#include "pjrt/kv_store.h"

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_DeviceDescription;
struct PJRT_Buffer;
struct PJRT_LoadedExecutable;
struct PJRT_Event;

namespace ttpu::pjrt {

// An error returned by the plugin, or a misuse caught before calling it.
// `method` names the PJRT C API function ("PJRT_Client_Compile", ...).
class PjrtError : public std::runtime_error {
 public:
  PjrtError(std::string method, std::string message, int code);
  const std::string& method() const { return method_; }
  int code() const { return code_; }  // PJRT_Error_Code, or -1 for our own checks

 private:
  std::string method_;
  int code_;
};

// The plugin could not be opened or is not a usable PJRT plugin.
class PluginError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Fork safety. A plugin's thread pools do not survive fork(): a forked child
// that calls into the client its parent created blocks forever on events no
// thread will ever signal. So once a Client exists, a child forked from this
// process refuses every plugin call (PjrtError carrying fork_message(); object
// destructors skip the plugin and leak instead). A child forked before any
// Client was created may create its own.
bool in_forked_child();
const char* fork_message();

// Interruptible waits. `poll` is called about every 50 ms while a wait that the
// caller marked interruptible blocks (a host read waiting on a long program);
// an exception it throws (the bindings raise KeyboardInterrupt on SIGINT)
// abandons the wait, leaving the computation running. Not thread-safe to set
// while waits are in progress: set once at start.
void set_wait_poll(std::function<void()> poll);
// Whether a poll is installed (the Python bindings install one; C++ tests do not).
bool has_wait_poll();
// Calls the installed poll, if any, for a wait done outside this layer (the
// runtime's wait on a compile running on another thread). May throw.
void poll_wait();

// Element types we move across the C API. Values match PJRT_Buffer_Type so a cast
// is exact; anything else is rejected before calling the plugin (an invalid type
// aborts inside it).
enum class ElementType : int {
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kC64 = 14,   // (real, imag) f32 pairs
  kC128 = 15,  // (real, imag) f64 pairs
  kF8E5M2 = 16,
  kF8E4M3FN = 17,
  kF8E5M2FNUZ = 19,
  kF8E4M3FNUZ = 20,
  kF8E8M0FNU = 28,
};
int64_t element_size(ElementType type);  // bytes per element

class Plugin;
class Client;

// PJRT_Client_Create inputs. Options a plugin does not know may be rejected by
// it (the GPU plugin validates option names); the CPU plugin reads only
// cpu_device_count and ignores node_id/num_nodes and the store.
struct ClientOptions {
  int64_t cpu_device_count = 0;  // > 0: the "cpu_device_count" option
  // num_nodes > 0: the "node_id" and "num_nodes" options (int64), for plugins
  // that run one program across processes; num_nodes > 1 needs kv_store.
  int64_t node_id = 0;
  int64_t num_nodes = 0;
  // Passed as the three key-value callbacks; the Client keeps it alive.
  std::shared_ptr<KeyValueStore> kv_store;
};

// Loads a plugin shared library (dlopen + GetPjrtApi + PJRT_Plugin_Initialize),
// checks the API major version is 0 and the minor at least the one we need.
// Throws PluginError naming the path and what to do. The same path loaded twice
// returns the same Plugin.
std::shared_ptr<Plugin> load_plugin(const std::string& path);

class Plugin : public std::enable_shared_from_this<Plugin> {
 public:
  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int api_major() const;
  int api_minor() const;
  // Creates a client. `cpu_device_count` > 0 is passed as the "cpu_device_count"
  // create option (read only by the CPU plugin; others ignore it).
  std::shared_ptr<Client> create_client(int64_t cpu_device_count);
  // Throws PjrtError (method "PJRT_Client_Create"): from the plugin, or code -1
  // for options rejected before calling it (num_nodes < 0, node_id outside
  // [0, num_nodes), num_nodes > 1 without a store).
  std::shared_ptr<Client> create_client(const ClientOptions& options);

  Plugin(std::string path, const PJRT_Api* api) : path_(std::move(path)), api_(api) {}

 private:
  std::string path_;
  const PJRT_Api* api_;
};

class Buffer;
class Executable;
struct ParamType;  // signature.h

class Client : public std::enable_shared_from_this<Client> {
 public:
  ~Client();
  const PJRT_Api* api() const { return api_; }
  PJRT_Client* raw() const { return client_; }
  std::string platform_name() const;
  int device_count() const;  // addressable devices
  PJRT_Device* device(int index) const;
  // The device's kind ("cpu", "NVIDIA H200", ...): PJRT_DeviceDescription_Kind.
  std::string device_kind(int index) const;

  // What PJRT_Device_MemoryStats reports, where the plugin implements it
  // (GPU/TPU plugins do; the CPU plugin does not). `limit` is -1 when unset.
  struct MemoryStats {
    int64_t bytes_in_use = 0;
    int64_t limit = -1;
  };
  // False (nothing filled) when the plugin has no memory stats for the device.
  bool memory_stats(int index, MemoryStats* out) const;

  // Global id (PJRT_DeviceDescription_Id) of addressable device `index`: the
  // ids MultiDeviceOptions::device_ids names.
  int64_t device_id(int index) const;
  // Every device the client knows, other processes' included. Larger than
  // device_count() only on a plugin that built a multi-process topology.
  int global_device_count() const;

  // Copies `data` (dense row-major, `dims`) to device `device_index`. The host
  // bytes may be reused as soon as this returns.
  std::shared_ptr<Buffer> buffer_from_host(const void* data, ElementType type,
                                           const std::vector<int64_t>& dims, int device_index);
  // Like buffer_from_host, but the plugin may make `data` the buffer's own
  // memory instead of copying it (PJRT's kMutableZeroCopy: no allocation, no
  // copy on the CPU plugin; a plain copy on others). `release` runs once when
  // the plugin no longer needs `data` (right after a copy; when the buffer,
  // and any output it was donated to, is gone after a zero-copy), possibly on
  // a plugin thread: it must be quick and must not call into PJRT. Until then
  // the caller must neither write nor free `data`. On a throw, `release` has run.
  std::shared_ptr<Buffer> buffer_adopting_host(void* data, ElementType type,
                                               const std::vector<int64_t>& dims, int device_index,
                                               std::function<void()> release);
  // Copies `data` to the device, possibly after this returns (PJRT's
  // kImmutableUntilTransferCompletes: the CPU plugin copies buffers of 100 KB
  // and more on its worker threads). The buffer is never an alias of `data`.
  // `release` runs once the copy has read `data` (same rules as above); until
  // then the caller must neither write nor free it. What a non_blocking copy
  // from pinned memory does on CUDA.
  std::shared_ptr<Buffer> buffer_from_host_async(const void* data, ElementType type,
                                                 const std::vector<int64_t>& dims, int device_index,
                                                 std::function<void()> release);

  // Compiles StableHLO text (MLIR, entry @main) for one replica, one partition.
  // Throws PjrtError (method "PJRT_Client_Compile") with the plugin's message.
  // `level`: see Optimization in compile_options.h.
  std::shared_ptr<Executable> compile(const std::string& stablehlo_text,
                                      Optimization level = Optimization::kFull);
  // Compiles one program over num_replicas x num_partitions devices (not
  // portable), run with Executable::execute_multi. Checked before calling the
  // plugin (PjrtError, code -1): counts >= 1; without device_ids, N at most
  // global_device_count(); with them, exactly N distinct non-negative ids.
  // Ids of devices the client does not know are left to the plugin (another
  // process's devices are legitimate on a multi-process plugin).
  std::shared_ptr<Executable> compile(const std::string& stablehlo_text,
                                      const MultiDeviceOptions& options);

  // Loads bytes from Executable::serialize. They must come from the same plugin
  // build (and, for CPU, a host with the same CPU features). Throws PjrtError
  // (method "PJRT_Executable_DeserializeAndLoad").
  std::shared_ptr<Executable> deserialize(const std::string& bytes);

  Client(std::shared_ptr<Plugin> plugin, PJRT_Client* client,
         std::shared_ptr<KeyValueStore> kv_store = nullptr);

 private:
  // PJRT_Device_GetDescription of addressable device `index`.
  PJRT_DeviceDescription* description(int index) const;
  std::shared_ptr<Executable> compile_bytes(const std::string& stablehlo_text,
                                            const std::string& options);
  // PJRT_Client_BufferFromHostBuffer with the given PJRT_HostBufferSemantics,
  // after the checks that keep the plugin from aborting; `*done` receives the
  // done-with-host-buffer event (the caller owns it).
  PJRT_Buffer* from_host_raw(const void* data, ElementType type, const std::vector<int64_t>& dims,
                             int device_index, int semantics, PJRT_Event** done) const;
  // from_host_raw whose host-buffer event runs `release` (see buffer_adopting_host).
  std::shared_ptr<Buffer> from_host_released(const void* data, ElementType type,
                                             const std::vector<int64_t>& dims, int device_index,
                                             int semantics, std::function<void()> release);
  // Declared first so it is destroyed last: the plugin may call the store
  // until PJRT_Client_Destroy returns.
  std::shared_ptr<KeyValueStore> kv_store_;
  std::shared_ptr<Plugin> plugin_;
  const PJRT_Api* api_;
  PJRT_Client* client_;
  std::vector<PJRT_Device*> devices_;
};

// An on-device array. Owns its PJRT_Buffer handle (destroyed with the object).
class Buffer {
 public:
  Buffer(std::shared_ptr<Client> client, PJRT_Buffer* buffer);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  PJRT_Buffer* raw() const { return buffer_; }
  ElementType element_type() const;
  std::vector<int64_t> dims() const;
  int64_t on_device_size_bytes() const;
  PJRT_Device* device() const;  // the device holding it

  // Blocks until the buffer's value is computed; throws PjrtError carrying the
  // error of the computation that produced it (async errors surface here).
  // `interruptible`: the wait polls set_wait_poll()'s function, which may throw.
  void await_ready(bool interruptible = false) const;
  // Copies the whole buffer to `dst` (dense row-major, `nbytes` must equal the
  // buffer's size) and waits for the copy. Throws PjrtError on failure. The wait
  // for the value to be computed is interruptible (see set_wait_poll); the copy
  // itself is not, since the plugin writes into `dst` until it completes.
  void to_host(void* dst, int64_t nbytes) const;

  // A copy of this buffer on device `device_index` of the same client
  // (PJRT_Buffer_CopyToDevice; asynchronous: it orders after this buffer's
  // producer). Throws PjrtError with code UNIMPLEMENTED (12) when the plugin
  // lacks the method, so a caller can stage through the host instead.
  std::shared_ptr<Buffer> copy_to_device(int device_index) const;

  // Calls `done(ok)` once the buffer's value is computed (ok false: its
  // producer failed), possibly at once on this thread, possibly later on a
  // plugin thread: `done` must be quick and must not call into PJRT.
  void on_ready(std::function<void(bool ok)> done) const;

  // Moves the handle into a new Buffer and leaves this one empty (its
  // destructor then calls nothing; no other method may be called on it).
  // For a donated buffer: destroying one waits inside the plugin until the
  // program consuming it has run, so its owner may hand the handle to a
  // keeper that destroys it later, while those holding this object weakly
  // see it gone, as if destroyed.
  std::unique_ptr<Buffer> release();

 private:
  std::shared_ptr<Client> client_;
  PJRT_Buffer* buffer_;
};

// A compiled, loaded program. Owns its PJRT_LoadedExecutable.
class Executable {
 public:
  Executable(std::shared_ptr<Client> client, PJRT_LoadedExecutable* exe);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  int num_outputs() const { return num_outputs_; }
  // Enqueues one execution on device `device_index` and returns its outputs
  // without waiting for them (the plugin computes asynchronously; errors surface
  // in Buffer::await_ready / to_host). Throws PjrtError if the plugin rejects
  // the call, or (code -1) if the executable runs on several devices.
  std::vector<std::shared_ptr<Buffer>> execute(const std::vector<Buffer*>& args, int device_index);

  // The client device indices a multi-device executable runs on, in the order
  // execute_multi takes its argument lists (replica-major, this process's
  // devices only). Empty for a portable (single-device) executable.
  const std::vector<int>& addressable_devices() const { return addressable_devices_; }
  // Enqueues one execution over every addressable device: args[d] are the
  // arguments of addressable_devices()[d], all lists the same length. Returns
  // the outputs per device, [d][output], without waiting (as execute()).
  // Throws PjrtError (code -1) before calling the plugin when: the executable
  // is portable; the list count is not the device count; a list's length is
  // not the program's parameter count; an argument is not on its list's
  // device; argument i differs in type or dims between devices, or (programs
  // without an SPMD partitioner) from the program's parameter type. These are
  // checked here because the CPU plugin, rejecting a multi-device launch,
  // leaves the other devices stuck in the program's collectives (signature.h).
  std::vector<std::vector<std::shared_ptr<Buffer>>> execute_multi(
      const std::vector<std::vector<Buffer*>>& args);

  // Serialized executable bytes for the persistent cache.
  std::string serialize() const;

 private:
  std::shared_ptr<Client> client_;
  std::vector<int> query_addressable_devices() const;
  void check_multi_args(const std::vector<std::vector<Buffer*>>& args) const;
  friend class Client;  // sets the two fields below after a multi-device compile
  // The entry function's parameters read from the program text (signature.h),
  // when known; their shapes are the per-device ones unless an SPMD
  // partitioner splits them (then only the count and cross-device agreement
  // are checked).
  std::shared_ptr<const std::vector<ParamType>> params_;
  bool params_are_per_device_ = false;

  PJRT_LoadedExecutable* exe_;
  int num_outputs_ = 0;
  std::vector<int> addressable_devices_;
};

}  // namespace ttpu::pjrt
