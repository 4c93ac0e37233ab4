// Layer 1 — the `num_locks` word at the heart of a task (docs/memory_orders.md).
//
// Before execution the low bits count locks: 1 launch lock from creation, plus one per
// unfinished prerequisite. Whoever removes the last lock makes the task ready (and
// schedules it). Execution begins by setting the high bit with a CAS from exactly 0 — the
// scheduler and a retracting waiter race for it, and one wins. From then on the low bits
// count parts: 1 for the body itself plus one per unfinished nested task; whoever ends the
// last part has finished the task and completes it.
//
// Three marks ride in the word beside the count:
//   * prerequisites_claimed (bit 30): a waiter took over the task's references to its
//     prerequisites before it began (to retract them). The begin CAS tells the runner
//     whether it takes them over instead (begin_outcome), so a chain hop needs no
//     read-modify-write of its own for the hand-over.
//   * finishes_open (bit 28): begun by a waiter that took it back off its own deque, which
//     ends it without closing its subsequent list unless something was pushed meanwhile
//     (lib/tasks/wait_retraction.cpp): a thread that announces itself to the task (pushes to its list,
//     sets its waiter flag) and finds it running so makes the heavy half of an asymmetric
//     barrier before it looks again (has_finished_after_announcing).
//   * reference_left_to_handles (bit 29): set after completion: a waiter that ran the task
//     after taking it back left the queue's reference to the handles, and the last handle
//     dropped releases it too (one of the last handle's duties: detail/task_base.h, "Who
//     frees a task").
//
// Exclusive access. Several moves have a cheap form (a plain store instead of a
// read-modify-write) for a thread that alone can write the word: before the task is linked
// anywhere or published, or, for a body that never gained a nested part, from its end on.
// Those forms take `exclusive_access`, so each call site states that it holds it.
//
// Lifetime — who holds the task, and who frees it. `references` (task_base) counts owners;
// the last to go destroys the task (the rule is written once, in detail/task_base.h, "Who
// frees a task"). This word decides only who runs and who completes it; its one part in
// freeing is the mark a waiter leaves instead of dropping a reference.
//
//   created ── handle + system reference; word = 1 (launch lock)
//     │ add_locks(k)          one lock per prerequisite; each prerequisite's list edge holds
//     │                       the task, the task holds a reference on each prerequisite
//     │ remove_locks / remove_launch_lock(exclusive_access)
//     ▼ unlock_outcome::ready: the remover schedules it (queue entry takes the system's)
//   ready ──── try_begin / try_begin_open / try_remove_last_lock_and_begin
//     │        one winner; begin_outcome::began_holding_prerequisites: the winner drops the
//     │        task's references to its prerequisites (else the waiter that claimed them does)
//     ▼
//   running ── add_nested_part per nested task (its edge holds a reference on the parent)
//     │        end_part: part_outcome::finished for the last part ...
//     ▼
//   finished ─ ... whose ender completes it: closes the list, releases its subsequents, then
//              drops the system's reference (the queue entry's, for a queued task). The
//              handles go on holding theirs; a waiter that ran it may leave one more to them
//              (leave_reference_to_handles(exclusive_access)), which the last handle's
//              dropper releases with its own. Last reference: destroyed.
//
//   task_state state;                               // 1 launch lock
//   state.add_locks(k);                             // before launch: one per prerequisite
//   if (state.remove_locks() == unlock_outcome::ready) schedule(task);
//   if (begin_outcome began = state.try_begin(); began != begin_outcome::refused) {
//     run body; (add_nested_part() per nested task; end_part() as each completes)
//     if (state.end_part() == part_outcome::finished) complete(task);
//   }
//
// test/model/task_state_model.cpp checks launch vs the last prerequisite vs a retracting
// waiter vs a nested task completing elsewhere under Relacy: one execution, one
// completion, and the prerequisite's result visible to the body.
#pragma once

#include <magpie/detail/atomics.h>

#include <cstdint>

