// Private to lib/: what the task files (task*.cpp, wait*.cpp, pipe.cpp) share.
#pragma once

#include "../scheduler/scheduler_impl.h"
#include "thread_state.h"

#include <magpie/detail/task_base.h>
#include <magpie/detail/trace_points.h>
#include <magpie/pipe.h>

#include <algorithm>
#include <chrono>

namespace magpie::detail {

// ready_loop turns lock releases into scheduling and completions, iteratively: a chain
// of 100,000 events completes in one loop, not 100,000 nested calls.
//
//   ready_loop loop(nullptr);
//   loop.lock_released(task, task->state.remove_locks());
//   loop.drain();
// next_task is the ready loop's slot for the first ready task this thread may run: the
// caller runs it next without queueing it. `claim`: whether its execution was already won
// (as it became ready: task_state::try_remove_last_lock_and_begin), and how.
struct next_task {
  task_base* task = nullptr;
  begin_outcome claim = begin_outcome::refused;
};

class ready_loop {
 public:
  // next_slot: see next_task (nullptr: queue everything).
  explicit ready_loop(next_task* next_slot) noexcept : next_slot_(next_slot) {}
  ready_loop(const ready_loop&) = delete;
  ready_loop& operator=(const ready_loop&) = delete;

  // lock_released acts on what removing a lock of `task` left. The caller holds a reference
  // to `task` (or, as join_pipe, the lock that keeps it from running): with locks left, it
  // is read again here. Only its flags: with a prerequisite's lock left, another thread may
  // remove that lock, run the body and add `extras` meanwhile (reading `extras` here would
  // race with that); the piped flag was set before anyone could reach the task, and a piped
  // task left with 1 lock holds only its pipe's, which is ours. Inline: a launch or trigger
  // goes straight to ready.
  void lock_released(task_base* task, unlock_outcome left) noexcept {
    if (left == unlock_outcome::ready) {
      ready(task);
    } else if (left == unlock_outcome::one_lock_left && task->has_flag(piped)) {
      join_pipe(task);  // only the pipe's lock is left (a piped task reaches 1 exactly once)
    }
  }

  // completed queues `task` for completion; with `drop_reference`, one reference the
  // caller held is released after it. Inline while the loop's own slots have room (every
  // inline task and event completes through here); the spill is out of line.
  void completed(task_base* task, bool drop_reference) noexcept {
    std::uintptr_t tagged = reinterpret_cast<std::uintptr_t>(task) | (drop_reference ? 1u : 0u);
    if (!spilled_ && queued_here_ < inline_capacity) [[likely]] {
      queued_[queued_here_++] = tagged;
      return;
    }
    spill(tagged);
  }

  // drain completes everything queued, and what that makes ready.
  void drain() noexcept {
    if (queued_here_ != 0 || spilled_) drain_queued();
  }

  // complete_ran completes a queued task whose body ran on this thread (end_body said
  // it finished), then drains what that makes ready.
  void complete_ran(task_base* task) noexcept {
    finish(task);
    drain();
  }

  // close_left_open closes the subsequent list of a task finished open by the waiter that
  // took it back (lib/tasks/wait_retraction.cpp, finish_open), and releases what it held:
  // nothing when another thread closed it first. Then drains.
  void close_left_open(task_base* task) noexcept {
    release_subsequents(task->subsequents.close());
    drain();
  }

 private:
  void ready(task_base* task) noexcept;
  bool began_as_last_unlock(task_base* task) noexcept;
  void join_pipe(task_base* task) noexcept;
  void finish(task_base* task) noexcept;
  void release_subsequents(task_edge* newest_first) noexcept;
  [[gnu::always_inline]] inline void remove_lock(task_base* subsequent) noexcept;
  [[gnu::noinline]] void release_inline(const task_edge* edge) noexcept;
  void drain_queued() noexcept;
  [[gnu::noinline]] void spill(std::uintptr_t tagged) noexcept;
  std::uintptr_t take_newest() noexcept;

