// Waiting for a task (docs/tasks.md, "Waiting"): deep retraction, a brief spin, then a block
// that retries retraction whenever the task is scheduled.
#include "held_runs.h"
#include "task_internal.h"

#include <magpie/diagnostics.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <string>

namespace magpie::detail {

namespace {

// max_retraction_depth bounds the recursion through prerequisites and nested tasks (each
// level runs a body on this stack).
constexpr unsigned max_retraction_depth = 128;

// max_running_depth bounds how many bodies a worker runs on its stack at once through
// retraction (~1 KiB of magpie's frames each, plus the bodies' own): past it a worker's wait
// blocks instead, and another thread runs the task (a standby worker, created past the cap
// when every worker is blocked: lib/scheduler.cpp). Threads outside the pool are not
// bounded: with no worker, retraction is the only way their work runs.
constexpr unsigned max_running_depth = 256;

// spin_checks is how many times a waiter looks at the task before it blocks: a few
// microseconds, less than a futex sleep and wake-up cost.
constexpr int spin_checks = 64;


struct alignas(cache_line) padded_event_count {
  event_count<> events;
};

// can_retract_here: a task bound to a named thread runs only on that thread; a task whose
// scheduler is gone never runs (it completes as never run once ready: ready_loop).
bool can_retract_here(const task_base* task) noexcept {
  if (task->kind() != task_kind::queued) return false;  // events and inline tasks run when their locks go
  scheduler::impl* owner = owner_of(task);
  if (task->target == target_none) return !scheduler_slot::is_retired(owner);
  const thread_context& context = this_thread_context();
  return context.owner == owner && context.named == static_cast<int>(task->target >> 2u);
}

// last_thread_standing says that this is a pool thread of `owner` which, if it blocked,
// would leave every thread of its kind blocked with no standby left to start. Ready work
// would then wait for ever (the task it waits for may be queued behind it), so it helps with
// any queued work instead, though that work may, in the worst case, wait for the body
// beneath it (the false dependency helping otherwise avoids): that stalls only that case,
// where blocking would stall every case. Within twice the usual depth, so that its stack
// stays bounded.
bool last_thread_standing(scheduler::impl* owner) noexcept {
  const thread_context& context = this_thread_context();
  if (context.self == nullptr || context.owner != owner) return false;
  if (innermost_running != nullptr && innermost_running->depth >= 2 * max_running_depth) return false;
  return owner->would_stall(*context.self);
}

// help runs other work while waiting, where that is the only way forward and makes no
// false dependency: on the named thread a task is bound to (its own queues, never
// re-entered), on a scheduler without workers from a thread running no task body, and as
// the last thread standing (above). A body helped onto the stack above another body could
// wait for that one, which cannot go on until it returns (docs/scheduler.md, "Waiting
// inside a task"). Returns whether it ran something. `owner` is pinned by the caller.
bool help(const task_base* task, scheduler::impl* owner) noexcept {
  spill_held_runs();  // what this thread holds aside is work to find too (lib/held_runs.h)
  const thread_context& context = this_thread_context();
  // A named thread's wait keeps running its own queues (never one it is processing already):
  // work only it may run (a task bound to it, a coroutine resuming on it) may be what the
  // wait needs, directly or through what it waits for. Its scheduler lives: it is attached.
  if (context.named >= 0 && context.owner->run_one_named_item(static_cast<std::uint32_t>(context.named))) return true;
  if (task->target != target_none && context.owner == owner && context.named == static_cast<int>(task->target >> 2u)) {
    return false;
  }
  if (owner->workers.empty() && innermost_running == nullptr) return owner->facade.try_run_one();
  if (last_thread_standing(owner)) return owner->facade.try_run_one();
  return false;
}

// too_deep_to_run_here: a pool thread (of any scheduler) already runs max_running_depth
// bodies on its stack.
bool too_deep_to_run_here() noexcept {
  return innermost_running != nullptr && innermost_running->depth >= max_running_depth &&
         this_thread_context().pool_thread;
}

// own_deque_for is this thread's own deque if it is a thread of `task`'s scheduler (which
// then needs no pin to run what it takes back from it), else nullptr.
work_stealing_deque<work_item*>* own_deque_for(const task_base* task) noexcept {
  const thread_context& context = this_thread_context();
  return context.owner == owner_of(task) ? context.deque : nullptr;
}

// Stale entries. A waiter that claims a task out of the middle of the deque it launched
// it onto (waits in random order) leaves the entry there, holding the queue's reference,
// for whoever reaches it: a worker popping or stealing it drops it. A thread that is not a
// worker pops its deque only when it waits, so with no workers stealing, those entries
// would pile up, each keeping its task alive. Such a thread trims them itself: when a
// take-back uncovers the entry below the one it took, it pops the newest entries while
// they are tasks already begun, and drops them. So the newest entry is never a stale one
// this thread made (a claim out of the middle is never of the newest: that one is taken
// back), and the last wait of a batch, a take-back, clears the rest. Tasks are recognised
// by their handlers (each task type has its own, and nothing else queued has a task's):
// those of the last few types it claimed so.
constexpr std::size_t stale_types = 4;
constinit thread_local std::array<work_item::handler_fn, stale_types> stale_handlers{};
constinit thread_local unsigned next_stale_handler = 0;
// How many entries this thread may have left stale and not trimmed yet: an estimate (a
// worker may drop some, and a claimed task may have been queued elsewhere, by another
// thread); it only says whether to look. A look that finds nothing costs a pop and a push,
// so after max_stale_misses such looks in a row the estimate is dropped: claims of other
// threads' tasks must not tax every later take-back. (Forgetting loses no entry for good:
// the next look, after the next claim, drops every stale entry on top, however many.)
constinit thread_local std::size_t stale_left = 0;
constinit thread_local unsigned stale_misses = 0;
constexpr unsigned max_stale_misses = 16;

bool is_stale_task(work_item* item) noexcept {
  for (work_item::handler_fn handler : stale_handlers) {
    if (handler == item->handler) return static_cast<task_base*>(item)->state.has_begun();
  }
  return false;
}

// drop_stale drops a stale entry this thread has taken off its deque: the queue's
// reference goes, as run_queued would let it go for a task already begun.
void drop_stale(work_item* item) noexcept {
  if (stale_left != 0) --stale_left;
  drop_reference(static_cast<task_base*>(item));
}

// trim_stale drops the stale entries on top of `own`, this thread's deque.
void trim_stale(work_stealing_deque<work_item*>* own, scheduler::impl* owner) noexcept {
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
    stale_misses = 0;
  } else if (++stale_misses == max_stale_misses) {
    stale_left = 0;
    stale_misses = 0;
  }
}

// left_stale notes that this thread, not a worker, claimed `task` (queued, bound to no
// named thread) past its queue entry, which may be in its own deque.
void left_stale(const task_base* task) noexcept {
  if (this_thread_context().self != nullptr) return;  // a worker pops its own deque (a standby has none)
  if (std::find(stale_handlers.begin(), stale_handlers.end(), task->handler) == stale_handlers.end()) {
    stale_handlers[next_stale_handler++ % stale_types] = task->handler;
  }
  ++stale_left;
}

// held_reference holds one reference to a task for a scope (none for nullptr).
class held_reference {
 public:
  explicit held_reference(task_base* task) noexcept : task_(task) {
    if (task_ != nullptr) add_reference(task_);
  }
  ~held_reference() {
    if (task_ != nullptr) drop_reference(task_);
  }
  held_reference(const held_reference&) = delete;
  held_reference& operator=(const held_reference&) = delete;

