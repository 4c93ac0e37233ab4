// Layer 3 — coroutine tasks: a task body that waits without holding its thread.
//
//   magpie::task<int> size = magpie::launch("size", [] { return 42; });
//   magpie::task<int> doubled = magpie::launch("doubled", [size]() -> magpie::coro<int> {
//     int value = co_await size;                          // the worker runs other work meanwhile
//     co_await magpie::resume_on(magpie::named_thread::game);
//     co_return value * 2;                                // now on the game thread
//   });
//
// A body returning coro<R> makes launch() return task<R>. The task completes when the
// coroutine returns (and every nested task has completed), not when it first suspends;
// until then launch keeps the body — and so a lambda's captures — alive.
//
// co_await of a completed task continues at once. Otherwise the coroutine suspends and
// its resumption becomes one more subsequent of the awaited task: a small task that runs
// on the thread that completes it (the completer runs its first ready subsequent next, in
// its loop) or is queued there, at the coroutine task's priority. A coroutine never runs
// on two threads at once. The awaited task's exception is rethrown by co_await.
//
// Awaitable: task<R> (yields R&, which lives as long as the task), task_event, when_all /
// when_any results, and resume_on(named_thread), resume_on(priority), yield().
// add_nested() from the coroutine makes the coroutine task wait for the nested task, before
// and after a suspension. Frames come from magpie's task pool (larger ones from operator new),
// through a small per-thread cache of the frames that ended while the thread ran coroutines.
//
// Fork-join between coroutines, without a task per child (include/magpie/coroutine_fork.h):
//
//   magpie::coro<long> fib(int n) {
//     if (n < 2) co_return n;
//     long a = 0, b = 0;
//     co_await magpie::fork(a, fib(n - 1));  // stealable by idle workers
//     co_await magpie::call(b, fib(n - 2));  // runs now
//     co_await magpie::join();               // suspends only if children finish elsewhere
//     co_return a + b;
//   }
//   long answer = magpie::launch("fib", [] { return fib(30); }).get_result();
//
// Destroying the scheduler abandons its coroutines still suspended behind work that never
// completed (an event never triggered): each is reported by name, its frame and body are
// freed, and its task completes holding task_never_ran (docs/coroutines.md, Shutdown).
#pragma once

#include <magpie/detail/language.h>

#include <magpie/cancellation.h>
#include <magpie/detail/task_pool.h>
#include <magpie/detail/work_item.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace magpie {

template <class R = void>
class coro;

namespace detail {

class coro_promise_base;

// allocate_frame and free_frame make and free every magpie coroutine frame: from the
// calling thread's cache of frames that ended while it ran coroutines, else from the task
// pool. Out of line: a coroutine may resume on another thread, so nothing inlined into its
// body may keep a thread's cache (lib/forkjoin/coroutine.cpp).
void* allocate_frame(std::size_t bytes);
void free_frame(void* frame, std::size_t bytes) noexcept;

// frame_cache_scope spans a run of coroutine code from one of magpie's entry points (a
// coroutine task's start, a resumption, a stolen forked child): inside one, a frame that
// ends is kept for the next one made on this thread; the outermost scope to close hands
// every frame kept back to the task pool, so a thread between runs holds none.
class frame_cache_scope {
 public:
  frame_cache_scope() noexcept;
  ~frame_cache_scope();
  frame_cache_scope(const frame_cache_scope&) = delete;
  frame_cache_scope& operator=(const frame_cache_scope&) = delete;
};

// fork_item is a forked child coroutine's entry in a deque: a work item that runs it.
struct fork_item : work_item {
  coro_promise_base* child;  // set by adopt_child, before the item is ever queued
};

// fork_state is a coroutine's fork-join bookkeeping (include/magpie/coroutine_fork.h).
struct fork_state {
  // As a parent. unjoined counts the children forked since the last join that have not
  // finished on this coroutine's own thread of control (only this coroutine touches it).
  // Children that finish anywhere else — stolen, or suspended on the way — subtract one
  // from pending each; the join adds the unjoined count to it and suspends unless that
  // makes zero, and the child whose subtraction reaches zero resumes it.
  std::uint32_t unjoined = 0;
  bool forked = false;    // a child was forked or called since the last join (a return without one is misuse)
  bool returned = false;  // suspended at its final point until its unjoined children finish
  std::atomic<std::int32_t> pending{0};
  std::atomic<bool> failed{false};  // a child threw: the first claims `failure` by this flag
  std::exception_ptr failure;
  // The last worker that started one of its children away from this coroutine's thread, or
  // nullptr: its deque holds that child's own forks, which a join outside the pool may take.
  std::atomic<void*> thief{nullptr};
  // home is the scheduler whose workers may steal this coroutine's children (nullptr: not
  // looked up yet, or none: the children then run when forked). run_forks_now: its
  // scheduler has no workers, so a fork runs the child at once, as call does.
  scheduler::impl* home = nullptr;
  bool run_forks_now = false;
  // As a forked child: its parent (nullptr: not a forked child), where its result goes,
  // and, while the parent's own thread runs it inline, the flag it sets on finishing there.
  coro_promise_base* parent = nullptr;
  void* destination = nullptr;
  bool* finished_inline = nullptr;
  fork_item item;
};

// coro_promise_base is the part of every magpie coroutine's promise that does not depend on R.
class coro_promise_base {
 public:
  static void* operator new(std::size_t bytes) { return allocate_frame(bytes); }
  static void operator delete(void* frame, std::size_t bytes) noexcept { free_frame(frame, bytes); }

