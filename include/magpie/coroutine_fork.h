// Layer 3 — fork-join between coroutines: a child coroutine forked without a task.
//
//   magpie::coro<long> fib(int n) {
//     if (n < 2) co_return n;
//     long a = 0;
//     long b = 0;
//     co_await magpie::fork(a, fib(n - 1));  // queued on this thread's deque: idle workers may steal it
//     co_await magpie::call(b, fib(n - 2));  // runs now, on this thread
//     co_await magpie::join();               // a and b are set; a child's exception is rethrown here
//     co_return a + b;
//   }
//
//   long answer = magpie::launch("fib", [] { return fib(30); }).get_result();
//
// Included by <magpie/coroutine.h>. fork, call and join work inside any magpie::coro
// coroutine, the task's own (the body launch runs) or a forked one, at any depth.
//
// A forked child is a coroutine frame from magpie's task pool and a work item inside it:
// no task, no handle, no reference count. fork pushes it onto the calling worker's deque
// (newest first for its owner, oldest first for thieves) and the parent goes on; call runs
// it at once. This is child stealing: what a thief takes is the child, and the parent's
// continuation stays with its thread. join first runs, on this thread and newest first,
// the children still on top of the deque (cache-hot, and with no atomic operation when none
// was stolen). If some were stolen, or suspended on their own way, the parent suspends at
// the join — no thread blocks — and the last of them to finish resumes it on its own
// thread, by symmetric transfer. So the code after a join may run on another thread than
// the code before it, as after any co_await.
//
// A child's result is written into the variable fork or call names when it returns:
// read it after the join. The first exception a child lets out is rethrown by the join
// (later ones are dropped; every child still runs). Children take their parent's task's
// cancellation token and priority: a task of another priority than normal has its
// children queued at that priority, where its join cannot take them back; on a scheduler
// without workers, fork runs the child at once, as call does. A forked child may co_await
// tasks and events as its task may; add_nested from it is misuse, refused and reported
// once it has suspended (docs/coroutines.md).
//
// Returning from a coroutine with children not joined is misuse, reported (not when an
// exception leaves it): the coroutine's end then waits for them without blocking, as a
// join does, and their exceptions are dropped. Its locals are gone by then: children
// forked into them write into a variable whose scope has ended.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/coroutine.h>
#include <magpie/detail/thread_context.h>

#include <atomic>
#include <coroutine>
#include <exception>
#include <type_traits>
#include <utility>

