#include "task_census.h"

#include <magpie/detail/atomics.h>
#include <magpie/detail/task_base.h>

#include <array>
#include <atomic>

namespace magpie::detail {

// census_record is one thread's count of tasks created minus tasks destroyed, per slot.
// One writer at a time: its thread, or after that thread exits, the next thread that
// adopts the record (the counts carry over: only the sum over records means anything).
// Records start on cache lines of their own: each is written by its own thread.
struct alignas(cache_line) census_record {
  std::array<census_count, 256> net_by_slot{};
  std::atomic<bool> in_use{true};
  census_record* next = nullptr;  // written before the record is published, then never
};

namespace {

constinit std::atomic<census_record*> every_record{nullptr};

census_record* adopt_or_add() {
  // acquire: pairs with the publishing CAS below, so the walk sees each record's `next`
  for (census_record* each = every_record.load(std::memory_order_acquire); each != nullptr; each = each->next) {
    bool free = false;
    // acquire: pairs with the leaving thread's release, so its counts are ours to go on from
    if (!each->in_use.load(std::memory_order_relaxed) &&  // relaxed: only a guess before the CAS
        each->in_use.compare_exchange_strong(free, true, std::memory_order_acquire, std::memory_order_relaxed)) {  // relaxed: taken by another, look on
      return each;
    }
  }
  auto* fresh = new census_record();  // never freed: adopted by later threads instead (out of memory here ends the program)
  fresh->next = every_record.load(std::memory_order_relaxed);  // relaxed: only the CAS's guess
  // release: a reader that finds the record sees it whole
  while (!every_record.compare_exchange_weak(fresh->next, fresh, std::memory_order_release,
                                             std::memory_order_relaxed)) {  // relaxed: we only retry
  }
  return fresh;
}

// record_keeper hands this thread's record back at thread exit. A task destroyed on this
// thread after that (a thread_local handle's destructor) adopts a record for good.
struct record_keeper {
  record_keeper() = default;
  record_keeper(const record_keeper&) = delete;
  record_keeper& operator=(const record_keeper&) = delete;
  ~record_keeper() {
    census_record* mine = scheduler_tls.census_record_kept;
    scheduler_tls.census_record_kept = nullptr;
    scheduler_tls.census_counts = nullptr;
    scheduler_tls.census_record_returned = true;
    mine->in_use.store(false, std::memory_order_release);  // release: pairs with the adopter's acquire
  }
};

template <class Each>
std::int64_t sum_records(Each&& per_record) noexcept {
  std::int64_t total = 0;
  // acquire: pairs with adopt_or_add's release
  for (census_record* each = every_record.load(std::memory_order_acquire); each != nullptr; each = each->next) {
    total += per_record(*each);
  }
  return total;
}

}  // namespace

[[gnu::cold, gnu::noinline]] void add_to_census_unclaimed(std::uint8_t slot, std::int64_t delta) noexcept {
  census_record* mine = adopt_or_add();
  add_to_count(mine->net_by_slot[slot], delta);
  if (scheduler_tls.census_record_returned) {
    // Past this thread's keeper (a thread_local handle's destructor): nobody would hand a
    // kept record back, so it is borrowed for this count only.
    mine->in_use.store(false, std::memory_order_release);  // release: pairs with the next adopter's acquire
    return;
  }
  scheduler_tls.census_record_kept = mine;
  scheduler_tls.census_counts = mine->net_by_slot.data();
  thread_local record_keeper keeper;  // constructed once, on the first claim
  (void)keeper;
}

std::int64_t live_tasks_naming(std::uint8_t slot) noexcept {
  return sum_records([slot](const census_record& record) {
    // relaxed: each count has one writer, and the creations a caller must see reached it
    // through what handed it the slot (the retirement's release; see scheduler_slot::claim)
    return record.net_by_slot[slot].load(std::memory_order_relaxed);
  });
}

std::int64_t live_tasks() noexcept {
  return sum_records([](const census_record& record) {
    std::int64_t live = 0;
    // relaxed: as in live_tasks_naming (tests read it once the tasks they made are gone)
    for (const auto& net : record.net_by_slot) live += net.load(std::memory_order_relaxed);
    return live;
  });
}

}  // namespace magpie::detail
