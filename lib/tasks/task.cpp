// The task state machine: references, prerequisites, launch, execution, completion.
// Waiting lives in task_wait.cpp, retraction in wait_retraction.cpp, pipes in pipe.cpp.
#include "task_internal.h"
#include "../scheduler/task_census.h"

#include <magpie/diagnostics.h>
#include <magpie/pipe.h>
#include <magpie/task.h>

#include <array>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace magpie::detail {

namespace {

using tracing::event_kind;

// trace_launch records a launch: its name, priority and named thread, and an edge from
// each of its prerequisites (`count` of them in `prerequisites`, else its own groups').
// Before the launch takes effect: from then on the task may run at once.
void trace_launch(const task_base* task, task_base* const* prerequisites = nullptr, std::size_t count = 0) noexcept {
  if (!tracing::on(tracing::task)) [[likely]] {
    return;
  }
  tracing::record(event_kind::task_launched, task, task->name, 0,
                  static_cast<std::uint32_t>(task->task_priority()) | std::uint32_t{task->target} << 8);
  auto edge_from = [task](const task_base* prerequisite) {
    if (prerequisite != nullptr) {
      tracing::record(event_kind::task_edge, task, nullptr, reinterpret_cast<std::uintptr_t>(prerequisite),
                      static_cast<std::uint32_t>(edge_kind::prerequisite));
    }
  };
  for (std::size_t i = 0; i < count; ++i) edge_from(prerequisites[i]);
  if (prerequisites != nullptr) return;
  for (const edge_group* group = prerequisite_groups(task); group != nullptr; group = group->next) {
    for (std::uint32_t i = 0; i < group->count; ++i) edge_from(group->edges()[i].prerequisite);
  }
}

constexpr std::uint64_t reference_mask = 0xffff'ffffu;

// report_unobserved_exception warns that `task` threw and nobody looked. Cold and out of
// line, as every diagnostic on a hot path: the path keeps a small frame.
[[gnu::cold, gnu::noinline]] void report_unobserved_exception(const task_base* task) noexcept {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(failure_of(task));
  } catch (const std::exception& error) {
    what = error.what();
  } catch (...) {
  }
  report(diagnostic_kind::unhandled_exception,
         std::string("task '") + task->name + "' threw and nobody asked for its result: " + what,
         severity::warning);
}

void destroy(task_base* task) noexcept {
  if ((task->flags.load(std::memory_order_acquire) & (has_exception | nested_exception)) != 0 &&  // acquire: as has_flag
      !task->has_flag(exception_observed)) {
    report_unobserved_exception(task);
  }
  // A task that never started still holds its prerequisites. As the last owner, nobody can
  // claim them meanwhile: a load will do, not claim_prerequisites' read-modify-write.
  if (prerequisite_groups(task) != nullptr && task->state.still_holds_prerequisites()) {
    drop_prerequisite_references(task);
  }
  // A task's own group goes with its block; an event's groups and when_any's are alone.
  if (task_extras* extras = task->extras) {
    // relaxed: the last owner's acquire of the reference count ordered every earlier write
    if (task_base* predecessor = extras->pipe_predecessor.load(std::memory_order_relaxed)) drop_reference(predecessor);
    for (edge_group* list : {extras->prerequisites, extras->owned}) {
      while (list != nullptr) {
        edge_group* next = list->next;
        edge_group::destroy_alone(list);
        list = next;
      }
    }
    extras->~task_extras();
    free_task(extras, sizeof(task_extras));
  }
  count_destroyed(task->owner_index);
  task->apply(task_op::destroy);
}

// only_abandoned_coroutines_wait: every task waiting for the untriggered `event`, whose
// last handle is gone, resumes a coroutine its scheduler's shutdown abandoned. Triggering it
// then runs nothing, and frees them and it. Without handles nobody can push to its list,
// and nobody can complete it: the walk is safe.
bool only_abandoned_coroutines_wait(task_base* event) noexcept {
  for (task_edge* edge = event->subsequents.newest_while_open(); edge != nullptr;
       edge = subsequent_list<task_edge>::next_of(edge)) {
    if (edge->kind != edge_kind::prerequisite || !is_abandoned_resumption(edge->subsequent)) return false;
  }
  return true;
}

