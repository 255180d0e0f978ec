#include "runtime/runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "pjrt/compile_options.h"
#include "pjrt/host_read.h"
#include "runtime/trace.h"
#include "stablehlo/emit.h"
#include "settings/settings.h"

namespace ttpu::runtime {

thread_local int t_fused_region = 0;

namespace {

// Bounds the bookkeeping of enqueued outputs: past this many, the older half is
// awaited, which also keeps a runaway Python loop from queueing without limit.
constexpr size_t kMaxInFlight = 4096;

std::mutex g_init_mutex;
Runtime* g_runtime = nullptr;  // never destroyed, see runtime.h
// g_runtime once set, read without the mutex: get() runs several times per
// eager op, and the lock was most of its cost.
std::atomic<Runtime*> g_started{nullptr};
std::string g_default_plugin;
int g_cpu_devices_at_init = 0;

int env_cpu_devices() {
  return static_cast<int>(settings::integer("TORCHTPU_CPU_DEVICES", 1, 1, 1024));
}

// The client's index of the device holding `buffer` (0 if not found).
int device_index_of(pjrt::Client& client, const pjrt::Buffer& buffer) {
  PJRT_Device* d = buffer.device();
  for (int i = 0; i < client.device_count(); ++i) {
    if (client.device(i) == d) return i;
  }
  return 0;
}

// A copy's profiler record (trace.h), its end set by the caller or by the
// buffer's readiness.
trace::Record copy_record(trace::Kind kind, int device, const char* name, int64_t start_ns,
                          int64_t bytes) {
  trace::Record r;
  r.kind = kind;
  r.device = device;
  r.name = name;
  r.start_ns = start_ns;
  r.bytes = bytes;
  return r;
}

}  // namespace

void Metrics::reset() {
  compiles = 0;
  compile_ns = 0;
  executes = 0;
  cache_hits = 0;
  cache_misses = 0;
  persistent_hits = 0;
  persistent_misses = 0;
  persistent_rejected = 0;
  persistent_load_ns = 0;
  bytes_to_device = 0;
  bytes_to_host = 0;
  donations = 0;
  donated_bytes = 0;
  fused_flushes = 0;
  fused_strict_ops = 0;
  dispatch_cache_hits = 0;
  deferred_ops = 0;
  background_compiles_peak = 0;
}

pjrt::ElementType element_type(ir::DType t) {
  using E = pjrt::ElementType;
  switch (t) {
    case ir::DType::kBool: return E::kPred;
    case ir::DType::kU8: return E::kU8;
    case ir::DType::kI8: return E::kS8;
    case ir::DType::kI16: return E::kS16;
    case ir::DType::kI32: return E::kS32;
    case ir::DType::kI64: return E::kS64;
    case ir::DType::kU32: return E::kU32;
    case ir::DType::kU64: return E::kU64;
    case ir::DType::kU16: return E::kU16;
    case ir::DType::kF16: return E::kF16;
    case ir::DType::kBF16: return E::kBF16;
    case ir::DType::kF32: return E::kF32;
    case ir::DType::kF64: return E::kF64;
    case ir::DType::kC64: return E::kC64;
    case ir::DType::kC128: return E::kC128;
    case ir::DType::kF8E4M3FN: return E::kF8E4M3FN;
    case ir::DType::kF8E5M2: return E::kF8E5M2;
    case ir::DType::kF8E4M3FNUZ: return E::kF8E4M3FNUZ;
    case ir::DType::kF8E5M2FNUZ: return E::kF8E5M2FNUZ;
    case ir::DType::kF8E8M0FNU: return E::kF8E8M0FNU;
  }
  throw std::runtime_error("unknown dtype");
}

void Runtime::set_default_plugin(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  g_default_plugin = path;
}

std::string Runtime::resolve_plugin_path() {
  std::string p = settings::text("TORCHTPU_PLUGIN").value_or("");
  if (p.empty() || p == "cpu") {
    if (g_default_plugin.empty()) {
      throw pjrt::PluginError(
          "no PJRT plugin configured: install the xla-cpu-pjrt package, or set "
          "TORCHTPU_PLUGIN to the path of a PJRT plugin .so");
    }
    return g_default_plugin;
  }
  return p;
}

bool Runtime::initialized() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  return g_runtime != nullptr;
}

