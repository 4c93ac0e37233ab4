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
// notify_one's wake-ups are counted. It grants one (a "signal") only while some announced
// waiter has none coming, and each waiter takes one on its way out. So a burst of launches
// while a woken worker is still getting onto a CPU costs one futex call, not one per
// launch — the waiter counts as announced until it runs, and without the count each
// notify would wake it again. A waiter that leaves otherwise (a cancel, a time-out, a broadcast) takes a signal
// only when every waiter holds one (then one of them is surely its own); otherwise the
// signal stays for a waiter still on its way out. Either way signals never outnumber
// waiters, and none is left behind when the last goes.
// Signals are anyone's to take, so notify_one suits only event counts whose waiters all
// wait for the same thing (idle workers: any work).
//
// notify_all grants no signals: it advances a broadcast count, and every waiter whose key
// predates it leaves. A waiter arriving later cannot take its place, so waiters of one
// event count may wait for different things (tasks sharing a slot of waiters_of, standby
// workers of different ranks) as long as they are woken with notify_all.
//
// Sleepers block on the epoch, a futex word that every grant and broadcast advances. It
// lives in the event count, never on a waiter's stack, so a notifier
// may touch it after the waiter has left. test/model/event_count_model.cpp model-checks the protocol
// under Relacy, with a weakened mutant that must lose a wake-up.
#pragma once

#include <magpie/detail/atomics.h>

#include <chrono>
#include <cstdint>

namespace magpie::detail {

// deadline_after is the steady-clock point `timeout` after `now`, saturating at the
// clock's end: a timeout too long to represent (nanoseconds::max(), hours::max()) means
// no time-out, where now + timeout would overflow into the past. A negative one is `now`.
// Every timed wait of the library computes its deadline here.
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(
    std::chrono::duration<Rep, Period> timeout,
    std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) noexcept {
  using clock_point = std::chrono::steady_clock::time_point;
  if (!(timeout > std::chrono::duration<Rep, Period>::zero())) return now;  // (NaN too)
  // Compared in double nanoseconds, which cannot overflow: rounding is monotonic, so a
  // timeout below the room left is below it exactly, and its ceiling still fits.
  using wide = std::chrono::duration<double, std::nano>;
  if (std::chrono::duration_cast<wide>(timeout) >= std::chrono::duration_cast<wide>(clock_point::max() - now)) {
    return clock_point::max();
  }
  return now + std::chrono::ceil<std::chrono::steady_clock::duration>(timeout);
}

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
  // key is what a waiter saw when it announced itself.
  struct key {
    std::uint32_t epoch;       // the futex word, to sleep on
    std::uint32_t broadcasts;  // notify_all calls so far
  };

  // prepare_wait announces the calling thread as a waiter. Re-check the condition after
  // it, then call commit_wait or cancel_wait exactly once.
  key prepare_wait() noexcept {
    state_.fetch_add(one_waiter, std::memory_order_relaxed);  // relaxed: ordered by the fence below
    // Dekker with the notifiers: the increment above is globally visible before the
    // caller's re-check of its condition.
    Atomics::fence_seq_cst();
    Atomics::chaos_point(chaos::site::park);
    key announced{};
    announced.broadcasts = broadcasts_.load(std::memory_order_acquire);  // acquire: pairs with notify_all's release increment
    announced.epoch = epoch_.load(std::memory_order_acquire);  // acquire: pairs with the notifiers' release increments
    return announced;
  }

  // cancel_wait withdraws an announcement whose re-check found work.
  void cancel_wait() noexcept { (void)withdraw(); }

  // commit_wait sleeps until this waiter takes a signal, or a notify_all comes after its
  // prepare_wait.
  void commit_wait(key announced) noexcept {
    while (!woken(announced)) {
      Atomics::wait(epoch_, announced.epoch);  // returns at once if a notify advanced the epoch since
      announced.epoch = epoch_.load(std::memory_order_acquire);  // acquire: as in prepare_wait
    }
  }

