// Coroutine tasks: suspending, resuming, and giving up on a coroutine that cannot resume.
#include "task_internal.h"

#include <magpie/coroutine.h>
#include <magpie/diagnostics.h>

#include <string>

namespace magpie::detail {

namespace {
using resumption_task = task_impl<resumer, void>;
}  // namespace

void resume_later(std::coroutine_handle<> frame, coro_promise_base& promise, task_base* after, placement where) {
  if (!promise.done) {
    // The first suspension, so still inside the coroutine task's own run: the event nests
    // in it before anything can resume the coroutine.
    promise.done.emplace(promise.owner->name);
    magpie::add_nested(*promise.done);
  }
  resumption_task* resumption = resumption_task::create(resumer(frame, &promise), after != nullptr ? 1 : 0);
  initialise(resumption, promise.owner->name, where.kind(), scheduler_for_free_functions(), where.task_priority(),
             where.target());
  resumption->kind_and_priority |= task_base::resumes_coroutine;
  // Nobody holds a handle to it: only the system's reference. relaxed: nothing else can
  // reach the task yet; the launch below publishes it
  resumption->references.store(task_base::one_reference, std::memory_order_relaxed);
  // After this the coroutine may resume on another thread at once: `promise` is not ours.
  if (after != nullptr) {
    launch_behind(resumption, &after, 1, resumption->own_group());
  } else {
    launch_task(resumption, nullptr);
  }
}

// max_inline_await_depth bounds the bodies on this stack below which an awaited task still
// runs inline: past it the coroutine suspends as usual, and resumes from a queue with an
// empty stack (a chain of coroutines each awaiting the next must not recurse without end).
constexpr unsigned max_inline_await_depth = 64;

// A chain of coroutines deeper than the bound gains nothing from running inline: the
// deepest await is refused, so the awaited task beneath every level on the stack suspends,
// and every level suspends as well after its inline run — both costs paid, and the
// suspensions, made while the stack unwinds, lay the chain out in memory in the reverse of
// the order it completes in (530 ns per level against 371 with no inline runs). So once an
// await on this thread has been refused at the bound, its awaits suspend at once, as before
// inline runs, until an inline run completes its task again: one await in
// inline_probe_period still tries, and a task that completes (a chain's or a tree's leaf)
// turns inline runs back on.
constexpr unsigned inline_probe_period = 64;

// past_inline_bound: an await on this thread was refused at the depth bound, and no inline
// run has completed its task since. awaits_since_probe counts the awaits that suspended at
// once since the last one that tried.
constinit thread_local bool past_inline_bound = false;
constinit thread_local unsigned awaits_since_probe = 0;

bool run_awaited_here(task_base* awaited) noexcept {
  // (Its own task, already begun, is left alone by retract: the claim fails.)
  if (awaited->kind() != task_kind::queued) return false;
  if (innermost_running != nullptr && innermost_running->depth >= max_inline_await_depth) {
    past_inline_bound = true;
    return false;
  }
  if (past_inline_bound) {
    if (++awaits_since_probe < inline_probe_period) return false;
    awaits_since_probe = 0;
  }
  retract(awaited, 0, nullptr, /*finish_open=*/false);  // its resumption may link to it (retract)
  if (!awaited->is_completed()) return false;
  past_inline_bound = false;
  return true;
}

void hand_over_failure(task_base* owner, std::exception_ptr failure) noexcept {
  owner->ensure_extras().exception = std::move(failure);
  owner->flags.fetch_or(has_exception, std::memory_order_relaxed);  // relaxed: published by completion
}

void resumer::abandon() noexcept {
  task_base* owner = promise_->owner;
  report(diagnostic_kind::never_ran, std::string("coroutine task '") + owner->name +
                                         "' was suspended when its scheduler shut down: it never resumes; frame freed");
  hand_over_failure(owner, std::make_exception_ptr(task_never_ran(std::string("coroutine task '") + owner->name +
                                                                  "' never resumed")));
  owner->flags.fetch_or(exception_observed, std::memory_order_relaxed);  // relaxed: as above; reported already
  std::optional<task_event> done = std::move(promise_->done);
  auto destroy_body = promise_->destroy_body;
  std::exchange(frame_, {}).destroy();
  destroy_body(owner);
  if (done) done->trigger();
}

void nest_in_coroutine(task_base* resumption, task_base* nested) noexcept {
  coro_promise_base* promise = static_cast<resumption_task*>(resumption)->body().promise();
  add_handle(nested);
  promise->done->add_prerequisites(task<>::adopt(nested));
}

}  // namespace magpie::detail