 private:
  task_base* task_;
};

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
  if (running == task) {
    report(diagnostic_kind::misuse, std::string("task '") + task->name +
                                        "' waited for from inside its own execution: it can never complete");
  } else {
    report(diagnostic_kind::misuse, std::string("task '") + task->name + "' waited for inside task '" +
                                        running->name + "', which it waits for: a dependency cycle, it can never complete");
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
bool finish_begun(task_base* task, task_base* const* through) noexcept {
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

// run_taken_back runs a task whose queue entry this thread took back off its own deque,
// unless another waiter began it first, and disposes of the queue's reference that came
// with the entry. True when the task is complete or ran here.
bool run_taken_back(task_base* task, unsigned depth, task_base* const* through, bool open = true) noexcept {
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

// run_taken_back_and_trim is run_taken_back for a task taken back off `own`, this thread's
// deque of `owner`, then trims the stale entries the take-back uncovered (a worker pops its
// own deque itself).
bool run_taken_back_and_trim(task_base* task, unsigned depth, task_base* const* through, bool finish_open,
                             work_stealing_deque<work_item*>* own, scheduler::impl* owner) noexcept {
  bool done = run_taken_back(task, depth, through, finish_open);
  if (stale_left != 0 && this_thread_context().self == nullptr) trim_stale(own, owner);
  return done;
}

constexpr std::size_t run_limit = 64;

// Launch order without workers. A scheduler with no workers runs nothing until a thread
// waits or helps, and Unreal's no-threading mode runs each task at its launch. A wait from a
// thread with nothing of magpie's beneath it on its stack (at_top_level) first runs the
// tasks of the awaited task's type (launched from the same place: each task type has its own
// handler) that lie below it on this thread's deque, oldest first. So a batch launched in a
// loop and waited for in any order runs in launch order, in the order it lies in memory (a
// task claimed out of the middle of the deque paid a whole memory latency behind the locked
// instructions of the wait before). Entries of other types are not run: each goes back at
// the newest end and waits as before (run_queued_before), and one met first stops the run.
// A task launched elsewhere in the code, run earlier than its wait asks, may wait for what
// the waiting thread or a newer task does (an event main triggers later, a pipe to drain,
// a limiter, a task_group to join), where Unreal would have run it at its launch, before
// any of that existed; each of these would hang. docs/scheduler.md lists what a wait
// with no workers still cannot serve.
// Beneath a body the rule would be unsound even within a type: an entry launched after that
// body's task may wait for it to complete. wait_all goes further: it takes its own handles
// oldest first (take_oldest_run), whatever their types, when its range starts at the
// deque's oldest end (waits_in_launch_order), since it waits for all of them anyway.

// at_top_level: this thread runs no body, item or help of any scheduler, and holds no work
// out of the queues (thread_context::holding). (A task_group child run by its joiner leaves
// nothing beneath that matters: it was the newest entry when popped, so whatever lies above
// it was queued from inside it.)
bool at_top_level() noexcept {
  const thread_context& context = this_thread_context();
  return innermost_running == nullptr && context.running == 0 && context.helping == 0 && context.holding == 0;
}

// in_launch_order_here: a wait on `owner`'s task from this thread runs its queue in launch
// order (above). `owner` is this thread's scheduler or pinned. Not after a held run was
// spilled, until this thread's wait_alls return (lib/held_runs.h): its entries went back
// on top of newer ones.
bool in_launch_order_here(const scheduler::impl* owner) noexcept {
  const thread_context& context = this_thread_context();
  bool no_workers = context.owner == owner ? context.self == nullptr && !context.wakes_workers : owner->workers.empty();
  return no_workers && at_top_level() && !spilled_in_wait_all;
}

// run_queued_before runs the tasks of `task`'s type that `own`, this thread's deque, held
// below it when this call began, oldest first, up to `task` if it is among them (then what
// run_taken_back says of it); nothing when it was not. An entry of another type is taken,
// then put back at the newest end (the oldest belongs to the thieves), where it runs when
// waited for or helped; the run goes on past it, unless it was the first entry met (see
// "Launch order without workers"). A stale entry of another type (is_stale_task) is dropped.
// One entry per CAS: an entry's type can be read only once it is ours (a thief may have
// taken and freed it), and entries taken ahead in a batch would be hidden while the bodies
// before them run, from a body that helps (try_run_one, a task_group's join) and from a
// helping thread that would steal them (either would hang). Held aside as
// wait_all's runs are (lib/held_runs.h), a spill would put older tasks above newer ones for
// later waits, where wait_all's spills end with it. The run stops once `deadline` (if any)
// has passed. `ran_any` says whether it ran anything.
std::optional<bool> run_queued_before(task_base* task, work_stealing_deque<work_item*>* own,
                                      const std::chrono::steady_clock::time_point* deadline, bool& ran_any) noexcept {
  const std::int64_t end = own->end_index();
  // Read now: once it has run, a body run after it may free it.
  const work_item::handler_fn tasks_handler = task->handler;
  using take = work_stealing_deque<work_item*>::oldest_take;
  auto one = [](std::int64_t, work_item*) { return take::take_and_stop; };
  for (;;) {
    if (ran_any && deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return std::nullopt;
    work_item* item = nullptr;
    if (own->take_oldest(&item, 1, end, one) == 0) return std::nullopt;
    if (item != task && item->handler != tasks_handler) {
      if (is_stale_task(item)) {  // a task this thread claimed past its entry: dropped, not passed over
        drop_stale(item);
        continue;
      }
      if (!ran_any) {
        // Met first: the run stops. The task, if newest, is taken back before the entry goes
        // on top of it.
        bool task_taken = own->pop_if(task);
        own->push(item);
        if (task_taken) return run_taken_back(task, 0, nullptr);  // the wait holds it: see wait()
        return std::nullopt;
      }
      own->push(item);
      continue;
    }
    ran_any = true;
    auto* each = static_cast<task_base*>(item);
    if (each == task) return run_taken_back(task, 0, nullptr);  // the wait holds it: see wait()
    if (!own->empty()) {
      run_taken_back(each, 0, nullptr);  // finished open: a locked instruction fewer than its handler's run
    } else {
      // The last one queued (a chain's next link, readied by the one before): its handler
      // runs what its completion readies at once (the chain's hop), where a task finished
      // open would queue it for the next look.
      each->handler(each, work_action::run);
    }
  }
}

// run_in_launch_order is wait's step in launch order (above) for `task`, whose scheduler has
// no workers, from a thread at top level: nothing when it did not find the task queued
// here, else what run_taken_back says. `deadline` and `ran_any` as for run_queued_before.
std::optional<bool> run_in_launch_order(task_base* task, const std::chrono::steady_clock::time_point* deadline,
                                        bool& ran_any) noexcept {
  ran_any = false;
  if (task->target != target_none) return std::nullopt;  // on a named thread's queue, not the deque
  if (work_stealing_deque<work_item*>* own = own_deque_for(task)) {
    return run_queued_before(task, own, deadline, ran_any);
  }
  scheduler_pin pin(task->owner_index);  // a thread of no scheduler: its lent deque
  work_stealing_deque<work_item*>* lent = pin.get() != nullptr ? pin.get()->borrowed_deque() : nullptr;
  if (lent == nullptr) return std::nullopt;
  return run_queued_before(task, lent, deadline, ran_any);
}

// take_back_run takes the newest run of `handles` (up to run_limit) off `own`, this
// thread's own deque, at once, when they lie on top of it in that order, into `taken`;
// returns how many (0 when fewer than two: a single task goes the ordinary way, through
// retract).
std::size_t take_back_run(work_stealing_deque<work_item*>* own, task_base* const* const* handles, std::size_t count,
                          work_item** taken) noexcept {
  if (own == nullptr || count < 2) return 0;
  // Each handle is read only once the one before matched: where the newest is not on top
  // (a graph's sink, waiting on its prerequisites) this costs one look, not a run's worth.
  auto expected = [&](std::int64_t i) -> work_item* { return taken[i] = *handles[i]; };
  auto run = static_cast<std::size_t>(own->newest_matching(expected, static_cast<std::int64_t>(std::min(count, run_limit))));
  if (run < 2 || !own->pop_newest(static_cast<std::int64_t>(run))) return 0;
  return run;
}

// take_oldest_run takes the oldest run of `handles` (up to run_limit) off `own`, this
// thread's deque, at once, when they lie at its oldest end in that order (a range waited
// for oldest first, in launch order: see in_launch_order_here), into `taken`; returns how
// many (0 when fewer than two, as take_back_run).
std::size_t take_oldest_run(work_stealing_deque<work_item*>* own, task_base* const* const* handles, std::size_t count,
                            work_item** taken) noexcept {
  if (own == nullptr || count < 2) return 0;
  using take = work_stealing_deque<work_item*>::oldest_take;
  return static_cast<std::size_t>(own->take_oldest(
      taken, static_cast<std::int64_t>(std::min(count, run_limit)), own->end_index(),
      [handles](std::int64_t i, work_item* item) { return item == *handles[i] ? take::take : take::stop; }));
}

// take_back_and_run takes back a run of `handles` and runs it here; returns how many were
// taken: with no workers the oldest run, when the range comes oldest first from the deque's
// oldest end (take_oldest_run, waits_in_launch_order); else the newest (take_back_run). A
// thread of no scheduler looks on the deque lent to it by the first task's scheduler,
// pinned while it runs them. The run is held aside (lib/held_runs.h): a body that helps or
// blocks puts back what has not begun, which the caller then waits for one by one.
std::size_t take_back_and_run(task_base* const* const* handles, std::size_t count) noexcept {
  work_item* taken[run_limit];  // the handles' tasks
  if (count < 2 || *handles[0] == nullptr) return 0;  // (a body run earlier may have emptied a handle)
  auto take_and_run = [&](work_stealing_deque<work_item*>* own, scheduler::impl* owner) -> std::size_t {
    std::size_t run = in_launch_order_here(owner) ? take_oldest_run(own, handles, count, taken) : 0;
    if (run == 0) run = take_back_run(own, handles, count, taken);
    if (run == 0) return 0;
    held_run held(taken, run, own, owner);
    for (std::size_t i = 0; held.next(i);) run_taken_back(static_cast<task_base*>(taken[i]), 0, handles[i]);
    return run;
  };
  const thread_context& context = this_thread_context();
  if (context.owner != nullptr) {
    if (context.owner != owner_of(*handles[0])) return 0;  // another scheduler's task: not on this deque
    return take_and_run(context.deque, context.owner);
  }
  scheduler_pin pin((*handles[0])->owner_index);
  scheduler::impl* owner = pin.get();
  return owner != nullptr ? take_and_run(owner->borrowed_deque(), owner) : 0;
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
  if (task->target != target_none || too_deep_to_run_here()) return std::nullopt;
  if (work_stealing_deque<work_item*>* own = own_deque_for(task)) {
    if (launch_order != nullptr && in_launch_order_here(owner_of(task))) {
      *launch_order = true;
      // The oldest entry (alone, or waits in launch order) is taken back as ever; else the
      // caller runs what lies below it first.
      if (own->steal_if(task)) {
        return run_taken_back_and_trim(task, depth, through, finish_open, own, owner_of(task));
      }
      return std::nullopt;  // the caller runs the queue (run_in_launch_order), holding the task
    }
    if (!own->take_back(task)) return std::nullopt;
    return run_taken_back_and_trim(task, depth, through, finish_open, own, owner_of(task));
  }
  if (this_thread_context().owner != nullptr) return std::nullopt;  // another scheduler's thread
  // A thread of no scheduler has its launches on a deque lent to it (lib/lent_deques.cpp),
  // and pins the scheduler while it runs its work.
  scheduler_pin pin(task->owner_index);
  work_stealing_deque<work_item*>* lent = pin.get() != nullptr ? pin.get()->borrowed_deque() : nullptr;
  if (lent == nullptr) return std::nullopt;
  if (launch_order != nullptr && in_launch_order_here(pin.get())) {
    *launch_order = true;
    if (lent->steal_if(task)) {
      return run_taken_back_and_trim(task, depth, through, finish_open, lent, pin.get());
    }
    return std::nullopt;  // as above
  }
  if (!lent->take_back(task)) return std::nullopt;
  return run_taken_back_and_trim(task, depth, through, finish_open, lent, pin.get());
}

// unattached_grace is how long a wait that needs a named thread no thread has attached
// blocks before it says so: long enough for a thread being started to attach meanwhile.
constexpr std::chrono::milliseconds unattached_grace{100};
// unattached_relook is how often a blocked wait that needed no unattached named thread
// looks again: a blocked waiter wakes that often, for a look of a few loads.
constexpr std::chrono::milliseconds unattached_relook{1000};

// unattached_named_thread is a named thread of `owner` that no thread has attached and whose
// work the wait for `task` may need: the one it is bound to, or (for a task bound to none)
// one with work queued (a coroutine's resumption there, say); -1 if none.
int unattached_named_thread(const task_base* task, const scheduler::impl& owner) noexcept {
  // acquire, all: pairs with attach's exchange (a thread attached since is seen attached);
  // a stale look only delays the report by one grace period
  if (task->target != target_none) {
    auto index = task->target >> 2u;
    return owner.named[index].attached.load(std::memory_order_acquire) ? -1 : static_cast<int>(index);
  }
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    const named_thread_state& state = owner.named[index];
    if (state.attached.load(std::memory_order_acquire)) continue;
    for (const named_queue& each : state.queues) {
      if (!each.high.looks_empty() || !each.normal.looks_empty()) return static_cast<int>(index);
    }
  }
  return -1;
}

// unattached_look follows, over one wait, whether it needs a named thread that no thread
// has attached, and reports it once the need has lasted unattached_grace.
class unattached_look {
 public:
  // look says how long the coming block may last before the next look (max: no need seen).
  std::chrono::nanoseconds look(const task_base* task, stall_watch::clock::time_point now) noexcept {
    if (reported_) return std::chrono::nanoseconds::max();
    if (now < next_look_) return next_look_ - now;
    int index = -1;
    {
      scheduler_pin pin(task->owner_index);  // never held while blocked
      if (pin.get() != nullptr) index = unattached_named_thread(task, *pin.get());
    }
    // No need seen: look again after a while (work may be queued there while this blocks,
    // and nothing wakes it for that). A new need starts its grace now.
    std::chrono::nanoseconds next = index < 0 ? std::chrono::nanoseconds(unattached_relook) : unattached_grace;
    if (index < 0 || index != index_) {
      index_ = index;
      since_ = now;
      next_look_ = now + next;
      return next;
    }
    if (now - since_ < unattached_grace) {
      next_look_ = since_ + unattached_grace;
      return next_look_ - now;
    }
    reported_ = true;
    report_unattached(task, static_cast<std::uint32_t>(index));
    return std::chrono::nanoseconds::max();
  }

 private:
  [[gnu::cold, gnu::noinline]] static void report_unattached(const task_base* task, std::uint32_t index) {
    std::string thread = named_thread_name(index);
    if (task->target != target_none) {
      report(diagnostic_kind::misuse,
             std::string("task '") + task->name + "' is waited for on " + calling_thread_name() + ", but it runs only on the " +
                 thread + " thread, which no thread has attached: the wait goes on until a thread attaches as " + thread +
                 " and runs its queue",
             severity::warning);
    } else {
      report(diagnostic_kind::misuse,
             std::string("task '") + task->name + "' is waited for on " + calling_thread_name() +
                 " while work is queued on the " + thread + " thread, which no thread has attached: if the task needs "
                 "it (a coroutine resuming there), the wait goes on until a thread attaches as " + thread +
                 " and runs its queue",
             severity::warning);
    }
  }

  bool reported_ = false;
  int index_ = -1;
  stall_watch::clock::time_point since_{};
  stall_watch::clock::time_point next_look_{};
};

// report_stalled_wait reports a wait for `task` that has blocked `waited_ms` without it
// completing (scheduler_options::stall_report_after).
[[gnu::cold, gnu::noinline]] void report_stalled_wait(const task_base* task, long long waited_ms) noexcept {
  std::string bound = task->target != target_none ? " (it runs on the " + named_thread_name(task->target >> 2u) + " thread)" : "";
  report(diagnostic_kind::stalled,
         std::string("task '") + task->name + "'" + bound + " waited for on " + calling_thread_name() +
             " has not completed after " + std::to_string(waited_ms) + " ms; the wait goes on",
         severity::warning);
}

// named_queues_of_caller is the named-thread state of the calling thread when it is attached
// (its wait runs its queues' work, and a send there must wake it), else nullptr.
named_thread_state* named_queues_of_caller() noexcept {
  const thread_context& context = this_thread_context();
  return context.named >= 0 ? &context.owner->named[static_cast<std::size_t>(context.named)] : nullptr;
}

}  // namespace

event_count<>& waiters_of(const void* task) noexcept {
  static std::array<padded_event_count, 64> table;
  auto bits = reinterpret_cast<std::uintptr_t>(task) >> 6;  // tasks are 64-byte aligned
  return table[(bits ^ (bits >> 6) ^ (bits >> 12)) % table.size()].events;
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
  if (too_deep_to_run_here()) return task->is_completed();
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
  if (task->target == target_none) left_stale(task);
  return true;
}

bool waits_in_launch_order(const task_base* task) noexcept {
  // Only where the range starts at the oldest end of this thread's deque: else its runs come
  // back newest first, as with workers (whatever lies below may not run before it).
  auto starts_there = [task](work_stealing_deque<work_item*>* own) { return own != nullptr && own->oldest_is(const_cast<task_base*>(task)); };
  const thread_context& context = this_thread_context();
  if (context.owner != nullptr) {
    return context.owner == owner_of(task) && in_launch_order_here(context.owner) && starts_there(context.deque);
  }
  scheduler_pin pin(task->owner_index);
  return pin.get() != nullptr && in_launch_order_here(pin.get()) && starts_there(pin.get()->borrowed_deque());
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
  if (task_base* running = innermost_running != nullptr ? running_task_awaited_by(task) : nullptr) {
    report_waiting_inside(task, running);
    return false;
  }
  // A launch followed by its wait: taken back before the loop's set-up (retract, which
  // looks again when it is not there, finds the deque's ends in the cache). Or, with no
  // workers, what this thread queued runs in launch order (above), each time round.
  bool launch_order = false;
  if (take_back_and_run_one(task, 0, through, /*finish_open=*/true, &launch_order) &&
      ((through != nullptr && *through != task) || task->is_completed())) {
    return true;  // (the task may be freed once the handle no longer names it)
  }
  // Running the queue in launch order runs bodies unrelated to the task, which may drop its
  // last handle or move the handle waited through (a vector they grow): from then on the
  // wait holds a reference of its own and never reads `through`.
  held_reference hold(launch_order ? task : nullptr);
  if (launch_order) through = nullptr;
  no_worker_nap nap;  // see the block below
  stall_watch watch;  // armed only once the wait is about to block
  unattached_look unattached;
  for (;;) {
    if (launch_order) {
      bool ran_any = false;
      run_in_launch_order(task, deadline, ran_any);
      if (task->is_completed()) return true;
      if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return false;
      if (ran_any) continue;
    }
    retract(task, 0, through);
    // A body run here that dropped or replaced the handle waited through may have freed the
    // task: the handle no longer names it, so there is nothing left to wait for.
    if (through != nullptr && *through != task) return true;
    if (task->is_completed()) return true;
    bool napping = false;  // see the block below
    std::chrono::milliseconds stall_after{0};
    {
      scheduler_pin pin(task->owner_index);  // never held while blocked
      if (scheduler::impl* owner = pin.get()) {
        if (help(task, owner)) {
          nap.helped();
          watch.progressed();
          continue;
        }
        stall_after = owner->stall_after;
        // Without workers, or as the last thread standing, the block is a nap and the loop
        // helps after it.
        napping = owner->workers.empty() || last_thread_standing(owner);
      }
    }
    for (int i = 0; i < spin_checks; ++i) {
      if (task->is_completed()) return true;
      for (int pause = 0; pause < 16; ++pause) cpu_relax();
    }
    if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return task->is_completed();

    // Block. The flag makes the scheduler and the completer notify; setting it before the
    // re-check pairs with their "change state, then look for the flag".
    task->set_flag(has_waiter);
    event_count<>& events = waiters_of(task);
    // An attached thread's wait runs its queues' work: a send there wakes it (named_thread.cpp).
    named_thread_state* own_queues = named_queues_of_caller();
    // seq_cst: Dekker with a sender's push, fence and load of it, through prepare_wait's fence
    if (own_queues != nullptr) own_queues->blocked_waiter.store(&events, std::memory_order_seq_cst);
    struct waiter_clear {
      named_thread_state* queues;
      ~waiter_clear() {
        if (queues != nullptr) queues->blocked_waiter.store(nullptr, std::memory_order_relaxed);  // relaxed: a late view costs a sender one spurious notify
      }
    } clear_waiter{own_queues};
    auto key = events.prepare_wait();
    bool completed = task->subsequents.is_closed() || task->state.has_finished_after_announcing();
    if (completed || (task->state.is_ready() && can_retract_here(task) && !too_deep_to_run_here())) {
      events.cancel_wait();
      continue;
    }
    if (own_queues != nullptr && own_queues->has_work_to_run()) {
      events.cancel_wait();
      // Run here even when help did not look (the task's scheduler is gone): else this loops.
      this_thread_context().owner->run_one_named_item(static_cast<std::uint32_t>(this_thread_context().named));
      continue;
    }
    blocking_scope blocked;  // on a worker: a standby worker takes this one's place
    // Without workers the block is a nap, and the loop helps after it (see no_worker_nap).
    // (A task whose scheduler is gone completes on another thread, which wakes us.)
    tracing::trace_point(tracing::task, tracing::event_kind::wait_began, task, task->name);
    chaos::point(chaos::site::wait_block);
    // The looks below (stall, an unattached named thread) arm only here, about to block.
    auto now = std::chrono::steady_clock::now();
    if (deadline != nullptr && now >= *deadline) {
      events.cancel_wait();
      tracing::trace_point(tracing::task, tracing::event_kind::wait_ended, task);
      continue;
    }
    auto left = deadline != nullptr ? std::chrono::duration_cast<std::chrono::nanoseconds>(*deadline - now)
                                    : std::chrono::nanoseconds::max();
    if (napping) left = std::min(left, nap.next());
    left = std::min({left, watch.limit(stall_after, now), unattached.look(task, now)});
    if (left == std::chrono::nanoseconds::max()) {
      events.commit_wait(key);
    } else {
      events.commit_wait_for(key, left);
    }
    tracing::trace_point(tracing::task, tracing::event_kind::wait_ended, task);
    if (stall_after.count() > 0 && !task->is_completed()) {
      auto after = std::chrono::steady_clock::now();
      if (watch.due(stall_after, after)) report_stalled_wait(task, watch.waited_ms(after));
    }
  }
}

namespace {

// wait_all_depth counts this thread's wait_alls in progress. A spill's aftermath
// (spilled_in_wait_all) ends when the last of them returns: every entry a held run
// spills is one of their handles, and by then each is complete (unless a timed one gave
// up first: what it left then runs in whatever order waits and helpers come to it).
constinit thread_local unsigned wait_all_depth = 0;

}  // namespace

bool wait_all(task_base* const* const* handles, std::size_t count,
              const std::chrono::steady_clock::time_point* deadline) noexcept {
  struct depth_scope {
    depth_scope() noexcept { ++wait_all_depth; }
    ~depth_scope() {
      if (--wait_all_depth == 0) spilled_in_wait_all = false;
    }
  } in_wait_all;
  std::size_t next = 0;
  bool runs_likely = true;  // until a look finds none: then the rest go one by one
  while (next < count) {
    std::size_t run = runs_likely ? take_back_and_run(handles + next, count - next) : 0;
    runs_likely = run != 0;
    // What the run did not complete (nested tasks still running, another waiter ran it, a
    // body replaced a later handle), and whatever did not lie on the deque, is waited for.
    std::size_t end = next + std::max<std::size_t>(run, 1);
    // (A run is taken back whatever the deadline: running it here is how it completes soonest.)
    for (; next < end; ++next) {
      task_base* task = *handles[next];
      // Untimed, a wait returns early only on misuse (waiting on itself, reported): go on.
      if (task != nullptr && !task->is_completed() && !wait(task, deadline, handles[next]) && deadline != nullptr) {
        return false;
      }
    }
  }
  return true;
}

void throw_wait_failed(const task_base* task) {
  throw task_wait_failed(std::string("magpie: get_result on task '") + task->name +
                         "', which cannot complete while the calling thread's task runs");
}

void rethrow_if_failed(task_base* task) {
  if (!task->has_flag(has_exception | nested_exception)) return;
  task->flags.fetch_or(exception_observed, std::memory_order_relaxed);  // relaxed: read by destroy after the last release
  std::rethrow_exception(failure_of(task));
}

bool observe_exception(task_base* task) noexcept {
  if (!task->is_completed() || !task->has_flag(has_exception | nested_exception)) return false;
  task->flags.fetch_or(exception_observed, std::memory_order_relaxed);  // relaxed: read by destroy after the last release
  return true;
}

}  // namespace magpie::detail
