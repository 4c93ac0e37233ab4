// Private to lib/: what the three parts of a wait share. A wait is one retraction routine
// (lib/tasks/wait_retraction.cpp: follow what the task waits for, take its entry back off this
// thread's deque, run it here) inside one loop (lib/tasks/task_wait.cpp) whose steps between
// retractions depend on who waits, its waiter policy; wait_all and the launch-order rule of
// schedulers without workers (lib/tasks/wait_launch_order.cpp) plug into both. docs/scheduler.md,
// "The wait protocol", lists the steps in order.
#pragma once

#include "deque_owner_view.h"
#include "held_runs.h"
#include "task_internal.h"

#include <chrono>
#include <optional>
#include <utility>

namespace magpie::detail {

// max_retraction_depth bounds the recursion through prerequisites and nested tasks (each
// level runs a body on this stack).
inline constexpr unsigned max_retraction_depth = 128;

// max_running_depth bounds how many bodies a thread runs on its stack at once through
// retraction (~1 KiB of magpie's frames each, plus the bodies' own): past it the wait blocks
// instead, and another thread runs the task (a standby worker, created past the cap when
// every worker is blocked: lib/scheduler/scheduler.cpp). Only where another thread will:
// see too_deep_to_run_here.
inline constexpr unsigned max_running_depth = 256;

using task_deque = work_stealing_deque<work_item*>;

// leaves_deep_work_to_others: running `depth` bodies on its stack, the calling thread leaves
// `task` to other threads. A pool thread does past max_running_depth (of any scheduler: a
// standby takes its place while it blocks). A thread outside every pool does once a quarter
// of its stack is all that is left, while `task`'s scheduler has workers: a chain of waits
// from `main` runs on `main`'s stack as deep as that stack allows, and the workers take the
// rest. A named thread never does (work bound to it runs nowhere else), nor a thread waiting
// on a scheduler without workers: retraction is then the only way the work runs.
bool leaves_deep_work_to_others(const task_base* task, unsigned depth) noexcept;

// stack_look_depth is how many bodies a thread runs on its stack before a wait there asks
// whether to leave its task to others: few enough that a thread outside the pool with a
// small stack looks in time (a sanitizer's frames are several times larger).
inline constexpr unsigned stack_look_depth = 32;

// too_deep_to_run_here: this thread already runs enough bodies on its stack to leave `task`
// to others (leaves_deep_work_to_others).
inline bool too_deep_to_run_here(const task_base* task) noexcept {
  return tasks_tls.innermost_running != nullptr && tasks_tls.innermost_running->depth >= stack_look_depth &&
         leaves_deep_work_to_others(task, tasks_tls.innermost_running->depth);
}

// can_retract_here: a task bound to a named thread runs only on that thread; a task whose
// scheduler is gone never runs (it completes as never run once ready: ready_loop).
bool can_retract_here(const task_base* task) noexcept;

// waiter_deque is the one place that finds the deque a waiting thread's own launches onto a
// task's scheduler went to, the deque its take-backs look at: the thread's own deque when it
// is a worker or attached thread of that scheduler (no pin needed: the scheduler outlives its
// threads); for a thread of no scheduler, the deque that scheduler lent it
// (lib/scheduler/lent_deques.cpp), with the scheduler pinned for as long as this lives; none for a
// thread of another scheduler, or when the scheduler is gone.
class waiter_deque {
 public:
  explicit waiter_deque(const task_base* task) noexcept {
    const thread_context& context = this_thread_context();
    if (context.owner != nullptr) {
      if (context.owner == owner_of(task)) {
        owner_ = context.owner;
        deque_ = context.deque;  // none on a standby worker
      }
      return;
    }
    pin_.emplace(task->owner_index);
    owner_ = pin_->get();
    if (owner_ != nullptr) deque_ = owner_->borrowed_deque();
  }
  waiter_deque(const waiter_deque&) = delete;
  waiter_deque& operator=(const waiter_deque&) = delete;

  // deque is the deque found, or nullptr.
  task_deque* deque() const noexcept { return deque_; }
  // owner is the task's scheduler, alive while this lives, when a deque was found.
  scheduler::impl* owner() const noexcept { return owner_; }