// last_handle_dropped: nobody can trigger an untriggered event any more. Out of line:
// drop_handle is on every task's path, this only on an event's.
[[gnu::noinline]] void last_handle_dropped(task_base* event) noexcept {
  if (event->has_flag(triggered)) return;
  if (!event->subsequents.is_empty() && !event->is_completed() && !only_abandoned_coroutines_wait(event)) {
    report(diagnostic_kind::never_ran,
           std::string("task event '") + event->name +
               "' lost its last handle without trigger(): the tasks waiting for it can never run");
    return;  // it and its subsequents stay allocated: they are still linked to each other
  }
  trigger(event);  // nothing waits for it: let it complete and free itself
}

// can_run_here says whether a task made ready by what this thread just ran may run next
// on this thread, skipping the queue: on a worker of its scheduler; on any thread running
// that scheduler's work when it has no workers (nobody else would run it).
bool can_run_here(const task_base* task) noexcept {
  const thread_context& context = this_thread_context();
  scheduler::impl* owner = owner_of(task);
  if (context.owner != owner || task->target != target_none) return false;
  if (context.self == nullptr) return owner->workers.empty();
  return !is_background(task->task_priority()) || context.self->kind == worker_kind::background;
}

// report_orphan reports a task that became ready after its scheduler was destroyed (see
// scheduler_slot). Cold.
[[gnu::cold, gnu::noinline]] void report_orphan(task_base* task) noexcept {
  if (is_abandoned_resumption(task)) return;  // its coroutine was reported when it was abandoned
  report(diagnostic_kind::never_ran, std::string("task '") + task->name +
                                         "' became ready after its scheduler was destroyed: it never runs");
}

// enqueue queues a ready task where it runs: its scheduler's workers or its named thread.
void enqueue(task_base* task) noexcept {
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
  enqueue(task);
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
  task->ensure_extras().exception =
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

}  // namespace

// run_queued: every task type's handler sends the scheduler's actions here.
bool run_queued(work_item* item, work_action action) noexcept {
  auto* task = static_cast<task_base*>(item);
  if (action == work_action::discard) {
    const begin_outcome dropped = task->state.try_begin();
    if (began(dropped)) never_ran(task, dropped);
    drop_reference(task);
    return began(dropped);
  }
  // A waiter may have retracted the queued task (run it already): then this entry runs
  // nothing, and says so (a named thread's count of what it ran).
  next_task current{task, task->state.try_begin()};
  if (!began(current.claim)) {
    drop_reference(task);  // the reference the queue (or the slot) held
    return false;          // a waiter retracted it: this queue entry ran nothing
  }
  while (current.task != nullptr) {
    next_task next;
    if (began(current.claim)) {
      // Its completion walks its subsequent list, which runs through the subsequents' own
      // blocks, one dependent miss per edge: start on the first while the body runs (a
      // prefetch only: nothing is read through the pointer). Not the subsequents themselves:
      // a launcher may still be writing them, and pulling them over early slowed a wavefront
      // built while it ran by a third.
      if (task_edge* newest = current.task->subsequents.newest_while_open()) __builtin_prefetch(newest);
      execute(current.task, current.claim, &next);
    }  // else a waiter retracted it
    if (holds_prerequisites(next.claim) && is_only_prerequisite(current.task, next.task)) {
      // A chain's hop: the next task would drop its reference to this one as it starts.
      // Drop it here with the queue's (or the slot's), in one go.
      next.claim = begin_outcome::began;
      drop_reference(current.task, 2);
    } else {
      drop_reference(current.task);  // the reference the queue (or the slot) held
    }
    current = next;
    // A task the ready loop left in the slot without beginning it is claimed here.
    if (current.task != nullptr && !began(current.claim)) current.claim = current.task->state.try_begin();
  }
  return true;
}

