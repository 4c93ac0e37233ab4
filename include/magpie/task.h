// Layer 3 — tasks: launch a callable, get a handle, wait for it or chain work after it.
//
//   magpie::task<int> answer = magpie::launch("answer", [] { return 42; });
//   magpie::task<> print = magpie::launch("print", [answer] { std::printf("%d\n", answer.get_result()); },
//                                         magpie::prerequisites(answer));
//   print.wait();
//
// A task runs once every prerequisite has completed. Completion means the body returned
// (its captures already destroyed) and every task it added with add_nested() completed.
// Where it runs is its placement: a priority (the default, `normal`, runs on any worker),
// `magpie::run_inline` (run at once by the thread that removed its last lock — the launcher,
// or whoever completed its last prerequisite), or `magpie::on_thread(named_thread::game)`.
//
// wait() first *retracts*: a task that has not started runs on the waiting thread, after
// its unfinished prerequisites (and then its nested tasks), so waiting never deadlocks on
// work that was launched; only then does it spin briefly and block. A body's exception is
// kept: wait() never throws, get_result() rethrows, has_exception() tells; a task whose
// exception nobody looked at is reported as unhandled when it is destroyed.
//
// The free functions use the scheduler of the task calling them, else the scheduler the
// calling named thread is attached to, else default_scheduler(). See docs/tasks.md.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/cancellation.h>
#include <magpie/detail/event_count.h>
#include <magpie/detail/task_base.h>
#include <magpie/scheduler.h>

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace magpie {

template <class R = void>
class task;

namespace detail {
struct task_access;
}

// task<void> is the handle every task converts to: copyable, reference counted. A
// default-constructed handle is invalid and counts as completed.
template <>
class task<void> {
 public:
  task() noexcept = default;
  // task(const task&), task(task&&) and operator= copy or move the handle: copies add a
  // reference to the same task, a moved-from handle is invalid.
  task(const task& other) noexcept : base_(other.base_) {
    if (base_ != nullptr) detail::add_handle(base_);
  }
  task(task&& other) noexcept : base_(std::exchange(other.base_, nullptr)) {}
  task& operator=(task other) noexcept {
    std::swap(base_, other.base_);
    return *this;
  }
  ~task() {
    if (base_ != nullptr) detail::drop_handle(base_);
  }

  // is_valid says whether the handle refers to a task.
  bool is_valid() const noexcept { return base_ != nullptr; }

  // is_completed says whether the task completed (true for an invalid handle).
  bool is_completed() const noexcept { return base_ == nullptr || base_->is_completed(); }

  // has_exception says whether the task completed with an exception from its body.
  bool has_exception() const noexcept { return base_ != nullptr && detail::observe_exception(base_); }

  // wait returns once the task completed. Never throws. (Looked at here, inline: a loop of
  // waits over handles that are mostly complete then overlaps one task's cache miss with
  // the next, as a loop of is_completed() does.)
  void wait() const noexcept {
    if (base_ != nullptr && !base_->is_completed()) detail::wait(base_, nullptr, &base_);
  }

  // wait returns whether the task completed within `timeout` (retraction still runs
  // first, so a wait may take longer than the timeout).
  template <class Rep, class Period>
  bool wait(std::chrono::duration<Rep, Period> timeout) const noexcept {
    if (base_ == nullptr || base_->is_completed()) return true;
    auto deadline = detail::deadline_after(timeout);  // saturating: max() waits for ever
    return detail::wait(base_, &deadline, &base_);
  }

  // try_retract_and_execute runs the task on this thread if it has not started yet (after
  // its prerequisites); true if it is now completed or ran here (nested tasks may still run).
  bool try_retract_and_execute() const noexcept {
    return base_ == nullptr || detail::try_retract_and_execute(base_, &base_);
  }

  // get_result waits, then rethrows the body's exception if it threw. A wait that cannot
  // end (the task waits for the caller's own task: reported) throws task_wait_failed
  // rather than hand back a result that was never made.
  void get_result() const {
    check_valid("get_result");
    if (!base_->is_completed() && !detail::wait(base_, nullptr, &base_)) detail::throw_wait_failed(base_);
    if (detail::has_failed(base_)) detail::rethrow_if_failed(base_);
  }

  // name is the name given at launch ("" for an invalid handle).
  const char* name() const noexcept { return base_ != nullptr ? base_->name : ""; }

  // runs_on is the named thread the task was placed on, if any (none for an invalid handle).
  std::optional<named_thread> runs_on() const noexcept {
    return base_ != nullptr ? detail::named_thread_of(base_) : std::nullopt;
  }

  friend bool operator==(const task& a, const task& b) noexcept { return a.base_ == b.base_; }

 protected:
  friend struct detail::task_access;

  explicit task(detail::task_base* adopted) noexcept : base_(adopted) {}

  // borrow_running makes `into` (empty) name the task whose body the calling thread runs,
  // without a reference of its own; forget_borrowed empties it again without dropping one.
  // For layers that hand a running body a handle to itself for the length of a call
  // (copies made meanwhile are ordinary handles). See this_task() for a handle to keep.
  static void borrow_running(task& into) noexcept { into.base_ = detail::current_task(); }
  static void forget_borrowed(task& borrowed) noexcept { borrowed.base_ = nullptr; }

  void check_valid(const char* operation) const {
    if (base_ != nullptr) return;
    detail::report_invalid(operation);
    throw std::logic_error(std::string("magpie::task::") + operation + " on an invalid handle");
  }

  detail::task_base* base_ = nullptr;
};

// task<R> is a handle to a task whose body returns R.
template <class R>
class task : public task<void> {
 public:
  task() noexcept = default;

  // get_result waits, rethrows the body's exception, else returns the result, which
  // lives as long as the task.
  R& get_result() const {
    task<void>::get_result();
    return static_cast<detail::task_with_result<R>*>(base_)->result();
  }

 private:
  friend struct detail::task_access;
  explicit task(detail::task_base* adopted) noexcept : task<void>(adopted) {}
};

namespace detail {
// task_access reaches what a handle holds, for magpie's own layers: the task object, the
// slot the handle keeps it in (it may change while a waiter runs a body that replaces the
// handle), and a handle made from a task object.
struct task_access {
  // base is the task object `handle` refers to (nullptr for an invalid handle).
  static task_base* base(const task<>& handle) noexcept { return handle.base_; }
  // base_slot is where `handle` keeps it.
  static task_base* const* base_slot(const task<>& handle) noexcept { return &handle.base_; }
  // releasable_slot is where `handle` keeps it, for a launch that may take over the handle's
  // reference: it empties the slot, without a drop, when it does.
  static task_base** releasable_slot(task<>& handle) noexcept { return &handle.base_; }
  // adopt makes a handle that takes over one handle reference of `base`.
  template <class R = void>
  static task<R> adopt(task_base* base) noexcept {
    return task<R>(base);
  }
};
}  // namespace detail

// task_never_ran is the exception a task holds when it was released without running
// (its scheduler shut down with the task stranded).
class task_never_ran : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// task_wait_failed is what get_result throws when the task cannot complete before the
// caller's own task does (it waits for a task this thread is running): reported, never a
// result that was never made.
class task_wait_failed : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// placement says where a task runs: a priority on any worker, inline, or a named thread.
class placement {
 public:
  // placement(p) runs the task at priority `p` on any worker; implicit, so that a priority
  // may be passed where a placement is wanted.
  constexpr placement(priority p = priority::normal) noexcept : priority_(p) {}  // NOLINT: implicit on purpose

  // task_priority, kind and target read the placement back: the priority, how the task runs
  // and the named thread and queue it targets (packed).
  constexpr priority task_priority() const noexcept { return priority_; }
  constexpr detail::task_kind kind() const noexcept { return kind_; }
  constexpr std::uint8_t target() const noexcept { return target_; }

  // make_inline is run_inline: the task runs on whichever thread removes its last lock.
  static constexpr placement make_inline() noexcept {
    placement result;
    result.kind_ = detail::task_kind::inline_run;
    return result;
  }
  // make_named runs the task on a named thread's main or local queue, at high or normal
  // priority.
  static constexpr placement make_named(named_thread thread, thread_queue queue, bool high) noexcept {
    placement result(high ? priority::high : priority::normal);
    result.target_ = detail::target_of(thread, queue, high);
    return result;
  }

 private:
  priority priority_ = priority::normal;
  detail::task_kind kind_ = detail::task_kind::queued;
  std::uint8_t target_ = detail::target_none;
};

// run_inline runs a task on whichever thread removes its last lock, without queueing it:
// for short continuations. A long inline body delays that thread's other work.
inline constexpr placement run_inline = placement::make_inline();

// on_thread runs a task on a named thread's queue (FIFO per producer, high before normal).
constexpr placement on_thread(named_thread thread, thread_queue queue = thread_queue::main,
                              bool high_priority = false) noexcept {
  return placement::make_named(thread, queue, high_priority);
}

// task_handle: anything that converts to task<> (a task<R> or a task_event).
template <class T>
concept task_handle = std::is_convertible_v<const T&, const task<>&>;

// prerequisite_range: a forward range of task handles, e.g. std::vector<task<int>>.
template <class T>
concept prerequisite_range = std::ranges::forward_range<const T&> &&
                             task_handle<std::ranges::range_value_t<const T&>>;

// prerequisite_source: what may follow the body in launch().
template <class T>
concept prerequisite_source = task_handle<T> || prerequisite_range<T>;

namespace detail {
template <class T>
inline constexpr bool is_task_handle_type = false;
template <class R>
inline constexpr bool is_task_handle_type<task<R>> = true;
}  // namespace detail

// handed_prerequisite: a task<R> passed to launch() as an rvalue. The launch takes the
// handle over (it is empty afterwards), and the link to the prerequisite keeps the handle's
// reference instead of adding one of its own.
template <class T>
concept handed_prerequisite = !std::is_lvalue_reference_v<T> && detail::is_task_handle_type<std::remove_cvref_t<T>>;

// prerequisites collects tasks and task events into one argument for launch().
template <task_handle... Handles>
std::array<task<>, sizeof...(Handles)> prerequisites(const Handles&... handles) {
  return {static_cast<const task<>&>(handles)...};
}

namespace detail {
// body_result_traits says, for what a body returns, the task's result type and the task
// object that runs the body: the body's return value itself, by task_impl, unless another
// header says otherwise (magpie/coroutine.h: a body returning coro<R> makes a task<R>).
template <class Returned>
struct body_result_traits {
  using task_result = Returned;
  template <class Body>
  using task_type = task_impl<Body, Returned>;
};
}  // namespace detail

// result_of is the result type of a task running `Body`.
template <class Body>
using result_of = typename detail::body_result_traits<std::invoke_result_t<std::decay_t<Body>&>>::task_result;

namespace detail {

// prerequisite_buffer holds the task objects of a prerequisite source. Up to 8 sit in the
// buffer itself; more, or handles a range makes as it is read, go in storage it allocates.
class prerequisite_buffer {
 public:
  template <class Source>
  explicit prerequisite_buffer(const Source& source) {
    if constexpr (task_handle<Source>) {
      add(task_access::base(source));
    } else if constexpr (std::is_lvalue_reference_v<std::ranges::range_reference_t<const Source&>>) {
      for (const auto& each : source) add(task_access::base(each));
    } else {
      // A range that makes its handles as it is read (a transform view, say): each one would
      // go at the end of its iteration, and with it perhaps the task, before the launch links
      // to it. Keep them until then.
      for (auto&& each : source) {
        std::vector<task<>>& kept = storage().kept;
        kept.push_back(static_cast<const task<>&>(each));
        add(task_access::base(kept.back()));
      }
    }
  }
  // prerequisite_buffer(handed, tag) holds one prerequisite given by rvalue: it takes the
  // handle over, and handed_slot() offers its reference to the launch.
  struct handed_tag {};
  prerequisite_buffer(task<>&& handed, handed_tag) : handed_(std::move(handed)) {
    add(task_access::base(handed_));
  }
  prerequisite_buffer() {}  // user-provided: value-initialising it would zero inline_
  prerequisite_buffer(const prerequisite_buffer&) = delete;
  prerequisite_buffer& operator=(const prerequisite_buffer&) = delete;

  task_base* const* data() const noexcept { return size_ <= inline_.size() ? inline_.data() : more_->spill.data(); }
  std::size_t size() const noexcept { return size_; }

  // handed_slot is the slot of the handle to data()[0] that the launch may take over (see
  // launch_behind), or nullptr when the prerequisites were not handed over.
  task_base** handed_slot() noexcept { return handed_.is_valid() ? task_access::releasable_slot(handed_) : nullptr; }

 private:
  // more_storage is what only a launch with more than 8 prerequisites, or with a range
  // that makes its handles, needs.
  struct more_storage {
    std::vector<task_base*> spill;
    std::vector<task<>> kept;  // handles a range made as it was read
  };

  more_storage& storage() {
    if (more_ == nullptr) more_ = std::make_unique<more_storage>();
    return *more_;
  }

  void add(task_base* each) {
    if (size_ < inline_.size()) [[likely]] {
      inline_[size_++] = each;
      return;
    }
    spill(each);
  }

  [[gnu::noinline]] void spill(task_base* each) {
    std::vector<task_base*>& spilled = storage().spill;
    if (spilled.empty()) spilled.assign(inline_.begin(), inline_.end());
    spilled.push_back(each);
    ++size_;
  }

  std::array<task_base*, 8> inline_;  // only the first size_ are read: no zeroing per launch
  std::size_t size_ = 0;
  std::unique_ptr<more_storage> more_;
  task<> handed_;  // a prerequisite handed over by rvalue, until the launch takes its reference
};

// create_and_launch is what every launch() comes down to.
template <class Body>
task<result_of<Body>> create_and_launch(scheduler& owner, magpie::pipe* into, const char* name, Body&& body,
                                        prerequisite_buffer&& before, placement where) {
  using R = result_of<Body>;
  using impl = typename body_result_traits<std::invoke_result_t<std::decay_t<Body>&>>::template task_type<std::decay_t<Body>>;
  impl* fresh = impl::create(std::forward<Body>(body), before.size());
  initialise(fresh, name, where.kind(), owner, where.task_priority(), where.target());
  auto handle = task_access::adopt<R>(fresh);
  if (before.size() != 0 && into == nullptr) {
    launch_behind(fresh, before.data(), before.size(), fresh->own_group(), before.handed_slot());
  } else {
    if (into != nullptr) enter_pipe(fresh, into);  // first: see enter_pipe
    if (before.size() != 0) add_prerequisites(fresh, before.data(), before.size(), fresh->own_group());
    launch_task(fresh, into);
  }
  return handle;
}

// launch_with sorts out launch()'s optional arguments.
template <class Body>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body, placement where = {}) {
  return create_and_launch(owner, into, name, std::forward<Body>(body), prerequisite_buffer(), where);
}
template <class Body, prerequisite_source Prerequisites>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body,
                 const Prerequisites& before, placement where = {}) {
  return create_and_launch(owner, into, name, std::forward<Body>(body), prerequisite_buffer(before), where);
}
template <class Body, handed_prerequisite Handed>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body, Handed&& before,
                 placement where = {}) {
  return create_and_launch(owner, into, name, std::forward<Body>(body),
                           prerequisite_buffer(static_cast<task<>&&>(before), prerequisite_buffer::handed_tag{}), where);
}