namespace magpie::detail {

// exclusive_access_t marks a move made by the only thread that can write the word (see
// "Exclusive access" above); exclusive_access is its value.
struct exclusive_access_t {
  explicit exclusive_access_t() = default;
};
inline constexpr exclusive_access_t exclusive_access{};

// unlock_outcome is what removing locks left: `ready` (the caller schedules or runs the
// task), `one_lock_left` (a piped task then joins its pipe: that lock is the pipe's), or
// `locked` (more than one lock is left).
enum class unlock_outcome : std::uint8_t { locked, one_lock_left, ready };

// begin_outcome says whether the caller won execution: `refused` (still locked, or someone
// else began it), `began` (a waiter had claimed the prerequisites), or
// `began_holding_prerequisites` (the caller drops the task's references to them).
enum class begin_outcome : std::uint8_t { refused, began, began_holding_prerequisites };

// part_outcome is what ending a part did: `parts_remain` (others still hold the task),
// `finished` (that was the last: the caller completes the task), or `last_part_kept`
// (end_part_unless_last left the last part in place for the caller).
enum class part_outcome : std::uint8_t { parts_remain, finished, last_part_kept };

// began says whether a begin_outcome won execution.
constexpr bool began(begin_outcome outcome) noexcept { return outcome != begin_outcome::refused; }
// holds_prerequisites says whether the winner of a begin drops the prerequisite references.
constexpr bool holds_prerequisites(begin_outcome outcome) noexcept {
  return outcome == begin_outcome::began_holding_prerequisites;
}

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
  // finishes_open: begun by a waiter that completes it without a close (see above).
  static constexpr std::uint32_t finishes_open = std::uint32_t{1} << 28;
  // marks are the bits that are neither the count nor the execution flag.
  static constexpr std::uint32_t marks = prerequisites_claimed | reference_left_to_handles | finishes_open;

  // add_locks adds `count` locks; only before launch, by the launching thread, while the
  // task may already be reachable (an event others wait for).
  void add_locks(std::uint32_t count) noexcept {
    // relaxed: the locks are published with the task, by the release that hands the task
    // to a prerequisite's subsequent list; and the launch lock keeps the count above zero
    num_locks_.fetch_add(count, std::memory_order_relaxed);
  }

  // add_locks with exclusive_access: nothing links to the task yet, so a load and a store.
  void add_locks(std::uint32_t count, exclusive_access_t) noexcept {
    // relaxed: published with the task, as the shared add_locks'
    num_locks_.store(num_locks_.load(std::memory_order_relaxed) + count, std::memory_order_relaxed);
  }

  // replace_launch_lock sets the count to `count` prerequisite locks in place of the launch
  // lock: a store. The caller then links the task to its prerequisites and removes, with
  // remove_locks, those found complete.
  void replace_launch_lock(std::uint32_t count, exclusive_access_t) noexcept {
    num_locks_.store(count, std::memory_order_relaxed);  // relaxed: published by the first link's release CAS
  }

  // remove_locks removes `count` locks (one per call, or the prerequisites found complete
  // while adding them, at once) and says what is left.
  [[nodiscard]] unlock_outcome remove_locks(std::uint32_t count = 1) noexcept {
    // seq_cst: every unlocker publishes what it did first (a prerequisite's result) and the
    // last one acquires all of it (acq_rel would do for that); seq_cst also orders this
    // against the unlocker's later look for a waiting thread, which a waiter pairs with
    // by setting its flag and then reading this word (lib/tasks/task.cpp)
    std::uint32_t left = (num_locks_.fetch_sub(count, std::memory_order_seq_cst) - count) & ~prerequisites_claimed;
    return left == 0 ? unlock_outcome::ready : left == 1 ? unlock_outcome::one_lock_left : unlock_outcome::locked;
  }

  // remove_launch_lock removes the launch lock, the only lock, with a plain store: the task
  // is ready, and the caller must schedule (or run) it.
  void remove_launch_lock(exclusive_access_t) noexcept {
    num_locks_.store(0, std::memory_order_relaxed);  // relaxed: published with the task by the queue push
  }

  // try_begin claims the right to run the body (see begin_outcome).
  [[nodiscard]] begin_outcome try_begin() noexcept { return begin(execution_flag | 1); }

  // try_begin_open is try_begin for a waiter that took the task back off its own deque:
  // the task is marked finishes_open.
  [[nodiscard]] begin_outcome try_begin_open() noexcept { return begin(execution_flag | 1 | finishes_open); }