  std::suspend_always initial_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { failure = std::current_exception(); }

  // owner is the coroutine task; destroy_body destroys its body (the callable) once the
  // coroutine has returned.
  task_base* owner = nullptr;
  void (*destroy_body)(task_base* owner) noexcept = nullptr;
  // done exists from the first suspension on: a task event nested in the owner, so the
  // owner completes only when the coroutine returns and triggers it.
  std::optional<task_event> done;
  std::exception_ptr failure;
  // token is the cancellation token the task was launched with (nullptr: none): every
  // segment of the coroutine runs under it, not only the first.
  const cancellation_token* token = nullptr;
  // self is this coroutine's own frame (set as it is made): forked children are run, and
  // their parents resumed, through it.
  std::coroutine_handle<> self;
  // forks is this coroutine's fork-join state: as a parent, and as a forked child
  // (include/magpie/coroutine_fork.h). Untouched by a coroutine that never forks.
  fork_state forks;
};

// token_for_segment makes `token` the thread's current one while a coroutine segment runs
// (none: the current one stays, as for any task body).
class token_for_segment {
 public:
  explicit token_for_segment(const cancellation_token* token) noexcept : outer_(current_cancellation) {
    if (token != nullptr) current_cancellation = token;
  }
  ~token_for_segment() { current_cancellation = outer_; }
  token_for_segment(const token_for_segment&) = delete;
  token_for_segment& operator=(const token_for_segment&) = delete;

 private:
  const cancellation_token* outer_;
};

// resume_later suspends the coroutine `frame` until `after` completes (nullptr: until it
// is scheduled), then resumes it as a task placed `where` (lib/forkjoin/coroutine.cpp).
void resume_later(std::coroutine_handle<> frame, coro_promise_base& promise, task_base* after, placement where);

// run_awaited_here runs a task a coroutine awaits that has not started, on this thread, as
// a wait would retract it; true when it completed so (lib/forkjoin/coroutine.cpp).
bool run_awaited_here(task_base* awaited) noexcept;

// hand_over_failure gives the owner the coroutine's exception (lib/forkjoin/coroutine.cpp).
void hand_over_failure(task_base* owner, std::exception_ptr failure) noexcept;

// finish_task_coroutine: the coroutine of a task returned; its result or failure is in
// the promise or the owner already. Destroys the frame and the body, then lets the owner
// complete.
inline void finish_task_coroutine(coro_promise_base& promise) noexcept {
  task_base* owner = promise.owner;
  if (promise.failure) hand_over_failure(owner, std::move(promise.failure));
  std::optional<task_event> done = std::move(promise.done);
  auto destroy_body = promise.destroy_body;
  promise.self.destroy();
  destroy_body(owner);  // the callable outlived the coroutine, as launch promises
  if (done) done->trigger();
}

// finish_coroutine ends a coroutine that returned, a task's or a forked child's, and
// returns the coroutine to continue with (a parent its finish resumes), else a no-op one
// (include/magpie/coroutine_fork.h).
inline std::coroutine_handle<> finish_coroutine(coro_promise_base& promise) noexcept;

// settle_forks_at_return: a coroutine returned (or threw) with forked children not
// joined. Runs those still queued here; true when all have finished, else it stays
// suspended at its final point and the last to finish ends it (lib/forkjoin/coroutine_fork.cpp).
bool settle_forks_at_return(coro_promise_base& promise) noexcept;

// finished_here ends a forked child that returns on the thread of control that runs it for
// its parent (include/magpie/coroutine_fork.h): false when it must take finish_coroutine.
inline bool finished_here(coro_promise_base& promise) noexcept;

// final_awaiter ends every magpie coroutine: it hands the frame to finish_coroutine, except
// that a forked child its parent's thread runs is counted there and lets the coroutine end
// by itself (which frees the frame without another call through it).
struct final_awaiter {
  coro_promise_base* promise;

