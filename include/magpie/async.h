// Layer 4 — compatibility: Unreal's Async, TFuture, TSharedFuture and TPromise, built on
// magpie's task states: a future is a handle to the task that holds its value, and a
// continuation is an inline task behind it. No mutex per future (Unreal's takes one).
//
//   magpie::future<int> size = magpie::async(magpie::async_execution::task_graph, [] { return load(); });
//   magpie::future<void> shown = std::move(size).next([](int bytes) { show(bytes); });
//   shown.wait();
//
//   magpie::promise<int> answer;
//   magpie::future<int> later = answer.get_future();
//   answer.set_value(42);     // continuations of `later` run here, on the setting thread
//   later.get();              // 42; get() keeps the future valid, consume() empties it
//
// Continuations (then, next) run on the thread that completes the value, or at once on the
// caller if it is already complete; a long chain completes in a loop, not a recursion.
// then and next empty the future they are called on: one continuation per state. An
// exception thrown by the callable, a continuation or set_exception is kept: get() and
// consume() rethrow it, and next passes it down the chain. See docs/porting-from-unreal.md.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/thread_pool.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

namespace magpie {

// async_execution is Unreal's EAsyncExecution: where async runs the callable. task_graph:
// a task on the workers; task_graph_main_thread: a task on the game thread's queue;
// thread: a thread of its own; thread_pool: global_queued_thread_pool().
enum class async_execution { task_graph, task_graph_main_thread, thread, thread_pool };

// broken_promise is the exception a future completes with when its promise was destroyed
// without a value, or its pool work was abandoned.
class broken_promise : public std::logic_error {
 public:
  using std::logic_error::logic_error;
  // ~broken_promise is defined in the library, which keeps the class's vtable there alone.
  ~broken_promise() override;
};

template <class R>
class future;
template <class R>
class shared_future;
template <class R>
class promise;

namespace async_internal {

// report_misuse reports a misuse of futures or promises.
void report_misuse(std::string_view message);

// check_valid reports and throws when `valid` is false (a get or consume on an empty future).
void check_valid(bool valid, const char* operation);

// value_keeper is the scheduler that a promise's value task and event belong to: made on
// first use, never destroyed, with one worker that is never given work (nothing of it is
// ever queued: the value task runs inline when the promise is set). So a promise can be
// set whatever became of the scheduler it was made under, and a wait for its value blocks
// until it is set, where a wait on a scheduler without workers would nap and poll for work.
scheduler& value_keeper();

// span_ns is a wait's length as a floating count of nanoseconds: any duration, and the
// distance between any two time points, converts to it without overflowing.
using span_ns = std::chrono::duration<long double, std::nano>;

// until is how long from now until `deadline` (negative once it passed).
template <class Clock, class Duration>
span_ns until(std::chrono::time_point<Clock, Duration> deadline) {
  return span_ns(deadline.time_since_epoch()) - span_ns(Clock::now().time_since_epoch());
}

// wait_within waits at most `timeout` for `state` and says whether it completed (false
// for an invalid state). The task's timed wait computes its deadline with deadline_after,
// which saturates: a timeout past the end of the steady clock's range (duration::max(),
// time_point::max()) waits without one.
template <class R>
bool wait_within(const task<R>& state, span_ns timeout) noexcept {
  if (!state.is_valid()) return false;
  return state.wait(timeout);
}

// then_step is the body of a then task: the state it continues, by handle (the callable
// receives it as a future), and the callable.
template <class R, class F>
struct then_step {
  task<R> prior;
  F function;

  auto operator()() { return function(future<R>(std::move(prior))); }
};

// next_step is the body of a next task: the callable, and the state it continues, borrowed.
// A next task is an inline task whose one prerequisite is `prior`, so its body runs only
// when that one lock goes: in the completion of `prior`, or in the launch if it finds
// `prior` complete. The completer, or the handle the launch was given, holds `prior`
// meanwhile (detail/task_base.h, "Who frees a task"): the body reads the result in place.
template <class R, class F>
struct next_step {
  detail::task_base* prior;
  F function;

