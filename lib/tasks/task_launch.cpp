// Making and launching tasks: a task's name and owner, its prerequisites, its launch
// (alone, behind prerequisites, into a pipe) and an event's trigger.
#include "task_internal.h"
#include "../scheduler/task_census.h"

#include <magpie/diagnostics.h>
#include <magpie/task.h>

#include <string>

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

}  // namespace

void initialise(task_base* task, const char* name, task_kind kind, scheduler& owner, priority task_priority,
                std::uint8_t target) noexcept {
  task->name = name != nullptr ? name : "";
  task->tag = static_cast<std::uint8_t>((task->tag & task_base::has_own_group) | work_item::is_task |
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
  const edge_kind kind = task->kind() == task_kind::inline_run ? edge_kind::inline_prerequisite : edge_kind::prerequisite;
  std::uint32_t already_complete = 0;
  for (std::size_t i = 0; i < count; ++i) {
    task_edge* edge = new (group->edges() + i) task_edge();
    edge->subsequent = task;
    edge->kind = kind;
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
    add_reference_inline(prerequisite);  // kept until this task starts
    if (!push_subsequent(prerequisite, edge)) ++already_complete;
  }
  return already_complete;
}

// link_only_prerequisite is link_prerequisites for a new task that is not an event and has
// one prerequisite (a continuation, a chain's link): 1 when the prerequisite is complete or
// invalid, a lock the caller still has to remove. `handed`: see launch_behind.
std::uint32_t link_only_prerequisite(task_base* task, task_base* prerequisite, task_edge* slot,
                                     task_base** handed) noexcept {
  task_edge* edge = new (slot) task_edge();
  edge->subsequent = task;
  edge->kind = task->kind() == task_kind::inline_run ? edge_kind::inline_prerequisite : edge_kind::prerequisite;
  if (prerequisite == nullptr) return 1;  // an invalid handle counts as completed
  edge->prerequisite = prerequisite;
  // Kept until this task starts: the handed handle's reference, else one of its own.
  const bool hand_over = handed != nullptr && can_hand_handle_to_edge(prerequisite);
  if (hand_over && prerequisite->kind() == task_kind::inline_run) {
    // The edge keeps the handle itself, counted as a handle, and the push tags the list:
    // no read-modify-write to uncount the handle, and the completer, which finds the tag in
    // its own list word, still closes the list with a plain store (close_subsequents).
    // Nothing here looks at the prerequisite after the push, which is what lets the handle
    // go at once: once pushed, the prerequisite may complete, run this task and be freed. (An
    // inline task is never taken back off a deque, so it never finishes open, and
    // push_subsequent's look after the push has nothing to find.)
    edge->holds_handle = true;
    if (prerequisite->subsequents.push_if_not_closed(edge, true)) {
      *handed = nullptr;
      return 0;
    }
    // Complete already: as below, the handle stays with the launcher.
    edge->holds_handle = false;
    add_reference_inline(prerequisite);
    return 1;
  }
  if (!hand_over) add_reference_inline(prerequisite);
  if (push_subsequent(prerequisite, edge)) {
    if (hand_over) {
      *handed = nullptr;
      hand_handle_to_edge(prerequisite);  // after the push: see task_base.h, "Who frees a task"
    }
    return 0;
  }
  // Complete already: the handle stays with the launcher, which holds the task while an
  // inline body reads it here (the edge's own reference goes as the body starts).
  if (hand_over) add_reference_inline(prerequisite);
  return 1;
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

void launch_behind(task_base* task, task_base* const* prerequisites, std::size_t count, edge_group* group,
                   task_base** handed) noexcept {
  // The prerequisites' locks stand in for the launch lock: the task cannot become ready
  // before the last of them goes, and the ones found complete are removed only at the end.
  trace_launch(task, prerequisites, count);
  task->state.replace_launch_lock(static_cast<std::uint32_t>(count), exclusive_access);
  std::uint32_t already_complete = count == 1 ? link_only_prerequisite(task, prerequisites[0], group->edges(), handed)
                                              : link_prerequisites(task, prerequisites, count, group);
  chaos::point(chaos::site::task_launch);
  if (already_complete == 0) return;  // the last prerequisite to complete makes it ready
  ready_loop loop(nullptr);
  loop.lock_released(task, task->state.remove_locks(already_complete));
  loop.drain();
}

// --- launch, trigger ---------------------------------------------------------------------

void enter_pipe(task_base* task, magpie::pipe* into) noexcept {
  ensure_extras_inline(task).pipe = into;
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
      enqueue_ready(task);
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

scheduler& scheduler_for_free_functions() noexcept {
  if (scheduler* current = scheduler::current()) return *current;
  return default_scheduler();
}

}  // namespace magpie::detail