  next_task* next_slot_;
  // References to the task drain_queued is finishing that inline subsequents begun in its
  // release left to it (release_inline), to drop with its own; not_draining outside
  // drain_queued's finish, where nothing takes them over (complete_ran, close_left_open:
  // their callers drop their own reference apart).
  // In drop_holds_inline's units: an edge that kept a handle leaves that (edge_hold).
  static constexpr std::uint64_t not_draining = ~std::uint64_t{0};
  std::uint64_t taken_over_ = not_draining;
  // The tasks queued for completion, tagged (bit 0: drop a reference after), newest last:
  // here while they fit, then on the thread's spill stack above spill_base_ (a loop made
  // while this one drains uses the stack above it, and empties it before this one goes
  // on). Tasks carry no link of their own for it: a field every task would pay for.
  static constexpr std::uint32_t inline_capacity = 6;
  std::uint32_t queued_here_ = 0;
  bool spilled_ = false;
  std::size_t spill_base_ = 0;
  std::uintptr_t queued_[inline_capacity];  // only the first queued_here_ are read
};

// no_worker_nap: how long a thread waiting on a scheduler without workers blocks before it
// helps again (50 µs, doubling to 2 ms while helping finds nothing to run). Without
// workers, queued work runs only when a waiting thread helps: another waiter may make what
// this one waits for ready (through a prerequisite it ran) and go away, leaving it queued
// with nobody to run it, and nothing wakes this thread for that.
class no_worker_nap {
 public:
  std::chrono::nanoseconds next() noexcept {
    std::chrono::nanoseconds now = nap_;
    nap_ = std::min(nap_ * 2, longest);
    return now;
  }
  // helped: the waiter ran something, so things are moving again: nap briefly next time.
  void helped() noexcept { nap_ = shortest; }

