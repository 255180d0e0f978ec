// torch.profiler's device timeline for tpu: a kineto child profiler.
//
// torch.profiler runs kineto; kineto asks each registered child profiler
// (libkineto::IActivityProfiler) for a session per trace, starts and stops
// it with the trace, and at the end lets it log its activities into the
// trace. PyTorch hands PrivateUse1 backends PrivateUse1ProfilerRegistry to
// register one (torch/csrc/profiler/standalone/privateuse1_profiler.h). The
// session here starts the runtime's recorder (runtime/trace.h) and turns its
// records into activities:
// - each executed program: CONCURRENT_KERNEL (kineto's device kernel type),
//   named "XLA program: <op or graph>", on device d's "programs" row;
// - each copy: GPU_MEMCPY, "Memcpy HtoD|DtoH|DtoD", with its bytes, on
//   device d's "copies" row;
// - each XLA compile: PRIVATEUSE1_RUNTIME (a host-side runtime event),
//   "XLA compile: <op or graph>", with its seconds, on a "tpu compiles" row
//   of this process.
// Why these types: torch's kineto shim asks for CONCURRENT_KERNEL, GPU_MEMCPY
// and PRIVATEUSE1_RUNTIME when ProfilerActivity.PrivateUse1 is requested
// (PRIVATEUSE1_RUNTIME also with ProfilerActivity.CPU), and its
// deviceTypeFromActivity gives the first two DeviceType.PrivateUse1 once a
// PrivateUse1 backend is registered, so key_averages counts their time as
// device time (self_device_time_total); the compile counts as CPU time.
//
// A device event is linked to the host op that enqueued it (the correlation
// id kineto pushes around each op), so key_averages adds its device time to
// that op's row as CUDA kernels are to theirs.
#define USE_KINETO 1
// Kineto's GenericTraceActivity formats metadata with fmt, whose compiled
// part libtorch does not export: use fmt header-only here.
#define FMT_HEADER_ONLY 1
#include "aten/profiler.h"

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <libkineto.h>

#include <chrono>
#include <set>

#include "runtime/trace.h"

namespace ttpu::aten {
namespace {

using libkineto::ActivityType;
namespace trace = runtime::trace;

// Resource (chrome trace "tid") ids. Device rows live under pid = the device
// index, as CUDA's GPU rows do; compiles run on the host, under this process.
constexpr int32_t kProgramsRow = 1;
constexpr int32_t kCopiesRow = 2;
constexpr int32_t kCompilesRow = 0x74707563;    // "tpuc": not a real thread id
constexpr int32_t kCompileIds = 1 << 30;        // correlation ids of compile events
constexpr int64_t kDeviceSortBase = 0x1000000;  // device rows after the host's

const std::set<ActivityType>& supported() {
  static const std::set<ActivityType> types{
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::PRIVATEUSE1_RUNTIME};
  return types;
}

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string copy_name(trace::Kind k) {
  switch (k) {
    case trace::Kind::kHostToDevice: return "Memcpy HtoD (host -> tpu)";
    case trace::Kind::kDeviceToHost: return "Memcpy DtoH (tpu -> host)";
    default: return "Memcpy DtoD (tpu -> tpu)";
  }
}

class Session : public libkineto::IActivityProfilerSession {
 public:
  explicit Session(const std::set<ActivityType>& types)
      : programs_(types.count(ActivityType::CONCURRENT_KERNEL) != 0),
        copies_(types.count(ActivityType::GPU_MEMCPY) != 0),
        compiles_(types.count(ActivityType::PRIVATEUSE1_RUNTIME) != 0) {}

  void start() override {
    trace::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    records_ = trace::stop();
    // Kineto's timestamps are wall-clock (Unix epoch) ns, the records'
    // steady-clock ns: one offset, taken now, converts them.
    offset_ns_ = wall_ns() - trace::now_ns();
    status_ = libkineto::TraceStatus::READY;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    build(nullptr);
    for (auto& a : buffer_->activities) a->log(logger);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t, int64_t) override {
    build(&linked);
    for (auto& a : buffer_->activities) a->log(logger);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (devices_.empty()) return nullptr;
    const int d = *devices_.begin();
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        d, kDeviceSortBase + d, "tpu:" + std::to_string(d), "tpu " + std::to_string(d)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (int d : devices_) {
      out.push_back({kProgramsRow, kProgramsRow, d, "XLA programs"});
      out.push_back({kCopiesRow, kCopiesRow, d, "copies"});
    }
    if (has_compiles_) {
      const int64_t pid = libkineto::processId();
      out.push_back({kCompilesRow, kCompilesRow, pid, "tpu XLA compiles"});
    }
    return out;
  }

