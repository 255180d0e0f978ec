// The runtime's compile path: in-memory program cache, persistent cache, XLA
// compile, and the compile jobs that let a waiter be interrupted.
//
// Why jobs: PJRT_Client_Compile blocks its thread for as long as XLA takes
// (minutes for a big fused graph), and Python runs signal handlers only when
// its main thread comes back to the interpreter. So, where the bindings have
// installed a wait poll, each compile runs on a thread of its own and the
// caller waits for it in 50 ms slices, polling between them: Ctrl-C raises
// KeyboardInterrupt at once, and the compile goes on to completion in the
// background, landing in both caches, so the next request for the same
// program finds it (or joins the job still running) instead of starting over.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include <sys/stat.h>

#include "pjrt/compile_options.h"
#include "runtime/compile_pool.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"
#include "stablehlo/emit.h"
#include "settings/settings.h"

namespace ttpu::runtime {

pjrt::Optimization per_op_optimization(const ir::Graph& graph) {
  constexpr int64_t kQuickMaxElements = int64_t{1} << 16;
  bool float8 = false;
  for (const auto& node : graph.nodes()) {
    for (const auto& t : node.results) {
      if (t.numel() > kQuickMaxElements) return pjrt::Optimization::kFull;
      float8 = float8 || ir::is_float8(t.dtype);
    }
  }
  return float8 ? pjrt::Optimization::kQuick : pjrt::Optimization::kQuickCpu;
}

pjrt::Optimization Runtime::effective(pjrt::Optimization level) const {
  if (!quick_compile_) return pjrt::Optimization::kFull;
  if (level == pjrt::Optimization::kQuickCpu && !cpu_plugin_) return pjrt::Optimization::kQuick;
  return level;
}

// One compile in progress; every caller that wants its program waits on it.
struct Runtime::CompileJob {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::shared_ptr<pjrt::Executable> exe;
  std::exception_ptr error;
};

std::shared_ptr<pjrt::Executable> Runtime::compile(const ir::Graph& graph, const std::string& op,
                                                   const std::string* fingerprint,
                                                   pjrt::Optimization level) {
  level = effective(level);
  std::string key = fingerprint != nullptr ? *fingerprint : graph.fingerprint();
  std::shared_ptr<CompileJob> job;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = programs_.find(key);
    if (it != programs_.end()) {
      ++metrics_.cache_hits;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.exe;
    }
    auto running = compiling_.find(key);
    if (running != compiling_.end()) {
      job = running->second;  // compiled once, for every caller
    } else {
      job = std::make_shared<CompileJob>();
      compiling_.emplace(key, job);
      owner = true;
    }
  }
  if (owner) {
    ++metrics_.cache_misses;
    std::string text;
    try {
      text = stablehlo::emit(graph, "torchtpu", emit_options_);
    } catch (...) {
      finish(key, *job, nullptr, std::current_exception());
      throw;
    }
    auto work = [this, key, text = std::move(text), op, job, level]() mutable {
      std::shared_ptr<pjrt::Executable> exe;
      std::exception_ptr error;
      try {
        exe = load_or_compile(text, op, level);
      } catch (...) {
        error = std::current_exception();
      }
      finish(key, *job, std::move(exe), error);
      job.reset();               // its last owner may be this thread: gone before it counts as done
      std::string().swap(text);  // so is the program text
      --compiles_running_;
    };
    // Without a poll (C++ callers, tests) nothing could interrupt the wait,
    // so the compile runs here and the wait below returns at once.
    ++compiles_running_;
    if (pjrt::has_wait_poll()) {
      try {
        std::thread(std::move(work)).detach();
      } catch (const std::system_error&) {
        work();  // no thread to be had: compile here, uninterruptibly
      }
    } else {
      work();
    }
  }
  return await(*job);
}

void Runtime::compile_ahead(const ir::Graph& graph, const std::string& op,
                            const std::string& fingerprint, pjrt::Optimization level) {
  level = effective(level);
  auto job = std::make_shared<CompileJob>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (programs_.count(fingerprint) != 0 || compiling_.count(fingerprint) != 0) return;
    compiling_.emplace(fingerprint, job);
  }
  ++metrics_.cache_misses;
  ++compiles_running_;
  auto work = [this, key = fingerprint, graph = graph, op, job, level]() mutable {
    std::shared_ptr<pjrt::Executable> exe;
    std::exception_ptr error;
    if (compile_queue_closed()) {
      error = std::make_exception_ptr(
          pjrt::PjrtError("compile", op + ": its compile was dropped: the process is exiting", -1));
    } else {
      static std::atomic<int64_t> busy{0};  // compiles on the pool now
      const int64_t now = ++busy;
      int64_t peak = metrics_.background_compiles_peak.load();
      while (now > peak && !metrics_.background_compiles_peak.compare_exchange_weak(peak, now)) {}
      try {
        exe = load_or_compile(stablehlo::emit(graph, "torchtpu", emit_options_), op, level);
      } catch (...) {
        error = std::current_exception();
      }
      --busy;
    }
    graph = ir::Graph();
    finish(key, *job, std::move(exe), error);
    job.reset();  // (as in compile(): gone before it counts as done)
    --compiles_running_;
  };
  auto task = std::make_shared<decltype(work)>(std::move(work));
  if (!submit_compile([task] { (*task)(); })) (*task)();
}

bool Runtime::program_at_hand(const ir::Graph& graph, pjrt::Optimization level) {
  level = effective(level);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (programs_.count(graph.fingerprint()) != 0) return true;
  }
  if (disk_cache_ == nullptr) return false;
  const std::string text = stablehlo::emit(graph, "torchtpu", emit_options_);
  cache::Key disk_key = level == pjrt::Optimization::kFull
                            ? cache_keys_->key(text)
                            : cache_keys_->key(text, pjrt::compile_options_bytes(level));
  struct stat st;
  return ::stat(disk_cache_->entry_path(disk_key).c_str(), &st) == 0;
}

