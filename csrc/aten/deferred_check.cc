#include "aten/deferred_check.h"

#include <map>
#include <mutex>
#include <optional>

#include "aten/copy.h"
#include "aten/lowering.h"

namespace ttpu::aten {
namespace {

std::vector<DeferredCheck>& pending() {
  static auto* checks = new std::vector<DeferredCheck>();  // outlives static teardown
  return *checks;
}

thread_local bool t_running = false;
uint64_t g_drains = 0;
std::mutex g_pending_mu;  // guards pending() and g_drains (ops may come from several threads)

// A loop that never reads would grow the list (and keep its small device
// values) without bound: past this many, the checks run (one wait).
constexpr size_t kMaxPending = 4096;
// Flags ANDed by one program; a shorter list repeats its first flag (AND is
// idempotent), so every count uses the same compiled program.
constexpr size_t kOkChunk = 64;

// The AND of oks[start, start + kOkChunk) (the first repeated past the end) in `ctx`.
ir::Value and_chunk(LoweringContext& ctx, const std::vector<at::Tensor>& oks, size_t start) {
  auto& g = ctx.g();
  ir::Value acc;
  for (size_t k = 0; k < kOkChunk; ++k) {
    const size_t i = start + k < oks.size() ? start + k : start;
    ir::Value v = ctx.tensor(oks[i]);
    acc = k == 0 ? v : g.binary(ir::Op::kAnd, acc, v);
  }
  return acc;
}

// The AND of `oks` (tpu bool 0-d tensors of one device), as one tpu bool.
at::Tensor all_ok(std::vector<at::Tensor> oks, int device) {
  while (oks.size() > 1) {
    std::vector<at::Tensor> next;
    for (size_t start = 0; start < oks.size(); start += kOkChunk) {
      LoweringContext ctx("deferred checks", device);
      next.push_back(ctx.run({and_chunk(ctx, oks, start)})[0]);
    }
    oks.swap(next);
  }
  return oks[0];
}

// Largest read folded with the checks' verdict (read_with_checks).
constexpr int64_t kFoldBytes = 64;

// The unsigned integer type of `t`'s width (kBool: kU8, converted), or
// nullopt where bits cannot be moved that way (complex, float8, 16 bytes).
std::optional<ir::DType> bits_type(ir::DType t) {
  if (ir::is_complex(t) || ir::is_float8(t)) return std::nullopt;
  switch (ir::byte_size(t)) {
    case 1: return ir::DType::kU8;
    case 2: return ir::DType::kU16;
    case 4: return ir::DType::kU32;
    case 8: return ir::DType::kU64;
    default: return std::nullopt;
  }
}

bool all_passed(const std::vector<DeferredCheck>& checks) {
  std::map<int, std::vector<at::Tensor>> by_device;
  for (const DeferredCheck& c : checks) by_device[c.ok.device().index()].push_back(c.ok);
  for (auto& [device, oks] : by_device) {
    if (!to_host(all_ok(std::move(oks), device)).item<bool>()) return false;
  }
  return true;
}

}  // namespace

void defer_check(at::Tensor value, at::Tensor ok, CheckFn check) {
  TORCH_INTERNAL_ASSERT(ok.scalar_type() == at::kBool && ok.dim() == 0 &&
                        ok.device() == value.device());
  bool full;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    full = pending().size() >= kMaxPending;
  }
  if (full) run_deferred_checks();
  std::lock_guard<std::mutex> lock(g_pending_mu);
  pending().push_back({std::move(value), std::move(ok), std::move(check)});
}

void check_device_values(const at::Tensor& value, const at::Tensor& ok, CheckFn check) {
  if (runtime::Runtime::get().mode() == runtime::EagerMode::kDebug) {
    check(to_host(value));
  } else {
    defer_check(value, ok, std::move(check));
  }
}

std::vector<DeferredCheck> deferred_checks() {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  return pending();
}

uint64_t deferred_check_drains() {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  return g_drains;
}

std::optional<at::Tensor> read_with_checks(const at::Tensor& src) {
  const ir::DType dtype = to_ir(src.scalar_type());
  const std::optional<ir::DType> bits = bits_type(dtype);
  const int64_t n = src.numel();
  if (t_running || !bits || n == 0 || n * ir::byte_size(dtype) > kFoldBytes) return std::nullopt;
  const int device = src.device().index();
  std::vector<DeferredCheck> checks;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    auto& all = pending();
    if (all.empty() || all.size() > kOkChunk) return std::nullopt;
    for (const DeferredCheck& c : all) {
      if (c.ok.device().index() != device) return std::nullopt;
    }
    checks.swap(all);
    ++g_drains;
  }
  t_running = true;
  struct Done {
    ~Done() { t_running = false; }
  } done;
  std::vector<at::Tensor> oks;
  for (const DeferredCheck& c : checks) oks.push_back(c.ok);
  // [the value's bits..., the verdict]: one program, one download.
  LoweringContext ctx("deferred checks and a read", device);
  auto& g = ctx.g();
  ir::Value value = g.reshape(ctx.tensor(src), {n});
  value = dtype == ir::DType::kBool ? g.convert(value, *bits) : g.bitcast_convert(value, *bits);
  ir::Value verdict = g.reshape(g.convert(and_chunk(ctx, oks, 0), *bits), {1});
  at::Tensor host = to_host(ctx.run({g.concatenate({value, verdict}, 0)})[0]);
  if (host[n].item<int64_t>() == 0) {
    for (const DeferredCheck& c : checks) c.check(to_host(c.value));
  }
  at::Tensor out = host.narrow(0, 0, n);
  out = dtype == ir::DType::kBool ? out.to(at::kBool) : out.view(src.scalar_type());
  return out.view(src.sizes());
}

void run_deferred_checks() {
  if (t_running) return;
  std::vector<DeferredCheck> checks;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    if (pending().empty()) return;
    checks.swap(pending());
    ++g_drains;
  }
  t_running = true;
  struct Done {
    ~Done() { t_running = false; }
  } done;
  if (all_passed(checks)) return;
  for (const DeferredCheck& c : checks) c.check(to_host(c.value));
}

}  // namespace ttpu::aten
