// Deques lent to threads outside a scheduler's pool (scheduler_impl.h, lent_deque): which
// thread holds which, and handing them back when the thread exits.
//
// A thread that launches on a scheduler without being one of its threads (`main` with a
// plain scheduler, say) borrows one of its deques on its first launch: its launches push
// there, its waits take their tasks back from there (alone or in runs), and workers steal
// from there, as from an attached thread's deque. The thread remembers what it holds by the
// scheduler's serial, never by its address, so a record of a scheduler since destroyed is
// simply stale; it hands its deques back when it exits, pinned (scheduler_pin) so that the
// scheduler cannot go meanwhile.
#include "scheduler_impl.h"

#include <cstddef>
#include <cstdint>
#include <thread>

namespace magpie {

namespace {

using detail::lent_record;
using detail::scheduler_tls;

// give_back returns the deque `record` names, if its scheduler still lives and is not
// closing, and clears the record.
void give_back(lent_record& record) noexcept {
  if (record.serial == 0) return;
  if (record.serial == scheduler_tls.last_lent_serial) scheduler_tls.last_lent_serial = 0;
  scheduler_pin pin(record.slot);
  if (scheduler::impl* owner = pin.get(); owner != nullptr && owner->serial == record.serial) {
    // release: pairs with the next borrower's CAS, which then sees this thread's last push
    // and pop of the deque
    owner->lent[record.index].lent.store(false, std::memory_order_release);
  }
  record = lent_record{};
}

// lent_records_return hands this thread's lent deques back when the thread exits.
struct lent_records_return {
  lent_records_return() = default;
  lent_records_return(const lent_records_return&) = delete;
  lent_records_return& operator=(const lent_records_return&) = delete;
  ~lent_records_return() {
    scheduler_tls.lent_records_returned = true;
    for (lent_record& record : scheduler_tls.lent_records) give_back(record);
  }
};

}  // namespace

detail::work_stealing_deque<work_item*>* scheduler::impl::find_borrowed_deque() noexcept {
  for (const lent_record& record : scheduler_tls.lent_records) {
    if (record.serial == serial) {
      scheduler_tls.last_lent_serial = serial;
      scheduler_tls.last_lent_deque = &lent[record.index].deque;
      return scheduler_tls.last_lent_deque;
    }
  }
  return nullptr;
}

detail::work_stealing_deque<work_item*>* scheduler::impl::lend_deque_slowly() noexcept {
  if (auto* held = find_borrowed_deque()) return held;
  return scheduler_tls.lent_records_returned ? nullptr : lend_new_deque();
}

detail::work_stealing_deque<work_item*>* scheduler::impl::lend_new_deque() noexcept {
  // Pinned first: that takes this thread's pin record before the returner below is made,
  // so it is still there when the returner runs at thread exit. And no deque is lent once
  // the scheduler is closing.
  scheduler_pin pin(slot.index());
  if (pin.get() != this) return nullptr;
  for (std::size_t i = 0; i < lent.size(); ++i) {
    bool taken = false;
    // acquire: pairs with give_back's release (the previous borrower's pushes and pops)
    if (!lent[i].lent.compare_exchange_strong(taken, true, std::memory_order_acquire,
                                              std::memory_order_relaxed)) {  // relaxed: we try the next
      continue;
    }
    lent[i].deque.set_owner(std::this_thread::get_id());
    // release: a thief that sees the bit also sees the deque's new owner binding
    lent_deques_in_use.fetch_or(std::uint32_t{1} << i, std::memory_order_release);
    lent_record* record = nullptr;
    for (lent_record& each : scheduler_tls.lent_records) {
      if (each.serial == 0 && record == nullptr) record = &each;
    }
    if (record == nullptr) {
      record = &scheduler_tls.lent_records[scheduler_tls.next_lent_replaced++ % detail::lent_records_per_thread];
      give_back(*record);
    }
    *record = lent_record{serial, slot.index(), static_cast<std::uint8_t>(i)};
    thread_local lent_records_return returner;  // constructed once: hands them back at thread exit
    (void)returner;
    return &lent[i].deque;
  }
  return nullptr;  // every one is lent: this thread's launches go to the injection queue
}

}  // namespace magpie