std::shared_ptr<pjrt::Executable> Runtime::await(CompileJob& job) {
  std::unique_lock<std::mutex> lock(job.mu);
  while (!job.cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return job.done; })) {
    lock.unlock();
    pjrt::poll_wait();  // may throw (KeyboardInterrupt): the job runs on
    lock.lock();
  }
  if (job.error) std::rethrow_exception(job.error);
  return job.exe;
}

void Runtime::finish(const std::string& key, CompileJob& job, std::shared_ptr<pjrt::Executable> exe,
                     std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    compiling_.erase(key);  // a failed compile is tried again by the next caller
    if (exe != nullptr) remember(key, exe);
  }
  std::lock_guard<std::mutex> lock(job.mu);
  job.exe = std::move(exe);
  job.error = error;
  job.done = true;
  job.cv.notify_all();
}

void Runtime::remember(const std::string& key, const std::shared_ptr<pjrt::Executable>& exe) {
  seen_.insert(std::hash<std::string>{}(key));
  auto [it, inserted] = programs_.emplace(key, Program{exe, {}});
  if (!inserted) return;
  lru_.push_front(&it->first);
  it->second.lru = lru_.begin();
  while (programs_.size() > max_programs_) {
    // Executables still referenced (a running program, a compiled-graph
    // capture) live on through their other owners.
    programs_.erase(*lru_.back());
    lru_.pop_back();
  }
}

std::shared_ptr<pjrt::Executable> Runtime::load_or_compile(const std::string& text,
                                                           const std::string& op,
                                                           pjrt::Optimization level) {
  if (disk_cache_ == nullptr) return compile_text(text, op, level);
  cache::Key disk_key = level == pjrt::Optimization::kFull
                            ? cache_keys_->key(text)
                            : cache_keys_->key(text, pjrt::compile_options_bytes(level));
  auto exe = load_from_disk(disk_key, op);
  if (exe == nullptr) {
    exe = compile_text(text, op, level);
    store_to_disk(disk_key, *exe);
  }
  return exe;
}

void Runtime::open_disk_cache(const pjrt::Plugin& plugin) {
  cache_log_ = settings::flag("TORCHTPU_CACHE_LOG", false);
  std::string dir = cache::cache_dir_from_env();
  if (dir.empty()) return;
  try {
    cache_keys_ = std::make_unique<cache::KeyBuilder>(
        plugin.path(), plugin.api_major(), plugin.api_minor(), pjrt::compile_options_bytes());
    disk_cache_ = std::make_unique<cache::DiskStore>(dir);
  } catch (const std::exception& e) {
    // The cache only saves time: without it every program is compiled.
    std::fprintf(stderr, "torchtpu: warning: persistent compile cache disabled: %s\n", e.what());
    cache_keys_.reset();
    disk_cache_.reset();
  }
}

std::shared_ptr<pjrt::Executable> Runtime::load_from_disk(const cache::Key& key,
                                                          const std::string& op) {
  auto start = std::chrono::steady_clock::now();
  cache::LoadResult entry = disk_cache_->load(key);
  if (entry.status == cache::LoadStatus::kHit) {
    try {
      auto exe = client_->deserialize(entry.payload);
      ++metrics_.persistent_hits;
      metrics_.persistent_load_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count();
      return exe;
    } catch (const pjrt::PjrtError& e) {
      entry.status = cache::LoadStatus::kCorrupt;
      entry.reason = std::string("the plugin refused the executable: ") + e.what();
    }
  }
  ++metrics_.persistent_misses;
  if (entry.status != cache::LoadStatus::kAbsent) ++metrics_.persistent_rejected;
  if (cache_log_) {
    std::string parts;
    for (const auto& p : key.parts()) parts += " " + p.name + "=" + p.value + ";";
    std::fprintf(stderr, "torchtpu: compile cache miss for %s (%s): %s\n  key:%s\n", op.c_str(),
                 key.digest().c_str(), entry.reason.c_str(), parts.c_str());
  }
  return nullptr;
}

void Runtime::store_to_disk(const cache::Key& key, const pjrt::Executable& exe) {
  std::string error;
  try {
    error = disk_cache_->store(key, exe.serialize());
  } catch (const pjrt::PjrtError& e) {
    error = std::string("the plugin cannot serialize the executable: ") + e.what();
  }
  static std::atomic<bool> warned{false};
  if (!error.empty() && !warned.exchange(true)) {
    std::fprintf(stderr,
                 "torchtpu: warning: cannot write to the compile cache (%s); "
                 "programs still compile, they are just not saved (warned once)\n",
                 error.c_str());
  }
}

std::shared_ptr<pjrt::Executable> Runtime::compile_text(const std::string& text,
                                                        const std::string& op,
                                                        pjrt::Optimization level) {
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<pjrt::Executable> exe;
  try {
    exe = client_->compile(text, level);
  } catch (const pjrt::PjrtError& e) {
    throw pjrt::PjrtError(e.method(),
                          "XLA rejected the program lowered for " + op + ": " + e.what(), e.code());
  }
  auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  ++metrics_.compiles;
  metrics_.compile_ns += ns;
  if (trace::active()) {
    trace::Record r;
    r.kind = trace::Kind::kCompile;
    r.name = op;
    r.end_ns = trace::now_ns();
    r.start_ns = r.end_ns - ns;
    trace::add(std::move(r));
  }
  return exe;
}

}  // namespace ttpu::runtime
