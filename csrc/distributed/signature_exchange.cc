// The store form of the signature exchange and its watch on the peers (signature_exchange.h).
#include "distributed/signature_exchange.h"
#include "settings/settings.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace ttpu::distributed {
namespace {

int store_ranks() {
  static const int ranks =
      static_cast<int>(settings::integer("TORCHTPU_DIST_STORE_RANKS", kStoreRanks, 0, 1 << 20));
  return ranks;
}

// The queue a sender's hashes reach a receiver through (FIFO: the calls'
// order, which every rank shares).
std::string queue_key(int from, int to) { return std::to_string(from) + ">" + std::to_string(to); }

// The watch's receives use a tag no collective or user send uses.
constexpr int kWatchTag = 0x7470776c;  // "tpwl"

// A hash is 8 bytes; a left mark is the peer's error text, never 8 bytes.
std::vector<uint8_t> left_mark(std::string why) {
  if (why.size() > 300) why.resize(300);
  why = "its connection closed: " + why;
  return {why.begin(), why.end()};
}

std::string first_line(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string s = c10 ? c10->what_without_backtrace() : e.what();
  return s.substr(0, s.find('\n'));
}

}  // namespace

SignatureStore::SignatureStore(const c10::intrusive_ptr<c10d::Store>& base,
                               c10::intrusive_ptr<c10d::Backend> control,
                               std::chrono::milliseconds timeout)
    : rank_(control->getRank()), size_(control->getSize()), control_(std::move(control)) {
  push_ = base->clone();
  pop_ = base->clone();
  alert_ = base->clone();
  pop_->queueLen(queue_key(0, 0));  // a store without queues raises here, before any watch
  push_->setTimeout(timeout);
  alert_->setTimeout(timeout);
  for (int r = 0; r < size_; ++r) {
    slots_.push_back(at::empty({1}, at::TensorOptions().dtype(at::kLong).device(at::kCPU)));
  }
  try {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::vector<at::Tensor> slot{slots_[r]};
      watches_.push_back(control_->recv(slot, r, kWatchTag));
      watchers_.emplace_back([work = watches_.back(), alert = alert_, peer = r, me = rank_] {
        std::string why;
        try {
          work->wait(std::chrono::hours(24 * 365));
          return;  // aborted: this rank is leaving the group
        } catch (const std::exception& e) {
          why = first_line(e);
        }
        try {
          alert->queuePush(queue_key(peer, me), left_mark(why));
        } catch (const std::exception&) {
          // The store is gone too (its server was the peer): pops fail at once.
        }
      });
    }
  } catch (...) {
    for (auto& w : watches_) w->abort();
    for (auto& t : watchers_) t.join();
    throw;
  }
}

SignatureStore::~SignatureStore() {
  for (auto& w : watches_) w->abort();
  for (auto& t : watchers_) t.join();
}

void SignatureStore::push(int64_t hash) {
  std::vector<uint8_t> bytes(sizeof hash);
  std::memcpy(bytes.data(), &hash, sizeof hash);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) push_->queuePush(queue_key(rank_, r), bytes);
}

int64_t SignatureStore::pop(int from, const char* what, std::chrono::milliseconds timeout) {
  const std::string key = queue_key(from, rank_);
  std::vector<uint8_t> got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    try {
      pop_->setTimeout(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now()),
                                std::chrono::milliseconds(1)));
      got = pop_->queuePop(key, /*block=*/true);
      break;
    } catch (const c10::DistQueueEmptyError& e) {
      // The store's blocking pop can return "queue is empty" at once for a
      // queue that held items before (seen with 3-4 ranks when a peer is a
      // little late): wait for the peer's push until the deadline.
      if (std::chrono::steady_clock::now() >= deadline) {
        TORCH_CHECK(false, "torch.distributed backend 'tpu': ", what, ": no signature from rank ",
                    from,
                    " within the timeout (a peer that is late, hung, or left): ", first_line(e));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "torch.distributed backend 'tpu': ", what, ": no signature from rank ",
                  from,
                  " within the timeout (a peer that is late, hung, or left): ", first_line(e));
    }
  }
  int64_t hash = 0;
  if (got.size() == sizeof hash) {
    std::memcpy(&hash, got.data(), sizeof hash);
    return hash;
  }
  // The peer's left mark: put it back for the group's next call.
  try {
    pop_->queuePush(key, got);
  } catch (const c10::Error&) {}
  TORCH_CHECK(false, "torch.distributed backend 'tpu': ", what, ": rank ", from,
              " left the group (", std::string(got.begin(), got.end()), ")");
}

std::shared_ptr<SignatureStore> signature_store(const c10::intrusive_ptr<c10d::Store>& base,
                                                const c10::intrusive_ptr<c10d::Backend>& control,
                                                std::chrono::milliseconds timeout) {
  if (!base || control->getSize() > store_ranks()) return nullptr;
  try {
    return std::make_shared<SignatureStore>(base, control, timeout);
  } catch (const c10::Error&) {
    return nullptr;  // the same store type on every rank: all take the all_reduce
  }
}

}  // namespace ttpu::distributed
