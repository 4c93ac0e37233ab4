// The scheduler's shutdown: draining the queues until every worker is parked with nothing
// left, closing the scheduler's slot to threads outside the pool, the drain of suspended
// coroutines (install_shutdown_drain), ending named-thread processing, and joining the
// workers; a drain that stalls is reported.
#include "scheduler_impl.h"
#include "task_census.h"

#include <magpie/diagnostics.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace magpie {

namespace detail {
// installed_shutdown_drain is the drain install_shutdown_drain set, or null.
constinit std::atomic<shutdown_drain_fn> installed_shutdown_drain{nullptr};

void install_shutdown_drain(shutdown_drain_fn drain) noexcept {
  installed_shutdown_drain.store(drain, std::memory_order_release);  // release: pairs with the shutdown's acquire load
}
}  // namespace detail

bool scheduler::impl::quiescent() const {
  // seq_cst: everything a thread did before parking (acq_rel) is visible to the checks
  // below; the second load proves nobody parked or woke while we looked.
  std::uint64_t before = parked.load(std::memory_order_seq_cst);
  std::uint64_t threads = workers.size() +
                          standby[0].created.load(std::memory_order_acquire) +  // acquire: pairs with start_standby
                          standby[1].created.load(std::memory_order_acquire);
  if ((before & parked_mask) != threads) return false;
  for (const auto& queue : injection) {
    if (!queue.looks_empty()) return false;
  }
  for (const auto& each : workers) {
    if (!each->deque.empty()) return false;
  }
  for (const named_thread_state& state : named) {
    if (!state.deque.empty()) return false;
  }
  for (const lent_deque& each : lent) {
    if (!each.deque.empty()) return false;
  }
  return parked.load(std::memory_order_seq_cst) == before;
}

void scheduler::impl::shutdown() {
  const thread_context& caller = this_thread_context();
  if ((caller.owner == this && (caller.self != nullptr || caller.running > 0)) || slot.pinned_here()) {
    // Waiting for every worker to park from inside this scheduler's own work never ends.
    report(diagnostic_kind::misuse, "scheduler: shutdown called from work running on the same scheduler; ignored");
    return;
  }
  std::call_once(shut_down, [this] {
    accepting.store(false, std::memory_order_relaxed);  // relaxed: its readers read nothing after `false` (accepts_from_this_thread)
    drain_until_quiescent();
    // Threads outside the pool may still run its work (a waiter retracting a task): the
    // slot closes to them, and the work they still run is waited for. Meanwhile queued work
    // runs here too: such a thread may wait for what it launched, with no worker to run it.
    // Between looks close sleeps briefly; a thread outside the pool that runs this
    // scheduler's work for stall_report_after meanwhile is reported once.
    stall_watch closing_watch;
    slot.close([this, &closing_watch] {
      work_item* item = find_work_as_helper();
      if (item != nullptr) {
        execute(item, nullptr);
        closing_watch.progressed();
        return true;
      }
      auto now = stall_watch::clock::now();
      (void)closing_watch.limit(stall_after, now);  // arms it
      if (closing_watch.due(stall_after, now)) report_stalled_drain(closing_watch.waited_ms(now), /*outside=*/true);
      return false;
    });
    drain_until_quiescent();
    // Coroutines still suspended now await work that nothing will complete: each is
    // reported and freed, and what its task's completion makes ready still runs.
    // acquire: pairs with install_shutdown_drain's release store
    if (detail::shutdown_drain_fn drain = detail::installed_shutdown_drain.load(std::memory_order_acquire)) {
      while (drain(*this)) drain_until_quiescent();
    }
    // A named thread processing its queue is part of the drain: it runs what is queued there,
    // then its processing call returns, before anything is freed.
    while (end_named_processing()) drain_until_quiescent();
    stopping.store(true, std::memory_order_release);  // release: pairs with the workers' acquire loads
    foreground_wake.notify_all();
    background_wake.notify_all();
    for (standby_pool& pool : standby) pool.wake.notify_all();
    for (auto& each : workers) each->thread.join();
    for (standby_pool& pool : standby) {
      std::lock_guard lock(pool.creation);
      for (auto& each : pool.threads) each->thread.join();
    }
    discard_stranded_named_work();
  });
}

void scheduler::impl::drain_until_quiescent() {
  // Run what is queued on this thread too (the only way with zero workers), then wait
  // until every worker is parked with nothing left anywhere.
  stall_watch watch;
  for (;;) {
    while (work_item* item = find_work_as_helper()) {
      execute(item, nullptr);
      watch.progressed();
    }
    auto key = parking_news.prepare_wait();
    if (quiescent()) {
      parking_news.cancel_wait();
      break;
    }
    // Work pushed by a thread outside the pool wakes nobody when there are no workers: look
    // again rather than wait for a park that never comes.
    bool queued = false;
    for (const auto& queue : injection) queued = queued || !queue.looks_empty();
    for (const lent_deque& each : lent) queued = queued || !each.deque.empty();
    for (const named_thread_state& state : named) queued = queued || !state.deque.empty();
    if (queued) {
      parking_news.cancel_wait();
      continue;
    }
    // Armed only here, about to block: a drain that is waiting for a worker still running
    // something (a body that waits for what comes after this destructor) is reported once.
    auto now = stall_watch::clock::now();
    std::chrono::nanoseconds limit = watch.limit(stall_after, now);
    if (limit == std::chrono::nanoseconds::max()) {
      parking_news.commit_wait(key);
    } else if (!parking_news.commit_wait_for(key, limit) && watch.due(stall_after, stall_watch::clock::now())) {
      report_stalled_drain(watch.waited_ms(stall_watch::clock::now()), /*outside=*/false);
    }
  }
}

void scheduler::impl::report_stalled_drain(long long waited_ms, bool outside) {
  std::string alive = std::to_string(detail::live_tasks_naming(slot.index())) + " of its tasks alive";
  std::string waited_for;
  if (outside) {
    waited_for = "a thread outside its pool to finish the task of its own it runs (a waiter ran it; " + alive + ")";
  } else {
    // relaxed: a sample for the report
    unsigned parked_now = static_cast<unsigned>(parked.load(std::memory_order_relaxed) & parked_mask);
    unsigned threads = static_cast<unsigned>(workers.size()) +
                       standby[0].created.load(std::memory_order_relaxed) +  // relaxed: as above
                       standby[1].created.load(std::memory_order_relaxed);   // relaxed: as above
    waited_for = "its workers to finish what they run (" + std::to_string(threads - parked_now) + " of " +
                 std::to_string(threads) + " still busy, " + alive + ")";
  }
  report(diagnostic_kind::stalled,
         "scheduler: shutdown on " + calling_thread_name() + " has waited " + std::to_string(waited_ms) + " ms for " +
             waited_for + ": a task body may be waiting for something that happens only after the scheduler is destroyed",
         severity::warning);
}

}  // namespace magpie
