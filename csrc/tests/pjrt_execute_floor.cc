// The plugin's own cost per execute: the floor under strict mode's per-op time.
//
//   build/csrc/tests/pjrt_execute_floor [plugin.so] [ops]
//
// Compiles `c = a + b` (float32, 100 / 1,000 / 10,000 elements) through our
// PJRT layer (csrc/pjrt, no torch, no IR, no cache) and enqueues it `ops`
// times (default 20,000) on the same two input buffers, as strict mode does:
// each output is dropped right away ("drop") or all are kept to the end
// ("keep"; buffer destruction not counted), one wait at the end. Prints one
// JSON line per case: wall microseconds per execute (best of 3 runs) and
// process CPU microseconds per execute (all threads: the plugin's workers
// too). A benchmark, not a test: nothing is asserted. Compare with
// `python bench/bench_eager.py --add-only` (the same op from Python).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"
#include "tests/test_plugin.h"

namespace {

using ttpu::pjrt::Buffer;
using ttpu::pjrt::ElementType;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string add_program(int64_t n) {
  const std::string t = "tensor<" + std::to_string(n) + "xf32>";
  return "module @m {\n  func.func public @main(%a: " + t + ", %b: " + t + ") -> " + t +
         " {\n    %0 = stablehlo.add %a, %b : " + t + "\n    return %0 : " + t + "\n  }\n}";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string plugin = argc > 1 ? argv[1] : ttpu::testing::plugin_path();
  const int ops = argc > 2 ? std::atoi(argv[2]) : 20000;
  auto client = ttpu::pjrt::load_plugin(plugin)->create_client(1);
  for (int64_t n : {100, 1000, 10000}) {
    auto exe = client->compile(add_program(n), ttpu::pjrt::Optimization::kQuick);
    std::vector<float> host(n, 1.0f);
    auto a = client->buffer_from_host(host.data(), ElementType::kF32, {n}, 0);
    auto b = client->buffer_from_host(host.data(), ElementType::kF32, {n}, 0);
    for (bool keep : {false, true}) {
      double best_wall = 1e9, cpu_at_best = 0;
      for (int run = 0; run < 3; ++run) {
        std::vector<std::shared_ptr<Buffer>> kept;
        kept.reserve(keep ? ops : 1);
        std::shared_ptr<Buffer> last;
        const double cpu0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < ops; ++i) {
          auto outs = exe->execute({a.get(), b.get()}, 0);
          last = outs[0];
          if (keep) kept.push_back(std::move(outs[0]));
        }
        last->await_ready();
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double cpu = cpu_seconds() - cpu0;
        if (wall < best_wall) best_wall = wall, cpu_at_best = cpu;
      }
      std::printf(
          "{\"numel\": %lld, \"outputs\": \"%s\", \"ops\": %d, "
          "\"wall_us_per_execute\": %.3f, \"cpu_us_per_execute\": %.3f}\n",
          static_cast<long long>(n), keep ? "keep" : "drop", ops, 1e6 * best_wall / ops,
          1e6 * cpu_at_best / ops);
    }
  }
  return 0;
}
