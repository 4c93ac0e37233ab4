// Waiting for a task (docs/tasks.md, "Waiting"; the steps in order: docs/scheduler.md, "The
// wait protocol"). After its first take-back (lib/tasks/wait_retraction.cpp) a wait loops: the
// launch-order run where it applies, retraction, its waiter policy's help, a brief spin, then
// a block that retries all of it whenever the task is scheduled or woken.
#include "held_runs.h"
#include "wait_internal.h"

#include <magpie/diagnostics.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace magpie::detail {

namespace {

// spin_checks is how many times a waiter looks at the task before it blocks: a few
// microseconds, less than a futex sleep and wake-up cost.
constexpr int spin_checks = 64;

// last_thread_standing says that this is a pool thread which, if it blocked, would leave
// every thread of its kind blocked with no standby left to start, whichever scheduler the
// task it waits for is of (an event of another scheduler, triggered by work queued on this
// one, say). Its pool's ready work would then wait for ever, so it helps with that work
// instead, though the work may, in the worst case, wait for the body beneath it (the false
// dependency helping otherwise avoids): that stalls only that case, where blocking would
// stall every case. Within twice the usual depth, so that its stack stays bounded.
bool last_thread_standing() noexcept {
  const thread_context& context = this_thread_context();
  if (context.self == nullptr) return false;
  if (tasks_tls.innermost_running != nullptr && tasks_tls.innermost_running->depth >= 2 * max_running_depth) return false;
  return context.owner->would_stall(*context.self);
}

// nap_scope marks a pool thread's block as a nap while it lives, so that the nap's end does
// not count as the pool's progress (scheduler::impl::others_unblocked): threads napping side
// by side would otherwise see each other's naps end and never find the pool stuck.
class nap_scope {
 public:
  explicit nap_scope(bool napping) noexcept : self_(napping ? this_thread_context().self : nullptr) {
    if (self_ != nullptr) self_->napping = true;
  }
  ~nap_scope() {
    if (self_ != nullptr) self_->napping = false;
  }
  nap_scope(const nap_scope&) = delete;
  nap_scope& operator=(const nap_scope&) = delete;

 private:
  worker* self_;
};

// stuck_pool_help marks, while it lives, the bodies this thread runs from here on as run by
// the last thread standing of a stuck pool (tasks_thread_state::stuck_help_depth).
class stuck_pool_help {
 public:
  stuck_pool_help() noexcept : outer_(tasks_tls.stuck_help_depth) {
    const running_frame* innermost = tasks_tls.innermost_running;
    tasks_tls.stuck_help_depth = innermost != nullptr ? innermost->depth : 0;
  }
  ~stuck_pool_help() { tasks_tls.stuck_help_depth = outer_; }
  stuck_pool_help(const stuck_pool_help&) = delete;
  stuck_pool_help& operator=(const stuck_pool_help&) = delete;

 private:
  unsigned outer_;
};

// Waiter policies. Between retractions a wait may run other work only where that is the way
// forward and makes no false dependency (a body helped onto the stack above another body
// could wait for that one, which cannot go on until it returns: docs/scheduler.md, "Waiting
// inside a task"). Who waits decides what that is, and how the wait blocks:
//   pool_worker   a worker or standby thread: helps only as the last thread standing of its
//                 scheduler (above); blocks inside a blocking_scope, so a standby takes its
//                 place.
//   named_thread  a thread attached as a named thread: first runs one item of its own
//                 queues (work only it may run may be what the wait needs), a queue an outer
//                 call on this thread is processing included (run_own_item), but nothing of
//                 its deque while the scheduler has workers: they run that, and a task run
//                 under the wait could block on what this thread does after it (an event it
//                 triggers next); a task bound to it needs nothing more on a scheduler with
//                 workers (retraction ran it if it could; what holds it open, workers run);
//                 blocked, a send to its queues wakes it.
//   outside       any other thread (of no scheduler, or of another one): helps with nothing
//                 of its own.
// And on a scheduler without workers, any of them that runs no task body helps with the
// scheduler's queued work (nobody else will run it), and its blocks are naps after which it
// helps again (no_worker_nap): the workerless policy.
enum class waiter_role : std::uint8_t { pool_worker, named_thread, outside };

// may_reenter_own_queue: a named thread's wait may run an item of a queue that an outer call
// on this thread is processing (process_until_idle, or the item a wait of its own runs):
// only the attached thread claims its queues, so a claimed one is this thread's, and a wait
// that passed it over could wait for ever for what lies there (a coroutine's resumption
// sent back to this thread). Each such item runs above the waiting body, so this stops at
// max_running_depth bodies on the stack; past that the wait blocks.
bool may_reenter_own_queue() noexcept {
  return tasks_tls.innermost_running == nullptr || tasks_tls.innermost_running->depth < max_running_depth;
}

// run_own_item runs one item of named thread `index`'s queues (or, without workers, its
// deque), in the order run_one_named_item looks, then of a queue this thread is processing
// further down its stack (may_reenter_own_queue); whether it ran one. On the attached
// thread only.
bool run_own_item(scheduler::impl& owner, std::uint32_t index) noexcept {
  if (owner.run_one_named_item(index)) return true;
  if (!may_reenter_own_queue()) return false;
  for (named_queue& source : owner.named[index].queues) {
    // relaxed: this thread's own flag; run_one_named_item looked at the unclaimed queues
    if (!source.processing.load(std::memory_order_relaxed)) continue;
    work_item* item = source.high.try_pop();
    if (item == nullptr) item = source.normal.try_pop();
    if (item != nullptr) {
      owner.execute(item, nullptr);
      return true;
    }
  }
  return false;
}

// own_queues_have_work says whether run_own_item would find a queued item (its deque aside,
// which a blocked waiter's re-check does not look at: without workers it naps). On the
// attached thread only.
bool own_queues_have_work(const named_thread_state& state) noexcept {
  if (state.has_work_to_run()) return true;
  if (!may_reenter_own_queue()) return false;
  for (const named_queue& each : state.queues) {
    if (!each.high.looks_empty() || !each.normal.looks_empty()) return true;
  }
  return false;
}

class waiter_policy {
 public:
  waiter_policy() noexcept : context_(this_thread_context()) {
    // A thread left attached to a scheduler since destroyed is detached, with a report,
    // before the wait reads that scheduler's queues.
    if (context_.named >= 0) drop_dead_attachment();
  }

