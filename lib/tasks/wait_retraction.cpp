// The retraction routine every wait runs (docs/scheduler.md, "The wait protocol"): follow
// what the task waits for (prerequisites, the task before it in its pipe, nested tasks),
// take its entry back off this thread's deque, and run it here; and wait()'s first step,
// the take-back of a launch followed by its wait.
#include "wait_internal.h"

#include <magpie/diagnostics.h>

#include <pthread.h>

#include <algorithm>
#include <array>
#include <string>

namespace magpie::detail {

bool can_retract_here(const task_base* task) noexcept {
  if (task->kind() != task_kind::queued) return false;  // events and inline tasks run when their locks go
  scheduler::impl* owner = owner_of(task);
  if (task->target == target_none) return !scheduler_slot::is_retired(owner);
  const thread_context& context = this_thread_context();
  return context.owner == owner && context.named == static_cast<int>(task->target >> 2u);
}

namespace {

struct alignas(cache_line) padded_event_count {
  event_count<> events;
};

// Stale entries. A waiter that claims a task out of the middle of the deque it launched
// it onto (waits in random order) leaves the entry there, holding the queue's reference,
// for whoever reaches it: a worker popping or stealing it drops it. A thread that is not a
// worker pops its deque only when it waits, so with no workers stealing, those entries
// would pile up, each keeping its task alive. Such a thread trims them itself: when a
// take-back uncovers the entry below the one it took, it pops the newest entries while
// they are tasks already begun, and drops them. So the newest entry is never a stale one
// this thread made (a claim out of the middle is never of the newest: that one is taken
// back), and the last wait of a batch, a take-back, clears the rest. An entry says itself
// whether it is a task (work_item::is_task), and a task entry whose task has begun is
// stale whoever began it.
//
// tasks_tls.stale_entries counts the entries this thread may have left stale and not
// trimmed yet: an estimate (a worker may drop some, and a claimed task may have been queued
// elsewhere, by another thread); it only says whether to look. A look that finds nothing costs a pop
// and a push, so after max_stale_misses such looks in a row the estimate is dropped:
// claims of other threads' tasks must not tax every later take-back. (Forgetting loses no
// entry for good: the next look, after the next claim, drops every stale entry on top,
// however many.)
constexpr unsigned max_stale_misses = 16;

}  // namespace

bool is_stale_task(work_item* item) noexcept {
  return is_task_item(item) && static_cast<task_base*>(item)->state.has_begun();
}

// drop_stale drops a stale entry this thread has taken off its deque: the queue's
// reference goes, as run_queued would let it go for a task already begun.
void drop_stale(work_item* item) noexcept {
  if (tasks_tls.stale_entries.left != 0) --tasks_tls.stale_entries.left;
  drop_reference(static_cast<task_base*>(item));
}

namespace {

// trim_stale drops the stale entries on top of `own`, this thread's deque.
void trim_stale(task_deque* own, scheduler::impl* owner) noexcept {
  bool dropped = false;
  bool pushed_back = false;
  // Popped before it is looked at: once popped, the entry's reference is ours to read by.
  while (std::optional<work_item*> newest = own->pop_matching(is_stale_task, pushed_back)) {
    dropped = true;
    drop_stale(*newest);
  }
  // A worker that looked while the entry was out may have parked: the entry needs the
  // wake-up its launch gave, or a ready task can sit beside parked workers.
  if (pushed_back) owner->wake_for(priority::normal);
  if (dropped) {
    tasks_tls.stale_entries.misses = 0;
  } else if (++tasks_tls.stale_entries.misses == max_stale_misses) {
    tasks_tls.stale_entries = stale_entry_estimate{};
  }
}

// left_stale notes that this thread, not a worker, claimed a task (queued, bound to no
// named thread) past its queue entry, which may be in its own deque.
void left_stale() noexcept {
  if (this_thread_context().self != nullptr) return;  // a worker pops its own deque (a standby has none)
  ++tasks_tls.stale_entries.left;
}

// retract_nested retracts the nested tasks of a task whose body has returned: it ran here
// (the body's part keeps the list), or the caller holds the list (try_hold_nested).
void retract_nested(task_base* task, unsigned depth) noexcept {
  if (task->extras == nullptr) return;
  for (edge_group* group = task->extras->nested; group != nullptr; group = group->next) {
    retract(group->edges()->prerequisite, depth + 1);
  }
}

// retract_pipe_predecessor retracts the piped task `task` waits for in its pipe, holding the
// reference that comes with it meanwhile (task_extras::pipe_predecessor).
void retract_pipe_predecessor(task_base* task, unsigned depth) noexcept {
  std::atomic<task_base*>& slot = task->extras->pipe_predecessor;
  // acquire: pairs with join_pipe's release store (or another waiter's putting it back)
  task_base* predecessor = slot.exchange(nullptr, std::memory_order_acquire);
  if (predecessor == nullptr) return;  // not linked yet, or another waiter holds it
  retract(predecessor, depth + 1);
  // Back for the next waiter; if the task completed meanwhile, its destruction drops it.
  slot.store(predecessor, std::memory_order_release);  // release: pairs with the next exchange
}

// report_waiting_inside reports a wait that can never end: for `task` inside `running`,
// which it waits for. Cold and out of line, so wait() keeps a small frame.
[[gnu::cold, gnu::noinline]] void report_waiting_inside(const task_base* task, const task_base* running) noexcept {
  const running_frame* beneath = tasks_tls.innermost_running;
  while (beneath->task != running) beneath = beneath->outer;
  if (beneath->depth <= tasks_tls.stuck_help_depth) {
    // Not the program's cycle: the body waiting was helped onto this stack, above `running`,
    // because every thread of the pool was blocked (task_wait.cpp, help_stuck_pool).
    const task_base* helped = current_task_inline();
    report(diagnostic_kind::limit_reached,
           "scheduler: every thread of the pool was blocked and no more standby workers could start, so " +
               calling_thread_name() + " ran task '" + helped->name + "' on its own stack above task '" +
               running->name + "'; '" + helped->name + "' now waits for task '" + task->name +
               "', which cannot complete until '" + helped->name +
               "' returns, so this wait fails (raise scheduler_options::max_standby_workers, or block less inside tasks)");
    return;
  }
  if (running == task) {
    // The task is the one the caller is running (for a tick, the chunk of ticks running it).
    report(diagnostic_kind::misuse, std::string("task '") + task->name + "' waited for on " + calling_thread_name() +
                                        " from inside its own body: it is the task this thread is running "
                                        "(a tick's this_task() is the chunk running the tick), so it can never complete");
  } else {
    report(diagnostic_kind::misuse, std::string("task '") + task->name + "' waited for on " + calling_thread_name() +
                                        " inside task '" + running->name +
                                        "', which it waits for: a dependency cycle, it can never complete");
  }
}

// run_here runs a task whose execution this thread won, retracting its nested tasks while
// the body's part keeps them alive; true when it completed here.
bool run_here(task_base* task, begin_outcome claim, unsigned depth) noexcept {
  tracing::trace_point(tracing::task, tracing::event_kind::task_retracted, task);
  run_body(task, claim);
  retract_nested(task, depth);
  if (end_body(task) != part_outcome::finished) return false;
  ready_loop(nullptr).complete_ran(task);
  return true;
}

// leave_or_release disposes of the queue's reference to a task that completed here: while
// the handle the caller waits through still holds the task, the handles take it over — one
// store instead of a read-modify-write, and the last handle's drop frees the task in one go.
// Otherwise (a body dropped that handle) it is released as any reference.
void leave_or_release(task_base* task, task_base* const* through) noexcept {
  if (through != nullptr && *through == task) {
    task->state.leave_reference_to_handles(exclusive_access);
  } else {
    drop_reference(task);
  }
}

// came_since_finished says whether a pusher or a blocked waiter came to a task finished
// open before its completer looked.
bool came_since_finished(const task_base* task) noexcept {
  // seq_cst: without membarrier the barriers are fences, and these looks pair with them
  return !task->subsequents.is_empty() || (task->flags.load(std::memory_order_seq_cst) & has_waiter) != 0;
}

// settle_open acts on what came to a task finished open: closes its list and releases the
// edges pushed meanwhile (unless a pusher closed it first), wakes the threads blocked on it.
[[gnu::noinline]] void settle_open(task_base* task) noexcept {
  if (!task->subsequents.is_empty() && !task->subsequents.is_closed()) ready_loop(nullptr).close_left_open(task);
  // seq_cst: as came_since_finished
  if ((task->flags.load(std::memory_order_seq_cst) & has_waiter) != 0) waiters_of(task).notify_all();
}

// finish_open completes a finishes_open task whose body added no nested task and needs
// nothing extra (no pipe, no exception), without closing its subsequent list: the
// "finished" store completes it (task_base::is_completed), and a light barrier orders that
// store before the looks for a pusher or a blocked waiter that came meanwhile. Whoever comes
// later sees "finished" (a pusher then closes the list itself, push_subsequent); whoever
// came while the body ran made the heavy barrier (task_state::has_finished_after_announcing), so
// either it sees "finished" or these looks see what it did. One locked exchange fewer per
// task than a close (test/model/task_left_open_model.cpp).
void finish_open(task_base* task) noexcept {
  tracing::trace_point(tracing::task, tracing::event_kind::task_completed, task);
  task->state.end_part(exclusive_access);
  std_atomics::light_barrier();
  if (came_since_finished(task)) settle_open(task);
}

// finish_begun ends a task this thread began as finishes_open after taking it back off its
// own deque, and disposes of the queue's reference; true when it completed here.
[[gnu::always_inline]] inline bool finish_begun(task_base* task, task_base* const* through) noexcept {
  if (task->extras == nullptr) {  // the body added no nested task: nobody else writes the word
    finish_open(task);
  } else if (end_body(task) == part_outcome::finished) {
    ready_loop(nullptr).complete_ran(task);
  } else {
    drop_reference(task);  // nested tasks still run: it may still be written
    return false;
  }
  leave_or_release(task, through);
  return true;
}

// run_taken_back_here is run_taken_back, inlined on the path of a launch followed by its wait.
inline bool run_taken_back_here(task_base* task, unsigned depth, task_base* const* through, bool open) noexcept {
  const begin_outcome claim = open ? task->state.try_begin_open() : task->state.try_begin();
  if (!began(claim)) {
    bool done = task->is_completed();
    drop_reference(task);
    return done;
  }
  if (!open) {
    bool done = run_here(task, claim, depth);
    drop_reference(task);  // the queue's reference
    return done;
  }
  tracing::trace_point(tracing::task, tracing::event_kind::task_retracted, task);
  run_body(task, claim);
  retract_nested(task, depth);
  finish_begun(task, through);
  return true;
}

}  // namespace

bool run_taken_back(task_base* task, unsigned depth, task_base* const* through, bool open) noexcept {
  return run_taken_back_here(task, depth, through, open);
}

void run_held_run(held_run& held, work_item* const* taken, task_base* const* const* handles) noexcept {
  for (std::size_t i = 0; held.next(i);) run_taken_back_here(static_cast<task_base*>(taken[i]), 0, handles[i], true);
}

namespace {

// run_taken_back_and_trim is run_taken_back for a task taken back off `own`, this thread's
// deque of `owner`, then trims the stale entries the take-back uncovered (a worker pops its
// own deque itself).
bool run_taken_back_and_trim(task_base* task, unsigned depth, task_base* const* through, bool finish_open,
                             task_deque* own, scheduler::impl* owner) noexcept {
  bool done = run_taken_back_here(task, depth, through, finish_open);
  if (tasks_tls.stale_entries.left != 0 && this_thread_context().self == nullptr) trim_stale(own, owner);
  return done;
}

// take_back_and_run_one takes `task` back, with the queue's reference, if it is the newest
// or the oldest entry of this thread's deque (a launch followed by its wait; waits in launch
// order), and runs it here instead of leaving a stale entry for a worker to drop. An entry
// is ready, so nothing it waits for is left to retract: retract tries this before its looks.
// Nothing when it was not there; else what run_taken_back says (true when it is complete or
// ran here). Given `launch_order` (wait's first look), where waits run this thread's queue
// in launch order it sets it, and takes the task back only when it is the oldest entry (else
// nothing: the caller runs what lies below it first, run_in_launch_order).
[[gnu::always_inline]] inline std::optional<bool> take_back_and_run_one(task_base* task, unsigned depth, task_base* const* through,
                                                                        bool finish_open, bool* launch_order = nullptr) noexcept {
  if (task->target != target_none || too_deep_to_run_here(task)) return std::nullopt;
  waiter_deque found(task);
  task_deque* own = found.deque();
  if (own == nullptr) return std::nullopt;
  bool taken = false;
  if (launch_order != nullptr && in_launch_order_here(found.owner())) {
    *launch_order = true;
    // The oldest entry (alone, or waits in launch order) is taken back as ever; else the
    // caller runs what lies below it first (run_in_launch_order), holding the task.
    taken = own->steal_if(task);
  } else {
    taken = deque_owner_view(*own).take_back(task);
  }
  if (!taken) return std::nullopt;
  return run_taken_back_and_trim(task, depth, through, finish_open, own, found.owner());
}

}  // namespace

event_count<>& waiters_of(const void* task) noexcept {
  static std::array<padded_event_count, 64> table;
  auto bits = reinterpret_cast<std::uintptr_t>(task) >> 6;  // tasks are 64-byte aligned
  return table[(bits ^ (bits >> 6) ^ (bits >> 12)) % table.size()].events;
}

namespace {

// stack_running_low says whether less than a quarter of the calling thread's stack is left
// below the caller's frame (stacks grow down on every target). The bounds are read once per
// thread; where they cannot be read, the answer is yes.
[[gnu::noinline]] bool stack_running_low() noexcept {
  stack_bounds& bounds = tasks_tls.stack;
  if (bounds.lowest == 0) {
    bounds.lowest = 1;  // unknown, unless read below
#if defined(__GLIBC__)
    pthread_attr_t attributes;
    if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
      void* lowest = nullptr;
      std::size_t size = 0;
      if (pthread_attr_getstack(&attributes, &lowest, &size) == 0 && lowest != nullptr) {
        bounds.lowest = reinterpret_cast<std::uintptr_t>(lowest);
        bounds.size = size;
      }
      pthread_attr_destroy(&attributes);
    }
#endif
  }
  auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  return bounds.size == 0 || here < bounds.lowest || here - bounds.lowest < bounds.size / 4;
}

}  // namespace