constinit thread_local running_frame* innermost_running = nullptr;

// --- memory and references ---------------------------------------------------------------

task_extras& task_base::ensure_extras() {
  if (extras == nullptr) extras = new (allocate_task(sizeof(task_extras))) task_extras();
  return *extras;
}

edge_group* edge_group::create_alone(std::size_t count) {
  return place_before(static_cast<unsigned char*>(allocate_task(bytes(count))) + bytes(count), count);
}

void edge_group::destroy_alone(edge_group* group) noexcept {
  free_task(group->edges(), bytes(group->count));
}

void add_handle(task_base* task) noexcept {
  task->references.fetch_add(task_base::one_handle, std::memory_order_relaxed);  // relaxed: the copier already holds one
}

void drop_handle(task_base* task) noexcept {
  // kind is read while the handle still keeps the task alive: once it is dropped, another
  // thread may release the last reference and free the task.
  if (task->kind() == task_kind::event) {
    // The handle becomes a plain reference, held while last_handle_dropped looks at the event.
    // acq_rel: pairs with the other handle owners' drops, as below
    std::uint64_t before =
        task->references.fetch_sub(task_base::one_handle - task_base::one_reference, std::memory_order_acq_rel);
    if ((before >> 32) == 1) last_handle_dropped(task);
    drop_reference(task);
    return;
  }
  // acquire: pairs with the release half of every other owner's drop. Holding the only
  // reference, nobody can add one (that takes a reference), so no write is needed.
  std::uint64_t now = task->references.load(std::memory_order_acquire);
  if (now == task_base::one_handle) {
    destroy(task);
    return;
  }
  // The flag saying a waiter left a reference to the handles (retract) is read only while
  // this handle's reference keeps the task alive: read after letting go, it may be freed.
  if ((now >> 32) == 1) {
    // The only handle: nobody can make another (copying takes one), nor leave a reference
    // to the handles (a waiter does so through a handle it holds), so the flag is settled.
    bool left_to_handles = task->state.handles_hold_extra_reference();
    if (left_to_handles && now == task_base::one_handle + task_base::one_reference) {
      destroy(task);  // and the reference the handles held, which was the last
      return;
    }
    std::uint64_t dropped = task_base::one_handle + (left_to_handles ? task_base::one_reference : 0);
    // acq_rel: the last dropper sees every other owner's writes before destroying
    if ((task->references.fetch_sub(dropped, std::memory_order_acq_rel) & reference_mask) == (dropped & reference_mask)) {
      destroy(task);
    }
    return;
  }
  // Other handles too: the handle goes, its reference stays until we know whether this was
  // the last handle after all (the others dropped meanwhile) and so owns the left reference.
  // acq_rel: orders the flag's store (by the waiter, before its handle's drop) before our look
  std::uint64_t before =
      task->references.fetch_sub(task_base::one_handle - task_base::one_reference, std::memory_order_acq_rel);
  bool left_to_handles = (before >> 32) == 1 && task->state.handles_hold_extra_reference();
  drop_reference(task, left_to_handles ? 2 : 1);
}

void add_reference(task_base* task) noexcept {
  task->references.fetch_add(task_base::one_reference, std::memory_order_relaxed);  // relaxed: the caller already holds one
}

void drop_reference(task_base* task, std::uint32_t count) noexcept {
  // acquire: as in drop_handle, the sole owner destroys without a read-modify-write
  if (task->references.load(std::memory_order_acquire) == count * task_base::one_reference) {
    destroy(task);
    return;
  }
  // acq_rel: the last releaser sees every other owner's writes before destroying
  if ((task->references.fetch_sub(count * task_base::one_reference, std::memory_order_acq_rel) & reference_mask) == count) {
    destroy(task);
  }
}

void initialise(task_base* task, const char* name, task_kind kind, scheduler& owner, priority task_priority,
                std::uint8_t target) noexcept {
  task->name = name != nullptr ? name : "";
  task->kind_and_priority = static_cast<std::uint8_t>((task->kind_and_priority & task_base::has_own_group) |
                                                     static_cast<unsigned>(kind) | static_cast<unsigned>(task_priority) << 2u);
  task->owner_index = scheduler_access::of(owner).slot.index();
  task->target = target;
  count_created(task->owner_index);
}