  bool await_ready() const noexcept { return finished_here(*promise); }
  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> frame) const noexcept {
    // The awaiter lived in the frame: nothing here touches it after the frame goes.
    coro_promise_base& ending = frame.promise();
    if (ending.forks.forked && !settle_forks_at_return(ending)) [[unlikely]] return std::noop_coroutine();
    return finish_coroutine(ending);
  }
  void await_resume() const noexcept {}
};

template <class R>
class coro_promise : public coro_promise_base {
 public:
  coro<R> get_return_object() noexcept;
  final_awaiter final_suspend() noexcept { return {this}; }
  template <class Value>
    requires std::is_constructible_v<R, Value&&>
  void return_value(Value&& value) {
    if constexpr (std::is_assignable_v<R&, Value&&>) {
      if (forks.destination != nullptr) {  // a forked child: into the parent's variable
        *static_cast<R*>(forks.destination) = std::forward<Value>(value);
        return;
      }
    }
    // Straight into the task's result: no second copy.
    new (static_cast<task_with_result<R>*>(owner)->result_storage) R(std::forward<Value>(value));
  }
};

template <>
class coro_promise<void> : public coro_promise_base {
 public:
  coro<void> get_return_object() noexcept;
  final_awaiter final_suspend() noexcept { return {this}; }
  void return_void() noexcept {}
};

// as_magpie_promise checks that a co_await happens inside a magpie coroutine.
template <class Promise>
coro_promise_base& as_magpie_promise(std::coroutine_handle<Promise> frame) noexcept {
  static_assert(std::is_base_of_v<coro_promise_base, Promise>,
                "magpie: these awaitables work only inside a magpie::coro coroutine");
  return frame.promise();
}

// task_awaiter waits for a task from a coroutine. It keeps the awaited handle by
// reference: the operand of a co_await, a named handle or a temporary of the full
// expression, outlives the suspension, and a copy would cost two locked read-modify-writes
// of the task's count on every co_await, where awaiting a completed task by reference is a
// load and a branch.
template <class R>
class task_awaiter {
 public:
  explicit task_awaiter(const task<R>& awaited) noexcept : awaited_(awaited) {}

  // A task not started yet runs here first (work-first, as a wait's retraction would), and
  // the coroutine goes on without suspending.
  bool await_ready() const noexcept { return awaited_.is_completed() || run_awaited_here(detail::task_access::base(awaited_)); }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> frame) {
    coro_promise_base& promise = as_magpie_promise(frame);
    resume_later(frame, promise, detail::task_access::base(awaited_), placement(promise.owner->task_priority()));
  }
  decltype(auto) await_resume() const {
    if constexpr (std::is_void_v<R>) {
      awaited_.get_result();
    } else {
      return awaited_.get_result();
    }
  }

 private:
  const task<R>& awaited_;
};

// placement_awaiter always suspends and resumes the coroutine as a task placed `where`
// (nullopt: at the coroutine task's own priority).
class placement_awaiter {
 public:
  explicit placement_awaiter(std::optional<placement> where) noexcept : where_(where) {}

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> frame) {
    coro_promise_base& promise = as_magpie_promise(frame);
    resume_later(frame, promise, nullptr, where_ ? *where_ : placement(promise.owner->task_priority()));
  }
  void await_resume() const noexcept {}

 private:
  std::optional<placement> where_;
};

