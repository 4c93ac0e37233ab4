// The concurrency limiter: one atomic word decides who runs, bits name the slots.
//
// `occupancy` packs the slots in use (low half) and the pieces queued but not yet taken
// (high half). Every decision — "take a slot", "queue behind the running ones", "take the
// next queued piece with the slot I hold", "give my slot back" — is one CAS on that word,
// so a piece is never left queued while a slot is free: the pusher that queues it and the
// finisher that would give its slot back see each other in the word's modification order.
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
    for (std::atomic<task_base*>& runner : runners_) {
      if (task_base* left = runner.load(std::memory_order_relaxed)) drop_handle(left);  // relaxed: the last owner
    }
  }

  std::uint32_t max_concurrency() const noexcept { return max_concurrency_; }

  void push(limited_item* item) {
    unfinished_.fetch_add(1);  // seq_cst: a waiter reading zero has seen every push before it
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
      if ((unfinished_.load() & count_mask) == 0) return true;
      // Queued pieces with a slot free: run them here (a waiting worker "retracts" them).
      std::uint32_t slot = 0;
      if (limited_item* item = try_take_queued(slot)) {
        run_from(slot, item);
        continue;
      }
      // Limiter tasks launched but perhaps not started: take them back and run them here,
      // or block on them (which lets a standby worker stand in for a blocked worker).
      bool retracted = false;
      for (std::atomic<task_base*>& runner : runners_) {
        task_base* launched = runner.exchange(nullptr);  // seq_cst: the waiter's half of the pairing in publish_runner
        if (launched == nullptr) continue;
        retracted = true;
        // Held out of runners_ while its wait runs other work: that work must not run
        // first in launch order, or a body waiting for this limiter would wait for ever.
        ++this_thread_context().holding;
        bool done = detail::wait(launched, forever ? nullptr : &deadline);
        --this_thread_context().holding;
        drop_handle(launched);
        if (!done) return (unfinished_.load() & count_mask) == 0;
      }
      if (retracted) continue;
      // Everything runs elsewhere: sleep until a piece finishes or a runner is published.
      std::uint32_t seen = unfinished_.fetch_or(waiter_sleeps) | waiter_sleeps;  // seq_cst: pairs with publish_runner's load
      if ((seen & count_mask) == 0) return true;
      if (has_published_runner() || has_claimable_queued()) continue;
      spill_held_runs();  // it sleeps: a piece may need what this thread holds aside (lib/held_runs.h)
      if (forever) {
        std_atomics::wait(unfinished_, seen);
      } else {
        auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !std_atomics::wait_for(unfinished_, seen, left.count())) {
          return (unfinished_.load() & count_mask) == 0;
        }
      }
    }
  }

  // run_from runs `item` in `slot`, then whatever is queued while pieces remain, and gives
  // the slot back at the end.
  void run_from(std::uint32_t slot, limited_item* item) noexcept {
    for (;;) {
      run_one(slot, item);
      release_slot_bit(slot);
      std::uint64_t word = occupancy_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
      bool takes_next = false;
      do {
        takes_next = queued(word) != 0;
        // acq_rel: as in push
      } while (!occupancy_.compare_exchange_weak(word, takes_next ? word - one_queued : word - 1,
                                                 std::memory_order_acq_rel,
                                                 std::memory_order_relaxed));  // relaxed: we only retry
      if (!takes_next) return;
      slot = claim_free_slot();  // our own bit, most likely; any free one will do
      item = pop_counted();
    }
  }

 private:
  static constexpr std::uint64_t one_queued = std::uint64_t{1} << 32;
  static constexpr std::uint32_t waiter_sleeps = std::uint32_t{1} << 31;
  static constexpr std::uint32_t count_mask = waiter_sleeps - 1;

  static std::uint32_t in_use(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word); }
  static std::uint32_t queued(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word >> 32); }

  // try_take_queued takes a free slot and a queued piece together, if both exist.
  limited_item* try_take_queued(std::uint32_t& slot) noexcept {
    std::uint64_t word = occupancy_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    do {
      if (queued(word) == 0 || in_use(word) >= max_concurrency_) return nullptr;
      // acq_rel: as in push
    } while (!occupancy_.compare_exchange_weak(word, word - one_queued + 1, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    slot = claim_free_slot();
    return pop_counted();
  }

  bool has_claimable_queued() const noexcept {
    std::uint64_t word = occupancy_.load();  // seq_cst: read after the waiter's flag, as has_published_runner
    return queued(word) != 0 && in_use(word) < max_concurrency_;
  }

  bool has_published_runner() const noexcept {
    for (const std::atomic<task_base*>& runner : runners_) {
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
    std::uint32_t before = unfinished_.fetch_sub(1);  // seq_cst: a waiter reading zero sees this piece's writes
    if ((before & waiter_sleeps) != 0) wake_waiters();
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

  void wake_waiters() noexcept {
    unfinished_.fetch_and(~waiter_sleeps);  // seq_cst: changes the word the sleepers compare, so none sleeps on
    std_atomics::wake_all(unfinished_);
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
    if ((unfinished_.load() & waiter_sleeps) != 0) wake_waiters();  // seq_cst: as above
  }

  const std::uint32_t max_concurrency_;
  const priority work_priority_;
  scheduler* const owner_;
  std::atomic<std::uint64_t> occupancy_{0};
  std::vector<std::atomic<std::uint64_t>> free_slots_;
  // runners_[slot]: a handle to the last task launched for `slot`, for waiters to retract.
  std::vector<std::atomic<task_base*>> runners_;
  // Pieces pushed and not yet run; the high bit says a waiter sleeps on the word.
  std::atomic<std::uint32_t> unfinished_{0};
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