 private:
  static constexpr std::chrono::nanoseconds shortest = std::chrono::microseconds(50);
  static constexpr std::chrono::nanoseconds longest = std::chrono::milliseconds(2);
  std::chrono::nanoseconds nap_ = shortest;
};

// destroy_task frees a task whose last reference is gone (the caller held it): warns of an
// exception nobody looked at, drops what it still holds, frees its extras and its block.
void destroy_task(task_base* task) noexcept;

// The *_inline functions are task_base.h's out-of-line ones (add_reference, drop_reference,
// task_base::ensure_extras, edge_group::create_alone and destroy_alone, current_task)
// expanded where they are called: the task files use them for every task, edge or nested
// task they handle, where a call shows. The out-of-line ones are defined by them.

inline void add_reference_inline(task_base* task) noexcept {
  task->references.fetch_add(task_base::one_reference, std::memory_order_relaxed);  // relaxed: the caller already holds one
}

inline void drop_reference_inline(task_base* task, std::uint32_t count = 1) noexcept {
  // acquire: pairs with the release half of every other owner's drop; the sole owner
  // destroys without a read-modify-write (nobody can add a reference without holding one)
  if (task->references.load(std::memory_order_acquire) == count * task_base::one_reference) {
    destroy_task(task);
    return;
  }
  // acq_rel: the last releaser sees every other owner's writes before destroying. The whole
  // word: a handle still counted with no reference left is a launch taking it over for its
  // edge (hand_handle_to_edge), which destroys the task.
  if (task->references.fetch_sub(count * task_base::one_reference, std::memory_order_acq_rel) == count) {
    destroy_task(task);
  }
}

// can_hand_handle_to_edge says whether a launch given the handle `task` is held by may pass
// that handle's reference to its edge: it is the task's only handle (no other can be made:
// copying takes one), so none of a last handle's duties can fall to it meanwhile, and it
// has none now (a task, not an event; no reference left to the handles).
inline bool can_hand_handle_to_edge(const task_base* task) noexcept {
  // acquire: pairs with the acq_rel drop of the handle that took the count of handles down
  // to this one: a waiter that ran the task through that handle left the queue's reference
  // to the handles before that drop, and the look at the mark below must see it (else the
  // edge takes the handle's reference and the one left to the handles is never dropped)
  return task->kind() != task_kind::event && (task->references.load(std::memory_order_acquire) >> 32) == 1 &&
         !task->state.handles_hold_extra_reference();
}

// hand_handle_to_edge uncounts the handle of `task` whose reference now belongs to an edge
// pushed to its subsequent list (can_hand_handle_to_edge held): the reference stays. If the
// edge's subsequent already ran and let go of it, the word is left zero: the task goes.
// For a queued task, whose pusher must look at it after the push (push_subsequent); an
// inline task's edge keeps the handle itself (task_edge::holds_handle).
inline void hand_handle_to_edge(task_base* task) noexcept {
  constexpr std::uint64_t handle_count = task_base::one_handle - task_base::one_reference;
  // acq_rel: as a drop (pairs with every other owner's); the completer's acquire look for
  // handles (close_subsequents) pairs with it, after the push it follows
  if (task->references.fetch_sub(handle_count, std::memory_order_acq_rel) == handle_count) destroy_task(task);
}

// edge_hold is what `edge` holds on its prerequisite, in units of task_base::references: a
// handle (task_edge::holds_handle) or one reference. Only for the one owner of that hold
// (the subsequent's runner, or the waiter that claimed its prerequisites).
inline std::uint64_t edge_hold(const task_edge& edge) noexcept {
  return edge.holds_handle ? task_base::one_handle : task_base::one_reference;
}

// drop_handle_and_references drops a handle and `references` more references the caller
// holds on `task`, with the last handle's duties if it was the last (drop_handle's).
void drop_handle_and_references(task_base* task, std::uint32_t references) noexcept;

// drop_holds_inline drops `held`, a sum of references and at most one handle (an edge's,
// edge_hold): drop_reference_inline when no handle is among them; else, holding every
// reference, it destroys at once (nobody can add one), or calls drop_handle_and_references.
inline void drop_holds_inline(task_base* task, std::uint64_t held) noexcept {
  if (held < task_base::one_handle) {
    drop_reference_inline(task, static_cast<std::uint32_t>(held));
    return;
  }
  // acquire: pairs with the release half of every other owner's drop
  if (task->references.load(std::memory_order_acquire) == held) {
    destroy_task(task);
    return;
  }
  drop_handle_and_references(task, static_cast<std::uint32_t>(held - task_base::one_handle));
}

inline task_extras& ensure_extras_inline(task_base* task) {
  if (task->extras == nullptr) task->extras = new (allocate_task(sizeof(task_extras))) task_extras();
  return *task->extras;
}

inline edge_group* create_edge_group_inline(std::size_t count) {
  return edge_group::place_before(static_cast<unsigned char*>(allocate_task(edge_group::bytes(count))) +
                                      edge_group::bytes(count),
                                  count);
}

inline void destroy_edge_group_inline(edge_group* group) noexcept {
  free_task(group->edges(), edge_group::bytes(group->count));
}

// enqueue_ready queues a ready task where it runs: its scheduler's workers or its named
// thread; to nobody, completing it as never run, once its scheduler is destroyed.
void enqueue_ready(task_base* task) noexcept;

// owner_of is the scheduler `task` belongs to.
inline scheduler::impl* owner_of(const task_base* task) noexcept { return scheduler_slot::at(task->owner_index); }

// run_body runs a task's body on this thread, which `began` it: drops its references to
// its prerequisites when the win held them (begin_outcome::began_holding_prerequisites),
// sets the thread's current task and scheduler around the call.
void run_body(task_base* task, begin_outcome began) noexcept;

// claim_prerequisites is true for the one caller that takes over the references a task
// holds on its prerequisites before it begins (a waiter retracting them, an event's
// completer); that caller may read the edges, then calls drop_prerequisite_references. A
// task that begins unclaimed takes them itself (begin_outcome::began_holding_prerequisites). Inline:
// a task without prerequisites, the common case on the wait path, costs one load.
inline bool claim_prerequisites(task_base* task) noexcept {
  return prerequisite_groups(task) != nullptr && task->state.try_claim_prerequisites();
}
void drop_prerequisite_references(task_base* task) noexcept;

// push_subsequent adds `edge` to `prerequisite`'s subsequent list: false, and nothing
// added, once the prerequisite completed (the caller removes the edge's lock itself). A
// prerequisite finished open (lib/tasks/wait_retraction.cpp, finish_open) still has its
// list open: whichever of its completer and us sees the other closes the list
// (close_finished_open), which releases everything in it, this edge included; then it
// returns true. The caller holds a reference to `prerequisite`. Inline: a launch, a pipe's
// join and add_nested push for every edge.
//
// close_finished_open is push_subsequent's rare path, out of line: it closes the list of a
// prerequisite finished open and releases what the list held, in a ready loop of its own.
void close_finished_open(task_base* prerequisite) noexcept;
inline bool push_subsequent(task_base* prerequisite, task_edge* edge) noexcept {
  if (!prerequisite->subsequents.push_if_not_closed(edge)) return false;
  if (prerequisite->state.has_finished_after_announcing()) close_finished_open(prerequisite);
  return true;
}

// body_failure is what a task with has_exception holds: its body's exception, or, for a
// task skipped by its canceled token (which stores none: hold_canceled), task_canceled
// (lib/tasks/cancellation.cpp).
std::exception_ptr body_failure(const task_base* task) noexcept;

// failure_of is the exception a task completed with: its body's, else a nested task's.
inline std::exception_ptr failure_of(const task_base* task) noexcept {
  return task->has_flag(has_exception) ? body_failure(task) : task->extras->nested_exception;
}

// hand_on_exception keeps the exception of a nested task that threw for its parent: the
// parent completes holding it unless its own body threw; the first nested one to get here
// is kept, later ones are dropped (as a task_group's). Called before the nested task's part
// of the parent goes: the parent may complete by that release.
void hand_on_exception(task_base* nested, task_base* parent) noexcept;

// try_hold_nested takes a hold on a task's nested list (task_extras::nested_holds): false
// once it is gone (the task completed). drop_nested_hold lets go; the last hold frees the
// list and the references its edges hold.
bool try_hold_nested(task_extras& extras) noexcept;
void drop_nested_hold(task_extras& extras) noexcept;

// end_body ends the body's part of a task that ran on this thread; finished when no
// nested task still runs: the caller completes it.
part_outcome end_body(task_base* task) noexcept;

// end_part_of ends one part (the body's or a nested task's) of a running task; finished
// when it was the last: the caller completes the task. A piped task leaves its pipe's
// count of uncompleted tasks just before its last part goes (pipe::has_work, ~pipe): a
// waiter may see it complete by that end, before its list closes.
part_outcome end_part_of(task_base* task) noexcept;

// is_running_here says whether this thread is inside `task`'s body (directly or in a task
// that body is running inline).
bool is_running_here(const task_base* task) noexcept;

// depends_on says whether `later` cannot complete before `earlier` has: it waits for it
// through prerequisites, pipes or nested tasks (lib/tasks/task_cycles.cpp). Only while `earlier`
// cannot complete meanwhile: its body runs on this thread, or it is an untriggered event.
// The walk is bounded; past the bound it answers false.
bool depends_on(const task_base* later, const task_base* earlier) noexcept;

// running_frame is one task body running on this thread; tasks_tls.innermost_running the
// newest, nullptr on a thread running no task (constant-initialised: one thread-pointer load).
struct running_frame {
  task_base* task;
  running_frame* outer;
  unsigned depth;  // how many bodies run on this thread's stack, this one included
};

// current_task_inline is current_task expanded (as the *_inline functions above): the task
// this thread runs innermost, or nullptr.
inline task_base* current_task_inline() noexcept {
  const running_frame* innermost = tasks_tls.innermost_running;
  return innermost != nullptr ? innermost->task : nullptr;
}

// running_task_awaited_by is the task this thread is running (innermost first) that
// `task` depends on, or nullptr: waiting for `task` here could never end.
task_base* running_task_awaited_by(const task_base* task) noexcept;

// waiters_of is the event count threads waiting for `task` sleep on (a striped table).
event_count<>& waiters_of(const void* task) noexcept;

// retract is try_retract_and_execute at a given recursion depth. `through` (depth 0 only):
// the pointer of the handle the caller waits through; if it still holds `task` once the
// task completed here, the queue's reference is left to the handles
// (task_state::leave_reference_to_handles) — a body may have dropped that handle.
// `finish_open`: a task taken back off this thread's deque may complete without closing its
// subsequent list (finish_open, task_wait.cpp): right when nothing links to it later, costly
// (a heavy barrier per later link) when something does — a coroutine awaiting it, whose
// resumption may link to it after it returned.
bool retract(task_base* task, unsigned depth, task_base* const* through = nullptr, bool finish_open = true) noexcept;

// pipe_access reaches a pipe's private state.
struct pipe_access {
  static std::atomic<task_base*>& last(magpie::pipe& p) noexcept { return p.last_; }
  static void task_added(magpie::pipe& p) noexcept;
  // task_completing: just before a piped task completes; task_finished: after, the last
  // touch of the pipe by its completer.
  static void task_completing(magpie::pipe& p) noexcept;
  static void task_finished(magpie::pipe& p, task_base* task) noexcept;
};

// current_pipe is the pipe of the task this thread runs innermost, or nullptr.
magpie::pipe* current_pipe() noexcept;

// nest_in_coroutine: add_nested from a task that resumes a coroutine (resumes_coroutine)
// nests `nested` in the coroutine's task instead (lib/forkjoin/coroutine.cpp).
void nest_in_coroutine(task_base* resumption, task_base* nested) noexcept;

// is_abandoned_resumption: `task` resumes a coroutine that its scheduler's shutdown
// abandoned; it does nothing if it runs (lib/forkjoin/coroutine.cpp).
bool is_abandoned_resumption(task_base* task) noexcept;

}  // namespace magpie::detail