  // role is who waits, read afresh each time: a body the wait runs may attach or detach.
  waiter_role role() const noexcept {
    if (context_.named >= 0) return waiter_role::named_thread;
    return context_.self != nullptr ? waiter_role::pool_worker : waiter_role::outside;
  }

  // help runs other work for the wait for `task`, as the policies above allow; returns
  // whether it ran something. `owner`, the task's scheduler, is pinned by the caller.
  bool help(const task_base* task, scheduler::impl* owner) noexcept {
    spill_held_runs();  // what this thread holds aside is work to find too (lib/tasks/held_runs.h)
    if (role() == waiter_role::named_thread) {
      // Its scheduler lives: it is attached.
      if (run_own_item(*context_.owner, named_index())) return true;
    }
    // Without workers nobody else runs what the task still needs, bound to this thread or
    // not: a body that ran here may hold it open for any-thread work (nested, dont_complete_until).
    if (is_workerless(owner)) return owner->facade.try_run_one();
    if (role() == waiter_role::named_thread && task->target != target_none && context_.owner == owner &&
        context_.named == static_cast<int>(task->target >> 2u)) {
      return false;
    }
    if (last_thread_standing()) return help_stuck_pool(context_.owner);
    return false;
  }

  // stall_after is how long this wait for `owner`'s task may go without progress before it
  // is reported: the setting of the scheduler this thread works for (a worker, an attached
  // thread, one inside execute), whichever scheduler the task is of (a promise's value lives
  // on a scheduler of its own); on any other thread, that of the task's scheduler.
  std::chrono::milliseconds stall_after(const scheduler::impl* owner) const noexcept {
    return context_.owner != nullptr ? context_.owner->stall_after : owner->stall_after;
  }

  // naps says whether this wait's blocks on `owner`'s task are naps, the loop helping after
  // each: without workers, or as the last thread standing.
  bool naps(scheduler::impl* owner) const noexcept { return owner->workers.empty() || last_thread_standing(); }

  // own_queues is the named-thread state whose sends must wake this waiter when it blocks
  // (its wait runs their work), else nullptr.
  named_thread_state* own_queues() const noexcept {
    return role() == waiter_role::named_thread ? &context_.owner->named[static_cast<std::size_t>(context_.named)] : nullptr;
  }

  // run_own_queue_item runs one item of a named thread's own queues, found waiting there
  // just before it would block (even when help did not look: the task's scheduler is gone).
  void run_own_queue_item() const noexcept { run_own_item(*context_.owner, named_index()); }

 private:
  // is_workerless: the workerless policy applies, from a thread running no task body.
  static bool is_workerless(const scheduler::impl* owner) noexcept {
    return owner->workers.empty() && tasks_tls.innermost_running == nullptr;
  }
  std::uint32_t named_index() const noexcept { return static_cast<std::uint32_t>(context_.named); }

  // help_stuck_pool runs queued work as the last thread standing, but only once no other
  // thread of the pool has left a blocked wait for stuck_after. Blocked threads that are
  // merely slow to wake (a chain of waits unwinding one wake-up at a time, on fewer cores
  // than threads) get going by themselves, while a body helped onto this stack could wait
  // for the one beneath it. Meanwhile the wait naps.
  bool help_stuck_pool(scheduler::impl* owner) noexcept {
    const auto now = std::chrono::steady_clock::now();
    std::uint64_t unblocked = owner->others_unblocked(*context_.self);
    if (std::exchange(unblocked_at_last_look_, unblocked) != unblocked) {
      progress_seen_at_ = now;
      return false;
    }
    if (now - progress_seen_at_ < stuck_after) return false;
    stuck_pool_help marked;
    return owner->facade.try_run_one();
  }

