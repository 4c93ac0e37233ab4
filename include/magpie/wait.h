// Layer 3 — waiting for several tasks, and tasks that stand for several.
//
//   std::vector<magpie::task<int>> parts = ...;
//   magpie::wait_all(parts);                                     // deep retraction through each
//   if (auto first = magpie::wait_any(parts, 5ms)) use(parts[*first]);
//   magpie::task<> all = magpie::when_all(parts);                // completes after every part
//   magpie::task<> any = magpie::when_any(parts);                // completes after the first
//
// Ranges are any forward range of handles (tasks or task events); invalid handles count
// as completed. when_any and wait_any allocate one block of edges for the whole range,
// not a task per input.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/task.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <ranges>
#include <type_traits>

namespace magpie {

namespace detail {
task<> when_all(const prerequisite_buffer& inputs);
task<> when_any(const prerequisite_buffer& inputs);
std::optional<std::size_t> wait_any(const prerequisite_buffer& inputs,
                                    const std::chrono::steady_clock::time_point* deadline);
// (deadline_after, the saturating deadline every timed wait computes, comes with
// <magpie/task.h>, from detail/event_count.h.)
}  // namespace detail

namespace detail {
// for_each_in_wait_order visits a range last to first where it can: tasks launched in a
// row from this thread sit newest-on-top in its deque, so a waiter retracts each straight
// off the top instead of leaving queue entries behind. Where waits run this thread's queue
// in launch order (no workers: waits_in_launch_order), first to last.
template <class Range, class Visit>
bool for_each_in_wait_order(const Range& tasks, Visit visit) {
  if constexpr (std::ranges::bidirectional_range<const Range&>) {
    auto first = std::ranges::begin(tasks);
    if (first == std::ranges::end(tasks)) return true;
    auto in_launch_order = [](const task<>& oldest) { return oldest.is_valid() && waits_in_launch_order(task_access::base(oldest)); };
    if (in_launch_order(static_cast<const task<>&>(*first))) {
      for (const auto& each : tasks) {
        if (!visit(static_cast<const task<>&>(each))) return false;
      }
      return true;
    }
    for (auto each = std::ranges::end(tasks); each != std::ranges::begin(tasks);) {
      --each;
      if (!visit(static_cast<const task<>&>(*each))) return false;
    }
  } else {
    for (const auto& each : tasks) {
      if (!visit(static_cast<const task<>&>(each))) return false;
    }
  }
  return true;
}
}  // namespace detail

namespace detail {
// handle_batch hands the handles of a wait_all to the library a batch at a time (see
// detail::wait_all), by address: a body run meanwhile may replace a later one.
class handle_batch {
 public:
  explicit handle_batch(const std::chrono::steady_clock::time_point* deadline) noexcept : deadline_(deadline) {}

  // add queues one more handle; false once a batch timed out.
  bool add(const task<>& handle) noexcept {
    if (!handle.is_valid()) return true;
    slots_[size_++] = task_access::base_slot(handle);
    return size_ < capacity || flush();
  }
  // flush waits for the queued handles; false if one had not completed by the deadline.
  bool flush() noexcept {
    bool completed = wait_all(slots_, size_, deadline_);
    size_ = 0;
    return completed;
  }

 private:
  static constexpr std::size_t capacity = 64;  // one run (lib/tasks/wait_launch_order.cpp); small on a stack a waiting body may deepen
  const std::chrono::steady_clock::time_point* deadline_;
  std::size_t size_ = 0;
  task_base* const* slots_[capacity];
};

// wait_all_until is both wait_alls (deadline nullptr: none).
template <class Range>
bool wait_all_until(const Range& tasks, const std::chrono::steady_clock::time_point* deadline) {
  // Handles are kept by address only where the range holds them: a range that makes them as
  // it is read (a transform view) hands out temporaries, gone before the batch is waited for.
  if constexpr (std::derived_from<std::ranges::range_value_t<const Range&>, task<>> &&
                std::is_lvalue_reference_v<std::ranges::range_reference_t<const Range&>>) {
    handle_batch batch(deadline);
    return for_each_in_wait_order(tasks, [&batch](const task<>& one) { return batch.add(one); }) && batch.flush();
  } else {  // handles made as the range is read, or converted: no address to keep
    // Untimed, a wait returns early only on misuse (waiting on itself, reported): go on.
    return for_each_in_wait_order(tasks, [deadline](const task<>& one) {
      return !one.is_valid() || wait(task_access::base(one), deadline) || deadline == nullptr;
    });
  }
}
}  // namespace detail

// wait_all waits for every task in `tasks`, each with retraction. Tasks launched in a row
// from this thread and still on its deque are taken back together and run here.
template <prerequisite_range Range>
bool wait_all(const Range& tasks) {
  return detail::wait_all_until(tasks, nullptr);
}

// wait_all with a timeout returns false if some task had not completed in time.
template <prerequisite_range Range, class Rep, class Period>
bool wait_all(const Range& tasks, std::chrono::duration<Rep, Period> timeout) {
  auto deadline = detail::deadline_after(timeout);
  return detail::wait_all_until(tasks, &deadline);
}

// wait_any returns the index of a completed task (the first it finds), after waiting for
// one to complete; empty for an empty range.
template <prerequisite_range Range>
std::optional<std::size_t> wait_any(const Range& tasks) {
  return detail::wait_any(detail::prerequisite_buffer(tasks), nullptr);
}

// wait_any with a timeout is also empty on time-out.
template <prerequisite_range Range, class Rep, class Period>
std::optional<std::size_t> wait_any(const Range& tasks, std::chrono::duration<Rep, Period> timeout) {
  auto deadline = detail::deadline_after(timeout);
  return detail::wait_any(detail::prerequisite_buffer(tasks), &deadline);
}

// when_all is a task that completes once every task in `tasks` has.
template <prerequisite_range Range>
task<> when_all(const Range& tasks) {
  return detail::when_all(detail::prerequisite_buffer(tasks));
}

// when_any is a task that completes once some task in `tasks` has (at once for an
// empty range).
template <prerequisite_range Range>
task<> when_any(const Range& tasks) {
  return detail::when_any(detail::prerequisite_buffer(tasks));
}

}  // namespace magpie
