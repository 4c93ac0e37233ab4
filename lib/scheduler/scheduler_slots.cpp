// The table of living schedulers (scheduler_slot) and the pins that keep one from being
// freed while a thread outside its pool runs its work (scheduler_pin).
#include "scheduler_impl.h"
#include "task_census.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace magpie {

std::array<std::atomic<scheduler::impl*>, 256> scheduler_slot::living{};
constinit scheduler_slot::marker scheduler_slot::markers[2] = {};
std::array<std::atomic<bool>, 256> scheduler_slot::closing{};

namespace {
// Where the next slot search starts: round the table, so that a slot just freed is the last
// to be taken again (cheap insurance; retirement is what keeps a dead scheduler's tasks out).
std::atomic<std::size_t> next_slot_search{0};
}  // namespace

bool scheduler_slot::claim(std::size_t index, scheduler::impl* owner) noexcept {
  // acquire: pairs with the previous owner's release of the slot (nullptr or retired), so
  // its start_closing's store comes before our clearing of the flag below, not after it
  scheduler::impl* seen = living[index].load(std::memory_order_acquire);
  // Open again before the slot is published: the CAS's release carries it to a pinner that
  // reads the new owner (scheduler_pin reads the owner, then the flag).
  if (seen == nullptr || seen == retired()) closing[index].store(false, std::memory_order_relaxed);  // relaxed: as said
  if (seen == nullptr) {
    // acq_rel: a slot's new owner sees the previous owner's release (its destruction)
    return living[index].compare_exchange_strong(seen, owner, std::memory_order_acq_rel,
                                                 std::memory_order_relaxed);  // relaxed: we look on
  }
  if (seen != retired()) return false;
  // A retired slot is free once the last task naming it is gone. The census is read with
  // the slot marked claiming: read while it was only retired, another claimant could take
  // the slot, and its scheduler die with tasks alive, between our read and our CAS. Nothing
  // can make a task naming a retired or claiming slot, so the count only falls.
  // acq_rel: see the retirement's release (and with it the tasks the census counts)
  if (!living[index].compare_exchange_strong(seen, claiming(), std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {  // relaxed: we look on
    return false;
  }
  bool free = detail::live_tasks_naming(static_cast<std::uint8_t>(index)) == 0;
  living[index].store(free ? owner : retired(), std::memory_order_release);  // release: pairs with the next claim
  return free;
}

scheduler_slot::scheduler_slot(scheduler::impl* owner) {
  std::size_t start = next_slot_search.fetch_add(1, std::memory_order_relaxed);  // relaxed: only spreads the searches
  for (std::size_t step = 0; step < living.size(); ++step) {
    std::size_t i = (start + step) % living.size();
    if (claim(i, owner)) {
      index_ = static_cast<std::uint8_t>(i);
      next_slot_search.store(i + 1, std::memory_order_relaxed);  // relaxed: as above
      return;
    }
  }
  throw std::length_error(
      "magpie: 256 schedulers are alive at once (counting destroyed ones whose tasks are still alive), the most "
      "there can be");
}

namespace detail {

// pin_record is one thread's pin counts, one per slot (scheduler_pin). Records are never
// freed: a thread that exits hands its record to the next thread that pins, so close walks
// the list without a lock while threads come and go.
struct pin_record {
  std::array<std::atomic<std::uint16_t>, 256> depth{};
  std::atomic<bool> in_use{true};
  pin_record* next = nullptr;  // written before the record is published
};

}  // namespace detail

namespace {

using detail::pin_record;
using detail::scheduler_tls;

std::atomic<pin_record*> pin_records{nullptr};

// pin_record_return hands this thread's record back when the thread exits. A pin taken
// after that (by another thread_local's destructor) takes a record it keeps.
struct pin_record_return {
  pin_record_return() = default;
  pin_record_return(const pin_record_return&) = delete;
  pin_record_return& operator=(const pin_record_return&) = delete;
  ~pin_record_return() {
    scheduler_tls.own_pin_record->in_use.store(false, std::memory_order_release);  // release: pairs with the next taker's CAS
    scheduler_tls.own_pin_record = nullptr;
    scheduler_tls.pin_record_returned = true;
  }
};

[[gnu::noinline]] pin_record* take_pin_record() {
  pin_record* taken = nullptr;
  for (pin_record* each = pin_records.load(std::memory_order_acquire); each != nullptr; each = each->next) {  // acquire: pairs with the push below
    bool in_use = false;
    // acquire: sees the previous user's last unpin (all its counts are zero)
    if (each->in_use.compare_exchange_strong(in_use, true, std::memory_order_acquire, std::memory_order_relaxed)) {  // relaxed: we look on
      taken = each;
      break;
    }
  }
  if (taken == nullptr) {
    taken = new pin_record;
    taken->next = pin_records.load(std::memory_order_relaxed);  // relaxed: the CAS below decides
    // release: publishes the record (and its zeroed counts) to close's walk
    while (!pin_records.compare_exchange_weak(taken->next, taken, std::memory_order_release, std::memory_order_relaxed)) {  // relaxed: we retry
    }
  }
  scheduler_tls.own_pin_record = taken;
  if (!scheduler_tls.pin_record_returned) {
    thread_local pin_record_return returner;  // constructed once: returns the record at thread exit
    (void)returner;
  }
  return taken;
}

}  // namespace

scheduler_pin::scheduler_pin(std::uint8_t index) noexcept {
  scheduler::impl* seen = scheduler_slot::at(index);
  if (this_thread_context().owner == seen) {
    // Its own worker or attached thread, or inside its work under an outer pin: the
    // scheduler outlives this without a pin (a closing slot names no scheduler: pinned below).
    owner_ = seen;
    return;
  }
  pin_record* record = scheduler_tls.own_pin_record != nullptr ? scheduler_tls.own_pin_record : take_pin_record();
  std::atomic<std::uint16_t>& depth = record->depth[index];
  // relaxed: only this thread writes its counts; the barrier below orders the store before
  // the look at the slot, against close's store and heavy barrier
  depth.store(static_cast<std::uint16_t>(depth.load(std::memory_order_relaxed) + 1), std::memory_order_relaxed);
  detail::std_atomics::light_barrier();
  seen = scheduler_slot::at_published(index);
  depth_ = &depth;
  if (scheduler_slot::is_retired(seen) || scheduler_slot::is_closing(index)) {
    unpin();
    depth_ = nullptr;
    return;
  }
  owner_ = seen;
}

void scheduler_pin::unpin() noexcept {
  // relaxed load: only this thread writes its counts. release store: pairs with close's
  // acquire look, ordering everything this thread did to the scheduler before its destruction
  depth_->store(static_cast<std::uint16_t>(depth_->load(std::memory_order_relaxed) - 1), std::memory_order_release);
}

bool scheduler_slot::is_closing(std::uint8_t index) noexcept {
  // relaxed: read after at_published's acquire, which orders claim's clearing before it;
  // against start_closing the barriers decide (the pinner's look sees the store, or the
  // closer's walk sees the pin)
  return closing[index].load(std::memory_order_relaxed);
}

void scheduler_slot::start_closing() noexcept {
  // seq_cst, and the heavy barrier: a pinner's look after its light barrier sees this, or
  // the walks in is_pinned see its count (and the record it may just have published)
  closing[index_].store(true, std::memory_order_seq_cst);
  detail::std_atomics::heavy_barrier();
}

bool scheduler_slot::pinned_here() const noexcept {
  // relaxed: this thread's own count
  const pin_record* mine = scheduler_tls.own_pin_record;
  return mine != nullptr && mine->depth[index_].load(std::memory_order_relaxed) != 0;
}

bool scheduler_slot::is_pinned() const noexcept {
  for (pin_record* each = pin_records.load(std::memory_order_acquire); each != nullptr; each = each->next) {  // acquire: pairs with take_pin_record's push
    if (each->depth[index_].load(std::memory_order_acquire) != 0) return true;  // acquire: pairs with the unpin's release
  }
  return false;
}

scheduler_slot::~scheduler_slot() {
  // Every task naming this slot was made before now (launching on a scheduler being
  // destroyed is a use after free), so the census is a bound from above from here on.
  scheduler::impl* after = detail::live_tasks_naming(index_) == 0 ? nullptr : retired();
  living[index_].store(after, std::memory_order_release);  // release: pairs with the next owner's claim
}

}  // namespace magpie
