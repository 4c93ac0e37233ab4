// The core's trace points (magpie/trace.h): one inline call at each place the timeline
// shows, which costs one relaxed load while nothing records, and compiles to nothing in a
// build configured with -Dtrace=disabled (MAGPIE_TRACE 0 in magpie/config.h).
//
//   trace_point(category::task, event_kind::task_started, task, task->name);
//
// The recording itself (lib/trace/trace.cpp) is out of line: a trace point that records is a
// call, a clock read and a 40-byte store into the thread's own ring buffer.
#pragma once

#include <magpie/config.h>

#include <atomic>
#include <cstdint>

namespace magpie::detail::tracing {

// category: which of trace::options' switches an event depends on.
enum category : std::uint32_t { task = 1, scheduler = 2, client = 4, user = 8 };

enum class event_kind : std::uint8_t {
  // tasks: id is the task
  task_launched,   // name; value: the launching thread's running task (0 at top level)
  task_edge,       // value: the prerequisite; arg: edge_kind
  task_scheduled,  // made ready and queued
  task_retracted,  // a waiter is about to run it (its next task_started is on the waiter)
  task_started,    // its body begins on this thread (a slice opens)
  task_finished,   // its body returned; arg 1 when it threw (the slice closes)
  task_completed,  // complete: its subsequents may go
  // waits: id is the task waited for
  wait_began,
  wait_ended,
  // scheduler: id is the scheduler
  stole,           // arg: the victim worker's index (~0u: a lent or named deque)
  parked,          // value: workers parked, counting this one
  unparked,        // value: workers parked after this one left
  standby_entered,
  standby_left,
  named_queue_began,  // arg: the named thread's index
  named_queue_ended,
  // user and client events: id unused
  scope_began,
  scope_ended,
  instant,
  counter,         // value: the double's bits
};

// recording_categories is the categories recording now (0: not recording).
extern std::atomic<std::uint32_t> recording_categories;

// record appends one event to the calling thread's buffer (lib/trace/trace.cpp).
void record(event_kind kind, const void* id, const char* name, std::uint64_t value, std::uint32_t arg) noexcept;

#if MAGPIE_TRACE
inline bool on(category wanted) noexcept {
  // relaxed: a trace point that misses a start or stop by a moment records one event more
  // or less; the buffers' own publication orders what is recorded
  return (recording_categories.load(std::memory_order_relaxed) & wanted) != 0;
}

inline void trace_point(category wanted, event_kind kind, const void* id, const char* name = nullptr,
                        std::uint64_t value = 0, std::uint32_t arg = 0) noexcept {
  if (on(wanted)) [[unlikely]] {
    record(kind, id, name, value, arg);
  }
}
#else
inline constexpr bool on(category) noexcept { return false; }
inline void trace_point(category, event_kind, const void*, const char* = nullptr, std::uint64_t = 0,
                        std::uint32_t = 0) noexcept {}
#endif

}  // namespace magpie::detail::tracing