  static constexpr std::chrono::milliseconds stuck_after{10};

  const thread_context& context_;
  // unblocked_at_last_look_ is how many blocked waits the pool's other threads had left when
  // this wait last looked as the last thread standing (none at first), and progress_seen_at_
  // when that count last moved.
  std::uint64_t unblocked_at_last_look_ = ~std::uint64_t{0};
  std::chrono::steady_clock::time_point progress_seen_at_{};
};

// unattached_named_thread is a named thread of `owner` that no thread has attached and whose
// work a wait may need: `target`, the one the awaited task is bound to, or (target_none)
// one with work queued (a coroutine's resumption there, a piped task bound there); -1 if none.
int unattached_named_thread(std::uint32_t target, const scheduler::impl& owner) noexcept {
  if (target == target_none) return owner.unattached_with_work();
  auto index = target >> 2u;
  // acquire: pairs with attach's exchange (a thread attached since is seen attached); a
  // stale look only delays the report by one relook
  return owner.named[index].attached.load(std::memory_order_acquire) ? -1 : static_cast<int>(index);
}

// report_unattached reports a wait for `task` that needs named thread `index`, which no
// thread has attached.
[[gnu::cold, gnu::noinline]] void report_unattached(const task_base* task, std::uint32_t index) {
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

// report_stalled_wait reports a wait for `task` that has blocked `waited_ms` without it
// completing (scheduler_options::stall_report_after).
[[gnu::cold, gnu::noinline]] void report_stalled_wait(const task_base* task, long long waited_ms) noexcept {
  std::string bound = task->target != target_none ? " (it runs on the " + named_thread_name(task->target >> 2u) + " thread)" : "";
  report(diagnostic_kind::stalled,
         std::string("task '") + task->name + "'" + bound + " waited for on " + calling_thread_name() +
             " has not completed after " + std::to_string(waited_ms) + " ms; the wait goes on",
         severity::warning);
}

}  // namespace

std::chrono::nanoseconds unattached_look::look(std::uint8_t owner_index, std::uint32_t target,
                                               std::chrono::steady_clock::time_point now) noexcept {
  if (reported_) return std::chrono::nanoseconds::max();
  if (now < next_look_) return next_look_ - now;
  int index = -1;
  {
    scheduler_pin pin(owner_index);  // never held while blocked
    if (pin.get() != nullptr) index = unattached_named_thread(target, *pin.get());
  }
  if (index >= 0) {
    // Seen about to block: reported now (due), once. A thread still starting up that
    // attaches a moment later ends the wait all the same.
    reported_ = true;
    due_ = index;
    return std::chrono::nanoseconds::max();
  }
  // No need seen: look again after a while (work may be queued there while this blocks,
  // and nothing wakes it for that).
  next_look_ = now + scheduler::impl::unattached_relook;
  return scheduler::impl::unattached_relook;
}

bool run_own_named_work() noexcept {
  const thread_context& context = this_thread_context();
  if (context.named < 0) return false;
  return run_own_item(*context.owner, static_cast<std::uint32_t>(context.named));
}

bool wait_until_complete(task_base* task, const std::chrono::steady_clock::time_point* deadline,
                         task_base* const* through, bool launch_order) noexcept {
  // Running the queue in launch order runs bodies unrelated to the task, which may drop its
  // last handle or move the handle waited through (a vector they grow): from then on the
  // wait holds a reference of its own and never reads `through`.
  held_reference hold(launch_order ? task : nullptr);
  if (launch_order) through = nullptr;
  waiter_policy policy;
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
        if (policy.help(task, owner)) {
          nap.helped();
          watch.progressed();
          continue;
        }
        stall_after = policy.stall_after(owner);
        // Without workers, or as the last thread standing, the block is a nap and the loop
        // helps after it.
        napping = policy.naps(owner);
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
    named_thread_state* own_queues = policy.own_queues();
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
    if (completed || (task->state.is_ready() && can_retract_here(task) && !too_deep_to_run_here(task))) {
      events.cancel_wait();
      continue;
    }
    if (own_queues != nullptr && own_queues_have_work(*own_queues)) {
      events.cancel_wait();
      // Run here even when help did not look (the task's scheduler is gone): else this loops.
      policy.run_own_queue_item();
      continue;
    }
    nap_scope nap_mark(napping);  // outlives `blocked`: see nap_scope
    blocking_scope blocked;       // on a worker: a standby worker takes this one's place
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
    left = std::min({left, watch.limit(stall_after, now), unattached.look(task->owner_index, task->target, now)});
    if (int index = unattached.due(); index >= 0) report_unattached(task, static_cast<std::uint32_t>(index));
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
