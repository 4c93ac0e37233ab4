// wait_all / wait_any / when_all / when_any.
#include "task_internal.h"

#include <magpie/wait.h>

namespace magpie::detail {

namespace {

// scheduler_of_inputs is the scheduler of the first input whose scheduler lives: a thread
// waiting for the event stands in for that scheduler's threads when it has none (it helps
// there), not for the default scheduler's.
scheduler& scheduler_of_inputs(const prerequisite_buffer& inputs) noexcept {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (task_base* input = inputs.data()[i]) {
      scheduler::impl* owner = owner_of(input);
      if (!scheduler_slot::is_retired(owner)) return owner->facade;
    }
  }
  return scheduler_for_free_functions();
}

task_base* new_event(const char* name, const prerequisite_buffer& inputs) {
  event_task* event = event_task::create();
  initialise(event, name, task_kind::event, scheduler_of_inputs(inputs), priority::normal, target_none);
  return event;
}

}  // namespace

task<> when_all(const prerequisite_buffer& inputs) {
  task_base* event = new_event("when_all", inputs);
  task<> handle = task_access::adopt(event);
  if (inputs.size() != 0) {
    event->ensure_extras();  // where the event keeps its groups
    add_prerequisites(event, inputs.data(), inputs.size(), edge_group::create_alone(inputs.size()));
  }
  trigger(event);
  return handle;
}

task<> when_any(const prerequisite_buffer& inputs) {
  task_base* event = new_event("when_any", inputs);
  task<> handle = task_access::adopt(event);
  if (inputs.size() == 0) {
    trigger(event);
    return handle;
  }
  // The edges hold a reference to the event, not to the inputs: the event lives until
  // every input has completed and let go of its edge.
  task_extras& extras = event->ensure_extras();  // first: if the group cannot be made, nothing leaks
  edge_group* group = edge_group::create_alone(inputs.size());
  group->next = extras.owned;
  extras.owned = group;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    task_edge* edge = new (group->edges() + i) task_edge();
    edge->subsequent = event;
    edge->kind = edge_kind::any;
    task_base* input = inputs.data()[i];
    if (input == nullptr) {  // an invalid handle counts as completed
      trigger(event);
      continue;
    }
    add_reference(event);
    if (!push_subsequent(input, edge)) {
      trigger(event);
      drop_reference(event);
    }
  }
  return handle;
}

std::optional<std::size_t> wait_any(const prerequisite_buffer& inputs,
                                    const std::chrono::steady_clock::time_point* deadline) {
  auto first_completed = [&]() -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      task_base* input = inputs.data()[i];
      if (input == nullptr || input->is_completed()) return i;
    }
    return std::nullopt;
  };
  if (inputs.size() == 0) return std::nullopt;
  if (auto done = first_completed()) return done;
  // As wait does: an input that has not started runs here (after what it waits for). Where
  // nobody else would run it (no workers), this is how any of them completes at all.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    task_base* input = inputs.data()[i];
    if (!is_running_here(input) && retract(input, 0) && input->is_completed()) return i;
  }
  task<> any = when_any(inputs);
  if (!wait(task_access::base(any), deadline)) return std::nullopt;
  return first_completed();
}

}  // namespace magpie::detail