Runtime& Runtime::get() {
  // Before any lock: a lock held by a parent thread at fork stays held forever.
  if (pjrt::in_forked_child()) throw std::runtime_error(pjrt::fork_message());
  if (Runtime* started = g_started.load(std::memory_order_acquire)) return *started;
  {
    std::lock_guard<std::mutex> lock(g_init_mutex);
    if (g_runtime != nullptr) return *g_runtime;
  }
  return init(resolve_plugin_path(), env_cpu_devices());
}

int Runtime::device_count_if_started() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  return g_runtime != nullptr ? g_runtime->device_count() : 0;
}

Runtime& Runtime::init(const std::string& plugin_path, int cpu_device_count) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_runtime != nullptr) {
    if (g_runtime->plugin_path_ != plugin_path || g_cpu_devices_at_init != cpu_device_count) {
      throw std::runtime_error(
          "torchtpu is already initialised with plugin '" + g_runtime->plugin_path_ +
          "'; a process can use one PJRT plugin and device count (call torchtpu.init "
          "before the first tpu tensor is created)");
    }
    return *g_runtime;
  }
  g_runtime = new Runtime(plugin_path, cpu_device_count);
  g_cpu_devices_at_init = cpu_device_count;
  g_started.store(g_runtime, std::memory_order_release);
  return *g_runtime;
}

Runtime::Runtime(std::string plugin_path, int cpu_device_count)
    : plugin_path_(std::move(plugin_path)) {
  auto plugin = pjrt::load_plugin(plugin_path_);
  client_ = plugin->create_client(cpu_device_count);
  retired_ = std::make_unique<std::atomic<uint64_t>[]>(client_->device_count());
  for (int i = 0; i < client_->device_count(); ++i) retired_[i] = 0;
  open_disk_cache(*plugin);
  max_programs_ = static_cast<size_t>(settings::integer(
      "TORCHTPU_MAX_PROGRAMS", static_cast<int64_t>(max_programs_), 1, int64_t{1} << 40));
  // TORCHTPU_DEVICE_COPY=host: copies between devices go through host memory,
  // as on a plugin without PJRT_Buffer_CopyToDevice (tests that path).
  if (settings::choice("TORCHTPU_DEVICE_COPY", "device", {"device", "host"}) == "host") {
    device_copy_ok_ = false;
  }
  // XLA:CPU's dot is about 2x slower with a transposed right operand (x @ W.t());
  // TORCHTPU_CPU_DOT_TRANSPOSE=0 keeps the plain form (for comparisons).
  cpu_plugin_ = client_->platform_name() == "cpu";
  emit_options_.materialize_transposed_rhs =
      cpu_plugin_ && settings::flag("TORCHTPU_CPU_DOT_TRANSPOSE", true);
  quick_compile_ = settings::flag("TORCHTPU_QUICK_COMPILE", quick_compile_);
  const std::string mode =
      settings::choice("TORCHTPU_EAGER_MODE", "strict", {"strict", "debug", "fused"});
  if (mode == "debug") mode_ = EagerMode::kDebug;
  if (mode == "fused") mode_ = EagerMode::kFused;
}

std::vector<std::shared_ptr<pjrt::Buffer>> Runtime::run(const ir::Graph& graph,
                                                        const std::vector<pjrt::Buffer*>& args,
                                                        int device, const std::string& op,
                                                        const std::string* fingerprint,
                                                        pjrt::Optimization level) {
  if (args.size() != graph.parameters().size()) {
    throw std::runtime_error("internal: " + op + " bound " + std::to_string(args.size()) +
                             " buffers to a program of " +
                             std::to_string(graph.parameters().size()) + " parameters");
  }
  auto exe = compile(graph, op, fingerprint, level);
  return execute(*exe, args, device, op);
}

std::vector<std::shared_ptr<pjrt::Buffer>> Runtime::execute(pjrt::Executable& exe,
                                                            const std::vector<pjrt::Buffer*>& args,
                                                            int device, const std::string& op) {
  const int64_t queued = trace::active() ? trace::now_ns() : 0;
  auto outs = exe.execute(args, device);
  ++metrics_.executes;
  if (queued != 0) trace::add_execute(outs, op, device, queued);
  if (mode_ == EagerMode::kDebug) {
    // Debug mode waits at every op: a long program there must not hold Ctrl-C
    // until it ends. Interrupted, the results stay tracked so that a later
    // synchronize still waits for them.
    try {
      for (auto& b : outs) b->await_ready(/*interruptible=*/true);
    } catch (const pjrt::PjrtError&) {
      throw;
    } catch (...) {
      track(outs, op, device, /*program=*/true);
      throw;
    }
  } else {
    track(outs, op, device, /*program=*/true);
  }
  return outs;
}