  auto operator()() {
    if (detail::has_failed(prior)) detail::rethrow_if_failed(prior);  // what went wrong upstream skips `function`
    if constexpr (std::is_void_v<R>) {
      return function();
    } else {
      return function(std::move(static_cast<detail::task_with_result<R>*>(prior)->result()));
    }
  }
};

// step_of is the body type of a then (passes_value false) or next continuation.
template <class R, class F, bool passes_value>
using step_of = std::conditional_t<passes_value, next_step<R, F>, then_step<R, F>>;

// chain launches the continuation of `prior` (valid) as an inline task behind it.
template <class R, class F, bool passes_value>
future<std::invoke_result_t<step_of<R, std::decay_t<F>, passes_value>&>> chain(task<R> prior, F&& function) {
  using body = step_of<R, std::decay_t<F>, passes_value>;
  using out = std::invoke_result_t<body&>;
  if constexpr (passes_value) {
    // `prior`, the handle, goes to the launch: when it is the only one, the edge keeps it
    // (an inline `prior`, a chain's link, as a handle; else as a reference), which holds the
    // task until the continuation starts, and the continuation's body borrows it. With no
    // other handle left, its completion closes its subsequent list without a locked exchange.
    detail::task_base* borrowed = detail::task_access::base(prior);
    return future<out>(magpie::launch("future continuation", body{borrowed, std::forward<F>(function)},
                                      std::move(prior), run_inline));
  } else {
    body made{std::move(prior), std::forward<F>(function)};
    const task<R>& before = made.prior;  // read by launch before it moves the body in
    return future<out>(magpie::launch("future continuation", std::move(made), before, run_inline));
  }
}

}  // namespace async_internal

// future<R> is Unreal's TFuture<R>: move-only, get() does not empty it.
template <class R>
class future {
  static_assert(!std::is_reference_v<R>, "future<R&> is not supported: use future<R*>");

 public:
  future() noexcept = default;

  // future(state) makes a future of any magpie task: its result is the future's value.
  explicit future(task<R> state) noexcept : state_(std::move(state)) {}

  // future(future&&) and operator= move the state out of `other`, which becomes invalid.
  future(future&&) noexcept = default;
  future& operator=(future&&) noexcept = default;
  future(const future&) = delete;
  future& operator=(const future&) = delete;

  // is_valid says whether the future has a state (not default-made, consumed or moved).
  bool is_valid() const noexcept { return state_.is_valid(); }

  // is_ready says whether the value (or exception) is there; false for an invalid future.
  bool is_ready() const noexcept { return state_.is_valid() && state_.is_completed(); }

  // wait returns once the future is ready (at once for an invalid future).
  void wait() const noexcept { state_.wait(); }

  // wait_for returns whether the future became ready within `timeout` (false if invalid);
  // duration::max() waits as long as it takes.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const noexcept {
    return async_internal::wait_within(state_, async_internal::span_ns(timeout));
  }

  // wait_until returns whether the future became ready by `deadline` (false if invalid);
  // time_point::max() waits as long as it takes.
  template <class Clock, class Duration>
  bool wait_until(std::chrono::time_point<Clock, Duration> deadline) const noexcept {
    return async_internal::wait_within(state_, async_internal::until(deadline));
  }

  // get waits, then returns the value (void for future<void>) and keeps the future valid;
  // rethrows the callable's exception. On an invalid future: reported, throws.
  decltype(auto) get() const {
    async_internal::check_valid(is_valid(), "get");
    if constexpr (std::is_void_v<R>) {
      state_.get_result();
    } else {
      return static_cast<const R&>(state_.get_result());
    }
  }

  // get_mutable is get() with a value the caller may change (Unreal's GetMutable).
  decltype(auto) get_mutable()
    requires(!std::is_void_v<R>)
  {
    async_internal::check_valid(is_valid(), "get_mutable");
    return static_cast<R&>(state_.get_result());
  }

  // consume waits, moves the value out and empties the future.
  R consume() {
    async_internal::check_valid(is_valid(), "consume");
    task<R> state = std::move(state_);
    if constexpr (std::is_void_v<R>) {
      state.get_result();
    } else {
      return std::move(state.get_result());
    }
  }

  // share turns the future into a copyable shared_future and empties this one.
  shared_future<R> share() noexcept { return shared_future<R>(std::move(state_)); }

  // then runs `f(future<R>)` once this future is ready (at once if it is) and returns the
  // future of its result. Empties this future; on an invalid one it is reported and gives
  // an invalid future.
  template <class F>
  auto then(F&& f) {
    return continue_with<false>(std::forward<F>(f), "then");
  }

  // next is then() with the value itself: `f(R)` (or `f()` for future<void>). An exception
  // upstream skips `f` and reaches the returned future.
  template <class F>
  auto next(F&& f) {
    return continue_with<true>(std::forward<F>(f), "next");
  }

  // reset empties the future.
  void reset() noexcept { state_ = task<R>(); }

  // as_task is the magpie task holding the value.
  const task<R>& as_task() const noexcept { return state_; }

