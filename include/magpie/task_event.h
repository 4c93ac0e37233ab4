// Layer 3 — task events: tasks without a body, completed by trigger().
//
//   magpie::task_event loaded("assets loaded");
//   auto start = magpie::launch("start level", [] { ... }, magpie::prerequisites(loaded));
//   ...
//   loaded.trigger();   // any thread, any number of times: the first one counts
//
// An event completes once it is triggered and its own prerequisites have completed. It is
// a handle like task<> (wait, is_completed, usable as a prerequisite or a nested task) and
// never occupies a worker. Dropping the last handle of an untriggered event that tasks
// wait for is reported: those tasks can never run.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/task.h>

namespace magpie {

// task_event is a task that completes when triggered.
class task_event : public task<> {
 public:
  // task_event belongs to the calling task's scheduler, else the calling named thread's,
  // else the default scheduler; or to `owner`.
  explicit task_event(const char* name);
  task_event(const char* name, scheduler& owner);

  // add_prerequisites makes the event wait for more tasks: handles or ranges of them.
  // Only before trigger(), and not concurrently with itself.
  template <prerequisite_source... Sources>
  void add_prerequisites(const Sources&... sources) {
    (add(detail::prerequisite_buffer(sources)), ...);
  }

  // trigger lets the event complete (once its prerequisites have). Idempotent; any thread.
  void trigger() noexcept;

 private:
  void add(const detail::prerequisite_buffer& more);
};

}  // namespace magpie
