// Hybrid fused mode (fusion.h): the switch, and the fused programs compiling
// in the background while their graphs run op by op.
#pragma once

#include <string>

#include "ir/graph.h"

namespace ttpu::runtime {

// Off unless TORCHTPU_FUSED_HYBRID=1 at start or set_fused_hybrid(true).
void set_fused_hybrid(bool on);
bool fused_hybrid();

// Where a fused program that hybrid mode wanted stands.
enum class Background {
  kNone,       // never started here (or finished: look in the runtime's cache)
  kCompiling,  // compiling on its own thread
  kFailed,     // its compile failed: the flush compiles it in the open, so the
               // error reaches the user as without hybrid mode
};
Background background_state(const std::string& key);
// Starts compiling `graph` (fingerprint `key`, named `name` in errors) on a
// thread of its own; the program lands in the runtime's caches. Returns false
// when no thread could be had (the caller then compiles as usual).
bool compile_in_background(ir::Graph graph, const std::string& key, const std::string& name);
// Whether as many background compiles run as hybrid mode allows (half the
// cores, at least one): a new graph then runs op by op without starting its
// own, and tries again at its next flush.
bool background_busy();
// Background compiles still running: the process must not exit while one
// runs (XLA's static destructors, see Runtime::compiles_running()).
int background_compiles();

// Start lines whose last graph was found compiled: their graphs stop keeping
// per-op programs (cheaper recording) until one of them is new again.
bool line_warm(const std::string& start);
void set_line_warm(const std::string& start, bool warm);

}  // namespace ttpu::runtime