// resumer is the body of a coroutine's resumption task. Destroyed without having run
// (its scheduler shut down before it could), it abandons the coroutine (lib/forkjoin/coroutine.cpp).
//
// A resumer that waits behind the task its coroutine awaits is recorded (record_waiting)
// until it is claimed: by its run, by its destruction, or by its scheduler's shutdown,
// which abandons coroutines whose awaited work never completed (its shutdown drain,
// abandon_stranded_coroutines in lib/forkjoin/coroutine.cpp). Whoever claims it takes the frame; a resumer claimed by the shutdown
// finds none when it runs later, and does nothing.
class resumer {
 public:
  resumer(std::coroutine_handle<> frame, coro_promise_base* promise) noexcept : frame_(frame), promise_(promise) {}
  // Only before record_waiting: a recorded resumer is linked by its address.
  resumer(resumer&& other) noexcept : frame_(std::exchange(other.frame_, {})), promise_(other.promise_) {}
  resumer(const resumer&) = delete;
  resumer& operator=(const resumer&) = delete;
  resumer& operator=(resumer&&) = delete;
  ~resumer() {
    if (std::coroutine_handle<> frame = claim()) abandon(frame);
  }

  void operator()() {
    std::coroutine_handle<> frame = claim();
    if (!frame) return;  // abandoned at its scheduler's shutdown: there is nothing left to resume
    token_for_segment scope(promise_->token);  // read before the resume, which may free the promise
    frame_cache_scope frames;
    frame.resume();
  }

  // promise is the promise of the coroutine this task resumes (read by add_nested while it runs).
  coro_promise_base* promise() const noexcept { return promise_; }

  // record_waiting records this resumer, of task `resumption`, until it is claimed
  // (lib/forkjoin/coroutine.cpp). Once, before its task is launched.
  void record_waiting(task_base* resumption) noexcept;

 private:
  friend struct waiting_record_access;  // lib/forkjoin/coroutine.cpp

  static constexpr std::uint8_t not_recorded = 0xff;

  // claim takes the frame, or nothing if it was taken already; the claimer owns the coroutine.
  std::coroutine_handle<> claim() noexcept {
    if (stripe_ == not_recorded) return std::exchange(frame_, {});
    return claim_recorded();
  }
  std::coroutine_handle<> claim_recorded() noexcept;
  void abandon(std::coroutine_handle<> frame) noexcept;

  std::coroutine_handle<> frame_;  // of a recorded resumer: read and written under its stripe's lock
  coro_promise_base* promise_;
  // Once recorded: its task, the stripe of the record it is in (lib/forkjoin/coroutine.cpp) and,
  // until claimed, its neighbours there.
  task_base* task_ = nullptr;
  resumer* newer_ = nullptr;
  resumer* older_ = nullptr;
  std::uint8_t stripe_ = not_recorded;
};

// coro_task<Body, R> is a task whose body returns coro<R>: running it starts the coroutine,
// and the coroutine, when it returns, completes the task. Laid out as task_impl.
template <class Body, class R>
struct coro_task final : task_with_result<R> {
  alignas(Body) unsigned char body_storage[sizeof(Body)];

  Body& body() noexcept { return *std::launder(reinterpret_cast<Body*>(body_storage)); }

  static_assert(alignof(Body) <= 64, "magpie: a task body aligned to more than 64 bytes is not supported");

  static constexpr std::size_t lead_bytes(std::size_t count) noexcept {
    return count == 0 ? 0 : (edge_group::bytes(count) + alignof(coro_task) - 1) / alignof(coro_task) * alignof(coro_task);
  }

  template <class F>
  static coro_task* create(F&& body, std::size_t prerequisite_count) {
    std::size_t lead = lead_bytes(prerequisite_count);
    auto* block = static_cast<unsigned char*>(allocate_task(lead + sizeof(coro_task)));
    auto* self = new (block + lead) coro_task;
    try {
      new (self->body_storage) Body(std::forward<F>(body));
    } catch (...) {
      self->~coro_task();
      free_task(block, lead + sizeof(coro_task));
      throw;
    }
    if (prerequisite_count != 0) {
      edge_group::place_before(self, prerequisite_count);
      self->tag = task_base::has_own_group;
    }
    self->handler = &handle;
    return self;
  }

  edge_group* own_group() noexcept { return reinterpret_cast<edge_group*>(this) - 1; }

  std::size_t lead() noexcept {
    return (this->tag & task_base::has_own_group) != 0 ? lead_bytes(own_group()->count) : 0;
  }

  static void destroy_body(task_base* owner) noexcept { static_cast<coro_task*>(owner)->body().~Body(); }

