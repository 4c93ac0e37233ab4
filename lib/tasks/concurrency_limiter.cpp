// The concurrency limiter: one atomic word decides who runs, bits name the slots, and a
// slot stays with the thread that holds it while work is queued.
//
// `occupancy` packs the slots in use (low 31 bits), a flag saying a waiter sleeps (bit 31)
// and the pieces queued but not yet taken (high half). Every decision — "take a slot",
// "queue behind the running ones", "take the next queued piece with the slot I hold",
// "give my slot back" — is one CAS on that word, so a piece is never left queued while a
// slot is free: the pusher that queues it and the finisher that would give its slot back see
// each other in the word's modification order. Hence queued > 0 only while every slot is in
// use, and the word reads zero exactly when every piece whose push returned has run: the
// waiters' condition, with no second counter to keep.
//
// The slot bits and the task launch are paid only when a slot changes hands. While pieces
// stay queued, a finisher keeps its slot and its bit and takes the next piece in the same
// task: two RMWs of the shared word per piece (the pusher's count, the finisher's take) plus
// the queue's own. A finisher that finds nothing queued lingers a moment before it gives the
// slot back, so that a pusher slower than the pieces hands them over through the queue
// rather than paying a task launch (and often a worker's wake-up) for each.
//
// A thread that counted a slot as taken then claims a free bit among `free_slots` (a
// releaser sets its bit before it uncounts the slot, so a counted claimant always finds
// one), and a thread that counted a queued piece as taken pops one from `queue` (a pusher
// counts its piece only after it is in the queue).
#include "held_runs.h"
#include "task_internal.h"

#include <magpie/concurrency_limiter.h>
#include <magpie/detail/atomics.h>
#include <magpie/detail/injection_queue.h>
#include <magpie/diagnostics.h>
#include <magpie/task.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace magpie::detail {

class limiter_state : public std::enable_shared_from_this<limiter_state> {
 public:
  limiter_state(std::uint32_t max_concurrency, priority work_priority, scheduler& owner)
      : max_concurrency_(max_concurrency),
        work_priority_(work_priority),
        owner_(&owner),
        free_slots_((std::size_t{max_concurrency} + 63) / 64),
        runners_(max_concurrency) {
    for (std::uint32_t slot = 0; slot < max_concurrency; ++slot) {
      free_slots_[slot / 64].fetch_or(std::uint64_t{1} << (slot % 64));
    }
  }

  ~limiter_state() {
    // Only handles: the tasks themselves finished (each held this state until then).
    for (std_atomics::atomic<task_base*>& runner : runners_) {
      if (task_base* left = runner.load(std::memory_order_relaxed)) drop_handle(left);  // relaxed: the last owner
    }
  }

  std::uint32_t max_concurrency() const noexcept { return max_concurrency_; }