// With a cancellation token last: the body runs under it, or is skipped once it is canceled.
template <class Body>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body, cancellation_token& token) {
  return launch_with(owner, into, name, cancelable_body<std::decay_t<Body>>(std::forward<Body>(body), token));
}
template <class Body>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body, placement where,
                 cancellation_token& token) {
  return launch_with(owner, into, name, cancelable_body<std::decay_t<Body>>(std::forward<Body>(body), token), where);
}
template <class Body, prerequisite_source Prerequisites>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body,
                 const Prerequisites& before, cancellation_token& token) {
  return launch_with(owner, into, name, cancelable_body<std::decay_t<Body>>(std::forward<Body>(body), token), before);
}
template <class Body, prerequisite_source Prerequisites>
auto launch_with(scheduler& owner, magpie::pipe* into, const char* name, Body&& body,
                 const Prerequisites& before, placement where, cancellation_token& token) {
  return launch_with(owner, into, name, cancelable_body<std::decay_t<Body>>(std::forward<Body>(body), token), before,
                     where);
}

}  // namespace detail

template <class Body, class... Options>
auto scheduler::launch(const char* name, Body&& body, Options&&... options) {
  return detail::launch_with(*this, nullptr, name, std::forward<Body>(body), std::forward<Options>(options)...);
}

