// Strict mode's background compiles: a program an op needs that is not
// loaded starts compiling on a pool of threads, and the op is recorded
// instead of waiting (fusion.h's "deferred strict" graphs), so the host goes
// on dispatching while XLA compiles, and many programs compile at once. The
// recorded ops run, each as its own strict program, at the next read of a
// value they compute (or torchtpu.sync(), a foreach call, a synchronize).
#pragma once

#include <functional>

namespace ttpu::runtime {

// Off at start unless TORCHTPU_BACKGROUND_COMPILE=1; set_background_compile()
// changes it for the ops issued after the call.
void set_background_compile(bool on);
bool background_compile();

// Threads of the pool: TORCHTPU_COMPILE_THREADS, else the cores (at least 2,
// at most 8).
int compile_threads();

// Runs `work` on the pool, in submission order as threads come free.
// Returns false when no thread could be started (the caller runs it itself).
bool submit_compile(std::function<void()> work);

// At exit after an error or Ctrl-C (torchtpu's exit hook): a compile not
// started yet is dropped instead of run (its waiters get an error), so the
// exit waits only for those already compiling.
void close_compile_queue();
bool compile_queue_closed();

}  // namespace ttpu::runtime