  void push(limited_item* item) {
    queue_.push(item);
    std::uint64_t word = occupancy_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    bool took_slot = false;
    do {
      took_slot = in_use(word) < max_concurrency_;
      // acq_rel: the word's read-modify-writes form one chain: a claimant sees the bit its
      // slot's releaser set before uncounting it, and the queued piece's enqueue
    } while (!occupancy_.compare_exchange_weak(word, took_slot ? word + 1 : word + one_queued,
                                               std::memory_order_acq_rel,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    if (took_slot) launch_runner(claim_free_slot(), pop_counted());
  }

  bool wait(std::chrono::nanoseconds timeout) {
    const auto now = std::chrono::steady_clock::now();
    // A timeout the clock cannot count up to from now is no time-out at all: saturated,
    // not wrapped into the past.
    const bool forever = timeout >= std::chrono::steady_clock::time_point::max() - now;
    const auto deadline = forever ? std::chrono::steady_clock::time_point::max() : now + timeout;
    for (;;) {
      if (all_ran(occupancy_.load())) return true;  // seq_cst: a waiter reading zero sees every piece's writes
      // Limiter tasks launched but perhaps not started: take them back and run them here,
      // or block on them (which lets a standby worker stand in for a blocked worker).
      bool retracted = false;
      for (std_atomics::atomic<task_base*>& runner : runners_) {
        task_base* launched = runner.exchange(nullptr);  // seq_cst: the waiter's half of the pairing in publish_runner
        if (launched == nullptr) continue;
        retracted = true;
        // Held out of runners_ while its wait runs other work: that work must not run
        // first in launch order, or a body waiting for this limiter would wait for ever.
        ++this_thread_context().holding;
        bool done = detail::wait(launched, forever ? nullptr : &deadline);
        --this_thread_context().holding;
        drop_handle(launched);
        if (!done) return all_ran(occupancy_.load());  // seq_cst: as above
      }
      if (retracted) continue;
      // Everything runs elsewhere: sleep until the last piece finishes or a runner is
      // published. The epoch is read before the flag is set: a waker that saw the flag
      // bumps it afterwards, so the sleep below cannot miss that wake-up.
      const std::uint32_t epoch = wake_epoch_.load();  // seq_cst: before the flag, as above
      if (!set_waiter_flag()) return true;
      if (has_published_runner()) continue;
      spill_held_runs();  // it sleeps: a piece may need what this thread holds aside (lib/tasks/held_runs.h)
      if (forever) {
        std_atomics::wait(wake_epoch_, epoch);
      } else {
        auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !std_atomics::wait_for(wake_epoch_, epoch, left.count())) {
          return all_ran(occupancy_.load());  // seq_cst: as above
        }
      }
    }
  }

  // run_from runs `item` in `slot`, then whatever is queued while pieces remain, and gives
  // the slot back at the end.
  void run_from(std::uint32_t slot, limited_item* item) noexcept {
    for (;;) {
      run_one(slot, item);
      if (!take_queued_or_linger()) {
        release_slot_bit(slot);
        if (!uncount_slot()) return;
        slot = claim_free_slot();  // a piece was queued meanwhile: any free bit will do
      }
      item = pop_counted();
    }
  }

 private:
  static constexpr std::uint64_t one_queued = std::uint64_t{1} << 32;
  static constexpr std::uint64_t waiter_sleeps = std::uint64_t{1} << 31;
  static constexpr std::uint64_t in_use_mask = waiter_sleeps - 1;
  // linger_for is how long a finisher with nothing queued keeps looking at the word,
  // linger_pauses spin-loop hints apart, before it gives its slot back: a few pushes' worth,
  // and less than a task launch with a worker's wake-up. Timed by the clock, since what a
  // spin-loop hint costs differs tenfold between processors.
  static constexpr std::chrono::nanoseconds linger_for{1000};
  static constexpr int linger_pauses = 4;

  static std::uint32_t in_use(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word & in_use_mask); }
  static std::uint32_t queued(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word >> 32); }
  static bool all_ran(std::uint64_t word) noexcept { return (word & ~waiter_sleeps) == 0; }

  // take_queued_or_linger counts a queued piece as taken with the slot the caller keeps;
  // with nothing queued it looks again for a while, and returns false if still nothing
  // came (or a waiter sleeps: no pusher is likely to come, and the waiter waits for this slot).
  bool take_queued_or_linger() noexcept {
    std::uint64_t word = occupancy_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    std::chrono::steady_clock::time_point give_up{};  // set at the first look that finds nothing
    for (;;) {
      if (queued(word) != 0) {
        // acq_rel: as in push; the acquire sees the piece's enqueue
        if (occupancy_.compare_exchange_weak(word, word - one_queued, std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {  // relaxed: we look again
          return true;
        }
        continue;
      }
      if ((word & waiter_sleeps) != 0) return false;
      const auto now = std::chrono::steady_clock::now();
      if (give_up == std::chrono::steady_clock::time_point{}) {
        give_up = now + linger_for;
      } else if (now >= give_up) {
        return false;
      }
      for (int pause = 0; pause < linger_pauses; ++pause) cpu_relax();
      word = occupancy_.load(std::memory_order_relaxed);  // relaxed: only a guess; the CAS decides
    }
  }

  // uncount_slot gives the caller's slot back, unless a piece was queued since it looked:
  // then it counts that piece as taken with a slot instead and returns true (the caller's
  // bit is already free; it claims one again). The last finisher wakes the sleeping waiters.
  bool uncount_slot() noexcept {
    std::uint64_t word = occupancy_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    std::uint64_t next = 0;
    do {
      next = queued(word) != 0 ? word - one_queued : word - 1;
      if (all_ran(next)) next = 0;  // the last one clears the waiter flag: it wakes them below
      // acq_rel: as in push; the release publishes the bit set before it and the piece's writes
    } while (!occupancy_.compare_exchange_weak(word, next, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    if (queued(word) != 0) return true;
    if ((word & waiter_sleeps) != 0 && next == 0) bump_and_wake();
    return false;
  }

  // set_waiter_flag marks that a waiter sleeps; false if every piece ran already.
  bool set_waiter_flag() noexcept {
    std::uint64_t word = occupancy_.load();  // seq_cst: the CAS's guess
    do {
      if (all_ran(word)) return false;
      if ((word & waiter_sleeps) != 0) return true;
      // seq_cst: the flag's store comes before the look at runners_ (Dekker with publish_runner)
    } while (!occupancy_.compare_exchange_weak(word, word | waiter_sleeps));
    return true;
  }

  bool has_published_runner() const noexcept {
    for (const std_atomics::atomic<task_base*>& runner : runners_) {
      if (runner.load() != nullptr) return true;  // seq_cst: after setting waiter_sleeps (Dekker with publish_runner)
    }
    return false;
  }

  std::uint32_t claim_free_slot() noexcept {
    for (;;) {  // a counted claimant always finds a bit; it may have to look again
      for (std::size_t index = 0; index < free_slots_.size(); ++index) {
        std::uint64_t bits = free_slots_[index].load(std::memory_order_relaxed);  // relaxed: the CAS's guess
        while (bits != 0) {
          std::uint64_t lowest = bits & (~bits + 1);
          // acquire: pairs with release_slot_bit's release: the slot's previous piece is done
          if (free_slots_[index].compare_exchange_weak(bits, bits & ~lowest, std::memory_order_acquire,
                                                       std::memory_order_relaxed)) {  // relaxed: we retry
            return static_cast<std::uint32_t>(index * 64 + static_cast<std::size_t>(std::countr_zero(lowest)));
          }
        }
      }
      std::this_thread::yield();
    }
  }

  void release_slot_bit(std::uint32_t slot) noexcept {
    // release: pairs with claim_free_slot's acquire: the next piece in this slot sees this one's writes
    free_slots_[slot / 64].fetch_or(std::uint64_t{1} << (slot % 64), std::memory_order_release);
  }

  // pop_counted pops a piece whose count the caller took: it is in the queue, though a
  // moodycamel dequeue may miss it briefly while another producer's block is in flux.
  limited_item* pop_counted() noexcept {
    for (;;) {
      if (limited_item* item = queue_.try_pop()) return item;
      std::this_thread::yield();
    }
  }

  void run_one(std::uint32_t slot, limited_item* item) noexcept {
    const char* name = item->name;
    try {
      item->run_and_destroy(item, slot);
    } catch (...) {
      report_thrown(name);
    }
  }

  [[gnu::cold, gnu::noinline]] static void report_thrown(const char* name) noexcept {
    std::string what = "unknown exception";
    try {
      throw;
    } catch (const std::exception& error) {
      what = error.what();
    } catch (...) {
    }
    report(diagnostic_kind::unhandled_exception,
           std::string("limited work '") + name + "' threw (a concurrency limiter has nobody to hand it to): " + what,
           severity::warning);
  }

  // bump_and_wake wakes every waiter asleep on the epoch (each read it before its flag).
  void bump_and_wake() noexcept {
    wake_epoch_.fetch_add(1);  // seq_cst: after the flag was seen; a waiter that read the old epoch does not sleep on
    std_atomics::wake_all(wake_epoch_);
  }

  void launch_runner(std::uint32_t slot, limited_item* item) {
    auto self = shared_from_this();
    task<> runner = owner_->launch(item->name, [self, slot, item] { self->run_from(slot, item); }, work_priority_);
    publish_runner(slot, runner);
  }

  // publish_runner lets a waiter find the task just launched for `slot`, to retract it.
  void publish_runner(std::uint32_t slot, const task<>& runner) noexcept {
    add_handle(task_access::base(runner));  // the one the cell holds
    // seq_cst: a waiter either finds the task in the cell, or sets waiter_sleeps before our load below
    task_base* previous = runners_[slot].exchange(task_access::base(runner));
    if (previous != nullptr) drop_handle(previous);  // an older task of this slot: begun, since it gave the slot up
    if ((occupancy_.load() & waiter_sleeps) != 0) {  // seq_cst: as above
      occupancy_.fetch_and(~waiter_sleeps);  // seq_cst: the waiters set it again before they sleep again
      bump_and_wake();
    }
  }

  const std::uint32_t max_concurrency_;
  const priority work_priority_;
  scheduler* const owner_;
  std_atomics::atomic<std::uint64_t> occupancy_{0};
  // wake_epoch_: what a sleeping waiter waits on (futex words are 32 bits); bumped by every wake.
  std_atomics::atomic<std::uint32_t> wake_epoch_{0};
  std::vector<std_atomics::atomic<std::uint64_t>> free_slots_;
  // runners_[slot]: a handle to the last task launched for `slot`, for waiters to retract.
  std::vector<std_atomics::atomic<task_base*>> runners_;
  injection_queue<limited_item> queue_;
};

}  // namespace magpie::detail

namespace magpie {

namespace {
std::uint32_t checked_concurrency(std::uint32_t max_concurrency) {
  if (max_concurrency > task_concurrency_limiter::most_at_once) return task_concurrency_limiter::most_at_once;
  if (max_concurrency != 0) return max_concurrency;
  report(diagnostic_kind::misuse, "task_concurrency_limiter: max_concurrency 0 would never run anything; using 1");
  return 1;
}
}  // namespace

task_concurrency_limiter::task_concurrency_limiter(std::uint32_t max_concurrency, priority work_priority)
    : task_concurrency_limiter(max_concurrency, work_priority, detail::scheduler_for_free_functions()) {}

task_concurrency_limiter::task_concurrency_limiter(std::uint32_t max_concurrency, priority work_priority,
                                                   scheduler& owner)
    : state_(std::make_shared<detail::limiter_state>(checked_concurrency(max_concurrency), work_priority, owner)) {}

task_concurrency_limiter::~task_concurrency_limiter() = default;

void task_concurrency_limiter::push_item(detail::limited_item* item) { state_->push(item); }

bool task_concurrency_limiter::wait(std::chrono::nanoseconds timeout) { return state_->wait(timeout); }

std::uint32_t task_concurrency_limiter::max_concurrency() const noexcept { return state_->max_concurrency(); }

}  // namespace magpie