namespace magpie {

namespace detail {

// fork_child_name marks a work item as a forked coroutine (its address, not its text).
inline constexpr char fork_child_name[] = "forked coroutine";

// run_forked_child is a fork_item's handler: a thief (or any thread that takes it from a
// queue) runs the child; a shut-down scheduler finishes it as never run (lib/forkjoin/coroutine_fork.cpp).
bool run_forked_child(work_item* item, work_action action) noexcept;

// this_thread_context_of_coroutine is the calling thread's context, read out of line: inlined
// into a coroutine body, which may resume on another thread, a thread_local's address may
// be computed once and kept in the frame (lib/forkjoin/coroutine_fork.cpp).
const thread_context& this_thread_context_of_coroutine() noexcept;

// fork_slowly queues `child` when the inline path of fork_child cannot: the first fork of a
// parent, a thread without a deque of the scheduler, another priority, no workers (it then
// runs the child at once) (lib/forkjoin/coroutine_fork.cpp).
void fork_slowly(coro_promise_base& parent, coro_promise_base& child);

// wake_for_fork wakes a worker of `home` for a pushed child (lib/forkjoin/coroutine_fork.cpp).
void wake_for_fork(scheduler::impl* home) noexcept;

// join_here runs the parent's children still on top of this thread's deque; true when all
// have finished, else the parent is left suspended for the last one to resume
// (lib/forkjoin/coroutine_fork.cpp).
bool join_here(coro_promise_base& parent);

// rethrow_fork_failure rethrows the first exception a joined child let out, and clears it.
[[noreturn]] void rethrow_fork_failure(coro_promise_base& parent);

// child_failed keeps a child's exception for its parent's join: the first one only.
inline void child_failed(coro_promise_base& parent, std::exception_ptr failure) noexcept {
  // relaxed: only decides which child stores; the store reaches the joining parent through
  // `pending` (or on this very thread), as the child's result does
  if (!parent.forks.failed.exchange(true, std::memory_order_relaxed)) parent.forks.failure = std::move(failure);
}

// is_child_of says whether a work item taken from this thread's deque is a forked child of `parent`.
inline bool is_child_of(const work_item* item, const coro_promise_base& parent) noexcept {
  return item->name == fork_child_name && static_cast<const fork_item*>(item)->child->forks.parent == &parent;
}

// adopt_child makes the coroutine `child` (not started) a forked child of `parent`.
inline void adopt_child(coro_promise_base& parent, coro_promise_base& child) noexcept {
  child.owner = parent.owner;  // for names, priority and the scheduler; the child never completes it
  child.token = parent.token;
  child.forks.parent = &parent;
  child.forks.home = parent.forks.home;
  child.forks.run_forks_now = parent.forks.run_forks_now;
  child.forks.item.handler = &run_forked_child;
  child.forks.item.name = fork_child_name;
  child.forks.item.child = &child;
}

// run_child_now runs an adopted child on this thread until it returns or suspends.
inline void run_child_now(coro_promise_base& parent, coro_promise_base& child) noexcept {
  bool finished = false;  // set by the child if it returns before resume() does
  child.forks.finished_inline = &finished;
  ++parent.forks.unjoined;
  child.self.resume();
  if (finished) --parent.forks.unjoined;  // else it finishes elsewhere and counts down `pending`
}

// fork_child queues an adopted child: the common case — a worker of the parent's
// scheduler, found before — is a push onto the worker's own deque, inline.
inline void fork_child(coro_promise_base& parent, coro_promise_base& child) {
  const thread_context& context = this_thread_context_of_coroutine();
  if (context.owner == parent.forks.home && context.owner != nullptr && context.deque != nullptr &&
      // relaxed: as task_group's spawn: `true` publishes nothing; `false` takes fork_slowly
      (context.push_gate == nullptr || context.push_gate->load(std::memory_order_relaxed))) {
    context.deque->push(&child.forks.item);  // may throw (no memory to grow): not counted then
    ++parent.forks.unjoined;
    if (context.wakes_workers) wake_for_fork(context.owner);
    return;
  }
  fork_slowly(parent, child);
}

// finish_forked ends a forked child that returned: destroys its frame, hands its exception
// to its parent, and counts it finished; returns the parent when it was the last child the
// parent's join (or end) waits for, else a no-op coroutine.
inline std::coroutine_handle<> finish_forked(coro_promise_base& child) noexcept {
  coro_promise_base& parent = *child.forks.parent;
  bool* finished_inline = child.forks.finished_inline;
  std::exception_ptr failure = std::move(child.failure);
  child.self.destroy();
  if (failure) [[unlikely]] child_failed(parent, std::move(failure));
  if (finished_inline != nullptr) {  // the parent's own thread ran it, and counts it
    *finished_inline = true;
    return std::noop_coroutine();
  }
  // acq_rel: release publishes the child's result and exception to the parent; acquire, for
  // the last child, takes the other children's and the parent's join (join_here's fetch_add)
  if (parent.forks.pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return std::noop_coroutine();
  if (parent.forks.returned) return finish_coroutine(parent);  // it waited at its end, not at a join
  return parent.self;
}

inline bool finished_here(coro_promise_base& promise) noexcept {
  fork_state& forks = promise.forks;
  if (forks.finished_inline == nullptr || forks.forked) return false;
  if (promise.failure) [[unlikely]] child_failed(*forks.parent, std::move(promise.failure));
  *forks.finished_inline = true;  // the runner reads it once the frame is gone
  return true;
}

inline std::coroutine_handle<> finish_coroutine(coro_promise_base& promise) noexcept {
  if (promise.forks.parent != nullptr) return finish_forked(promise);
  finish_task_coroutine(promise);
  return std::noop_coroutine();
}

// fork_awaiter starts a child coroutine: queued (fork) or run at once (call).
template <class R>
class fork_awaiter {
 public:
  fork_awaiter(coro<R>&& child, void* destination, bool run_now) noexcept
      : child_(std::move(child)), destination_(destination), run_now_(run_now) {}

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> frame) {
    coro_promise_base& parent = as_magpie_promise(frame);
    auto child = child_.release();
    coro_promise_base& promise = child.promise();
    promise.forks.destination = destination_;
    adopt_child(parent, promise);
    parent.forks.forked = true;
    if (run_now_ || parent.forks.run_forks_now) {
      run_child_now(parent, promise);
    } else {
      try {
        fork_child(parent, promise);
      } catch (...) {  // not queued, not counted: it never runs
        child.destroy();
        throw;
      }
    }
    return false;  // the parent goes on at once
  }
  void await_resume() const noexcept {}

 private:
  coro<R> child_;
  void* destination_;
  bool run_now_;
};

// join_awaiter waits for the children forked (and called) since the last join.
class join_awaiter {
 public:
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> frame) {
    parent_ = &as_magpie_promise(frame);
    coro_promise_base& parent = *parent_;
    parent.forks.forked = false;
    if (parent.forks.unjoined == 0) return false;  // all finished here already
    // The common shape first, inline: a worker of the parent's scheduler joins its newest
    // child, still on top of its deque. Anything else takes join_here.
    const thread_context& context = this_thread_context_of_coroutine();
    if (context.owner == parent.forks.home && context.owner != nullptr && context.deque != nullptr) {
      bool pushed_back = false;
      auto mine = context.deque->pop_matching([&parent](work_item* item) { return is_child_of(item, parent); },
                                              pushed_back);
      if (mine) {
        run_child_now(parent, *static_cast<fork_item*>(*mine)->child);
        --parent.forks.unjoined;  // run_child_now counted it again
        if (parent.forks.unjoined == 0) return false;
      } else if (pushed_back) {
        wake_for_fork(context.owner);  // a thief may have found it gone meanwhile
      }
    }
    return !join_here(parent);
  }
  void await_resume() const {
    // relaxed: set by a child on this thread, or published by `pending` before the resume
    if (parent_->forks.failed.load(std::memory_order_relaxed)) [[unlikely]] rethrow_fork_failure(*parent_);
  }

