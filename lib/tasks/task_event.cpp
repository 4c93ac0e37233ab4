// Task events: creation, late prerequisites, trigger.
#include "task_internal.h"

#include <magpie/diagnostics.h>
#include <magpie/task_event.h>

#include <string>

namespace magpie {

task_event::task_event(const char* name) : task_event(name, detail::scheduler_for_free_functions()) {}

task_event::task_event(const char* name, scheduler& owner) : task<>(detail::event_task::create()) {
  detail::initialise(base_, name, detail::task_kind::event, owner, priority::normal, detail::target_none);
}

void task_event::add(const detail::prerequisite_buffer& more) {
  if (base_ == nullptr) {
    detail::report_invalid("add_prerequisites");
    return;
  }
  if (base_->has_flag(detail::triggered)) {
    report(diagnostic_kind::misuse, std::string("task event '") + base_->name +
                                        "': prerequisites added after trigger(); ignored");
    return;
  }
  if (more.size() == 0) return;
  base_->ensure_extras();  // where the event keeps its groups
  detail::add_prerequisites(base_, more.data(), more.size(), detail::edge_group::create_alone(more.size()));
}

void task_event::trigger() noexcept {
  if (base_ == nullptr) {
    detail::report_invalid("trigger");
    return;
  }
  detail::trigger(base_);
}

}  // namespace magpie