  static bool handle(work_item* item, work_action action) noexcept {
    auto* self = static_cast<coro_task*>(item);
    if (action == as_action(task_op::run)) {
      const cancellation_token* token = nullptr;
      if constexpr (skippable_body<Body>) {
        if (self->body().skip_requested()) {
          hold_canceled(self);
          self->body().~Body();
          return true;
        }
        token = self->body().token();
      }
      try {
        auto frame = std::invoke(self->body()).release();
        frame.promise().owner = self;
        frame.promise().destroy_body = &destroy_body;
        frame.promise().token = token;
        token_for_segment scope(token);
        frame_cache_scope frames;
        // From here the coroutine owns the task's completion: when it returns, it hands
        // over its result, destroys the body and itself (finish_coroutine) — perhaps on
        // another thread before resume() returns here, so nothing is touched after it.
        frame.resume();
      } catch (...) {  // the body threw before its coroutine began
        self->ensure_extras().exception = std::current_exception();
        self->flags.fetch_or(has_exception, std::memory_order_relaxed);  // relaxed: published by completion
        self->body().~Body();
      }
      return true;
    }
    if (action == as_action(task_op::destroy)) {
      if constexpr (!std::is_void_v<R>) {
        // A coroutine that returned normally left a result; every other end sets has_exception.
        if (self->state.has_begun() && !self->has_flag(has_exception)) self->result().~R();
      }
      std::size_t lead = self->lead();
      self->~coro_task();
      free_task(reinterpret_cast<unsigned char*>(self) - lead, lead + sizeof(coro_task));
      return true;
    }
    if (action == as_action(task_op::drop_body)) {
      self->body().~Body();
      return true;
    }
    return run_queued(item, action);
  }
};

template <class R>
struct body_result_traits<coro<R>> {
  using task_result = R;
  template <class Body>
  using task_type = coro_task<Body, R>;
};

}  // namespace detail

// coro<R> is what a coroutine task's body returns: launch() turns it into a task<R>. It is
// only a carrier from the body to the task: launch it, never keep it.
template <class R>
class coro {
 public:
  // promise_type is the coroutine machinery's: the compiler looks it up, users never name it.
  using promise_type = detail::coro_promise<R>;

  // coro(coro&&) moves the coroutine out of `other`; a coro is move-only.
  coro(coro&& other) noexcept : frame_(std::exchange(other.frame_, {})) {}
  coro(const coro&) = delete;
  coro& operator=(const coro&) = delete;
  coro& operator=(coro&&) = delete;
  ~coro() {
    if (frame_) frame_.destroy();  // made and never started: its task never ran it
  }

  // release hands the frame to the task that runs it.
  std::coroutine_handle<promise_type> release() noexcept { return std::exchange(frame_, {}); }

 private:
  friend promise_type;
  explicit coro(std::coroutine_handle<promise_type> frame) noexcept : frame_(frame) {}

  std::coroutine_handle<promise_type> frame_;
};

namespace detail {
template <class R>
coro<R> coro_promise<R>::get_return_object() noexcept {
  auto frame = std::coroutine_handle<coro_promise<R>>::from_promise(*this);
  self = frame;
  return coro<R>(frame);
}
inline coro<void> coro_promise<void>::get_return_object() noexcept {
  auto frame = std::coroutine_handle<coro_promise<void>>::from_promise(*this);
  self = frame;
  return coro<void>(frame);
}
}  // namespace detail

// operator co_await on a task (or task event) suspends until it completes, then yields its
// result (a reference into the task) or rethrows its exception.
template <class R>
detail::task_awaiter<R> operator co_await(const task<R>& awaited) noexcept {
  return detail::task_awaiter<R>(awaited);
}

// resume_on continues the coroutine on `thread`'s main queue.
inline detail::placement_awaiter resume_on(named_thread thread) noexcept {
  return detail::placement_awaiter(on_thread(thread));
}

// resume_on continues the coroutine on a worker, at priority `p`.
inline detail::placement_awaiter resume_on(priority p) noexcept { return detail::placement_awaiter(placement(p)); }

// yield lets other work run: the coroutine continues later, queued at its task's priority.
inline detail::placement_awaiter yield() noexcept { return detail::placement_awaiter(std::nullopt); }

}  // namespace magpie

#include <magpie/coroutine_fork.h>  // fork, call, join: fork-join between coroutines