// --- prerequisites -----------------------------------------------------------------------

namespace {

// report_cycle reports a prerequisite that would make `task` wait for itself: the task
// itself (`prerequisite` nullptr), or one that waits for the event `task`. Cold.
[[gnu::cold, gnu::noinline]] void report_cycle(const task_base* task, const task_base* prerequisite) noexcept {
  if (prerequisite == nullptr) {
    report(diagnostic_kind::misuse, std::string("task '") + task->name +
                                        "' added as its own prerequisite: a dependency cycle; ignored");
  } else {
    report(diagnostic_kind::misuse, std::string("task event '") + task->name + "' given prerequisite '" +
                                        prerequisite->name + "', which waits for the event: a dependency cycle; ignored");
  }
}

// link_prerequisites puts `task` in each prerequisite's subsequent list, using `group`'s
// edges (its locks are already counted), and returns how many were complete or invalid:
// locks the caller still has to remove.
std::uint32_t link_prerequisites(task_base* task, task_base* const* prerequisites, std::size_t count,
                                 edge_group* group) noexcept {
  if (task->kind() == task_kind::event) {  // its caller made the extras
    group->next = task->extras->prerequisites;
    task->extras->prerequisites = group;
  }
  std::uint32_t already_complete = 0;
  for (std::size_t i = 0; i < count; ++i) {
    task_edge* edge = new (group->edges() + i) task_edge();
    edge->subsequent = task;
    task_base* prerequisite = prerequisites[i];
    if (prerequisite == task) {
      report_cycle(task, nullptr);
      prerequisite = nullptr;
    } else if (prerequisite != nullptr && task->kind() == task_kind::event && depends_on(prerequisite, task)) {
      // Only an event gains prerequisites once others may wait for it.
      report_cycle(task, prerequisite);
      prerequisite = nullptr;
    }
    if (prerequisite == nullptr) {  // an invalid handle counts as completed
      ++already_complete;
      continue;
    }
    edge->prerequisite = prerequisite;
    add_reference(prerequisite);  // kept until this task starts
    if (!push_subsequent(prerequisite, edge)) ++already_complete;
  }
  return already_complete;
}

}  // namespace

void add_prerequisites(task_base* task, task_base* const* prerequisites, std::size_t count,
                       edge_group* group) noexcept {
  // A task that is not an event gets its prerequisites once, before anything can reach it:
  // its lock count is still its own. An event may already be waited for.
  if (task->kind() == task_kind::event) {
    task->state.add_locks(static_cast<std::uint32_t>(count));
  } else {
    task->state.add_locks(static_cast<std::uint32_t>(count), exclusive_access);
  }
  std::uint32_t already_complete = link_prerequisites(task, prerequisites, count, group);
  // In one go, and never the last: the launch lock is still held.
  if (already_complete != 0) static_cast<void>(task->state.remove_locks(already_complete));
}

void launch_behind(task_base* task, task_base* const* prerequisites, std::size_t count,
                   edge_group* group) noexcept {
  // The prerequisites' locks stand in for the launch lock: the task cannot become ready
  // before the last of them goes, and the ones found complete are removed only at the end.
  trace_launch(task, prerequisites, count);
  task->state.replace_launch_lock(static_cast<std::uint32_t>(count), exclusive_access);
  std::uint32_t already_complete = link_prerequisites(task, prerequisites, count, group);
  chaos::point(chaos::site::task_launch);
  if (already_complete == 0) return;  // the last prerequisite to complete makes it ready
  ready_loop loop(nullptr);
  loop.lock_released(task, task->state.remove_locks(already_complete));
  loop.drain();
}

