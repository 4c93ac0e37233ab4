// Pipes: the pipe's own state. How piped tasks join the chain is in task.cpp
// (ready_loop::join_pipe); see include/magpie/pipe.h.
#include "task_internal.h"

#include <magpie/diagnostics.h>
#include <magpie/pipe.h>

#include <string>

namespace magpie {

pipe::pipe(const char* name) : pipe(name, detail::scheduler_for_free_functions()) {}

pipe::pipe(const char* name, scheduler& owner) : name_(name != nullptr ? name : ""), owner_(&owner) {}

pipe::~pipe() {
  // acquire: pairs with task_finished's release, so the tasks' effects are visible
  std::int64_t unfinished = unfinished_.load(std::memory_order_acquire);
  if (unfinished != 0) {
    report(diagnostic_kind::misuse, std::string("pipe '") + name_ + "' destroyed with " +
                                        std::to_string(unfinished) + " unfinished tasks; waiting for them");
    wait_until_empty();
  }
}

bool pipe::has_work() const noexcept {
  return unfinished_.load(std::memory_order_acquire) != 0;  // acquire: pairs with task_finished's release
}

bool pipe::is_in_context() const noexcept { return detail::current_pipe() == this; }

bool pipe::wait_until(const std::chrono::steady_clock::time_point* deadline) noexcept {
  scheduler::impl& pool = detail::scheduler_access::of(*owner_);
  for (;;) {
    if (!has_work()) return true;
    if (pool.workers.empty() && owner_->try_run_one()) continue;  // nobody else runs the tasks
    auto key = emptied_.prepare_wait();
    if (!has_work()) {
      emptied_.cancel_wait();
      return true;
    }
    blocking_scope blocked;
    if (deadline == nullptr) {
      emptied_.commit_wait(key);
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= *deadline) {
      emptied_.cancel_wait();
      return !has_work();
    }
    emptied_.commit_wait_for(key, std::chrono::duration_cast<std::chrono::nanoseconds>(*deadline - now));
  }
}

namespace detail {

void pipe_access::task_added(magpie::pipe& p) noexcept {
  p.unfinished_.fetch_add(1, std::memory_order_relaxed);  // relaxed: the launcher itself is not waiting
}

void pipe_access::task_finished(magpie::pipe& p, task_base* task) noexcept {
  task_base* expected = task;
  // acq_rel: as join_pipe's exchange — emptying the slot takes back its reference
  if (p.last_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed)) {
    release(task);
  }
  // acq_rel: a waiter that reads zero sees every piped task's effects
  if (p.unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) p.emptied_.notify_all();
}

}  // namespace detail
}  // namespace magpie