  // commit_wait_for is commit_wait bounded by `timeout`; it returns false on time-out.
  bool commit_wait_for(key announced, std::chrono::nanoseconds timeout) noexcept {
    auto deadline = deadline_after(timeout);
    while (!woken(announced)) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero() ||
          !Atomics::wait_for(epoch_, announced.epoch, std::chrono::nanoseconds(left).count())) {
        // A signal granted just now is still taken (and reported), as is a broadcast.
        return withdraw() || broadcasts_.load(std::memory_order_acquire) != announced.broadcasts;  // acquire: as in prepare_wait
      }
      announced.epoch = epoch_.load(std::memory_order_acquire);  // acquire: as in prepare_wait
    }
    return true;
  }

  // notify_one grants a wake-up to one announced waiter that has none coming, and says
  // whether there was one. Any announced waiter may take it (see above). Waiters that
  // announced but have not gone to sleep yet also return (spuriously).
  bool notify_one() noexcept {
    // Dekker with prepare_wait(): the caller's publication of work is globally visible
    // before we read the waiter count.
    Atomics::chaos_point(chaos::site::wake);
    Atomics::fence_seq_cst();
    return notify_one_unless<atomic<std::uint32_t>>(nullptr);
  }

  // notify_one_unless is notify_one for a caller that has made the fence itself, and that
  // may skip the wake-up while `covered` (when given) is non-zero: a word the would-be
  // waker's helpers raise while they look for the work anyway (searching workers). It is
  // read only when a waiter needs a wake-up, after the fence, so a helper that lowers it,
  // then fences and looks again, sees what the caller published. Any word with a load
  // serves (the counting build's atomics are not the caller's).
  template <class Word>
  bool notify_one_unless(const Word* covered) noexcept {
    std::uint64_t seen = state_.load(std::memory_order_relaxed);  // relaxed: ordered by the caller's fence
    if (signals_in(seen) == waiters_in(seen)) return false;
    if (covered != nullptr && covered->load(std::memory_order_relaxed) != 0) return false;  // relaxed: ordered by the caller's fence
    do {
      // Nobody waits, or every waiter already has a wake-up coming: nothing to do.
      if (signals_in(seen) == waiters_in(seen)) return false;
    // release: pairs with take_signal's acquire, so the woken waiter also sees the work;
    // relaxed on failure: we only retry
    } while (!state_.compare_exchange_weak(seen, seen + one_signal, std::memory_order_release,
                                           std::memory_order_relaxed));
    epoch_.fetch_add(1, std::memory_order_release);  // release: a sleeper that reads the new epoch sees the grant
    Atomics::wake_one(epoch_);
    return true;
  }

  // notify_all wakes every waiter announced before this call, and says whether there was one.
  bool notify_all() noexcept {
    Atomics::fence_seq_cst();  // Dekker with prepare_wait(), as in notify_one
    if (waiters_in(state_.load(std::memory_order_relaxed)) == 0) return false;  // relaxed: ordered by the fence above
    broadcasts_.fetch_add(1, std::memory_order_release);  // release: pairs with the waiters' acquire loads
    epoch_.fetch_add(1, std::memory_order_release);  // release: a sleeper that reads the new epoch sees the broadcast
    Atomics::wake_all(epoch_);
    return true;
  }

  // waiters is the number of threads between prepare_wait and the end of their wait.
  std::uint32_t waiters() const noexcept {
    return static_cast<std::uint32_t>(waiters_in(state_.load(std::memory_order_relaxed)));  // relaxed: a statistic for tests and tracing
  }

  // signals is the number of notify_one wake-ups granted and not yet taken.
  std::uint32_t signals() const noexcept {
    return static_cast<std::uint32_t>(signals_in(state_.load(std::memory_order_relaxed)));  // relaxed: a statistic for tests
  }

 private:
  // woken ends this waiter's announcement if a notify_all came after its prepare_wait, or a
  // signal is there for it, and says whether it did. The broadcast is looked at first: a
  // waiter leaving on it takes a signal only if every waiter holds one (withdraw), so a
  // notify_one's wake-up stays with a waiter that still needs it.
  bool woken(const key& announced) noexcept {
    if (broadcasts_.load(std::memory_order_acquire) != announced.broadcasts) {  // acquire: as in prepare_wait
      (void)withdraw();
      return true;
    }
    return take_signal();
  }

  // take_signal ends this waiter's announcement if a signal is there for it.
  bool take_signal() noexcept {
    std::uint64_t seen = state_.load(std::memory_order_acquire);  // acquire: pairs with notify_one's release grant
    while (signals_in(seen) != 0) {
      // acquire: pairs with notify_one's release grant; relaxed on failure: we look again
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
  atomic<std::uint32_t> broadcasts_{0};  // beside the epoch: both are written only while someone waits
};

}  // namespace magpie::detail
