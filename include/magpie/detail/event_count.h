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
//   publish_work();          // any store that makes the work visible (release is enough)
//   events.notify_one();     // one fence and one load when nobody waits
//
// Why no wake-up is lost: the waiter increments the waiter count and then passes a
// seq_cst fence before re-checking; the notifier publishes, passes a seq_cst fence, then
// loads the count (Dekker with fences on both sides): either the notifier sees the waiter,
// bumps the epoch and wakes it, or the waiter's re-check sees the work. The futex word — the epoch
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
    waiters_.fetch_add(1, std::memory_order_relaxed);  // relaxed: ordered by the fence below
    // Dekker with notify(): the increment above is globally visible before the caller's
    // re-check of its condition, and before we read the epoch.
    Atomics::fence_seq_cst();
    // acquire: pairs with notify's release increment — a key that already counts a notify
    // must also show that notify's work to the re-check, or commit_wait would sleep past it
    return epoch_.load(std::memory_order_acquire);
  }

  // cancel_wait withdraws an announcement whose re-check found work.
  void cancel_wait() noexcept {
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: a stale count only costs a notifier one spurious wake
  }

  // commit_wait sleeps until some notify happens after the matching prepare_wait.
  void commit_wait(key announced) noexcept {
    // acquire: pairs with notify's release increment of the epoch
    while (epoch_.load(std::memory_order_acquire) == announced) Atomics::wait(epoch_, announced);
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: as in cancel_wait
  }

  // commit_wait_for is commit_wait bounded by `timeout`; it returns false on time-out.
  bool commit_wait_for(key announced, std::chrono::nanoseconds timeout) noexcept {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    bool notified = true;
    while (epoch_.load(std::memory_order_acquire) == announced) {  // acquire: as in commit_wait
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero() ||
          !Atomics::wait_for(epoch_, announced, std::chrono::nanoseconds(left).count())) {
        notified = epoch_.load(std::memory_order_acquire) != announced;  // acquire: as in commit_wait
        break;
      }
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: as in cancel_wait
    return notified;
  }

  // notify_one wakes at least one waiter if any has announced itself, and says whether
  // there was one. Waiters that announced but have not gone to sleep yet also return
  // (spuriously).
  bool notify_one() noexcept { return notify(false); }

  // notify_all wakes every waiter that announced itself before this call, and says
  // whether there was one.
  bool notify_all() noexcept { return notify(true); }

  // waiters is the number of threads between prepare_wait and the end of their wait.
  std::uint32_t waiters() const noexcept {
    return waiters_.load(std::memory_order_relaxed);  // relaxed: a statistic for tests and tracing
  }

 private:
  bool notify(bool everyone) noexcept {
    // Dekker with prepare_wait(): the caller's publication of work is globally visible
    // before we read the waiter count.
    Atomics::fence_seq_cst();
    if (waiters_.load(std::memory_order_relaxed) == 0) return false;  // relaxed: ordered by the fence above
    // release: a waiter that reads the new epoch (after its fence) also sees the work
    epoch_.fetch_add(1, std::memory_order_release);
    if (everyone) {
      Atomics::wake_all(epoch_);
    } else {
      Atomics::wake_one(epoch_);
    }
    return true;
  }

  alignas(cache_line) atomic<std::uint32_t> waiters_{0};
  alignas(cache_line) atomic<std::uint32_t> epoch_{0};
};

}  // namespace magpie::detail
