// The concurrency limiter: pieces are counted where they are pushed and where they finish,
// on lines of their own; one shared word counts only the slots in use, and changes only when
// a slot changes hands.
//
// A push counts its piece on its thread's lane of `pushed_` (a line its pusher alone writes
// while few threads push), queues it, and then looks at `occupancy` (the slots in use, low
// 31 bits, and a flag saying a waiter sleeps, bit 31). Only when a slot is free does it
// take one there and launch a task. A slot's holder runs queued pieces one after another in
// the same task, counting each on the slot's lane of `finished_`, and touches the shared
// word only when the queue stays empty for a while (it lingers about a microsecond first)
// and it gives the slot back. So beside the queue's own operations a piece costs its pusher
// and its holder each one read-modify-write on a line of their own (and the pusher a fence),
// whatever the number of threads; the shared word is read by pushers and written by nobody
// while the slots stay held.
//
// No piece is left queued while a slot is free: a pusher queues its piece, then looks at the
// slots in use (a full fence between); a holder gives its slot back, then looks at the queue
// (its read-modify-write a full fence too). Of any two such, one sees the other: the pusher
// sees the slot free and takes it, or the holder sees the piece and takes a slot again if
// one is free — if none is, a slot was taken after that give-back, and its taker looks at
// the queue before it gives its own slot back.
//
// Every piece whose push returned has run once the finished lanes add up to the pushed
// ones: read in that order, a finished piece's push is always among those counted (it was
// pushed before it was popped), so the sums meet only when every counted push has run.
// A waiter that sleeps sets the flag first; a holder that gives its slot back clears the flag
// and wakes it, so the last holder to go wakes it after the last piece.
//
// A thread that counted a slot as taken then claims a free bit among `free_slots` (a
// releaser sets its bit before it uncounts the slot, so a counted claimant always finds one).
#include "held_runs.h"
#include "task_internal.h"

#include <magpie/concurrency_limiter.h>
#include <magpie/detail/atomics.h>
#include <magpie/detail/injection_queue.h>
#include <magpie/diagnostics.h>
#include <magpie/task.h>