 private:
  std::optional<scheduler_pin> pin_;
  scheduler::impl* owner_ = nullptr;
  task_deque* deque_ = nullptr;
};

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

// run_taken_back runs a task whose queue entry this thread took back off its own deque,
// unless another waiter began it first, and disposes of the queue's reference that came
// with the entry. `open`: finish it without closing its subsequent list where it can
// (retract's finish_open). True when the task is complete or ran here.
bool run_taken_back(task_base* task, unsigned depth, task_base* const* through, bool open = true) noexcept;

// run_held_run runs the entries of `held` (wait_all's run: `taken[i]`, the task of the
// handle `handles[i]`) one by one, each as run_taken_back, until each ran or the rest were
// spilled.
void run_held_run(held_run& held, work_item* const* taken, task_base* const* const* handles) noexcept;

// is_stale_task says whether `item`, taken off this thread's deque, is the entry of a task
// that has already begun (claimed where it lay, by this thread or another: lib/tasks/wait_retraction.cpp,
// "Stale entries"); drop_stale drops such an entry's reference, as a worker popping it would.
bool is_stale_task(work_item* item) noexcept;
void drop_stale(work_item* item) noexcept;

// at_top_level: this thread runs no body, item or help of any scheduler, and holds no work
// out of the queues (thread_context::holding). (A task_group child run by its joiner leaves
// nothing beneath that matters: it was the newest entry when popped, so whatever lies above
// it was queued from inside it.)
inline bool at_top_level() noexcept {
  const thread_context& context = this_thread_context();
  return tasks_tls.innermost_running == nullptr && context.running == 0 && context.helping == 0 && context.holding == 0;
}

// in_launch_order_here: a wait on `owner`'s task from this thread runs its queue in launch
// order (lib/tasks/wait_launch_order.cpp, "Launch order without workers"): its scheduler has no
// workers and the thread is at top level. `owner` is this thread's scheduler or pinned. Not
// after a held run was spilled, until this thread's wait_alls return (lib/tasks/held_runs.h): its
// entries went back on top of newer ones. Inline: every wait's first take-back asks.
inline bool in_launch_order_here(const scheduler::impl* owner) noexcept {
  const thread_context& context = this_thread_context();
  bool no_workers = context.owner == owner ? context.self == nullptr && !context.wakes_workers : owner->workers.empty();
  return no_workers && at_top_level() && !tasks_tls.spilled_in_wait_all;
}

// run_in_launch_order is a wait's step in launch order for `task`, whose scheduler has no
// workers, from a thread at top level: rounds of run_queued_before (lib/tasks/wait_launch_order.cpp)
// for as long as each runs something and the task is not complete. Nothing when it did not
// find the task queued here, else what run_taken_back says. It stops once `deadline` (if
// any) has passed; `ran_any` says whether its last round ran anything.
std::optional<bool> run_in_launch_order(task_base* task, const std::chrono::steady_clock::time_point* deadline,
                                        bool& ran_any) noexcept;

// unattached_look follows, over one wait about to block, whether it needs a named thread
// that no thread has attached (lib/tasks/task_wait.cpp): such a wait would go on until one
// attaches, so it is reported as soon as the need is seen, once.
class unattached_look {
 public:
  // look says how long the coming block may last before the next look (max: no more
  // looks), for a wait on work of the scheduler in slot `owner_index` bound to `target`
  // (target_none: any work queued on an unattached named thread counts); then due says
  // which named thread to report.
  std::chrono::nanoseconds look(std::uint8_t owner_index, std::uint32_t target,
                                std::chrono::steady_clock::time_point now) noexcept;
  // due is the index of the unattached named thread the last look found the wait needs,
  // once (then -1 for good).
  int due() noexcept { return std::exchange(due_, -1); }

 private:
  bool reported_ = false;
  int due_ = -1;
  std::chrono::steady_clock::time_point next_look_{};
};

// run_own_named_work runs, on a thread attached as a named thread, one item of its own
// queues as the named-thread waiter policy does (lib/tasks/task_wait.cpp), a queue
// it is processing further down its stack included; whether it ran one. False on any other
// thread.
bool run_own_named_work() noexcept;

// wait_until_complete is wait() past its first take-back: the loop of retraction, the
// waiter's policy steps, a spin and a block, until `task` completes or `deadline` passes.
// `launch_order`: the first take-back found that this wait runs its queue in launch order.
bool wait_until_complete(task_base* task, const std::chrono::steady_clock::time_point* deadline,
                         task_base* const* through, bool launch_order) noexcept;

}  // namespace magpie::detail