  // Kineto keeps the buffer (and so the activities it logged) with the trace.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { trace::push_correlation(id); }
  void popCorrelationId() override { trace::pop_correlation(); }

 private:
  void build(libkineto::getLinkedActivityCallback* linked) {
    if (buffer_ != nullptr) return;  // built once, whichever processTrace ran
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(0, 0, "tpu");
    buffer_->gpuOpCount = -1;
    for (const trace::Record& r : records_) {
      ActivityType type;
      std::string name;
      int32_t device = r.device;
      int32_t row = kProgramsRow;
      switch (r.kind) {
        case trace::Kind::kExecute:
          if (!programs_) continue;
          type = ActivityType::CONCURRENT_KERNEL;
          name = "XLA program: " + r.name;
          break;
        case trace::Kind::kCompile:
          if (!compiles_) continue;
          type = ActivityType::PRIVATEUSE1_RUNTIME;
          name = "XLA compile: " + r.name;
          device = static_cast<int32_t>(libkineto::processId());
          row = kCompilesRow;
          has_compiles_ = true;
          break;
        default:
          if (!copies_) continue;
          type = ActivityType::GPU_MEMCPY;
          name = copy_name(r.kind);
          row = kCopiesRow;
          break;
      }
      if (r.kind != trace::Kind::kCompile) devices_.insert(r.device);
      buffer_->emplace_activity(buffer_->span, type, name);
      auto& a = libkineto::CpuTraceBuffer::toRef(buffer_->activities.back());
      a.startTime = r.start_ns + offset_ns_;
      // A zero-length event is dropped by some viewers: at least 1 ns.
      a.endTime = std::max(r.end_ns, r.start_ns + 1) + offset_ns_;
      a.device = device;
      a.resource = row;
      a.threadId = row;
      // A compile is a host event of its own: with the op's correlation id,
      // key_averages would list the op's device time on the compile's row too.
      // Id 0 is no escape (PyTorch gives such an event a correlation id of
      // its own, which device events of that id then attach to): ids from
      // kCompileIds up are ones no device event links to.
      a.id = r.kind == trace::Kind::kCompile ? kCompileIds + compile_seq_++
                                             : static_cast<int32_t>(r.correlation);
      if (linked != nullptr && r.correlation != 0 && r.kind != trace::Kind::kCompile) {
        a.linked = (*linked)(static_cast<int32_t>(r.correlation));
      }
      switch (r.kind) {
        case trace::Kind::kExecute:
          a.addMetadata("device", r.device);
          a.addMetadata("queued_us", static_cast<double>(r.start_ns - r.queued_ns) / 1e3);
          break;
        case trace::Kind::kCompile:
          a.addMetadata("seconds", static_cast<double>(r.end_ns - r.start_ns) / 1e9);
          break;
        default:
          a.addMetadata("device", r.device);
          a.addMetadata("bytes", r.bytes);
          break;
      }
    }
  }

  bool programs_, copies_, compiles_;
  bool has_compiles_ = false;
  int32_t compile_seq_ = 0;
  std::vector<trace::Record> records_;
  int64_t offset_ns_ = 0;
  std::set<int> devices_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class TpuProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return supported(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    bool any = false;
    for (ActivityType t : supported()) any = any || types.count(t) != 0;
    if (!any) return nullptr;
    return std::make_unique<Session>(types);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torchtpu";
};

}  // namespace

// Called once at import (module.cc): kineto creates the child profiler when
// it starts (or at once if torch.profiler already ran).
void register_profiler() {
  register_legacy_profiler_stubs();
  torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(
      []() -> std::unique_ptr<libkineto::IActivityProfiler> {
        return std::make_unique<TpuProfiler>();
      });
}

}  // namespace ttpu::aten
