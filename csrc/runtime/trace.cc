#include "runtime/trace.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

#include "pjrt/pjrt.h"

namespace ttpu::runtime::trace {
namespace detail {
std::atomic<bool> g_active{false};
}  // namespace detail

namespace {

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Record> records;
  int pending = 0;       // add_when_ready callbacks of this session not yet fired
  uint64_t session = 0;  // bumped by start(): late callbacks of an older one are dropped
  uint64_t next_seq = 0;
};

State& state() {
  static State* s = new State();  // never destroyed: plugin threads may call in at exit
  return *s;
}

// Execute records of one device, in enqueue order: a program cannot start
// before the one enqueued ahead of it on the same device has ended.
void queue_starts(std::vector<Record>& records) {
  std::map<int, int64_t> last_end;  // per device
  for (Record& r : records) {
    if (r.kind != Kind::kExecute) continue;
    auto it = last_end.find(r.device);
    if (it != last_end.end() && it->second > r.start_ns && it->second < r.end_ns) {
      r.start_ns = it->second;
    }
    int64_t& end = last_end[r.device];
    end = std::max(end, r.end_ns);
  }
}

}  // namespace

namespace {
thread_local std::vector<uint64_t> t_correlation;
}  // namespace

void push_correlation(uint64_t id) { t_correlation.push_back(id); }
void pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
uint64_t current_correlation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

void start() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
  s.pending = 0;
  ++s.session;
  detail::g_active.store(true, std::memory_order_release);
}

std::vector<Record> stop(std::chrono::milliseconds wait) {
  State& s = state();
  detail::g_active.store(false, std::memory_order_release);
  std::vector<Record> out;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait_for(lock, wait, [&] { return s.pending == 0; });
    ++s.session;  // callbacks still outstanding now belong to no session
    s.pending = 0;
    out.swap(s.records);
  }
  std::sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.seq < b.seq; });
  queue_starts(out);
  return out;
}

void add(Record r) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  r.seq = s.next_seq++;
  if (r.correlation == 0) r.correlation = current_correlation();
  s.records.push_back(std::move(r));
}

void add_when_ready(Record r, const pjrt::Buffer& buffer) {
  State& s = state();
  uint64_t session = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    r.seq = s.next_seq++;
    if (r.correlation == 0) r.correlation = current_correlation();
    session = s.session;
    ++s.pending;
  }
  buffer.on_ready([r = std::move(r), session](bool) mutable {
    r.end_ns = now_ns();
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.session != session) return;  // the session ended before this completed
    st.records.push_back(std::move(r));
    if (--st.pending == 0) st.cv.notify_all();
  });
}

void add_execute(const std::vector<std::shared_ptr<pjrt::Buffer>>& outs, const std::string& op,
                 int device, int64_t queued) {
  Record r;
  r.kind = Kind::kExecute;
  r.device = device;
  r.name = op.empty() ? "program" : op;
  r.start_ns = r.queued_ns = queued;
  if (outs.empty()) {
    r.end_ns = now_ns();  // nothing to wait for: the enqueue is all there is
    add(std::move(r));
  } else {
    add_when_ready(std::move(r), *outs.front());
  }
}

}  // namespace ttpu::runtime::trace