// launch starts `body` as a task: launch(name, body [, prerequisites] [, placement] [, token]),
// where a placement is a priority, run_inline or on_thread(...), and a token a
// cancellation_token& (magpie/cancellation.h) that skips the body once canceled. One
// prerequisite given as a task<R> rvalue (std::move(handle)), without a token, is taken
// over: the handle is empty afterwards, and the link keeps its reference instead of adding
// one (a continuation chain's step saves a read-modify-write).
template <class Body, class... Options>
auto launch(const char* name, Body&& body, Options&&... options) {
  return detail::scheduler_for_free_functions().launch(name, std::forward<Body>(body),
                                                       std::forward<Options>(options)...);
}

// add_nested makes the task the calling thread is running complete only after `nested`
// completes, without blocking the thread. Only from inside a running task.
inline void add_nested(const task<>& nested) noexcept {
  if (nested.is_valid()) detail::add_nested(detail::task_access::base(nested));
}

namespace detail {
template <class R, class... Args>
task<R> make_completed(Args&&... args) {
  auto* made = completed_task<R>::create(std::forward<Args>(args)...);
  initialise(made, "completed", task_kind::event, scheduler_for_free_functions(), priority::normal, target_none);
  auto handle = task_access::adopt<R>(made);
  complete_now(made);
  return handle;
}
}  // namespace detail

// make_completed_task<R>(args...) is a task that has already completed with R(args...).
template <class R, class... Args>
task<R> make_completed_task(Args&&... args) {
  return detail::make_completed<R>(std::forward<Args>(args)...);
}

// make_completed_task(value) deduces R from the value.
template <class T>
task<std::decay_t<T>> make_completed_task(T&& value) {
  return detail::make_completed<std::decay_t<T>>(std::forward<T>(value));
}

// is_in_task says whether the calling thread is running a task.
inline bool is_in_task() noexcept { return detail::current_task() != nullptr; }

// this_task is a handle to the task whose body the calling thread is running (the
// innermost one), or an invalid handle outside task bodies. A body can hand it out as its
// own completion event (the TaskGraph layer passes it to do_task) or compare it with
// another handle; waiting on it from inside its own body is reported.
inline task<> this_task() noexcept {
  detail::task_base* running = detail::current_task();
  if (running == nullptr) return {};
  detail::add_handle(running);
  return detail::task_access::adopt(running);
}

}  // namespace magpie