void drop_prerequisite_references(task_base* task) noexcept {
  for (edge_group* group = prerequisite_groups(task); group != nullptr; group = group->next) {
    for (std::uint32_t i = 0; i < group->count; ++i) {
      if (task_base* prerequisite = group->edges()[i].prerequisite) drop_reference(prerequisite);
    }
  }
}

// --- launch, trigger ---------------------------------------------------------------------

void enter_pipe(task_base* task, magpie::pipe* into) noexcept {
  task->ensure_extras().pipe = into;
  task->flags.fetch_or(piped, std::memory_order_relaxed);  // relaxed: published with the task, as its locks
  task->state.add_locks(1, exclusive_access);  // the pipe's lock; nothing links to the task yet
  pipe_access::task_added(*into);
}

void launch_task(task_base* task, magpie::pipe* into) noexcept {
  trace_launch(task);
  chaos::point(chaos::site::task_launch);
  // Exclusive: no prerequisite lists it and no pipe, so no other thread can reach it yet.
  const bool exclusive = into == nullptr && prerequisite_groups(task) == nullptr;
  if (exclusive) {
    task->state.remove_launch_lock(exclusive_access);
    if (task->kind() == task_kind::queued) {
      // What the ready loop would do, without it. The handle has not left launch() yet, so
      // no waiter can be blocked on the task: enqueue, without schedule's waiter check.
      enqueue(task);
      return;
    }
  }
  ready_loop loop(nullptr);
  loop.lock_released(task, exclusive ? unlock_outcome::ready : task->state.remove_locks());
  loop.drain();
}

void trigger(task_base* event) noexcept {
  if (event->set_flag(triggered)) return;  // idempotent, and races are fine
  ready_loop loop(nullptr);
  loop.lock_released(event, event->state.remove_locks());
  loop.drain();
}

void complete_now(task_base* task) noexcept { trigger(task); }

// --- running -----------------------------------------------------------------------------

void run_body(task_base* task, begin_outcome began) noexcept {
  if (holds_prerequisites(began) && prerequisite_groups(task) != nullptr) drop_prerequisite_references(task);
  thread_context& context = this_thread_context();
  running_frame mine{task, innermost_running, innermost_running != nullptr ? innermost_running->depth + 1 : 1};
  innermost_running = &mine;
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
  innermost_running = mine.outer;
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
  for (const running_frame* each = innermost_running; each != nullptr; each = each->outer) {
    if (each->task == task) return true;
  }
  return false;
}

task_base* running_task_awaited_by(const task_base* task) noexcept {
  for (const running_frame* each = innermost_running; each != nullptr; each = each->outer) {
    if (depends_on(task, each->task)) return each->task;
  }
  return nullptr;
}

task_base* current_task() noexcept { return innermost_running != nullptr ? innermost_running->task : nullptr; }

magpie::pipe* current_pipe() noexcept {
  task_base* task = current_task();
  return task != nullptr && task->extras != nullptr ? task->extras->pipe : nullptr;
}

scheduler& scheduler_for_free_functions() noexcept {
  if (scheduler* current = scheduler::current()) return *current;
  return default_scheduler();
}

void report_invalid(const char* operation) noexcept {
  report(diagnostic_kind::misuse, std::string("task::") + operation + " called on an invalid handle");
}

// --- nested tasks ------------------------------------------------------------------------