 private:
  template <bool passes_value, class F>
  auto continue_with(F&& f, const char* operation) {
    using result = decltype(async_internal::chain<R, F, passes_value>(std::move(state_), std::forward<F>(f)));
    if (!is_valid()) {
      async_internal::report_misuse(std::string("future::") + operation +
                                    " on an invalid future (a second continuation on one state?); ignored");
      return result();
    }
    return async_internal::chain<R, F, passes_value>(std::move(state_), std::forward<F>(f));
  }

  task<R> state_;
};

// shared_future<R> is Unreal's TSharedFuture<R>: copyable; every copy reads the same value.
template <class R>
class shared_future {
 public:
  shared_future() noexcept = default;
  // shared_future(state) makes a shared future of any magpie task: its result is the value.
  explicit shared_future(task<R> state) noexcept : state_(std::move(state)) {}

  // is_valid, is_ready, wait, wait_for and wait_until are future's (see future).
  bool is_valid() const noexcept { return state_.is_valid(); }
  bool is_ready() const noexcept { return state_.is_valid() && state_.is_completed(); }
  void wait() const noexcept { state_.wait(); }
  // wait_for and wait_until are future's.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const noexcept {
    return async_internal::wait_within(state_, async_internal::span_ns(timeout));
  }
  template <class Clock, class Duration>
  bool wait_until(std::chrono::time_point<Clock, Duration> deadline) const noexcept {
    return async_internal::wait_within(state_, async_internal::until(deadline));
  }

  // get waits and returns the value; rethrows the exception the state holds.
  decltype(auto) get() const {
    async_internal::check_valid(is_valid(), "get");
    if constexpr (std::is_void_v<R>) {
      state_.get_result();
    } else {
      return static_cast<const R&>(state_.get_result());
    }
  }

 private:
  task<R> state_;
};

namespace async_internal {
// slot is where a promise puts its value for the task that hands it to the future.
template <class R>
struct slot {
  std::optional<R> value;
  std::exception_ptr error;
};
template <>
struct slot<void> {
  std::exception_ptr error;
};
}  // namespace async_internal

// promise<R> is Unreal's TPromise<R>: set the value (or an exception) once, from any
// thread; its future becomes ready, and its continuations run, during the set.
template <class R>
class promise {
  struct no_value {};
  using value_type = std::conditional_t<std::is_void_v<R>, no_value, R>;

 public:
  // promise needs no scheduler alive to be set: set_value always completes its future.
  // Continuations (then, next) belong to the scheduler they were attached under, and one
  // whose scheduler is gone by then is reported and never runs.
  promise() : promise(std::function<void()>()) {}

  // promise(completion_callback) also runs `completion_callback` during set_value /
  // set_exception, once the value is visible through the future.
  explicit promise(std::function<void()> completion_callback)
      : slot_(std::make_shared<async_internal::slot<R>>()),
        ready_("promise", async_internal::value_keeper()),
        callback_(std::move(completion_callback)) {
    state_ = async_internal::value_keeper().launch(
        "promise value",
        [slot = slot_]() -> R {
          if (slot->error) std::rethrow_exception(slot->error);
          if constexpr (!std::is_void_v<R>) return std::move(*slot->value);
        },
        ready_, run_inline);
  }

  // promise(promise&&) and operator= move the promise out of `other`; a promise assigned over
  // breaks its own unset value first, as its destructor would.
  promise(promise&& other) noexcept
      : slot_(std::move(other.slot_)), ready_(std::move(other.ready_)), state_(std::move(other.state_)),
        callback_(std::move(other.callback_)), future_taken_(other.future_taken_), set_(other.set_) {}
  promise& operator=(promise&& other) noexcept {
    if (this != &other) {
      break_if_unset();
      slot_ = std::move(other.slot_);
      ready_ = std::move(other.ready_);
      state_ = std::move(other.state_);
      callback_ = std::move(other.callback_);
      future_taken_ = other.future_taken_;
      set_ = other.set_;
    }
    return *this;
  }
  promise(const promise&) = delete;
  promise& operator=(const promise&) = delete;

  // ~promise: destroying a promise whose value was never set is a programming error
  // (reported); its future completes holding broken_promise.
  ~promise() { break_if_unset(); }

  // get_future hands out the future, once; a second call is reported and gives an invalid one.
  future<R> get_future() {
    if (future_taken_ || slot_ == nullptr) {
      async_internal::report_misuse("promise::get_future called twice (or on a moved-from promise)");
      return future<R>();
    }
    future_taken_ = true;
    return future<R>(std::move(state_));
  }

  // set_value sets the value, once (a second set is reported and ignored).
  void set_value(const value_type& value)
    requires(!std::is_void_v<R>)
  {
    emplace_value(value);
  }
  void set_value(value_type&& value)
    requires(!std::is_void_v<R>)
  {
    emplace_value(std::move(value));
  }
  void set_value()
    requires std::is_void_v<R>
  {
    emplace_value();
  }

