// Cancellation: the thread's current token, and what a skipped task holds.
#include "task_internal.h"

#include <magpie/cancellation.h>

#include <exception>

namespace magpie::detail {

constinit thread_local const cancellation_token* current_cancellation = nullptr;

namespace {
// canceled_exception is made once and shared by every skipped task: skipping costs a
// reference count, not a throw.
const std::exception_ptr& canceled_exception() {
  static const std::exception_ptr shared = std::make_exception_ptr(task_canceled());
  return shared;
}
}  // namespace

void hold_canceled(task_base* task) noexcept {
  // No exception of its own (body_failure supplies task_canceled): a skip allocates no
  // extras and touches no shared reference count. exception_observed: a skipped task is
  // the outcome its canceler asked for, not an unhandled error.
  // relaxed: published by completion, as a thrown exception's flag
  task->flags.fetch_or(has_exception | exception_observed, std::memory_order_relaxed);
}

std::exception_ptr body_failure(const task_base* task) noexcept {
  if (task->extras != nullptr && task->extras->exception != nullptr) return task->extras->exception;
  return canceled_exception();
}

}  // namespace magpie::detail
