// Fork-join between coroutines: queueing forked children, joining them, and a parent's
// end with children not joined (include/magpie/coroutine_fork.h).
#include "../tasks/held_runs.h"
#include "../tasks/task_internal.h"
#include "thread_state.h"

#include <magpie/coroutine.h>
#include <magpie/diagnostics.h>

#include <string>
#include <thread>

namespace magpie::detail {

namespace {

// run_own_children runs, newest first, the parent's children on top of this thread's deque.
void run_own_children(coro_promise_base& parent) noexcept {
  fork_state& forks = parent.forks;
  scheduler::impl* home = owner_of(parent.owner);
  work_stealing_deque<work_item*>* own = home->own_deque(this_thread_context());
  if (own == nullptr) return;
  while (forks.unjoined != 0) {
    bool pushed_back = false;
    auto mine = own->pop_matching([&parent](work_item* item) { return is_child_of(item, parent); }, pushed_back);
    if (!mine) {
      if (pushed_back) home->wake_for(priority::normal);  // a thief may have found it gone meanwhile
      return;
    }
    run_child_now(parent, *static_cast<fork_item*>(*mine)->child);
    --forks.unjoined;  // run_child_now counted it again
  }
}

// wait_for_children suspends `parent` until its unjoined children finish elsewhere; false
// when they all have already (the parent goes on). `at_return`: it waits at its final
// point, and the last child ends it instead of resuming it.
bool wait_for_children(coro_promise_base& parent, bool at_return) {
  fork_state& forks = parent.forks;
  if (forks.parent == nullptr && !parent.done) {
    // A task's first suspension, so still inside its own run: the event nests in it before
    // anything can resume the coroutine. (May throw: nothing is changed yet.)
    parent.done.emplace(parent.owner->name);
    magpie::add_nested(*parent.done);
  }
  const auto count = static_cast<std::int32_t>(forks.unjoined);
  forks.unjoined = 0;
  bool* finished_inline = forks.finished_inline;
  forks.finished_inline = nullptr;  // suspending: a forked one finishes elsewhere, counted down by `pending`
  forks.returned = at_return;
  // acq_rel: release publishes the writes above to the child whose finish resumes the
  // parent; acquire takes the results of the children that finished before
  if (forks.pending.fetch_add(count, std::memory_order_acq_rel) + count != 0) return true;
  forks.finished_inline = finished_inline;  // not suspended after all: still the runner's to count
  forks.returned = false;
  return false;
}

// helps_while_joining says whether a join on this thread works on its children's subtrees
// while they finish elsewhere, instead of suspending at once. A worker suspends: its loop
// takes the next work. So does an attached named thread, whose waits keep to its own
// queues. Any other thread (a plain `main` that ran the root task its wait took back, or a
// thread running it as a guest of this scheduler) has nothing to go back to but that wait,
// which runs no other work: the coroutine's tree would then run on the workers alone while
// this thread sleeps.
bool helps_while_joining() noexcept {
  const thread_context& context = this_thread_context();
  return !context.pool_thread && context.named < 0;
}

// descends_from says whether a work item is a forked child of `ancestor`, or of one of its
// descendants. Each coroutine on the way up waits for the child below it, so none is gone;
// their parents were set before the children were queued.
bool descends_from(const work_item* item, const coro_promise_base& ancestor) noexcept {
  if (item->name != fork_child_name) return false;
  for (const coro_promise_base* up = static_cast<const fork_item*>(item)->child->forks.parent; up != nullptr;
       up = up->forks.parent) {
    if (up == &ancestor) return true;
  }
  return false;
}

// help_until_joined runs, on this thread, forks of `parent`'s own subtree that wait on the
// deque of the worker that took one of its children (leapfrogging), until the parent's
// unjoined children have finished: true then, with the join done (the parent goes on, never
// suspended). Nothing else is run here: under the parent's body, other work could wait for
// what the body does after the join. False when nothing of the subtree turns up for a
// while, when this thread nests as deep as joiners go, or when the take was another's work
// (handed to the scheduler's shared queue): the join then suspends as usual, the children that
// finished meanwhile already counted in `pending`. Until the join adds its count, `pending`
// only goes down from zero, so no child finishing meanwhile resumes the parent.
bool help_until_joined(coro_promise_base& parent) noexcept {
  if (forkjoin_tls.foreign_depth >= max_foreign_depth) return false;
  fork_state& forks = parent.forks;
  scheduler::impl* home = owner_of(parent.owner);
  const auto finished_all = -static_cast<std::int32_t>(forks.unjoined);
  // Held runs of a wait_all beneath go back on the deque, where workers can take them: a
  // child may wait for one of them.
  spill_held_runs();
  int idle_checks = 0;
  // acquire: pairs with each child's release in finish_forked (its result, its exception)
  while (forks.pending.load(std::memory_order_acquire) != finished_all) {
    // relaxed: see run_forked_child
    if (auto* thief = static_cast<worker*>(forks.thief.load(std::memory_order_relaxed))) {
      if (auto taken = thief->deque.steal()) {
        if (!descends_from(*taken, parent)) {
          home->schedule_shared(*taken, priority::normal);
          return false;
        }
        ++forkjoin_tls.foreign_depth;
        home->execute(*taken, nullptr);
        --forkjoin_tls.foreign_depth;
        idle_checks = 0;
        continue;
      }
    }
    if (++idle_checks == join_spin_checks) return false;
    for (int pause = 0; pause < 16; ++pause) cpu_relax();
  }
  forks.unjoined = 0;
  forks.pending.store(0, std::memory_order_relaxed);  // relaxed: every child is done with it
  return true;
}

}  // namespace

// noinline: link-time optimisation must not take it back into a coroutine body.
[[gnu::noinline]] const thread_context& this_thread_context_of_coroutine() noexcept { return this_thread_context(); }

bool run_forked_child(work_item* item, work_action action) noexcept {
  coro_promise_base& child = *static_cast<fork_item*>(item)->child;
  if (action == work_action::discard) {
    // Its scheduler shut down with the child still queued: it never runs. It finishes as a
    // child that threw, so that its parent's join goes on.
    std::string text = std::string("coroutine forked by task '") + child.owner->name +
                       "' never ran: its scheduler shut down";
    report(diagnostic_kind::never_ran, text);
    child.failure = std::make_exception_ptr(task_never_ran(text));
    child.forks.finished_inline = nullptr;
    finish_forked(child).resume();
    return true;
  }
  const thread_context& context = this_thread_context();
  if (context.self != nullptr && context.owner == owner_of(child.owner) && !context.self->standby) {
    // relaxed: a worker made with the scheduler, before any coroutine of it ran; the join
    // that reads it takes only what that worker's deque publishes by its own atomics
    child.forks.parent->forks.thief.store(context.self, std::memory_order_relaxed);
  }
  token_for_segment scope(child.token);
  frame_cache_scope frames;
  child.self.resume();  // may resume its parent, and theirs, as each finishes last
  return true;
}

void wake_for_fork(scheduler::impl* home) noexcept { home->wake_for(priority::normal); }

void fork_slowly(coro_promise_base& parent, coro_promise_base& child) {
  scheduler::impl* home = owner_of(parent.owner);
  if (home->workers.empty()) {  // nobody could steal it: run it now, without a queue between
    parent.forks.run_forks_now = true;  // fixed for the scheduler's life: the next forks, and the children's, skip this look
    child.forks.run_forks_now = true;
    run_child_now(parent, child);
    return;
  }
  const priority at = parent.owner->task_priority();
  thread_context& context = this_thread_context();
  work_stealing_deque<work_item*>* own = home->own_deque(context);
  // relaxed: as in fork_child
  if (at == priority::normal && own != nullptr && (context.self != nullptr || home->accepting.load(std::memory_order_relaxed))) {
    own->push(&child.forks.item);
    ++parent.forks.unjoined;
    // Where the thread's context names this deque, the next forks take the inline path.
    if (context.owner == home && context.deque == own) parent.forks.home = home;
    home->wake_for(at);
    return;
  }
  home->schedule(&child.forks.item, at);  // another priority, or no deque of ours: the join cannot take it back
  ++parent.forks.unjoined;
}

bool join_here(coro_promise_base& parent) {
  run_own_children(parent);
  if (parent.forks.unjoined == 0) return true;
  if (helps_while_joining() && help_until_joined(parent)) return true;
  return !wait_for_children(parent, /*at_return=*/false);
}

void rethrow_fork_failure(coro_promise_base& parent) {
  std::exception_ptr failure = std::move(parent.forks.failure);
  parent.forks.failure = nullptr;
  parent.forks.failed.store(false, std::memory_order_relaxed);  // relaxed: only this coroutine reads it, at its joins
  std::rethrow_exception(failure);
}

bool settle_forks_at_return(coro_promise_base& promise) noexcept {
  promise.forks.forked = false;
  if (!promise.failure) {
    report(diagnostic_kind::misuse, std::string("a coroutine of task '") + promise.owner->name + "' returned on " +
                                        calling_thread_name() + " with forked children not joined; it ends when they finish");
  }
  run_own_children(promise);
  if (promise.forks.unjoined == 0) return true;
  try {
    return !wait_for_children(promise, /*at_return=*/true);
  } catch (...) {
    // No memory for the task's completion event: wait here instead, the children being
    // stealable or already running elsewhere.
    const auto count = static_cast<std::int32_t>(promise.forks.unjoined);
    promise.forks.unjoined = 0;
    // acquire: pairs with the children's release in finish_forked
    while (promise.forks.pending.load(std::memory_order_acquire) != -count) std::this_thread::yield();
    promise.forks.pending.store(0, std::memory_order_relaxed);  // relaxed: no child is left to read it
    return true;
  }
}

}  // namespace magpie::detail