  // looks_like_last_lock says whether a single lock remains (a hint: another unlocker may
  // be about to remove it), so try_remove_last_lock_and_begin's caller can skip its other
  // checks cheaply.
  [[nodiscard]] bool looks_like_last_lock() const noexcept {
    return (num_locks_.load(std::memory_order_relaxed) & ~prerequisites_claimed) == 1;  // relaxed: a hint; the CAS decides
  }

  // try_remove_last_lock_and_begin removes the caller's lock and begins execution in one
  // CAS when it is the last lock (remove_locks, then try_begin's CAS, without the second
  // read-modify-write), for a thread that would run the task at once. `refused`, nothing
  // changed, when other locks remain or the word moved meanwhile: the caller then calls
  // remove_locks.
  [[nodiscard]] begin_outcome try_remove_last_lock_and_begin() noexcept {
    std::uint32_t word = num_locks_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    if ((word & ~prerequisites_claimed) != 1) return begin_outcome::refused;
    Atomics::chaos_point(chaos::site::execution_claim);
    // seq_cst: remove_locks' ordering (this is its last unlock) and try_begin's acquire, in one
    if (!num_locks_.compare_exchange_strong(word, execution_flag | 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed)) {  // relaxed: the caller falls back to remove_locks
      return begin_outcome::refused;
    }
    // `word` is still what the CAS found: with the claim mark, a waiter has the prerequisites
    return word == 1 ? begin_outcome::began_holding_prerequisites : begin_outcome::began;
  }

