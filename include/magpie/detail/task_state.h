// Layer 1 — the `num_locks` word at the heart of a task (docs/memory_orders.md).
//
// Before execution the low bits count locks: 1 launch lock from creation, plus one per
// unfinished prerequisite. Whoever removes the last lock makes the task ready (and
// schedules it). Execution starts by setting the high bit with a CAS from exactly 0 — the
// scheduler and a retracting waiter race for it, and one wins. From then on the low bits
// count 1 (the body itself) plus each unfinished nested task; whoever removes the last of
// those completes the task.
//
// Bit 29 is set only after completion, when nothing else writes the word: a waiter that
// ran the task after taking it back off its own deque left the queue's reference to the
// task's handles, and the last handle to go releases it (lib/task.cpp, drop_handle).
//
// Bit 28 says the task was begun by a waiter that took it back off its own deque, and that
// the waiter completes it without closing its subsequent list unless something was pushed
// meanwhile (lib/task_wait.cpp, finish_open): a pusher or a blocking waiter that finds it
// running so makes the heavy half of an asymmetric barrier before it looks again.
//
// Bit 30 says a waiter claimed the task's prerequisites before it began (to retract them;
// it then drops the references the task held on them). The runner's begin CAS tells it
// whether it takes them over instead: a chain hop needs no read-modify-write of its own
// for that hand-over.
//
//   task_state state;                        // 1 launch lock
//   state.add_locks(k);                      // before launch: one per prerequisite
//   if (state.unlock()) schedule(task);      // launch, or a prerequisite completing
//   if (state.try_begin_execution(mine)) {   // a worker, or a waiter retracting it
//     run body; (add_nested_lock() for each nested task, release_part() when it completes)
//     if (state.release_part()) complete(task);
//   }
//
// test/model/task_state_model.cpp checks launch vs the last prerequisite vs a retracting
// waiter vs a nested task completing elsewhere under Relacy: one execution, one
// completion, and the prerequisite's result visible to the body.
#pragma once

#include <magpie/detail/atomics.h>

#include <cstdint>

namespace magpie::detail {

// task_state is a task's atomic `num_locks` word and its transitions.
template <class Atomics = std_atomics>
class task_state {
 public:
  // execution_flag is the high bit: set once execution has begun.
  static constexpr std::uint32_t execution_flag = std::uint32_t{1} << 31;
  // prerequisites_claimed: a waiter took over the prerequisites before execution began.
  static constexpr std::uint32_t prerequisites_claimed = std::uint32_t{1} << 30;
  // reference_left_to_handles: set after completion; see leave_reference_to_handles.
  static constexpr std::uint32_t reference_left_to_handles = std::uint32_t{1} << 29;
  // finishes_open: begun by a waiter that completes it without a close (bit 28 above).
  static constexpr std::uint32_t finishes_open = std::uint32_t{1} << 28;
  // marks are the bits that are neither the count nor the execution flag.
  static constexpr std::uint32_t marks = prerequisites_claimed | reference_left_to_handles | finishes_open;

  // add_locks adds `count` locks; only before launch, by the launching thread.
  void add_locks(std::uint32_t count) noexcept {
    // relaxed: the locks are published with the task, by the release that hands the task
    // to a prerequisite's subsequent list; and the launch lock keeps the count above zero
    num_locks_.fetch_add(count, std::memory_order_relaxed);
  }

  // add_unshared_locks is add_locks while no other thread can reach the task (nothing
  // links to it yet): a load and a store.
  void add_unshared_locks(std::uint32_t count) noexcept {
    // relaxed: published with the task, as add_locks'
    num_locks_.store(num_locks_.load(std::memory_order_relaxed) + count, std::memory_order_relaxed);
  }

  // replace_launch_lock sets the count to `count` prerequisite locks in place of the launch
  // lock, while no other thread can reach the task: a store. The caller then links the
  // task to its prerequisites and removes, with release_locks, those found complete.
  void replace_launch_lock(std::uint32_t count) noexcept {
    num_locks_.store(count, std::memory_order_relaxed);  // relaxed: published by the first link's release CAS
  }

  // release_locks removes `count` locks at once (prerequisites found complete while adding
  // them) and returns how many remain, as release_lock.
  std::uint32_t release_locks(std::uint32_t count) noexcept {
    // seq_cst: as release_lock
    return (num_locks_.fetch_sub(count, std::memory_order_seq_cst) - count) & ~prerequisites_claimed;
  }

  // unlock removes one lock and returns true when it was the last: the task is now ready
  // and the caller must schedule (or run) it.
  bool unlock() noexcept { return release_lock() == 0; }