void add_nested(task_base* nested) noexcept {
  task_base* parent = current_task();
  if (parent == nullptr) {
    report(diagnostic_kind::misuse, std::string("add_nested('") + nested->name +
                                        "') called outside a running task; ignored");
    return;
  }
  if ((parent->kind_and_priority & task_base::resumes_coroutine) != 0) [[unlikely]] {
    nest_in_coroutine(parent, nested);  // lib/forkjoin/coroutine.cpp: the coroutine's task waits for it
    return;
  }
  if (parent == nested) {
    report(diagnostic_kind::misuse, std::string("task '") + parent->name + "' added itself as nested; ignored");
    return;
  }
  if (depends_on(nested, parent)) {
    report(diagnostic_kind::misuse, std::string("task '") + parent->name + "' added '" + nested->name +
                                        "' as nested, which waits for it: a dependency cycle; ignored");
    return;
  }
  edge_group* group = edge_group::create_alone(1);
  task_edge* edge = new (group->edges()) task_edge();
  edge->subsequent = parent;
  edge->prerequisite = nested;
  edge->kind = edge_kind::nested;
  add_reference(nested);  // for retraction, until the parent's nested list goes (drop_nested_hold)
  add_reference(parent);  // the edge's: the parent may complete after its body returns
  parent->state.add_nested_part();
  tracing::trace_point(tracing::task, event_kind::task_edge, parent, nullptr, reinterpret_cast<std::uintptr_t>(nested),
                       static_cast<std::uint32_t>(edge_kind::nested));
  task_extras& extras = parent->ensure_extras();
  group->next = extras.nested;
  extras.nested = group;
  if (!push_subsequent(nested, edge)) {
    hand_on_exception(nested, parent);
    static_cast<void>(parent->state.end_part());  // parts_remain: the body still holds its part
    drop_reference(parent);
  }
}

bool push_subsequent(task_base* prerequisite, task_edge* edge) noexcept {
  if (!prerequisite->subsequents.push_if_not_closed(edge)) return false;
  // A task finished open (lib/tasks/wait_retraction.cpp, finish_open) is complete with its list still
  // open: whichever of its completer and us sees the other closes the list.
  if (prerequisite->state.has_finished_after_announcing()) ready_loop(nullptr).close_left_open(prerequisite);
  return true;
}

void hand_on_exception(task_base* nested, task_base* parent) noexcept {
  if (!nested->has_flag(has_exception)) return;  // its completion, which we follow, published it
  nested->flags.fetch_or(exception_observed, std::memory_order_relaxed);  // relaxed: read by its destroy after the last release
  // relaxed: only which nested task wins matters; the release below publishes what it wrote
  if ((parent->flags.fetch_or(nested_exception_claimed, std::memory_order_relaxed) & nested_exception_claimed) != 0) return;
  parent->extras->nested_exception = body_failure(nested);
  parent->flags.fetch_or(nested_exception, std::memory_order_release);  // release: pairs with has_flag's acquire
}

bool try_hold_nested(task_extras& extras) noexcept {
  std::uint32_t holds = extras.nested_holds.load(std::memory_order_acquire);  // acquire: as the CAS
  while (holds != 0) {
    // acquire: the list stays as the body left it until this hold goes
    if (extras.nested_holds.compare_exchange_weak(holds, holds + 1, std::memory_order_acquire,
                                                  std::memory_order_acquire)) {  // acquire: as above, on a retry
      return true;
    }
  }
  return false;
}

