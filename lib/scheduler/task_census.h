// Private to lib/: how many tasks are alive, per scheduler slot.
//
// A task names its scheduler by a one-byte slot (scheduler_slot). When a scheduler is
// destroyed while tasks that name it are still alive, its slot is retired instead of
// freed: reused, a task launched behind a late event would run on a stranger's scheduler.
// The census says when a retired slot's last task is gone. It costs no read-modify-write:
// each thread counts in a record of its own (a load and a store), and only a reader sums
// the records — which only the slot code and the tests do.
#pragma once

#include "thread_state.h"

#include <atomic>
#include <cstdint>

namespace magpie::detail {

inline void add_to_count(census_count& count, std::int64_t delta) noexcept {
  // relaxed: one writer; readers only sum, ordered by what handed the tasks over (see
  // live_tasks_naming)
  count.store(count.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

// add_to_census_unclaimed: the first count on this thread claims it a record (cold).
void add_to_census_unclaimed(std::uint8_t slot, std::int64_t delta) noexcept;

inline void add_to_census(std::uint8_t slot, std::int64_t delta) noexcept {
  census_count* counts = scheduler_tls.census_counts;  // this thread's record, per slot
  if (counts == nullptr) [[unlikely]] {
    add_to_census_unclaimed(slot, delta);
    return;
  }
  add_to_count(counts[slot], delta);
}

// count_created / count_destroyed: a task naming scheduler slot `slot` came / went.
inline void count_created(std::uint8_t slot) noexcept { add_to_census(slot, 1); }
inline void count_destroyed(std::uint8_t slot) noexcept { add_to_census(slot, -1); }

// live_tasks_naming: the tasks alive that name `slot`. Exact once nobody creates tasks
// naming it (its scheduler is gone): the sum can only fall from there, and a reading made
// while tasks are destroyed is never below the truth.
std::int64_t live_tasks_naming(std::uint8_t slot) noexcept;

}  // namespace magpie::detail