  // release_lock removes one lock and returns how many remain (a piped task joins its
  // pipe when only the pipe's own lock remains).
  std::uint32_t release_lock() noexcept {
    // seq_cst: every unlocker publishes what it did first (a prerequisite's result) and the
    // last one acquires all of it (acq_rel would do for that); seq_cst also orders this
    // against the unlocker's later look for a waiting thread, which a waiter pairs with
    // by setting its flag and then reading this word (lib/task.cpp)
    return (num_locks_.fetch_sub(1, std::memory_order_seq_cst) - 1) & ~prerequisites_claimed;
  }

  // release_unshared_launch_lock removes the launch lock with a plain store, when no
  // other thread can reach the task yet (no prerequisites, not published): the task is
  // ready, and the caller must schedule (or run) it.
  void release_unshared_launch_lock() noexcept {
    num_locks_.store(0, std::memory_order_relaxed);  // relaxed: published with the task by the queue push
  }

  // try_begin_execution claims the right to run the body; false if the task is still
  // locked or someone else claimed it. On success, `takes_prerequisites` says whether the
  // caller also takes over the task's prerequisites (no waiter claimed them first);
  // `open` marks it finishes_open.
  bool try_begin_execution(bool& takes_prerequisites, bool open = false) noexcept {
    std::uint32_t ready = 0;
    std::uint32_t begun = execution_flag | 1 | (open ? finishes_open : 0);
    takes_prerequisites = true;
    Atomics::chaos_point(chaos::site::execution_claim);
    // seq_cst: acquire sees what the unlockers published; seq_cst puts the begin of a
    // finishes_open task in S after any comer's look that misses it (has_finished_for_comer)
    if (num_locks_.compare_exchange_strong(ready, begun, std::memory_order_seq_cst,
                                           std::memory_order_relaxed)) {  // relaxed: we look at the value only
      return true;
    }
    if (ready != prerequisites_claimed) return false;  // still locked, or begun
    takes_prerequisites = false;
    return num_locks_.compare_exchange_strong(ready, begun, std::memory_order_seq_cst,  // seq_cst: as above
                                              std::memory_order_relaxed);  // relaxed: the loser does nothing
  }

  // one_lock_left says whether a single lock remains (a hint: another unlocker may be about
  // to remove it), so try_unlock_and_begin's caller can skip its other checks cheaply.
  bool one_lock_left() const noexcept {
    return (num_locks_.load(std::memory_order_relaxed) & ~prerequisites_claimed) == 1;  // relaxed: a hint; the CAS decides
  }

  // try_unlock_and_begin removes the caller's lock and begins execution in one CAS when it
  // is the last lock (release_lock, then try_begin_execution's CAS, without the second
  // read-modify-write), for a thread that would run the task at once. True then, with
  // `takes_prerequisites` as try_begin_execution's; false, nothing changed, when other
  // locks remain or the word moved meanwhile: the caller then calls release_lock.
  bool try_unlock_and_begin(bool& takes_prerequisites) noexcept {
    std::uint32_t word = num_locks_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    if ((word & ~prerequisites_claimed) != 1) return false;
    takes_prerequisites = word == 1;
    Atomics::chaos_point(chaos::site::execution_claim);
    // seq_cst: release_lock's ordering (this is its last unlock) and try_begin_execution's
    // acquire, in one
    return num_locks_.compare_exchange_strong(word, execution_flag | 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed);  // relaxed: the caller falls back to release_lock
  }

  // try_begin_execution for callers that hold no prerequisites (tests, models).
  bool try_begin_execution() noexcept {
    bool ignored = false;
    return try_begin_execution(ignored);
  }