 private:
  coro_promise_base* parent_ = nullptr;
};

}  // namespace detail

// fork starts `child` as a forked child of the calling coroutine: queued on this thread's
// deque, where an idle worker may steal it, while the caller goes on. Its result is written
// to `destination` when it returns: read it after the join. `destination` must outlive the
// join (a local of the calling coroutine does).
template <class R>
  requires(!std::is_void_v<R> && std::is_move_assignable_v<R>)
detail::fork_awaiter<R> fork(R& destination, coro<R> child) noexcept {
  return detail::fork_awaiter<R>(std::move(child), &destination, false);
}

// fork starts a child coroutine that returns nothing (see fork above).
inline detail::fork_awaiter<void> fork(coro<void> child) noexcept {
  return detail::fork_awaiter<void>(std::move(child), nullptr, false);
}

// call runs `child` at once on this thread, as a forked child the next join waits for: it
// returns (or suspends) before the caller goes on. Its result goes to `destination`.
template <class R>
  requires(!std::is_void_v<R> && std::is_move_assignable_v<R>)
detail::fork_awaiter<R> call(R& destination, coro<R> child) noexcept {
  return detail::fork_awaiter<R>(std::move(child), &destination, true);
}

// call runs a child coroutine that returns nothing at once (see call above).
inline detail::fork_awaiter<void> call(coro<void> child) noexcept {
  return detail::fork_awaiter<void>(std::move(child), nullptr, true);
}

// join waits for every child forked or called since the last join, then rethrows the
// first exception one let out. Suspends only when some finish on other threads.
inline detail::join_awaiter join() noexcept { return {}; }

}  // namespace magpie
