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
// loads the count (Dekker with fences on both sides): either the notifier sees the waiter
// and grants it a wake-up, or the waiter's re-check sees the work.
//
// Wake-ups are counted. A notify grants one (a "signal") only while some announced waiter
// has none coming, and each waiter takes one on its way out. So a burst of launches while
// a woken worker is still getting onto a CPU costs one futex call, not one per launch —
// the waiter counts as announced until it runs, and each notify used to wake it again.
// A waiter that cancels takes a signal only when every waiter holds one (then one of them
// is surely its own); otherwise the signal stays for a waiter still on its way out. Either
// way signals never outnumber waiters, and none is left behind when the last one goes.
//
// Sleepers block on the epoch, a futex word that every grant advances. It lives in the
// event count, never on a waiter's stack (RELIABILITY.md §3.4), so a notifier may touch it
// after the waiter has left. test/model/event_count_model.cpp model-checks the protocol
// under Relacy, with a weakened mutant that must lose a wake-up.
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

  // state_ holds the announced waiters in its low half and the signals granted to them
  // and not yet taken in its high half; signals ≤ waiters.
  static constexpr std::uint64_t one_waiter = 1;
  static constexpr std::uint64_t one_signal = std::uint64_t{1} << 32;
  static constexpr std::uint64_t waiter_mask = one_signal - 1;

  static std::uint64_t waiters_in(std::uint64_t state) noexcept { return state & waiter_mask; }
  static std::uint64_t signals_in(std::uint64_t state) noexcept { return state >> 32; }

 public:
  // key is the epoch a waiter announced itself in.
  using key = std::uint32_t;

  // prepare_wait announces the calling thread as a waiter. Re-check the condition after
  // it, then call commit_wait or cancel_wait exactly once.
  key prepare_wait() noexcept {
    state_.fetch_add(one_waiter, std::memory_order_relaxed);  // relaxed: ordered by the fence below
    // Dekker with notify(): the increment above is globally visible before the caller's
    // re-check of its condition.
    Atomics::fence_seq_cst();
    return epoch_.load(std::memory_order_acquire);  // acquire: pairs with notify's release increment
  }

  // cancel_wait withdraws an announcement whose re-check found work.
  void cancel_wait() noexcept { (void)withdraw(); }

  // commit_wait sleeps until this waiter takes a signal granted after its prepare_wait.
  void commit_wait(key announced) noexcept {
    while (!take_signal()) {
      Atomics::wait(epoch_, announced);  // returns at once if a grant advanced the epoch since
      announced = epoch_.load(std::memory_order_acquire);  // acquire: pairs with notify's release increment
    }
  }

  // commit_wait_for is commit_wait bounded by `timeout`; it returns false on time-out.
  bool commit_wait_for(key announced, std::chrono::nanoseconds timeout) noexcept {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!take_signal()) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero() ||
          !Atomics::wait_for(epoch_, announced, std::chrono::nanoseconds(left).count())) {
        return withdraw();  // a signal granted just now is still taken, and reported
      }
      announced = epoch_.load(std::memory_order_acquire);  // acquire: as in commit_wait
    }
    return true;
  }

  // notify_one grants a wake-up to one announced waiter that has none coming, and says
  // whether there was one. Waiters that announced but have not gone to sleep yet also
  // return (spuriously).
  bool notify_one() noexcept { return notify(false); }

  // notify_all grants a wake-up to every waiter announced before this call, and says
  // whether some waiter had none coming.
  bool notify_all() noexcept { return notify(true); }

  // waiters is the number of threads between prepare_wait and the end of their wait.
  std::uint32_t waiters() const noexcept {
    return static_cast<std::uint32_t>(waiters_in(state_.load(std::memory_order_relaxed)));  // relaxed: a statistic for tests and tracing
  }

  // signals is the number of wake-ups granted and not yet taken.
  std::uint32_t signals() const noexcept {
    return static_cast<std::uint32_t>(signals_in(state_.load(std::memory_order_relaxed)));  // relaxed: a statistic for tests
  }

 private:
  bool notify(bool everyone) noexcept {
    // Dekker with prepare_wait(): the caller's publication of work is globally visible
    // before we read the waiter count.
    Atomics::fence_seq_cst();
    std::uint64_t seen = state_.load(std::memory_order_relaxed);  // relaxed: ordered by the fence above
    std::uint64_t granted = 0;
    do {
      std::uint64_t waiters = waiters_in(seen);
      // Nobody waits, or every waiter already has a wake-up coming: nothing to do.
      if (signals_in(seen) == waiters) return false;
      granted = everyone ? (waiters << 32) | waiters : seen + one_signal;
    // release: pairs with take_signal's acquire, so the woken waiter also sees the work;
    // relaxed on failure: we only retry
    } while (!state_.compare_exchange_weak(seen, granted, std::memory_order_release, std::memory_order_relaxed));
    // release: a sleeper that reads the new epoch (and then takes the signal) sees the grant
    epoch_.fetch_add(1, std::memory_order_release);
    if (everyone) {
      Atomics::wake_all(epoch_);
    } else {
      Atomics::wake_one(epoch_);
    }
    return true;
  }

  // take_signal ends this waiter's announcement if a signal is there for it.
  bool take_signal() noexcept {
    std::uint64_t seen = state_.load(std::memory_order_acquire);  // acquire: pairs with notify's release grant
    while (signals_in(seen) != 0) {
      // acquire: pairs with notify's release grant; relaxed on failure: we look again
      if (state_.compare_exchange_weak(seen, seen - one_signal - one_waiter, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  // withdraw ends this waiter's announcement without waiting for a signal. When every
  // waiter holds one, this one does too and takes it (returning true); otherwise it
  // leaves the signals to the others.
  bool withdraw() noexcept {
    std::uint64_t seen = state_.load(std::memory_order_relaxed);  // relaxed: only the CAS's guess
    for (;;) {
      bool signalled = signals_in(seen) == waiters_in(seen);
      std::uint64_t left = seen - one_waiter - (signalled ? one_signal : 0);
      // acquire: a taken signal shows the notifier's work, as in take_signal; relaxed on
      // failure: we only retry
      if (state_.compare_exchange_weak(seen, left, std::memory_order_acquire, std::memory_order_relaxed)) {
        return signalled;
      }
    }
  }

  alignas(cache_line) atomic<std::uint64_t> state_{0};
  alignas(cache_line) atomic<std::uint32_t> epoch_{0};
};

}  // namespace magpie::detail
