// Running and completing tasks: the scheduler's entry (run_queued), a body's run and its
// parts, and the ready loop, which turns a completion into the scheduling and completion of
// what it releases. Launching is in task_launch.cpp, references in task_references.cpp,
// nested tasks in task_nesting.cpp, waiting in task_wait.cpp, retraction in
// wait_retraction.cpp, pipes in pipe.cpp.
#include "task_internal.h"
#include "thread_state.h"

#include <magpie/diagnostics.h>
#include <magpie/pipe.h>
#include <magpie/task.h>

#include <cstdlib>
#include <exception>
#include <string>

namespace magpie::detail {

namespace {

using tracing::event_kind;

// can_run_here says whether a task made ready by what this thread just ran may run next
// on this thread, skipping the queue: on a worker of its scheduler; on any thread running
// that scheduler's work when it has no workers (nobody else would run it), where inside a
// launch-order run only a task of the run's launch site (another site's task runs when it
// is waited for or helped, as the rule says).
bool can_run_here(const task_base* task) noexcept {
  const thread_context& context = this_thread_context();
  scheduler::impl* owner = owner_of(task);
  if (context.owner != owner || task->target != target_none) return false;
  if (context.self == nullptr) {
    const launch_site run = tasks_tls.launch_order_run;
    return owner->workers.empty() && (run == launch_site() || launch_site_of(task) == run);
  }
  return !is_background(task->task_priority()) || context.self->kind == worker_kind::background;
}

// report_orphan reports a task that became ready after its scheduler was destroyed (see
// scheduler_slot). Cold.
[[gnu::cold, gnu::noinline]] void report_orphan(task_base* task) noexcept {
  if (is_abandoned_resumption(task)) return;  // its coroutine was reported when it was abandoned
  report(diagnostic_kind::never_ran, std::string("task '") + task->name +
                                         "' became ready after its scheduler was destroyed: it never runs");
}

}  // namespace

void enqueue_ready(task_base* task) noexcept {
  tracing::trace_point(tracing::task, event_kind::task_scheduled, task);
  scheduler::impl* owner = owner_of(task);
  if (scheduler_slot::is_retired(owner)) {
    report_orphan(task);
    run_queued(task, work_action::discard);  // as a scheduler shutting down with it queued
  } else if (task->target == target_none) {
    owner->schedule(task, task->task_priority());
  } else {
    scheduler_access::schedule(owner->facade, task, target_thread(task->target), target_queue(task->target),
                               target_is_high(task->target));
  }
}

namespace {

// waiter_flagged is the look for a blocked waiter by a thread that just made the task
// ready (its last unlock) or complete (its close): the changer's half of the Dekker pairing
// with the waiter's set_flag, fence and re-check. An acquire load is not in the single order
// S, so [atomics.order] would let both sides miss; seq_cst puts it there (a plain `mov` on
// x86-64, `ldar` on ARMv8: no dearer than acquire).
bool waiter_flagged(const task_base* task) noexcept {
  return (task->flags.load(std::memory_order_seq_cst) & has_waiter) != 0;  // seq_cst: pairs with set_flag and the waiter's fence
}

// schedule enqueues a task that became ready, and wakes a waiter blocked on it.
void schedule(task_base* task) noexcept {
  // Read before the push: once queued, the task may run and be freed at any moment.
  bool wake_waiter = waiter_flagged(task);
  enqueue_ready(task);
  // A blocked waiter retries retraction now that the task can run.
  if (wake_waiter) waiters_of(task).notify_all();
}

// execute runs a task whose execution this thread won (`began`), and completes it unless
// nested tasks are still running.
void execute(task_base* task, begin_outcome began, next_task* next_slot) noexcept {
  run_body(task, began);
  if (end_body(task) == part_outcome::finished) ready_loop(next_slot).complete_ran(task);
}

// is_only_prerequisite says whether `prerequisite` is the one prerequisite `task` has.
bool is_only_prerequisite(const task_base* prerequisite, const task_base* task) noexcept {
  const edge_group* group = prerequisite_groups(task);
  return group != nullptr && group->next == nullptr && group->count == 1 && group->edges()->prerequisite == prerequisite;
}

// give_up_on readies a task that lost its chance to run (its scheduler shut down, or was
// destroyed), whose execution `began` here, for completion: its body goes, task_never_ran
// is its exception, and its part ends (finished: it may complete now).
part_outcome give_up_on(task_base* task, begin_outcome began) noexcept {
  if (holds_prerequisites(began) && prerequisite_groups(task) != nullptr) drop_prerequisite_references(task);
  task->apply(task_op::drop_body);
  ensure_extras_inline(task).exception =
      std::make_exception_ptr(task_never_ran(std::string("task '") + task->name + "' never ran"));
  task->flags.fetch_or(has_exception | exception_observed, std::memory_order_relaxed);  // relaxed: published by completion
  // As end_body: before the part that may complete it goes (nothing nested: it never ran).
  if (task->extras->pipe != nullptr) pipe_access::task_completing(*task->extras->pipe);
  return task->state.end_part();
}

// never_ran completes a task that lost its chance to run, in a ready loop of its own.
void never_ran(task_base* task, begin_outcome began) noexcept {
  if (give_up_on(task, began) == part_outcome::finished) {
    ready_loop loop(nullptr);
    loop.completed(task, false);
    loop.drain();
  }
}

// run_inline runs an inline task whose execution this thread won, and queues its
// completion on `loop` (not a loop of its own: a chain of inline tasks, or of orphans, must
// not recurse).
void run_inline(ready_loop& loop, task_base* task, begin_outcome claim) noexcept {
  if (scheduler_slot::is_retired(task->owner_index)) {
    report_orphan(task);
    if (give_up_on(task, claim) == part_outcome::finished) loop.completed(task, false);
    return;
  }
  run_body(task, claim);
  if (end_body(task) == part_outcome::finished) loop.completed(task, false);
}

}  // namespace

// run_queued: every task type's handler sends the scheduler's actions here.
bool run_queued(work_item* item, work_action action) noexcept {
  auto* task = static_cast<task_base*>(item);
  if (action == work_action::discard) {
    const begin_outcome dropped = task->state.try_begin();
    if (began(dropped)) never_ran(task, dropped);
    drop_reference_inline(task);
    return began(dropped);
  }
  // A waiter may have retracted the queued task (run it already): then this entry runs
  // nothing, and says so (a named thread's count of what it ran).
  next_task current{task, task->state.try_begin()};
  if (!began(current.claim)) {
    drop_reference_inline(task);  // the reference the queue (or the slot) held
    return false;                 // a waiter retracted it: this queue entry ran nothing
  }
  while (current.task != nullptr) {
    next_task next;
    if (began(current.claim)) {
      // Its completion walks its subsequent list, which runs through the subsequents' own
      // blocks, one dependent miss per edge: start on the first while the body runs (a
      // prefetch only: nothing is read through the pointer). Not the subsequents themselves:
      // a launcher may still be writing them, and pulling them over early slowed a wavefront
      // built while it ran by a third.
      if (const void* newest = current.task->subsequents.newest_hint()) __builtin_prefetch(newest);
      execute(current.task, current.claim, &next);
    }  // else a waiter retracted it
    if (holds_prerequisites(next.claim) && is_only_prerequisite(current.task, next.task)) {
      // A chain's hop: the next task would drop its reference to this one as it starts.
      // Drop it here with the queue's (or the slot's), in one go.
      next.claim = begin_outcome::began;
      drop_reference_inline(current.task, 2);
    } else {
      drop_reference_inline(current.task);  // the reference the queue (or the slot) held
    }
    current = next;
    // A task the ready loop left in the slot without beginning it is claimed here.
    if (current.task != nullptr && !began(current.claim)) current.claim = current.task->state.try_begin();
  }
  return true;
}

// --- running -----------------------------------------------------------------------------

void run_body(task_base* task, begin_outcome began) noexcept {
  if (holds_prerequisites(began) && prerequisite_groups(task) != nullptr) drop_prerequisite_references(task);
  thread_context& context = this_thread_context();
  running_frame* outer = tasks_tls.innermost_running;
  running_frame mine{task, outer, outer != nullptr ? outer->depth + 1 : 1};
  tasks_tls.innermost_running = &mine;
  tracing::trace_point(tracing::task, event_kind::task_started, task, task->name);
  scheduler::impl* owner = owner_of(task);
  if (context.owner == owner) {
    // One of its scheduler's threads. A named thread or helper counts the item it runs,
    // which lets the body launch during shutdown as a worker's may.
    unsigned counted = context.self == nullptr ? 1u : 0u;
    context.running += counted;
    task->apply(task_op::run);
    context.running -= counted;
  } else {
    // A waiter from elsewhere runs it: the body sees the task's scheduler as current. A
    // thread of no scheduler pushes what the body launches (fork-join children included)
    // onto the deque lent to it, as an attached thread would (lib/scheduler/lent_deques.cpp).
    guest_of guest(*owner, context.owner == nullptr);
    task->apply(task_op::run);
  }
  if (tracing::on(tracing::task)) [[unlikely]] {
    tracing::record(event_kind::task_finished, task, nullptr, 0, task->has_flag(has_exception) ? 1 : 0);
  }
  tasks_tls.innermost_running = mine.outer;
}

part_outcome end_body(task_base* task) noexcept {
  chaos::point(chaos::site::completion);
  // Only the body adds nested tasks, so with none added no other thread writes num_locks:
  // the body's thread has exclusive access.
  if (task->extras == nullptr || task->extras->nested == nullptr) {
    // Complete by the store below (a waiter may see "finished" before the list closes): a
    // piped task leaves its pipe's count of uncompleted tasks first.
    if (task->extras != nullptr && task->extras->pipe != nullptr) pipe_access::task_completing(*task->extras->pipe);
    task->state.end_part(exclusive_access);
    return part_outcome::finished;
  }
  // Before the body's part goes: a waiter that sees the flag may walk the nested list.
  task->flags.fetch_or(body_returned, std::memory_order_release);  // release: pairs with retract's has_flag
  return end_part_of(task);
}

part_outcome end_part_of(task_base* task) noexcept {
  magpie::pipe* piped_into = task->extras != nullptr ? task->extras->pipe : nullptr;
  if (piped_into == nullptr) return task->state.end_part();
  if (task->state.end_part_unless_last() == part_outcome::parts_remain) return part_outcome::parts_remain;
  // The last part of a piped task: it leaves its pipe's count before it is complete.
  pipe_access::task_completing(*piped_into);
  return task->state.end_part();
}

bool is_running_here(const task_base* task) noexcept {
  for (const running_frame* each = tasks_tls.innermost_running; each != nullptr; each = each->outer) {
    if (each->task == task) return true;
  }
  return false;
}

task_base* running_task_awaited_by(const task_base* task) noexcept {
  for (const running_frame* each = tasks_tls.innermost_running; each != nullptr; each = each->outer) {
    if (depends_on(task, each->task)) return each->task;
  }
  return nullptr;
}

task_base* current_task() noexcept { return current_task_inline(); }

magpie::pipe* current_pipe() noexcept {
  task_base* task = current_task();
  return task != nullptr && task->extras != nullptr ? task->extras->pipe : nullptr;
}

// --- the ready loop ----------------------------------------------------------------------

void close_finished_open(task_base* prerequisite) noexcept { ready_loop(nullptr).close_left_open(prerequisite); }

void ready_loop::join_pipe(task_base* task) noexcept {
  std::atomic<task_base*>& last = pipe_access::last(*task->extras->pipe);
  add_reference_inline(task);  // the slot's
  // acq_rel: we take over the slot's reference to the previous task (acquire) and publish
  // ours (release) to the next joiner
  task_base* previous = last.exchange(task, std::memory_order_acq_rel);
  if (previous == nullptr) {
    lock_released(task, task->state.remove_locks());
    return;
  }
  chaos::point(chaos::site::pipe_handover);  // the previous task may complete meanwhile
  task_edge& edge = task->extras->pipe_edge;
  edge.subsequent = task;
  edge.prerequisite = previous;
  edge.kind = edge_kind::pipe;
  // The slot's reference goes with the link, for a waiter that retracts this task: it runs
  // the previous one first (lib/tasks/wait_retraction.cpp). It is stored before the push, and this
  // thread holds a reference of its own over the push: once linked, the task may run,
  // complete and drop the link's while the push still looks at `previous`.
  std::atomic<task_base*>& predecessor = task->extras->pipe_predecessor;
  add_reference_inline(previous);
  predecessor.store(previous, std::memory_order_release);  // release: pairs with the retracting waiter's exchange
  const bool linked = push_subsequent(previous, &edge);
  if (!linked) {
    // The previous one already completed: take the link's reference back (unless a waiter
    // holds it just now: then the task's completion or destruction drops it).
    if (task_base* back = predecessor.exchange(nullptr, std::memory_order_acquire)) drop_reference_inline(back);  // acquire: pairs with a waiter's putting it back
  }
  drop_reference_inline(previous);
  if (!linked) lock_released(task, task->state.remove_locks());
}

void ready_loop::ready(task_base* task) noexcept {
  switch (task->kind()) {
    case task_kind::event:
      completed(task, false);
      return;
    case task_kind::inline_run: {
      const begin_outcome claim = task->state.try_begin();
      if (began(claim)) run_inline(*this, task, claim);
      return;
    }
    case task_kind::queued:
      if (next_slot_ != nullptr && next_slot_->task == nullptr && can_run_here(task)) {
        next_slot_->task = task;  // runs next on this thread: no queue, no wake-up
      } else if (scheduler_slot::is_retired(task->owner_index)) {
        // As enqueue would, but completed on this loop: a chain of orphans must not recurse.
        if (const begin_outcome claim = task->state.try_begin(); began(claim)) {
          report_orphan(task);
          if (give_up_on(task, claim) == part_outcome::finished) {
            completed(task, true);  // the system's reference goes after its completion
            return;
          }
        }
        drop_reference_inline(task);  // the system's
      } else {
        schedule(task);
      }
      return;
  }
}

namespace {
// settle_extras readies what a task's extras hold for its completion: the nested list goes
// with its last hold (a waiter walking it may hold it a little longer); the reference to a
// pipe predecessor goes, unless a retracting waiter holds it (then destroy drops it).
void settle_extras(task_base* task) noexcept {
  task_extras& extras = *task->extras;
  if (extras.nested != nullptr) drop_nested_hold(extras);  // the completion's: the list goes with the last hold
  if (task->has_flag(piped)) {
    // acquire: pairs with join_pipe's store or a waiter's putting it back
    if (task_base* predecessor = extras.pipe_predecessor.exchange(nullptr, std::memory_order_acquire)) drop_reference_inline(predecessor);
  }
}

// close_subsequents closes `task`'s subsequent list, taking what it held (newest first).
// No thread can push to it any more when its handles are all gone (and it is not piped):
// every push goes through a handle (a launch's prerequisites, add_nested, when_any) or, for
// a piped task, the pipe's slot. Its completer then closes it with a load and a store
// instead of a locked exchange (close_unshared). The acquire load pairs with the last
// handle's drop (acq_rel), ordering its owner's pushes before this look. Nor can a thread
// be blocked on the task without a handle, so the waiter's Dekker pairing with close's
// seq_cst is not needed either. A fire-and-forget launch, a chain's hop.
//
// One handle, with the list's tag standing, is as good as none: the tag is set only by the
// push of an edge that keeps the task's only handle (a launch was given it, a `next`
// chain's link), and that handle pushes nothing more. Another handle can only come from
// this_task() in the task's own body, which has returned: if it pushed, its push cleared
// the tag; if it is still held, the count is 2. An early dropper of the edge's handle (a
// waiter that claimed the subsequent's prerequisites) clears the tag before its drop, which
// the count's acquire orders before the tag's look, so with no handle left the tag is gone
// too. The look reads the task's own list word only: the newest edge itself may belong to
// a subsequent that has let go of it, and be freed or reused.
task_edge* close_subsequents(task_base* task) noexcept {
  // acquire: pairs with the last handle's acq_rel drop (its owner's pushes come before it),
  // and with an early dropper's drop of the edge's handle (its clear of the tag before it)
  const std::uint64_t handles = task->references.load(std::memory_order_acquire) >> 32;
  const bool piped = task->extras != nullptr && task->extras->pipe != nullptr;
  if (handles == 0 && !piped) [[likely]] {
    return task->subsequents.close_unshared();
  }
  task_edge* taken = nullptr;
  if (handles == 1 && !piped && task->subsequents.try_close_tagged_unshared(taken)) return taken;
  return task->subsequents.close();
}
}  // namespace

// began_as_last_unlock: a plain task (no pipe, nothing extra) that would go to the free next
// slot once its last lock goes begins in the CAS that removes that lock — one read-modify-write
// where remove_locks and then try_begin take two (a chain's every hop).
bool ready_loop::began_as_last_unlock(task_base* task) noexcept {
  if (task->kind() != task_kind::queued || task->extras != nullptr || !can_run_here(task)) return false;
  const begin_outcome claim = task->state.try_remove_last_lock_and_begin();
  if (!began(claim)) return false;
  next_slot_->task = task;
  next_slot_->claim = claim;
  return true;
}

constinit thread_local tasks_thread_state tasks_tls;

namespace {
// spill_guard frees the spill stack's storage at thread exit. Ready loops still run after
// that (see thread_state.h): a spill then allocates again, and frees its storage once the
// stack is empty.
struct spill_guard {
  spill_guard() = default;
  spill_guard(const spill_guard&) = delete;
  spill_guard& operator=(const spill_guard&) = delete;
  ~spill_guard() {
    std::free(tasks_tls.spilled_completions.items);
    tasks_tls.spilled_completions = {};  // a later spill allocates again; emptied, it is freed
    tasks_tls.spill_guard_gone = true;
  }
};
}  // namespace

void completion_spill_stack::grow() noexcept {
  if (items == nullptr && !tasks_tls.spill_guard_gone) {
    thread_local spill_guard guard;  // constructed once: frees the storage at thread exit
    (void)guard;
  }
  std::size_t bigger = capacity == 0 ? 64 : capacity * 2;
  auto* moved = static_cast<std::uintptr_t*>(std::realloc(items, bigger * sizeof(std::uintptr_t)));
  if (moved == nullptr) std::terminate();  // as a throwing push_back in this noexcept path would
  items = moved;
  capacity = bigger;
}

// spill queues a completion on the thread's spill stack once the loop's own slots are full
// (or it spilled already: from then on everything goes there, newest last).
void ready_loop::spill(std::uintptr_t tagged) noexcept {
  if (!spilled_) {
    spill_base_ = tasks_tls.spilled_completions.size;
    spilled_ = true;
  }
  tasks_tls.spilled_completions.push(tagged);
}

std::uintptr_t ready_loop::take_newest() noexcept {
  if (spilled_) {
    completion_spill_stack& spilled = tasks_tls.spilled_completions;
    std::uintptr_t newest = spilled.pop();
    spilled_ = spilled.size > spill_base_;
    if (spilled.size == 0 && tasks_tls.spill_guard_gone) {  // past the guard: nothing frees it later
      std::free(spilled.items);
      spilled = {};
    }
    return newest;
  }
  return queued_[--queued_here_];
}

void ready_loop::drain_queued() noexcept {
  while (queued_here_ != 0 || spilled_) {
    std::uintptr_t tagged = take_newest();
    auto* task = reinterpret_cast<task_base*>(tagged & ~std::uintptr_t{1});
    taken_over_ = 0;  // release_inline may leave references (or a handle) to `task` here
    finish(task);
    // The system's reference (events and inline tasks end here), the caller's if tagged, and
    // what the completion took over, in one go: a chain's link is freed by a load.
    const std::uint64_t own = (task->kind() != task_kind::queued ? 1u : 0u) + (tagged & 1u);
    const std::uint64_t dropped = taken_over_ + own * task_base::one_reference;
    taken_over_ = not_draining;
    if (dropped != 0) drop_holds_inline(task, dropped);
  }
}

// remove_lock removes the lock a prerequisite's (or the pipe's) edge stood for, and acts on
// what is left.
inline void ready_loop::remove_lock(task_base* subsequent) noexcept {
  // Cheap checks first, here: a waiter's loop has no slot, and most edges of a task with
  // several prerequisites are not its last.
  if (next_slot_ != nullptr && next_slot_->task == nullptr && subsequent->state.looks_like_last_lock() &&
      began_as_last_unlock(subsequent)) {
    return;
  }
  // Nothing here holds a reference to the subsequent: once the lock goes, another thread
  // may remove the last one, run it and free it. So whether it is piped is read first,
  // while the lock still keeps it (a piped task left with only its pipe's lock cannot run:
  // that lock is this thread's to remove, in join_pipe).
  bool piped = subsequent->extras != nullptr && subsequent->extras->pipe != nullptr;
  const unlock_outcome left = subsequent->state.remove_locks();
  if (left == unlock_outcome::ready) {
    ready(subsequent);
  } else if (left == unlock_outcome::one_lock_left && piped) {
    join_pipe(subsequent);
  }
}

// release_inline removes the lock an inline task's edge stood for. The last lock: the task
// begins in the CAS that removes it (one read-modify-write where remove_locks and try_begin
// take two) and runs here. Out of line: a chain of queued tasks never comes here.
void ready_loop::release_inline(const task_edge* edge) noexcept {
  task_base* subsequent = edge->subsequent;
  task_base* completing = edge->prerequisite;  // read first: once unlocked, the edge may go
  begin_outcome claim = begin_outcome::refused;
  if (subsequent->state.looks_like_last_lock()) claim = subsequent->state.try_remove_last_lock_and_begin();
  if (holds_prerequisites(claim) && taken_over_ != not_draining && is_only_prerequisite(completing, subsequent)) {
    // Its one hold on the completing task (a reference, or the handle its launch was given)
    // goes to drain_queued, which holds a reference of its own until the completion is done,
    // the inline runs included: it drops them together.
    claim = begin_outcome::began;
    taken_over_ += edge_hold(*edge);
  }
  if (began(claim)) {
    run_inline(*this, subsequent, claim);
  } else {
    remove_lock(subsequent);  // other locks remain (or the word moved meanwhile)
  }
}

// release_subsequents acts on the edges a close took from a task's subsequent list (newest
// first): each subsequent loses the lock, part or trigger the edge stood for.
void ready_loop::release_subsequents(task_edge* newest_first) noexcept {
  task_edge* in_order = nullptr;  // registration order: first launched, first released
  while (newest_first != nullptr) {
    task_edge* next = subsequent_list<task_edge>::next_of(newest_first);
    newest_first->hook.next.store(in_order, std::memory_order_relaxed);  // relaxed: only this thread walks it
    in_order = newest_first;
    newest_first = next;
  }
  while (in_order != nullptr) {
    // Read everything first: once unlocked, the subsequent may run and free the edge.
    task_edge* next = subsequent_list<task_edge>::next_of(in_order);
    task_base* subsequent = in_order->subsequent;
    const edge_kind kind = in_order->kind;
    if (kind == edge_kind::prerequisite || kind == edge_kind::pipe) {
      remove_lock(subsequent);
    } else if (kind == edge_kind::inline_prerequisite) {
      release_inline(in_order);
    } else if (kind == edge_kind::nested) {
      hand_on_exception(in_order->prerequisite, subsequent);  // before the part: the parent may complete by it
      if (end_part_of(subsequent) == part_outcome::finished) {
        completed(subsequent, true);  // the edge's reference goes after its completion
      } else {
        drop_reference_inline(subsequent);
      }
    } else {  // any
      if (!subsequent->set_flag(triggered)) lock_released(subsequent, subsequent->state.remove_locks());
      drop_reference_inline(subsequent);
    }
    in_order = next;
  }
}

void ready_loop::finish(task_base* task) noexcept {
  tracing::trace_point(tracing::task, event_kind::task_completed, task);
  if (task->kind() == task_kind::event && claim_prerequisites(task)) drop_prerequisite_references(task);
  if (task->extras != nullptr) settle_extras(task);
  // Closing makes every later push_if_not_closed fail: from here on the task is complete.
  task_edge* newest_first = close_subsequents(task);
  // After close: pairs with the waiter's flag-then-check. Before the subsequents are
  // released: an inline one runs here, for as long as it likes, and the task is complete.
  if (waiter_flagged(task)) waiters_of(task).notify_all();
  release_subsequents(newest_first);
  if (task->extras != nullptr && task->extras->pipe != nullptr) pipe_access::task_finished(*task->extras->pipe, task);
}

}  // namespace magpie::detail