void drop_nested_hold(task_extras& extras) noexcept {
  // acq_rel: the last holder sees every other holder's reads done before it frees the list
  if (extras.nested_holds.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (edge_group* group = extras.nested; group != nullptr;) {  // every nested task has completed
    edge_group* next = group->next;
    drop_reference(group->edges()->prerequisite);
    edge_group::destroy_alone(group);
    group = next;
  }
  extras.nested = nullptr;
}

// --- the ready loop ----------------------------------------------------------------------

// The caller holds a reference to `task` (or, as join_pipe, the lock that keeps it from
// running): with locks left, it is read again below. Only its flags: with a prerequisite's
// lock left, another thread may remove that lock, run the body and add `extras` meanwhile
// (reading `extras` here would race with that); the piped flag was set before anyone could reach
// the task, and a piped task left with 1 lock holds only its pipe's, which is ours.
void ready_loop::lock_released(task_base* task, unlock_outcome left) noexcept {
  if (left == unlock_outcome::ready) {
    ready(task);
  } else if (left == unlock_outcome::one_lock_left && task->has_flag(piped)) {
    join_pipe(task);  // only the pipe's lock is left (a piped task reaches 1 exactly once)
  }
}

void ready_loop::join_pipe(task_base* task) noexcept {
  std::atomic<task_base*>& last = pipe_access::last(*task->extras->pipe);
  add_reference(task);  // the slot's
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
  add_reference(previous);
  predecessor.store(previous, std::memory_order_release);  // release: pairs with the retracting waiter's exchange
  const bool linked = push_subsequent(previous, &edge);
  if (!linked) {
    // The previous one already completed: take the link's reference back (unless a waiter
    // holds it just now: then the task's completion or destruction drops it).
    if (task_base* back = predecessor.exchange(nullptr, std::memory_order_acquire)) drop_reference(back);  // acquire: pairs with a waiter's putting it back
  }
  drop_reference(previous);
  if (!linked) lock_released(task, task->state.remove_locks());
}

void ready_loop::ready(task_base* task) noexcept {
  switch (task->kind()) {
    case task_kind::event:
      completed(task, false);
      return;
    case task_kind::inline_run: {
      const begin_outcome claim = task->state.try_begin();
      if (!began(claim)) return;
      if (scheduler_slot::is_retired(task->owner_index)) {
        // Completed on this loop, not one of its own: a chain of orphans must not recurse.
        report_orphan(task);
        if (give_up_on(task, claim) == part_outcome::finished) completed(task, false);
        return;
      }
      run_body(task, claim);
      if (end_body(task) == part_outcome::finished) completed(task, false);
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
        drop_reference(task);  // the system's
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
    if (task_base* predecessor = extras.pipe_predecessor.exchange(nullptr, std::memory_order_acquire)) drop_reference(predecessor);
  }
}

// nobody_can_add_subsequents says that no thread can push to `task`'s subsequent list any
// more, so its completer may close it without a locked exchange. Every push goes through a
// handle (a launch's prerequisites, add_nested, when_any) or, for a piped task, the pipe's
// slot. With no handle left none can be made (a copy needs one), and the acquire pairs with
// the last handle's drop (acq_rel), ordering its owner's pushes before this look. Nor can a
// thread be blocked on the task without a handle, so the waiter's Dekker pairing with
// close's seq_cst is not needed either. A fire-and-forget launch, a chain's hop.
bool nobody_can_add_subsequents(const task_base* task) noexcept {
  // acquire: pairs with the last handle's acq_rel drop (its owner's pushes come before it)
  return (task->references.load(std::memory_order_acquire) >> 32) == 0 &&
         (task->extras == nullptr || task->extras->pipe == nullptr);
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

namespace {
// The spill stack of the ready loops on this thread (see ready_loop): grows for a wide
// fan-out of completions at once, and keeps its capacity. Trivially destructible: ready
// loops still run after this thread's thread_locals are destroyed (a static scheduler's
// shutdown runs leftover work; a thread_local handle's destructor triggers an event), so
// the storage is freed by a separate guard and stays usable, allocated anew, after it.
struct spill_stack {
  std::uintptr_t* items;
  std::size_t size;
  std::size_t capacity;

  void push(std::uintptr_t item) noexcept {
    if (size == capacity) grow();
    items[size++] = item;
  }
  std::uintptr_t pop() noexcept { return items[--size]; }
  void grow() noexcept;
};
constinit thread_local spill_stack spilled_completions{nullptr, 0, 0};
constinit thread_local bool spill_guard_gone = false;

struct spill_guard {
  spill_guard() = default;
  spill_guard(const spill_guard&) = delete;
  spill_guard& operator=(const spill_guard&) = delete;
  ~spill_guard() {
    std::free(spilled_completions.items);
    spilled_completions = {nullptr, 0, 0};  // a later spill allocates again; emptied, it is freed
    spill_guard_gone = true;
  }
};

void spill_stack::grow() noexcept {
  if (items == nullptr && !spill_guard_gone) {
    thread_local spill_guard guard;  // constructed once: frees the storage at thread exit
    (void)guard;
  }
  std::size_t bigger = capacity == 0 ? 64 : capacity * 2;
  auto* moved = static_cast<std::uintptr_t*>(std::realloc(items, bigger * sizeof(std::uintptr_t)));
  if (moved == nullptr) std::terminate();  // as a throwing push_back in this noexcept path would
  items = moved;
  capacity = bigger;
}
}  // namespace

void ready_loop::completed(task_base* task, bool drop_reference) noexcept {
  std::uintptr_t tagged = reinterpret_cast<std::uintptr_t>(task) | (drop_reference ? 1u : 0u);
  if (!spilled_ && queued_here_ < inline_capacity) {
    queued_[queued_here_++] = tagged;
    return;
  }
  if (!spilled_) {
    spill_base_ = spilled_completions.size;
    spilled_ = true;
  }
  spilled_completions.push(tagged);
}

std::uintptr_t ready_loop::take_newest() noexcept {
  if (spilled_) {
    std::uintptr_t newest = spilled_completions.pop();
    spilled_ = spilled_completions.size > spill_base_;
    if (spilled_completions.size == 0 && spill_guard_gone) {  // past the guard: nothing frees it later
      std::free(spilled_completions.items);
      spilled_completions = {nullptr, 0, 0};
    }
    return newest;
  }
  return queued_[--queued_here_];
}

void ready_loop::drain_queued() noexcept {
  while (queued_here_ != 0 || spilled_) {
    std::uintptr_t tagged = take_newest();
    auto* task = reinterpret_cast<task_base*>(tagged & ~std::uintptr_t{1});
    finish(task);
    if (task->kind() != task_kind::queued) drop_reference(task);  // the system's: events and inline tasks end here
    if ((tagged & 1u) != 0) drop_reference(task);
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
    switch (in_order->kind) {
      case edge_kind::prerequisite:
      case edge_kind::pipe:
        // Cheap checks first, here: a waiter's loop has no slot, and most edges of a task
        // with several prerequisites are not its last.
        if (next_slot_ == nullptr || next_slot_->task != nullptr || !subsequent->state.looks_like_last_lock() ||
            !began_as_last_unlock(subsequent)) {
          // Nothing here holds a reference to the subsequent: once the lock goes, another
          // thread may remove the last one, run it and free it. So whether it is piped is
          // read first, while the lock still keeps it (a piped task left with only its pipe's
          // lock cannot run: that lock is this thread's to remove, in join_pipe).
          bool piped = subsequent->extras != nullptr && subsequent->extras->pipe != nullptr;
          const unlock_outcome left = subsequent->state.remove_locks();
          if (left == unlock_outcome::ready) {
            ready(subsequent);
          } else if (left == unlock_outcome::one_lock_left && piped) {
            join_pipe(subsequent);
          }
        }
        break;
      case edge_kind::nested:
        hand_on_exception(in_order->prerequisite, subsequent);  // before the part: the parent may complete by it
        if (end_part_of(subsequent) == part_outcome::finished) {
          completed(subsequent, true);  // the edge's reference goes after its completion
        } else {
          drop_reference(subsequent);
        }
        break;
      case edge_kind::any:
        if (!subsequent->set_flag(triggered)) lock_released(subsequent, subsequent->state.remove_locks());
        drop_reference(subsequent);
        break;
    }
    in_order = next;
  }
}

void ready_loop::finish(task_base* task) noexcept {
  tracing::trace_point(tracing::task, event_kind::task_completed, task);
  if (task->kind() == task_kind::event && claim_prerequisites(task)) drop_prerequisite_references(task);
  if (task->extras != nullptr) settle_extras(task);
  // Closing makes every later push_if_not_closed fail: from here on the task is complete.
  task_edge* newest_first = nobody_can_add_subsequents(task) ? task->subsequents.close_unshared()
                                                             : task->subsequents.close();
  // After close: pairs with the waiter's flag-then-check. Before the subsequents are
  // released: an inline one runs here, for as long as it likes, and the task is complete.
  if (waiter_flagged(task)) waiters_of(task).notify_all();
  release_subsequents(newest_first);
  if (task->extras != nullptr && task->extras->pipe != nullptr) pipe_access::task_finished(*task->extras->pipe, task);
}

}  // namespace magpie::detail
