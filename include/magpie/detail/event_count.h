// Layer 1 — the event count idle workers park on.
//
// A waiter announces itself, re-checks its condition, then sleeps only if nobody
// notified in between; a notifier that finds no announced waiter returns after one
// load. This is the classic two-phase protocol:
//
//   auto key = events.prepare_wait();
//   if (work_available()) { events.cancel_wait(); return; }   // re-check after announcing
//   events.commit_wait(key);                                  // sleeps unless notified since
//
//   publish_work();          // must be a seq_cst operation (or followed by one)
//   events.notify_one();     // one seq_cst load when nobody waits
//
// Why no wake-up is lost: prepare_wait's seq_cst increment of the waiter count and the
// notifier's seq_cst load of it are ordered in one total order with the work publication
// and the waiter's re-check (Dekker): either the notifier sees the waiter, bumps the
// epoch and wakes it, or the waiter's re-check sees the work. The futex word — the epoch
// — lives in the event count, never on a waiter's stack (RELIABILITY.md §3.4), so a
// notifier may touch it after the waiter has left. test/model/event_count_model.cpp
// model-checks this under Relacy, with a weakened mutant that must lose a wake-up.
#pragma once

#include <magpie/detail/atomics.h>

#include <chrono>
#include <cstdint>

namespace magpie::detail {

// event_count parks and wakes threads without lost wake-ups.
template <class Atomics = std_atomics>
class event_count {
  template <class U>
  using atomic = typename Atomics::template atomic<U>;

 public:
  // key identifies the epoch a waiter announced itself in.
  using key = std::uint32_t;

  // prepare_wait announces the calling thread as a waiter. Re-check the condition after
  // it, then call commit_wait or cancel_wait exactly once.
  key prepare_wait() noexcept {
    waiters_.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: Dekker with notify's load of the count
    return epoch_.load(std::memory_order_seq_cst);
  }

  // cancel_wait withdraws an announcement whose re-check found work.
  void cancel_wait() noexcept {
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: a stale count only costs a notifier one spurious wake
  }

  // commit_wait sleeps until some notify happens after the matching prepare_wait.
  void commit_wait(key announced) noexcept {
    while (epoch_.load(std::memory_order_seq_cst) == announced) Atomics::wait(epoch_, announced);
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: as in cancel_wait
  }

  // commit_wait_for is commit_wait bounded by `timeout`; it returns false on time-out.
  bool commit_wait_for(key announced, std::chrono::nanoseconds timeout) noexcept {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    bool notified = true;
    while (epoch_.load(std::memory_order_seq_cst) == announced) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero() ||
          !Atomics::wait_for(epoch_, announced, std::chrono::nanoseconds(left).count())) {
        notified = epoch_.load(std::memory_order_seq_cst) != announced;
        break;
      }
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: as in cancel_wait
    return notified;
  }

  // notify_one wakes at least one waiter if any has announced itself. Waiters that
  // announced but have not gone to sleep yet also return (spuriously).
  void notify_one() noexcept { notify(false); }

  // notify_all wakes every waiter that announced itself before this call.
  void notify_all() noexcept { notify(true); }

  // waiters is the number of threads between prepare_wait and the end of their wait.
  std::uint32_t waiters() const noexcept {
    return waiters_.load(std::memory_order_relaxed);  // relaxed: a statistic for tests and tracing
  }

 private:
  void notify(bool everyone) noexcept {
    // seq_cst: Dekker with prepare_wait's increment; the caller's publication of work
    // precedes this load in the single total order.
    if (waiters_.load(std::memory_order_seq_cst) == 0) return;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (everyone) {
      Atomics::wake_all(epoch_);
    } else {
      Atomics::wake_one(epoch_);
    }
  }

  alignas(cache_line) atomic<std::uint32_t> waiters_{0};
  alignas(cache_line) atomic<std::uint32_t> epoch_{0};
};

}  // namespace magpie::detail
