// Task memory and references: the extras and edge blocks, handles and references, the
// destruction that the last of them to go performs, and the report of a call made through
// an invalid handle.
#include "task_internal.h"
#include "../scheduler/task_census.h"

#include <magpie/diagnostics.h>

#include <exception>
#include <string>

namespace magpie::detail {

namespace {

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

// only_abandoned_coroutines_wait: every task waiting for the untriggered `event`, whose
// last handle is gone, resumes a coroutine its scheduler's shutdown abandoned. Triggering it
// then runs nothing, and frees them and it. Without handles nobody can push to its list,
// and nobody can complete it: the walk is safe.
bool only_abandoned_coroutines_wait(task_base* event) noexcept {
  for (task_edge* edge = event->subsequents.newest_while_open(); edge != nullptr;
       edge = subsequent_list<task_edge>::next_of(edge)) {
    const bool locks = edge->kind == edge_kind::prerequisite || edge->kind == edge_kind::inline_prerequisite;
    if (!locks || !is_abandoned_resumption(edge->subsequent)) return false;
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

}  // namespace

void destroy_task(task_base* task) noexcept {
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

task_extras& task_base::ensure_extras() { return ensure_extras_inline(this); }

edge_group* edge_group::create_alone(std::size_t count) { return create_edge_group_inline(count); }

void edge_group::destroy_alone(edge_group* group) noexcept { destroy_edge_group_inline(group); }

void add_handle(task_base* task) noexcept {
  task->references.fetch_add(task_base::one_handle, std::memory_order_relaxed);  // relaxed: the copier already holds one
}

// last_handle_duties does what falls to whoever lets go of a task's last handle, while that
// handle still holds the task, and returns how many references besides the handle's own the
// dropper then releases: an untriggered event can no longer be triggered
// (last_handle_dropped); a waiter that ran the task may have left the queue's reference to
// the handles (task_state::leave_reference_to_handles), which goes with the last of them.
// Events are never queued, so the two never meet.
std::uint32_t last_handle_duties(task_base* task) noexcept {
  if (task->kind() == task_kind::event) {
    last_handle_dropped(task);
    return 0;
  }
  return task->state.handles_hold_extra_reference() ? 1 : 0;
}

namespace {

// drop_handle_holding drops a handle and `references` more references the caller holds.
inline void drop_handle_holding(task_base* task, std::uint32_t references) noexcept {
  const std::uint64_t held = task_base::one_handle + references * task_base::one_reference;
  // acquire: pairs with the release half of every other owner's drop. Holding every
  // reference, nobody can add one (that takes a reference), so no write is needed.
  std::uint64_t now = task->references.load(std::memory_order_acquire);
  if (now == held) {
    destroy_task(task);
    return;
  }
  if ((now >> 32) == 1) {
    // The only handle: nobody can make another (copying takes one), so it is the last, and
    // it does the last handle's duties before letting go, then drops its handle and what
    // they gave it in one read-modify-write (or, holding every reference, none).
    std::uint32_t extra = last_handle_duties(task);
    std::uint64_t dropped = held + extra * task_base::one_reference;
    // Seen holding every reference, nobody else can hold one now (never an event here: its
    // handles hold no extra reference, so it was the sole-owner case above).
    if (now == dropped) {
      destroy_task(task);
      return;
    }
    // acq_rel: the last dropper sees every other owner's writes before destroying (the
    // whole word, as drop_reference_inline)
    if (task->references.fetch_sub(dropped, std::memory_order_acq_rel) == dropped) {
      destroy_task(task);
    }
    return;
  }
  // Other handles too: the handle becomes a plain reference, which holds the task while
  // this dropper learns whether its handle was the last after all (the others went
  // meanwhile) and so has the last handle's duties.
  // acq_rel: orders the other handle owners' writes (a trigger, the store of
  // leave_reference_to_handles, both before their handle's drop) before the duties' looks
  std::uint64_t before =
      task->references.fetch_sub(task_base::one_handle - task_base::one_reference, std::memory_order_acq_rel);
  std::uint32_t extra = (before >> 32) == 1 ? last_handle_duties(task) : 0;
  drop_reference(task, 1 + references + extra);
}

}  // namespace

void drop_handle(task_base* task) noexcept { drop_handle_holding(task, 0); }

void drop_handle_and_references(task_base* task, std::uint32_t references) noexcept {
  drop_handle_holding(task, references);
}

void add_reference(task_base* task) noexcept { add_reference_inline(task); }

void drop_reference(task_base* task, std::uint32_t count) noexcept { drop_reference_inline(task, count); }

void drop_prerequisite_references(task_base* task) noexcept {
  for (edge_group* group = prerequisite_groups(task); group != nullptr; group = group->next) {
    for (std::uint32_t i = 0; i < group->count; ++i) {
      task_edge& edge = group->edges()[i];
      task_base* prerequisite = edge.prerequisite;
      if (prerequisite == nullptr) continue;
      if (!edge.holds_handle) {
        drop_reference(prerequisite);
        continue;
      }
      // The handle a launch gave the edge, whose push tagged the prerequisite's list. A
      // waiter may let go of it before the prerequisite completes: the tag goes first, so
      // that the completer never takes it for a handle that is still in the edge. The drop
      // (acq_rel) publishes the clear to the completer's acquire look at the count; if the
      // list moved on (a later push, or close), there is no tag of this edge's to clear.
      // The handle, not yet dropped, keeps the prerequisite alive for the look.
      prerequisite->subsequents.clear_tag(&edge);
      drop_handle(prerequisite);
    }
  }
}

void report_invalid(const char* operation) noexcept {
  report(diagnostic_kind::misuse, std::string("task::") + operation + " called on " + calling_thread_name() +
                                      " with an invalid handle (default-made, moved from or reset)");
}

}  // namespace magpie::detail