  // try_claim_prerequisites is true for the one caller that takes over the prerequisites
  // of a task that has not begun; false once a waiter claimed them or execution began
  // (the runner took them).
  [[nodiscard]] bool try_claim_prerequisites() noexcept {
    std::uint32_t word = num_locks_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    do {
      if ((word & (execution_flag | prerequisites_claimed)) != 0) return false;
      // relaxed: only who wins matters, which the word's modification order decides (the
      // edges read afterwards were published before the caller could reach the task)
    } while (!num_locks_.compare_exchange_weak(word, word | prerequisites_claimed, std::memory_order_relaxed,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    return true;
  }

  // still_holds_prerequisites says the task never began and no waiter claimed its
  // prerequisites: whoever destroys it drops them. For the task's last owner only.
  [[nodiscard]] bool still_holds_prerequisites() const noexcept {
    // relaxed: the last owner's acquire of the reference count ordered every earlier write
    return (num_locks_.load(std::memory_order_relaxed) & (execution_flag | prerequisites_claimed)) == 0;
  }

  // add_nested_part holds completion until one more nested task completes; only from the
  // running body, which itself holds a part, so the count cannot reach zero meanwhile.
  void add_nested_part() noexcept {
    num_locks_.fetch_add(1, std::memory_order_relaxed);  // relaxed: published by the nested task's list push (release)
  }

  // end_part ends the body or one nested task (parts_remain or finished).
  [[nodiscard]] part_outcome end_part() noexcept {
    // acq_rel: the completer sees everything the body and every nested task did
    return (num_locks_.fetch_sub(1, std::memory_order_acq_rel) & ~finishes_open) == (execution_flag | 1)
               ? part_outcome::finished
               : part_outcome::parts_remain;
  }

  // end_part_unless_last ends the body or one nested task like end_part (parts_remain),
  // unless it is the last part: then it ends nothing (last_part_kept), and the caller does
  // what must precede completion before end_part (a piped task leaving its pipe's count).
  // Whoever holds the last part holds the only one: nothing can be added to it meanwhile.
  [[nodiscard]] part_outcome end_part_unless_last() noexcept {
    std::uint32_t word = num_locks_.load(std::memory_order_relaxed);  // relaxed: the CAS decides
    do {
      if ((word & ~(marks | execution_flag)) == 1) return part_outcome::last_part_kept;
      // acq_rel: as end_part's (this is never the last part)
    } while (!num_locks_.compare_exchange_weak(word, word - 1, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    return part_outcome::parts_remain;
  }

  // end_part with exclusive_access ends the body of a task to which no nested task was ever
  // added: nobody else writes the word now, so a plain store finishes it (the caller
  // completes the task).
  void end_part(exclusive_access_t) noexcept {
    // release: pairs with has_finished's (and has_begun's) load: a task finished open is
    // complete by this store, so whoever sees it sees the body's result
    num_locks_.store(execution_flag, std::memory_order_release);
  }

  // is_ready says whether every lock is gone and execution has not begun.
  [[nodiscard]] bool is_ready() const noexcept {
    return (num_locks_.load(std::memory_order_seq_cst) & ~prerequisites_claimed) == 0;  // seq_cst: the waiter's half of remove_locks' pairing
  }

  // leave_reference_to_handles records, on a task this thread ran and completed itself,
  // that one reference the caller held now belongs to the task's handles: the last handle
  // dropped releases it too. Completed means nobody else writes the word any more (hence
  // exclusive_access); the handles' drops order it before any handle dropper's look.
  void leave_reference_to_handles(exclusive_access_t) noexcept {
    // release: the drop of the caller's handle (acq_rel) carries it to the last dropper
    num_locks_.store(execution_flag | reference_left_to_handles, std::memory_order_release);
  }

  // handles_hold_extra_reference says whether leave_reference_to_handles ran. Only a
  // handle owner asks, after the drop or load of `references` that orders it.
  [[nodiscard]] bool handles_hold_extra_reference() const noexcept {
    return (num_locks_.load(std::memory_order_acquire) & reference_left_to_handles) != 0;  // acquire: pairs with leave_reference_to_handles
  }

  // has_finished says whether the body and every nested task are done: the task is
  // complete, though its subsequent list may still be open (a finishes_open task: whoever
  // pushes to it then closes it).
  [[nodiscard]] bool has_finished() const noexcept {
    // seq_cst: without membarrier, the pusher's and the waiter's half of the pairing with
    // the fence its completer makes before it looks for their edges and flags
    return finished(num_locks_.load(std::memory_order_seq_cst));
  }

  // has_finished_after_announcing is has_finished for a thread that announced itself to the
  // task with a seq_cst read-modify-write (pushed to its list, set its waiter flag) and must
  // not miss both ways: either it sees "finished", or the completer's look after that store
  // sees what it did. A finishes_open task's completer makes only the light barrier
  // (lib/tasks/wait_retraction.cpp), so while the body runs, the caller makes the heavy one before the
  // look that counts.
  [[nodiscard]] bool has_finished_after_announcing() const noexcept {
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
  [[nodiscard]] bool has_begun() const noexcept {
    return (num_locks_.load(std::memory_order_acquire) & execution_flag) != 0;  // acquire: pairs with begin's CAS
  }

  // raw is the word itself, for tests, diagnostics and the cycle check's shortcuts.
  [[nodiscard]] std::uint32_t raw() const noexcept {
    return num_locks_.load(std::memory_order_relaxed);  // relaxed: a snapshot, acted on by nothing that needs ordering
  }

 private:
  static bool finished(std::uint32_t word) noexcept { return (word & ~marks) == execution_flag; }
  static bool running_open(std::uint32_t word) noexcept {
    return (word & finishes_open) != 0 && (word & ~(marks | execution_flag)) != 0;
  }

  // begin is try_begin and try_begin_open: CAS from "ready" (0, or 0 with the waiter's
  // claim of the prerequisites) to `begun`.
  begin_outcome begin(std::uint32_t begun) noexcept {
    std::uint32_t ready = 0;
    Atomics::chaos_point(chaos::site::execution_claim);
    // seq_cst: acquire sees what the unlockers published; seq_cst puts the begin of a
    // finishes_open task in S after any announcer's look that misses it
    // (has_finished_after_announcing)
    if (num_locks_.compare_exchange_strong(ready, begun, std::memory_order_seq_cst,
                                           std::memory_order_relaxed)) {  // relaxed: we look at the value only
      return begin_outcome::began_holding_prerequisites;
    }
    if (ready != prerequisites_claimed) return begin_outcome::refused;  // still locked, or begun
    return num_locks_.compare_exchange_strong(ready, begun, std::memory_order_seq_cst,  // seq_cst: as above
                                              std::memory_order_relaxed)  // relaxed: the loser does nothing
               ? begin_outcome::began
               : begin_outcome::refused;
  }

  typename Atomics::template atomic<std::uint32_t> num_locks_{1};
};

}  // namespace magpie::detail