bool leaves_deep_work_to_others(const task_base* task, unsigned depth) noexcept {
  const thread_context& context = this_thread_context();
  if (context.pool_thread) return depth >= max_running_depth;
  if (context.named >= 0 || !stack_running_low()) return false;
  scheduler_pin pin(task->owner_index);
  return pin.get() != nullptr && !pin.get()->workers.empty();
}

bool retract(task_base* task, unsigned depth, task_base* const* through, bool finish_open) noexcept {
  if (task->is_completed()) return true;
  if (depth > max_retraction_depth) return false;
  if (std::optional<bool> ran = take_back_and_run_one(task, depth, through, finish_open)) return *ran;
  // Prerequisites first. An event's list is read only once triggered: until then its
  // owner may still be adding to it.
  bool readable = task->kind() != task_kind::event || task->has_flag(triggered);
  bool claimed = readable && claim_prerequisites(task);
  // acquire: pairs with end_body's release of body_returned (the nested list it
  // settles); piped was set before anyone could reach the task
  const std::uint8_t flags = task->flags.load(std::memory_order_acquire);
  // Bodies run for what it waits for may drop the handle the caller holds it by.
  held_reference hold(claimed || (flags & (piped | body_returned)) != 0 ? task : nullptr);
  if (claimed) {
    for (edge_group* group = prerequisite_groups(task); group != nullptr; group = group->next) {
      for (std::uint32_t i = 0; i < group->count; ++i) {
        if (task_base* prerequisite = group->edges()[i].prerequisite) retract(prerequisite, depth + 1);
      }
    }
    drop_prerequisite_references(task);
  }
  // Then what else it waits for: the task before it in its pipe; its nested tasks, once
  // its body has returned (all that is left of it then).
  if ((flags & piped) != 0) retract_pipe_predecessor(task, depth);
  if ((flags & body_returned) != 0) {
    if (try_hold_nested(*task->extras)) {  // else it completed: the list is gone
      retract_nested(task, depth);
      drop_nested_hold(*task->extras);
    }
    return task->is_completed();
  }
  if (too_deep_to_run_here(task)) return task->is_completed();
  // A thread outside the task's pool keeps the scheduler alive while it runs its work.
  scheduler_pin pin(task->owner_index);
  if (pin.get() == nullptr) return task->is_completed();  // retired, or closing: see can_retract_here
  if (task->target == target_none) {
    if (task->kind() != task_kind::queued) return task->is_completed();  // as can_retract_here
  } else if (!can_retract_here(task)) {
    return task->is_completed();
  }
  const begin_outcome claim = task->state.try_begin();
  if (!began(claim)) return task->is_completed();
  run_here(task, claim, depth);
  if (task->target == target_none) left_stale();
  return true;
}

bool try_retract_and_execute(task_base* task, task_base* const* through) noexcept {
  if (is_running_here(task)) {
    report(diagnostic_kind::misuse, std::string("task '") + task->name +
                                        "' retracted from inside its own execution; ignored");
    return false;
  }
  return retract(task, 0, through);
}

bool wait(task_base* task, const std::chrono::steady_clock::time_point* deadline,
          task_base* const* through) noexcept {
  if (task->is_completed()) return true;
  if (task_base* running = tasks_tls.innermost_running != nullptr ? running_task_awaited_by(task) : nullptr) {
    report_waiting_inside(task, running);
    return false;
  }
  // A launch followed by its wait: taken back before the loop's set-up (retract, which
  // looks again when it is not there, finds the deque's ends in the cache). Or, with no
  // workers, what this thread queued runs in launch order (lib/tasks/wait_launch_order.cpp), each
  // time round.
  bool launch_order = false;
  if (take_back_and_run_one(task, 0, through, /*finish_open=*/true, &launch_order) &&
      ((through != nullptr && *through != task) || task->is_completed())) {
    return true;  // (the task may be freed once the handle no longer names it)
  }
  return wait_until_complete(task, deadline, through, launch_order);
}

}  // namespace magpie::detail