#include <algorithm>
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
        runners_(max_concurrency),
        pushed_(push_lanes),
        finished_(std::bit_ceil(std::min<std::size_t>(max_concurrency, finish_lanes))) {
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
    lane& mine = pushed_[pusher_lane()];
    // relaxed: the enqueue below publishes the count with the piece; a holder's finished
    // count (release) passes both on to a waiter
    mine.count.fetch_add(1, std::memory_order_relaxed);
    try {
      queue_.push(item);
    } catch (...) {
      mine.count.fetch_sub(1, std::memory_order_relaxed);  // relaxed: never queued, never counted as run
      item->destroy(item);
      throw;
    }
    // The piece queued before the look at the slots in use: with give_back_slot's
    // read-modify-write and look at the queue, one of the two sees the other.
    std_atomics::fence_seq_cst();
    if (!count_free_slot()) return;  // every holder looks at the queue before it gives its slot up
    std::uint32_t slot = claim_free_slot();
    limited_item* first = queue_.try_pop();
    if (first == nullptr) first = give_back_slot(slot);  // a holder took it meanwhile
    if (first != nullptr) launch_runner(slot, first);
  }

  bool wait(std::chrono::nanoseconds timeout) {
    const auto now = std::chrono::steady_clock::now();
    // A timeout the clock cannot count up to from now is no time-out at all: saturated,
    // not wrapped into the past.
    const bool forever = timeout >= std::chrono::steady_clock::time_point::max() - now;
    const auto deadline = forever ? std::chrono::steady_clock::time_point::max() : now + timeout;
    for (;;) {
      if (all_ran()) return true;
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
        if (!done) return all_ran();
      }
      if (retracted) continue;
      // Everything runs elsewhere: sleep until a holder gives its slot back or a runner is
      // published. The epoch is read before the flag is set: a waker that saw the flag
      // bumps it afterwards, so the sleep below cannot miss that wake-up.
      const std::uint32_t epoch = wake_epoch_.load();  // seq_cst: before the flag, as above
      // seq_cst: the flag before the looks below (Dekker with uncount_slot and publish_runner);
      // and it reads the word after every give-back before it, whose counts it then sees
      occupancy_.fetch_or(waiter_sleeps);
      if (all_ran()) return true;
      if (has_published_runner()) continue;
      spill_held_runs();  // it sleeps: a piece may need what this thread holds aside (lib/tasks/held_runs.h)
      if (forever) {
        std_atomics::wait(wake_epoch_, epoch);
      } else {
        auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !std_atomics::wait_for(wake_epoch_, epoch, left.count())) return all_ran();
      }
    }
  }

  // run_from runs `item` in `slot`, then whatever is queued while pieces remain, and gives
  // the slot back at the end.
  void run_from(std::uint32_t slot, limited_item* item) noexcept {
    do {
      while (item != nullptr) {
        run_one(slot, item);
        // release: pairs with all_ran's acquire: a waiter that counts this piece sees its writes
        finished_[slot & (finished_.size() - 1)].count.fetch_add(1, std::memory_order_release);
        item = next_or_linger();
      }
      item = give_back_slot(slot);
    } while (item != nullptr);
  }

 private:
  static constexpr std::uint32_t waiter_sleeps = std::uint32_t{1} << 31;
  static constexpr std::uint32_t in_use_mask = waiter_sleeps - 1;
  // push_lanes: pushing threads share a lane only beyond this many; finish_lanes: slots
  // share a lane only beyond this many (a power of two, as finished_'s size, so that a
  // slot finds its lane by a mask). Each lane is a cache line.
  static constexpr std::size_t push_lanes = 16;
  static constexpr std::size_t finish_lanes = 64;
  // linger_for is how long a holder with nothing queued keeps looking at the queue,
  // linger_pauses spin-loop hints apart, before it gives its slot back: a few pushes' worth,
  // and less than a task launch with a worker's wake-up. Timed by the clock, since what a
  // spin-loop hint costs differs tenfold between processors.
  static constexpr std::chrono::nanoseconds linger_for{1000};
  static constexpr int linger_pauses = 4;

  // lane is a counter alone on its cache line.
  struct alignas(64) lane {
    std_atomics::atomic<std::uint64_t> count{0};
  };

  static std::uint32_t in_use(std::uint32_t word) noexcept { return word & in_use_mask; }

  // pusher_lane is the calling thread's lane of pushed_, handed out in turn.
  static std::size_t pusher_lane() noexcept {
    static std::atomic<std::uint32_t> next{0};
    std::uint32_t& mine = tasks_tls.limiter_push_lane;
    if (mine == 0) mine = next.fetch_add(1, std::memory_order_relaxed) % push_lanes + 1;  // relaxed: only a spread
    return mine - 1;
  }

  // all_ran says every piece whose push returned before this call has run, and makes their
  // writes visible. Finished before pushed: see the head of this file.
  bool all_ran() const noexcept {
    std::uint64_t finished = 0;
    for (const lane& each : finished_) finished += each.count.load(std::memory_order_acquire);  // acquire: pairs with run_from's release
    std::uint64_t pushed = 0;
    // relaxed: a counted piece's push happened before its finish, which the acquire above saw
    for (const lane& each : pushed_) pushed += each.count.load(std::memory_order_relaxed);
    return finished >= pushed;
  }

  // next_or_linger pops the next queued piece; with none it looks again for a while, and
  // returns nullptr if still none came (or a waiter sleeps: no pusher is likely to come, and
  // the waiter waits for this slot).
  limited_item* next_or_linger() noexcept {
    if (limited_item* item = queue_.try_pop()) return item;
    const auto give_up = std::chrono::steady_clock::now() + linger_for;
    for (;;) {
      // relaxed: a stale flag only lingers a little longer
      if ((occupancy_.load(std::memory_order_relaxed) & waiter_sleeps) != 0) return nullptr;
      for (int pause = 0; pause < linger_pauses; ++pause) cpu_relax();
      if (limited_item* item = queue_.try_pop()) return item;
      if (std::chrono::steady_clock::now() >= give_up) return nullptr;
    }
  }

  // count_free_slot counts a slot as taken if one is free; false if all N are in use.
  bool count_free_slot() noexcept {
    // relaxed: after push's fence or uncount_slot's read-modify-write, which order it after
    // the caller's own publication; the CAS decides
    std::uint32_t word = occupancy_.load(std::memory_order_relaxed);
    do {
      if (in_use(word) >= max_concurrency_) return false;
      // acq_rel: the word's read-modify-writes form one chain; the bit claimed next pairs on its own
    } while (!occupancy_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    return true;
  }

  // give_back_slot gives `slot` up. If a piece was queued meanwhile and a slot is free, it
  // takes one again: it returns the piece, with `slot` set to the one taken; else nullptr.
  limited_item* give_back_slot(std::uint32_t& slot) noexcept {
    for (bool found_none = false;; found_none = true) {
      release_slot_bit(slot);
      chaos::point(chaos::site::limiter_handover);  // the bit free, the slot still counted
      uncount_slot();
      // The queue still counts a piece that another slot's holder is taking (and will run);
      // one that found none when it looked lets that holder go on before it looks again.
      if (found_none) std::this_thread::yield();
      if (queue_.size_approx() == 0 || !count_free_slot()) return nullptr;
      slot = claim_free_slot();
      if (limited_item* item = next_or_linger()) return item;
    }
  }

  // uncount_slot gives a counted slot back and wakes the waiters if one sleeps.
  void uncount_slot() noexcept {
    std::uint32_t word = occupancy_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    // seq_cst: before the caller's look at the queue (Dekker with push's fence), and after
    // the slot's pieces, whose finished counts a waiter that sets its flag later then sees
    while (!occupancy_.compare_exchange_weak(word, (word - 1) & ~waiter_sleeps, std::memory_order_seq_cst,
                                             std::memory_order_relaxed)) {  // relaxed: we only retry
    }
    std_atomics::fence_after_atomic();
    if ((word & waiter_sleeps) != 0) bump_and_wake();
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
  std_atomics::atomic<std::uint32_t> occupancy_{0};
  // wake_epoch_: what a sleeping waiter waits on (futex words are 32 bits); bumped by every wake.
  std_atomics::atomic<std::uint32_t> wake_epoch_{0};
  std::vector<std_atomics::atomic<std::uint64_t>> free_slots_;
  // runners_[slot]: a handle to the last task launched for `slot`, for waiters to retract.
  std::vector<std_atomics::atomic<task_base*>> runners_;
  injection_queue<limited_item> queue_;
  std::vector<lane> pushed_;    // pieces pushed, per pushing thread's lane
  std::vector<lane> finished_;  // pieces run, per slot's lane: slot & (size - 1)
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