void Runtime::track(const std::vector<std::shared_ptr<pjrt::Buffer>>& outs, const std::string& op,
                    int device, bool program) {
  std::vector<InFlight> oldest;
  std::shared_ptr<pjrt::Buffer> before;  // let go after the lock (its destroy calls the plugin)
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& b : outs) in_flight_.push_back({device, next_seq_++, b, op});
    if (program && !outs.empty()) {
      if (device >= static_cast<int>(last_output_.size())) last_output_.resize(device + 1);
      before = std::exchange(last_output_[device], outs.front());
    }
    if (in_flight_.size() <= kMaxInFlight) return;
    size_t half = in_flight_.size() / 2;
    oldest.assign(in_flight_.begin(), in_flight_.begin() + half);
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + half);
  }
  for (size_t i = 0; i < oldest.size(); ++i) {
    if (auto b = oldest[i].buffer.lock()) {
      try {
        b->await_ready(/*interruptible=*/true);
      } catch (const pjrt::PjrtError&) {
        // Left for the read of that buffer to report, with its op's name.
      } catch (...) {
        // Interrupted (Ctrl-C while the queue is full): what was not awaited
        // stays tracked, oldest first.
        std::lock_guard<std::mutex> lock(mu_);
        in_flight_.insert(in_flight_.begin(), oldest.begin() + static_cast<std::ptrdiff_t>(i),
                          oldest.end());
        throw;
      }
    }
  }
}

std::vector<std::shared_ptr<pjrt::Buffer>> Runtime::in_flight(int device, uint64_t* mark) {
  std::vector<std::shared_ptr<pjrt::Buffer>> live;
  std::lock_guard<std::mutex> lock(mu_);
  size_t kept = 0;
  for (auto& entry : in_flight_) {
    // Dropped here: freed buffers, and those a completed event covered.
    if (entry.seq <= retired_[entry.device].load(std::memory_order_acquire)) continue;
    auto b = entry.buffer.lock();
    if (b == nullptr) continue;
    if (entry.device == device) live.push_back(std::move(b));
    // (never a self-move: it empties the entry's weak_ptr, and synchronize
    // then skipped every buffer an event had listed)
    if (&in_flight_[kept] != &entry) in_flight_[kept] = std::move(entry);
    ++kept;
  }
  in_flight_.resize(kept);
  *mark = next_seq_ - 1;
  return live;
}

void Runtime::retire(int device, uint64_t mark) {
  auto& r = retired_[device];
  uint64_t cur = r.load(std::memory_order_relaxed);
  while (cur < mark && !r.compare_exchange_weak(cur, mark, std::memory_order_release)) {}
}

void Runtime::synchronize() {
  std::vector<InFlight> pending;
  std::vector<std::shared_ptr<pjrt::Buffer>> last;
  uint64_t upto = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    upto = next_seq_ - 1;
    pending.swap(in_flight_);
    // Their in_flight_ entries stay lockable while `last` holds them.
    last.swap(last_output_);
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    auto b = pending[i].buffer.lock();
    if (b == nullptr) continue;
    try {
      b->await_ready(/*interruptible=*/true);
    } catch (const pjrt::PjrtError& e) {
      throw pjrt::PjrtError(e.method(), pending[i].op + " (run asynchronously) failed: " + e.what(),
                            e.code());
    } catch (...) {
      // Interrupted: what was not awaited stays tracked for the next sync,
      // with the last programs' outputs where no newer program replaced them.
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.insert(in_flight_.begin(), pending.begin() + i, pending.end());
      if (last_output_.size() < last.size()) last_output_.resize(last.size());
      for (size_t d = 0; d < last.size(); ++d) {
        if (last_output_[d] == nullptr) last_output_[d] = std::move(last[d]);
      }
      throw;
    }
  }
  // The plugin may run an event's ready callbacks after this wait returned
  // (its waiters run in turn): the watermark says it now, as CUDA's query does.
  for (int d = 0; d < client_->device_count(); ++d) retire(d, upto);
}

