// Private to lib/: what the tasks layer keeps per thread, in one place.
//
// tasks_tls is constant-initialised and trivially destructible, so reading a field is one
// thread-pointer-relative load, as cheap as a thread_local of its own: no guard, no call,
// no destructor registration. Ready loops and held runs still run after this thread's
// thread_locals with destructors are gone (a static scheduler's shutdown runs leftover
// work on this thread; a thread_local handle's destructor triggers an event), so nothing
// here may depend on a destructor having not run yet: the spill stack's storage is freed
// by a separate guard (task.cpp, spill_guard), which then sets spill_guard_gone, and a
// spill after that allocates again and frees its storage as soon as it is empty.
//
// Outside it: the current cancellation token, which inline code in the public headers
// reads on every cancellable body (cancellation.h).
#pragma once

#include "launch_site.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace magpie::detail {

class held_run;        // held_runs.h
struct running_frame;  // task_internal.h

// completion_spill_stack holds the completions the ready loops on this thread could not
// keep inline (task.cpp, ready_loop): it grows for a wide fan-out of completions at once,
// and keeps its capacity.
struct completion_spill_stack {
  std::uintptr_t* items = nullptr;
  std::size_t size = 0;
  std::size_t capacity = 0;

  void push(std::uintptr_t item) noexcept {
    if (size == capacity) grow();
    items[size++] = item;
  }
  std::uintptr_t pop() noexcept { return items[--size]; }
  void grow() noexcept;  // task.cpp
};

// stale_entry_estimate counts the queue entries this thread may have left stale in its own
// deque and not trimmed yet, and the trims in a row that found none (wait_retraction.cpp,
// "Stale entries"): an estimate that only says whether to look.
struct stale_entry_estimate {
  std::size_t left = 0;
  unsigned misses = 0;
};

// stack_bounds is the calling thread's stack, as far as a deep wait needs it
// (wait_retraction.cpp, stack_running_low): lowest is 0 until read, 1 when unknown.
struct stack_bounds {
  std::uintptr_t lowest = 0;
  std::size_t size = 0;
};

// tasks_thread_state is the tasks layer's per-thread data. Every field is read and written
// by its own thread only.
struct tasks_thread_state {
  // This thread's newest held run, or nullptr (held_runs.h): set and cleared by held_run's
  // constructor and destructor, read before this thread helps or blocks.
  held_run* innermost_held_run = nullptr;

  // The task body this thread runs innermost, or nullptr (task_internal.h, running_frame):
  // pushed and popped by run_body, read by every wait and by current_task.
  running_frame* innermost_running = nullptr;

  // The depth (running_frame::depth) of the body beneath the bodies this thread runs as the
  // last thread standing of a stuck pool, 0 when it runs none (task_wait.cpp,
  // stuck_pool_help): a body beneath it that one of them waits for is a cycle the pool made.
  unsigned stuck_help_depth = 0;

  // Whether a held run was spilled during this thread's wait_alls in progress (held_runs.h),
  // and how many of them are in progress: the marker lasts until the last one returns.
  bool spilled_in_wait_all = false;
  unsigned wait_all_depth = 0;

  // The launch site of the launch-order run this thread is in (wait_launch_order.cpp), or
  // none: while it is set, a completion's ready loop runs at once only tasks of that site
  // (task.cpp, can_run_here), so the run starts nothing its rule would not.
  launch_site launch_order_run;

  // This thread's stack, read by a wait past stack_look_depth bodies (wait_internal.h).
  stack_bounds stack;

  // Retraction's estimate of the stale entries this thread left in its deque.
  stale_entry_estimate stale_entries;

  // This thread's lane among a concurrency limiter's push counters, plus one (0: none given
  // yet; concurrency_limiter.cpp, pusher_lane). The same lane serves every limiter.
  std::uint32_t limiter_push_lane = 0;

  // The ready loops' spill stack (task.cpp), and whether its guard has freed it at thread
  // exit (from then on a spill frees the storage when the stack empties).
  completion_spill_stack spilled_completions;
  bool spill_guard_gone = false;
};

static_assert(std::is_trivially_destructible_v<tasks_thread_state>, "read after this thread's destructors ran");

// tasks_tls is the calling thread's tasks_thread_state.
extern constinit thread_local tasks_thread_state tasks_tls;

}  // namespace magpie::detail