  // emplace_value constructs the value in place from `args`.
  template <class... A>
  void emplace_value(A&&... args) {
    if (!claim("set_value")) return;
    if constexpr (!std::is_void_v<R>) slot_->value.emplace(std::forward<A>(args)...);
    complete(true);
  }

  // set_exception completes the future with `error` instead of a value.
  void set_exception(std::exception_ptr error) {
    if (!claim("set_exception")) return;
    slot_->error = std::move(error);
    complete(true);
  }

 private:
  bool claim(const char* operation) {
    if (slot_ == nullptr || set_) {
      async_internal::report_misuse(std::string("promise::") + operation +
                                    (set_ ? " on a promise already set; ignored" : " on a moved-from promise; ignored"));
      return false;
    }
    set_ = true;
    return true;
  }

  void complete(bool run_callback) {
    ready_.trigger();  // the value task runs here, inline, and the continuations behind it
    if (run_callback && callback_) callback_();
  }

  void break_if_unset() noexcept {
    if (slot_ == nullptr || set_) return;
    async_internal::report_misuse("promise destroyed without a value (a broken promise); its future holds broken_promise");
    set_ = true;
    slot_->error = std::make_exception_ptr(broken_promise("magpie::promise destroyed without a value"));
    complete(false);
  }

  std::shared_ptr<async_internal::slot<R>> slot_;
  task_event ready_;
  task<R> state_;
  std::function<void()> callback_;
  bool future_taken_ = false;
  bool set_ = false;
};

namespace async_internal {

// set_from runs `function` and sets `target` from what it returns or throws.
template <class R, class F>
void set_from(promise<R>& target, F& function) {
  try {
    if constexpr (std::is_void_v<R>) {
      function();
      target.set_value();
    } else {
      target.set_value(function());
    }
  } catch (...) {
    target.set_exception(std::current_exception());
  }
}

// pool_work runs an async_pool callable on a queued thread pool.
template <class R, class F>
class pool_work final : public queued_work {
 public:
  pool_work(F function, promise<R> target) : function_(std::move(function)), target_(std::move(target)) {}
  void do_threaded_work() override {
    set_from(target_, function_);
    delete this;
  }
  void abandon() override {
    target_.set_exception(std::make_exception_ptr(broken_promise("async_pool: the pool was destroyed before the work ran")));
    delete this;
  }

 private:
  F function_;
  promise<R> target_;
};

}  // namespace async_internal

// async_pool runs `f` on `pool` and returns the future of its result; `completion_callback`
// runs on the pool thread after the value is set.
template <class F>
auto async_pool(queued_thread_pool& pool, F&& f, std::function<void()> completion_callback = {}) {
  using R = std::invoke_result_t<std::decay_t<F>&>;
  promise<R> target(std::move(completion_callback));
  future<R> result = target.get_future();
  pool.add_queued_work(new async_internal::pool_work<R, std::decay_t<F>>(std::forward<F>(f), std::move(target)));
  return result;
}

// async_thread runs `f` on a new thread of its own (detached; it ends when `f` returns).
template <class F>
auto async_thread(F&& f, std::function<void()> completion_callback = {}) {
  using R = std::invoke_result_t<std::decay_t<F>&>;
  promise<R> target(std::move(completion_callback));
  future<R> result = target.get_future();
  std::thread([function = std::decay_t<F>(std::forward<F>(f)), target = std::move(target)]() mutable {
    async_internal::set_from(target, function);
  }).detach();
  return result;
}

// async runs `f` as `execution` says and returns the future of its result. The task-graph
// variants are magpie tasks (the free functions' scheduler): `completion_callback` runs as
// an inline task after the value is set, on the thread that set it.
template <class F>
auto async(async_execution execution, F&& f, std::function<void()> completion_callback = {}) {
  using R = std::invoke_result_t<std::decay_t<F>&>;
  switch (execution) {
    case async_execution::thread:
      return async_thread(std::forward<F>(f), std::move(completion_callback));
    case async_execution::thread_pool:
      return async_pool(global_queued_thread_pool(), std::forward<F>(f), std::move(completion_callback));
    case async_execution::task_graph:
    case async_execution::task_graph_main_thread:
      break;
  }
  placement where = execution == async_execution::task_graph_main_thread ? on_thread(named_thread::game) : placement();
  task<R> made = magpie::launch("async", std::forward<F>(f), where);
  if (completion_callback) (void)magpie::launch("async completion", std::move(completion_callback), made, run_inline);
  return future<R>(std::move(made));
}

}  // namespace magpie