std::shared_ptr<pjrt::Buffer> Runtime::copy_to_device(const pjrt::Buffer& buffer, ir::DType dtype,
                                                      int64_t nbytes, int device) {
  if (device_copy_ok_) {
    try {
      const int64_t start = trace::active() ? trace::now_ns() : 0;
      auto out = buffer.copy_to_device(device);
      if (start != 0) {
        trace::add_when_ready(copy_record(trace::Kind::kDeviceToDevice, device,
                                          "copy between devices", start, nbytes),
                              *out);
      }
      track({out}, "aten::_to_copy (between devices)", device);
      return out;
    } catch (const pjrt::PjrtError& e) {
      if (e.code() != 12 /* PJRT_Error_Code_UNIMPLEMENTED */) throw;
      device_copy_ok_ = false;  // this plugin has no device-to-device copy
    }
  }
  std::vector<char> host(static_cast<size_t>(nbytes));
  download(buffer, host.data(), nbytes);
  return upload(host.data(), dtype, {nbytes / ir::byte_size(dtype)}, device);
}

namespace {

int64_t byte_count(ir::DType dtype, const std::vector<int64_t>& dims) {
  int64_t n = ir::byte_size(dtype);
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

std::shared_ptr<pjrt::Buffer> Runtime::upload(const void* data, ir::DType dtype,
                                              const std::vector<int64_t>& dims, int device) {
  return uploaded(byte_count(dtype, dims), device, [&] {
    return client_->buffer_from_host(data, element_type(dtype), dims, device);
  });
}

std::shared_ptr<pjrt::Buffer> Runtime::upload_adopting(void* data, ir::DType dtype,
                                                       const std::vector<int64_t>& dims, int device,
                                                       std::function<void()> release) {
  // Counted as a transfer, copied or not.
  return uploaded(byte_count(dtype, dims), device, [&] {
    return client_->buffer_adopting_host(data, element_type(dtype), dims, device,
                                         std::move(release));
  });
}

std::shared_ptr<pjrt::Buffer> Runtime::upload_async(const void* data, ir::DType dtype,
                                                    const std::vector<int64_t>& dims, int device,
                                                    std::function<void()> release) {
  return uploaded(byte_count(dtype, dims), device, [&] {
    return client_->buffer_from_host_async(data, element_type(dtype), dims, device,
                                           std::move(release));
  });
}

std::shared_ptr<pjrt::Buffer> Runtime::uploaded(
    int64_t nbytes, int device, const std::function<std::shared_ptr<pjrt::Buffer>()>& make) {
  metrics_.bytes_to_device += nbytes;
  const int64_t start = trace::active() ? trace::now_ns() : 0;
  auto buffer = make();
  if (start != 0) {
    trace::add_when_ready(
        copy_record(trace::Kind::kHostToDevice, device, "copy host to device", start, nbytes),
        *buffer);
  }
  track({buffer}, "aten::_copy_from (host to device)", device);
  return buffer;
}

void Runtime::download(const pjrt::Buffer& buffer, void* dst, int64_t nbytes) {
  // The record covers the copy only: the wait for the buffer's producer is
  // that program's time, not the transfer's.
  if (trace::active()) buffer.await_ready(/*interruptible=*/true);
  const int64_t start = trace::active() ? trace::now_ns() : 0;
  // Where device memory is host memory (the CPU plugin) one memcpy after the
  // ready event; elsewhere, or when it declines, the plugin's copy.
  if (!pjrt::read_in_place(*client_, buffer, dst, nbytes)) buffer.to_host(dst, nbytes);
  metrics_.bytes_to_host += nbytes;
  if (start != 0) {
    trace::Record r = copy_record(trace::Kind::kDeviceToHost, device_index_of(*client_, buffer),
                                  "copy device to host", start, nbytes);
    r.end_ns = trace::now_ns();
    trace::add(std::move(r));
  }
}

std::shared_ptr<pjrt::Buffer> Runtime::scalar(ir::DType dtype, uint64_t bits, int device) {
  std::string key(reinterpret_cast<const char*>(&bits), sizeof(bits));
  key.push_back(static_cast<char>(dtype));
  key.push_back(static_cast<char>(device));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  // Little-endian: the value's bytes are the low bytes of `bits`.
  auto buf = upload(&bits, dtype, {}, device);
  std::lock_guard<std::mutex> lock(mu_);
  if (scalars_.size() > 4096) scalars_.clear();
  return scalars_.emplace(std::move(key), buf).first->second;
}

}  // namespace ttpu::runtime