  // try_claim_prerequisites is true for the one caller that takes over the prerequisites
  // of a task that has not begun; false once a waiter claimed them or execution began
  // (the runner took them).
  bool try_claim_prerequisites() noexcept {
    std::uint32_t word = num_locks_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    do {
      if ((word & (execution_flag | prerequisites_claimed)) != 0) return false;
      // relaxed: only who wins matters, which the word's modification order decides (the
      // edges read afterwards were published before the caller could reach the task)
    } while (!num_locks_.compare_exchange_weak(word, word | prerequisites_claimed, std::memory_order_relaxed,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    return true;
  }

  // prerequisites_unclaimed says the task never began and no waiter claimed its
  // prerequisites: whoever destroys it drops them. For the task's last owner only.
  bool prerequisites_unclaimed() const noexcept {
    // relaxed: the last owner's acquire of the reference count ordered every earlier write
    return (num_locks_.load(std::memory_order_relaxed) & (execution_flag | prerequisites_claimed)) == 0;
  }

  // add_nested_lock holds completion until one more nested task completes; only from the
  // running body, which itself holds a lock, so the count cannot reach zero meanwhile.
  void add_nested_lock() noexcept {
    num_locks_.fetch_add(1, std::memory_order_relaxed);  // relaxed: published by the nested task's list push (release)
  }

  // release_part ends the body or one nested task, and returns true when that was the
  // last part: the caller completes the task.
  bool release_part() noexcept {
    // acq_rel: the completer sees everything the body and every nested task did
    return (num_locks_.fetch_sub(1, std::memory_order_acq_rel) & ~finishes_open) == (execution_flag | 1);
  }

  // release_part_unless_last ends the body or one nested task like release_part, unless it
  // is the last part: then it releases nothing and returns false, and the caller does what
  // must precede completion before release_part (a piped task leaving its pipe's count).
  // Whoever holds the last part holds the only one: nothing can be added to it meanwhile.
  bool release_part_unless_last() noexcept {
    std::uint32_t word = num_locks_.load(std::memory_order_relaxed);  // relaxed: the CAS decides
    do {
      if ((word & ~(marks | execution_flag)) == 1) return false;
      // acq_rel: as release_part's (this is never the last part)
    } while (!num_locks_.compare_exchange_weak(word, word - 1, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    return true;
  }

  // is_ready says whether every lock is gone and execution has not begun.
  bool is_ready() const noexcept {
    return (num_locks_.load(std::memory_order_seq_cst) & ~prerequisites_claimed) == 0;  // seq_cst: the waiter's half of release_lock's pairing
  }

  // release_unshared_part ends the body of a task to which no nested task was ever added:
  // nobody else writes the word now, so a plain store completes it (the caller completes
  // the task).
  void release_unshared_part() noexcept {
    // release: pairs with has_finished's (and has_begun's) load: a task finished open is
    // complete by this store, so whoever sees it sees the body's result
    num_locks_.store(execution_flag, std::memory_order_release);
  }

  // leave_reference_to_handles records, on a task this thread ran and completed itself,
  // that one reference the caller held now belongs to the task's handles: the last handle
  // dropped releases it too. Completed means nobody else writes the word any more, so a
  // store does; the handles' drops order it before any handle dropper's look.
  void leave_reference_to_handles() noexcept {
    // release: the drop of the caller's handle (acq_rel) carries it to the last dropper
    num_locks_.store(execution_flag | reference_left_to_handles, std::memory_order_release);
  }

  // handles_hold_extra_reference says whether leave_reference_to_handles ran. Only a
  // handle owner asks, after the drop or load of `references` that orders it.
  bool handles_hold_extra_reference() const noexcept {
    return (num_locks_.load(std::memory_order_acquire) & reference_left_to_handles) != 0;  // acquire: pairs with leave_reference_to_handles
  }

  // has_finished says whether the body and every nested task are done: the task is
  // complete, though its subsequent list may still be open (a finishes_open task: whoever
  // pushes to it then closes it).
  bool has_finished() const noexcept {
    // seq_cst: without membarrier, the pusher's and the waiter's half of the pairing with
    // the fence its completer makes before it looks for their edges and flags
    return finished(num_locks_.load(std::memory_order_seq_cst));
  }

  // has_finished_for_comer is has_finished for a thread that came to the task with a seq_cst
  // read-modify-write (pushed to its list, set its waiter flag) and must not miss both ways:
  // either it sees "finished", or the completer's look after that store sees what it did.
  // A finishes_open task's completer makes only the light barrier (lib/task_wait.cpp), so
  // while the body runs, the caller makes the heavy one before the look that counts.
  bool has_finished_for_comer() const noexcept {
    // seq_cst: a look that misses the begin (a seq_cst CAS) comes before it in S, and then
    // the completer's looks after "finished" see the caller's earlier write; one that sees
    // a body running without finishes_open pairs with the completer's close (an exchange)
    std::uint32_t word = num_locks_.load(std::memory_order_seq_cst);
    if (running_open(word)) {
      Atomics::heavy_barrier();
      word = num_locks_.load(std::memory_order_seq_cst);  // seq_cst: as above
    }
    return finished(word);
  }

  // has_begun says whether execution has begun (or finished).
  bool has_begun() const noexcept {
    return (num_locks_.load(std::memory_order_acquire) & execution_flag) != 0;  // acquire: pairs with try_begin_execution
  }

  // raw is the word itself, for tests, diagnostics and the cycle check's shortcuts.
  std::uint32_t raw() const noexcept {
    return num_locks_.load(std::memory_order_relaxed);  // relaxed: a snapshot, acted on by nothing that needs ordering
  }

 private:
  static bool finished(std::uint32_t word) noexcept { return (word & ~marks) == execution_flag; }
  static bool running_open(std::uint32_t word) noexcept {
    return (word & finishes_open) != 0 && (word & ~(marks | execution_flag)) != 0;
  }

  typename Atomics::template atomic<std::uint32_t> num_locks_{1};
};

}  // namespace magpie::detail
