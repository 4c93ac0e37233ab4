// Layer 3 — pipes: a chain of tasks that never run concurrently, without a thread of
// their own and without a mutex.
//
//   magpie::pipe audio("audio mixer");
//   audio.launch("mix", [&] { mixer.mix(); });          // runs on any worker,
//   audio.launch("apply", [&] { mixer.apply(); });      // but never beside "mix"
//   audio.wait_until_empty();                           // at shutdown only
//
// Tasks run one at a time in the order they become ready: launch order for tasks without
// prerequisites; a task still waiting for a prerequisite does not hold the pipe up, it
// joins when ready. The next task starts only after the previous one completed, nested
// tasks included. How: a piped task carries one extra lock, the pipe's; once only that
// lock remains it swaps itself into the pipe's "last task" slot and waits as a subsequent
// of the task it displaced (or, if there was none, is ready at once).
#pragma once

#include <magpie/detail/language.h>

#include <magpie/task.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace magpie {

namespace detail {
struct pipe_access;
}

// pipe serialises the tasks launched through it.
class pipe {
 public:
  // pipe uses the calling task's scheduler, else the calling named thread's, else the
  // default scheduler; or `owner`.
  explicit pipe(const char* name);
  pipe(const char* name, scheduler& owner);

  // ~pipe reports a pipe destroyed with unfinished tasks (they would outlive it), then
  // waits for them. A pipe may outlive its scheduler only to be waited on and destroyed:
  // its tasks then complete as never run once ready (see ~scheduler); launching through
  // it uses the destroyed scheduler.
  ~pipe();

  pipe(const pipe&) = delete;
  pipe& operator=(const pipe&) = delete;

  // launch starts `body` in this pipe: launch(name, body [, prerequisites] [, placement]).
  template <class Body, class... Options>
  auto launch(const char* name, Body&& body, Options&&... options) {
    return detail::launch_with(*owner_, this, name, std::forward<Body>(body), std::forward<Options>(options)...);
  }

  // has_work says whether a task launched here has not completed (waiting ones included).
  bool has_work() const noexcept;

  // wait_until_empty waits until has_work() is false; for shutdown, once nothing more is
  // launched. Returns false on time-out.
  bool wait_until_empty() noexcept { return wait_until(nullptr); }
  template <class Rep, class Period>
  bool wait_until_empty(std::chrono::duration<Rep, Period> timeout) noexcept {
    auto deadline = detail::deadline_after(timeout);  // saturating: max() waits for ever
    return wait_until(&deadline);
  }

  // is_in_context says whether the calling thread is running this pipe's task (the
  // innermost task it runs, so a task retracted from inside another pipe counts for that one).
  bool is_in_context() const noexcept;

  // name is the name the pipe was made with.
  const char* name() const noexcept { return name_; }

 private:
  friend struct detail::pipe_access;
  bool wait_until(const std::chrono::steady_clock::time_point* deadline) noexcept;
  // report_stalled reports a wait that made no progress for the scheduler's stall_report_after.
  void report_stalled(long long waited_ms) const noexcept;
  // report_unattached reports a wait while work is queued on named thread `index`, which no
  // thread has attached.
  void report_unattached(std::uint32_t index) const noexcept;

  const char* name_;
  scheduler* owner_;
  std::uint8_t owner_slot_;  // the scheduler's slot: says whether it is gone (waiting reads it)
  std::atomic<detail::task_base*> last_{nullptr};  // holds a reference while set
  // Counts tasks launched here that have not completed: each drops it just before it
  // completes, so a thread that has seen every task complete reads zero (has_work, ~pipe).
  std::atomic<std::uint32_t> uncompleted_{0};
  // The low 31 bits count tasks whose completer may still touch the pipe: each drops it
  // last, after it completed. The high bit says a thread sleeps on the word (a futex) until
  // it reaches zero, so the last task knows from its own decrement whether to wake it — and
  // touches nothing of the pipe after that.
  std::atomic<std::uint32_t> unfinished_{0};
};

}  // namespace magpie
