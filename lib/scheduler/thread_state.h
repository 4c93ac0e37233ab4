// Private to lib/: everything the scheduler layer keeps per thread, in one place.
//
// scheduler_tls is constant-initialised and trivially destructible, so reading a field is
// one thread-pointer-relative load, as cheap as a thread_local of its own: no guard, no
// call, no destructor registration. What must happen at thread exit (deques lent to the
// thread go back, its pin and census records go to the next thread) is done by small
// function-local thread_locals with destructors, made on the cold path that first needs
// them (lent_deques.cpp, scheduler_slots.cpp, task_census.cpp). Those destructors run in
// the reverse order of their construction, interleaved with the user's own thread_locals,
// so a field is never assumed valid at exit: each returner sets its `*_returned` flag, and
// the code that would claim again checks the flag and works without a kept record (a
// borrowed one, or none) rather than make a record nobody would hand back.
//
// The public thread_context (include/magpie/detail/thread_context.h) stays apart: inline
// code in the public headers reads it.
#pragma once

#include <magpie/detail/deque.h>
#include <magpie/detail/work_item.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace magpie::detail {

struct pin_record;     // scheduler_slots.cpp
struct census_record;  // task_census.cpp

// census_count is one slot's tasks created minus tasks destroyed on one thread.
using census_count = std::atomic<std::int64_t>;

// lent_record names one deque lent to this thread: whose, and which.
struct lent_record {
  std::uint64_t serial = 0;  // its scheduler's (0: none)
  std::uint8_t slot = 0;     // where that scheduler is found (scheduler_slot)
  std::uint8_t index = 0;    // which of its lent deques
};

// lent_records_per_thread is how many schedulers a thread holds a deque of at once; a
// fifth makes it hand back the oldest record's.
inline constexpr unsigned lent_records_per_thread = 4;

// help_or_block_hook is what a layer above asks this thread to do before it helps or
// blocks (scheduler_impl.h, prepare_to_help_or_block).
using help_or_block_hook = void (*)() noexcept;

// scheduler_thread_state is the scheduler layer's per-thread data. Every field is read and
// written by its own thread only.
struct scheduler_thread_state {
  // Deques lent to this thread (lent_deques.cpp): what it holds, which record a fifth
  // scheduler replaces, and whether its returner has run (the thread is exiting: borrow no
  // more; launches go to the injection queue).
  lent_record lent_records[lent_records_per_thread] = {};
  unsigned next_lent_replaced = 0;
  bool lent_records_returned = false;
  // The lent deque found last, by its scheduler's serial, so that a thread launching on one
  // scheduler finds its deque with one comparison, inline (scheduler_impl.h,
  // borrowed_deque). Cleared when that deque is given back.
  std::uint64_t last_lent_serial = 0;
  work_stealing_deque<work_item*>* last_lent_deque = nullptr;

  // This thread's pin counts (scheduler_slots.cpp, scheduler_pin): null until its first
  // pin that needs one, and again once its returner has run (then pin_record_returned is
  // set and a later pin takes a record for good).
  pin_record* own_pin_record = nullptr;
  bool pin_record_returned = false;

  // This thread's census record (task_census.cpp) and its counts, which the inline
  // count_created / count_destroyed read: null until the first count, and again once the
  // record's keeper has run (then census_record_returned is set and a later count borrows a
  // record for that count only).
  census_record* census_record_kept = nullptr;
  census_count* census_counts = nullptr;
  bool census_record_returned = false;

  // The scheduler this thread is attached to as a named thread (named_thread.cpp), by
  // serial and slot, so that it can tell without touching the scheduler that it was
  // destroyed meanwhile (serial 0: none).
  std::uint64_t attached_serial = 0;
  std::uint8_t attached_slot = 0;

  // Set by a layer above while it holds queued work out of every queue on this thread (a
  // wait_all's run); null otherwise (scheduler_impl.h, prepare_to_help_or_block).
  help_or_block_hook before_help_or_block = nullptr;

  // Set while this thread discards one item stranded in a named-thread queue at shutdown:
  // that item and where it was queued (scheduler_impl.h, discard_late_work).
  const std::string* discarding_stranded_work = nullptr;

  // Where a steal by a thread that is no worker (a helper, a waiting thread) starts looking
  // (scheduler.cpp, steal): xorshift state, never zero.
  std::uint64_t helper_random = 0x2545'F491'4F6C'DD1Dull;
};

// scheduler_tls is the calling thread's scheduler_thread_state.
extern constinit thread_local scheduler_thread_state scheduler_tls;

}  // namespace magpie::detail
