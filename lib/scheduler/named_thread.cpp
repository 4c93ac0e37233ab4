// Named threads: user-owned threads (game, render, …) that drain their own FIFO queues.
#include "scheduler_impl.h"
#include "../trace/trace_buffers.h"

#include <magpie/detail/thread_tag.h>

#include <magpie/chaos.h>
#include <magpie/diagnostics.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>

namespace magpie {

std::string named_thread_name(std::uint32_t index) {
  switch (index) {
    case 0: return "game";
    case 1: return "render";
    case 2: return "rhi";
    case 3: return "audio";
    default: return "user " + std::to_string(index - 4);
  }
}

std::string calling_thread_name() {
  const thread_context& context = this_thread_context();
  if (context.named >= 0) return "the " + named_thread_name(static_cast<std::uint32_t>(context.named)) + " thread";
  if (context.self != nullptr) {
    return std::string(context.self->standby ? "standby " : "") +
           (context.self->kind == worker_kind::background ? "background worker " : "worker ") +
           std::to_string(context.self->index);
  }
  std::ostringstream id;
  id << std::this_thread::get_id();
  return "thread " + id.str();
}

namespace {

std::string thread_name(std::uint32_t index) { return named_thread_name(index); }

// detach_grace is how long the destructor waits for a named thread whose processing call
// the shutdown ended to detach: long enough for a thread that only has to be scheduled again.
constexpr std::chrono::seconds detach_grace{1};

}  // namespace

std::array<std::atomic<std::uint64_t>, 256> attachable_serial{};

namespace {

std::string queue_name(std::uint32_t index, thread_queue queue) {
  return thread_name(index) + (queue == thread_queue::main ? " (main queue)" : " (local queue)");
}

thread_queue queue_of(const named_queue& source, const named_thread_state& state) {
  return &source == &state.queues[0] ? thread_queue::main : thread_queue::local;
}

bool valid(named_thread thread) {
  if (thread.index() < named_thread::max_count) return true;
  report(diagnostic_kind::misuse, "scheduler: named thread index " + std::to_string(thread.index()) +
                                      " is out of range (max " + std::to_string(named_thread::max_count) + ")");
  return false;
}

work_item* pop_next(named_queue& queue) {
  if (work_item* item = queue.high.try_pop()) return item;
  return queue.normal.try_pop();
}

// process_guard claims a named queue for processing on the calling thread, or reports why
// it cannot: the thread is not attached as that named thread, or it is already
// processing that queue (re-entry).
class process_guard {
 public:
  process_guard(scheduler::impl& owner, named_thread thread, thread_queue queue, const char* operation)
      : queue_(owner.named[thread.index()].queues[static_cast<std::size_t>(queue)]) {
    const thread_context& context = this_thread_context();
    if (context.owner != &owner || context.named != static_cast<int>(thread.index())) {
      report(diagnostic_kind::misuse, std::string("scheduler: ") + operation + "(" + thread_name(thread.index()) +
                                          ") called on a thread not attached as that named thread");
      return;
    }
    if (queue_.processing.exchange(true, std::memory_order_acquire)) {  // acquire: pairs with the release in the destructor
      report(diagnostic_kind::misuse, std::string("scheduler: ") + operation + " re-entered " +
                                          queue_name(thread.index(), queue) + ", which is already being processed");
      return;
    }
    claimed_ = true;
    detail::tracing::trace_point(detail::tracing::scheduler, detail::tracing::event_kind::named_queue_began, &owner, nullptr, 0, thread.index());
  }
  ~process_guard() {
    if (!claimed_) return;
    detail::tracing::trace_point(detail::tracing::scheduler, detail::tracing::event_kind::named_queue_ended, nullptr);
    queue_.processing.store(false, std::memory_order_release);  // release: pairs with the acquire above
  }
  process_guard(const process_guard&) = delete;
  process_guard& operator=(const process_guard&) = delete;

  bool claimed() const { return claimed_; }

 private:
  named_queue& queue_;
  bool claimed_ = false;
};

}  // namespace

void scheduler::schedule(detail::work_item* item, named_thread thread, thread_queue queue, bool high_priority) {
  if (!valid(thread)) {
    item->handler(item, detail::work_action::discard);
    return;
  }
  if (!impl_->accepts_from_this_thread()) {
    detail::discard_late_work(item, "sent to a named thread");
    return;
  }
  named_thread_state& state = impl_->named[thread.index()];
  named_queue& target = state.queues[static_cast<std::size_t>(queue)];
  detail::chaos::point(detail::chaos::site::named_queue);
  (high_priority ? target.high : target.normal).push(item);
  state.wake.notify_one();
  // relaxed: after notify_one's seq_cst fence, against the waiter's store of it before its
  // prepare_wait and re-check of the queues (Dekker): it sees the item, or we see it
  if (detail::event_count<>* waiter = state.blocked_waiter.load(std::memory_order_relaxed)) waiter->notify_all();
}

void scheduler::attach(named_thread thread) {
  if (!valid(thread)) return;
  thread_context& context = this_thread_context();
  if (context.self != nullptr) {
    report(diagnostic_kind::misuse, "scheduler: a worker thread cannot attach as named thread " +
                                        thread_name(thread.index()));
    return;
  }
  if (context.named >= 0 && !drop_dead_attachment()) {
    report(diagnostic_kind::misuse, "scheduler: this thread is already attached as " +
                                        thread_name(static_cast<std::uint32_t>(context.named)));
    return;
  }
  if (context.running > 0) {
    // The item's runner restores this thread's context when the item returns, which would
    // undo the attach and leave the named thread marked attached to nobody.
    report(diagnostic_kind::misuse, "scheduler: attach() called inside a work item this thread runs; ignored "
                                    "(attach before running work, or after it returns)");
    return;
  }
  if (impl_->named[thread.index()].attached.exchange(true, std::memory_order_acq_rel)) {  // acq_rel: one owner at a time
    report(diagnostic_kind::misuse, "scheduler: named thread " + thread_name(thread.index()) +
                                        " is already attached to another thread");
    return;
  }
  detail::attach_context(*impl_, thread.index(), impl_->named[thread.index()].deque);
  detail::scheduler_tls.attached_serial = impl_->serial;
  detail::scheduler_tls.attached_slot = impl_->slot.index();
  // relaxed: every attach to this scheduler stores the same value, which its own attacher
  // reads back; close_attachments' release store is what a later reader must see
  attachable_serial[detail::scheduler_tls.attached_slot].store(impl_->serial, std::memory_order_relaxed);
  detail::tracing::set_thread_role(detail::tracing::thread_role::named, thread.index());
  chaos::set_thread_identity(0x10000 + thread.index());
  impl_->named[thread.index()].deque.set_owner(std::this_thread::get_id());
  // release: a thief that sees the bit also sees the deque's new owner binding
  impl_->named_deques_in_use.fetch_or(std::uint32_t{1} << thread.index(), std::memory_order_release);
}

void scheduler::detach() {
  thread_context& context = this_thread_context();
  if (context.owner != impl_.get() || context.named < 0) {
    // Nothing to undo here: the thread is not attached to this scheduler. Changed nothing.
    std::string where = "is not attached as a named thread to any scheduler";
    if (context.named >= 0) {
      where = "is attached as the " + thread_name(static_cast<std::uint32_t>(context.named)) +
              " thread to another scheduler, not to this one";
    }
    report(diagnostic_kind::misuse, "scheduler: detach() called on " + calling_thread_name() + ", which " + where +
                                        "; ignored");
    return;
  }
  auto index = static_cast<std::uint32_t>(context.named);
  for (thread_queue queue : {thread_queue::main, thread_queue::local}) {
    // Only the attached thread processes its queues, so a claimed one is this thread's own:
    // its processing loop would go on waiting for the named thread's work unattached, beside
    // whichever thread attaches next (two waiters on a wake-up meant for one).
    // relaxed: this thread's own flag
    if (impl_->named[index].queues[static_cast<std::size_t>(queue)].processing.load(std::memory_order_relaxed)) {
      report(diagnostic_kind::misuse, "scheduler: detach() called while processing " + queue_name(index, queue) +
                                          "; ignored (return from the processing call first)");
      return;
    }
  }
  if (context.running > 0) {
    // As in attach: the item's runner would restore the attached context on return, and
    // this thread would go on using a deque another thread may attach to meanwhile.
    report(diagnostic_kind::misuse, "scheduler: detach() called inside a work item this thread runs (as " +
                                        thread_name(index) + "); ignored (detach after it returns)");
    return;
  }
  impl_->named[index].attached.store(false, std::memory_order_release);  // release: pairs with attach's exchange
  detail::detach_context();
  detail::scheduler_tls.attached_serial = 0;
}

bool drop_dead_attachment() noexcept {
  thread_context& context = this_thread_context();
  if (context.named < 0 || !attached_scheduler_gone()) return false;
  std::string name = thread_name(static_cast<std::uint32_t>(context.named));
  detail::detach_context();
  detail::scheduler_tls.attached_serial = 0;
  report(diagnostic_kind::misuse,
         "scheduler: the " + name + " thread was still attached to a scheduler that has been destroyed; detached "
         "now (detach a named thread before its scheduler goes)",
         severity::warning);
  return true;
}

void scheduler::impl::close_attachments() {
  // A named thread whose processing call the shutdown ended usually detaches next (process,
  // then detach): its detach must find this scheduler still here, so it is waited for, up to
  // detach_grace. One that stays attached longer is reported below.
  const auto give_up = stall_watch::clock::now() + detach_grace;
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    if ((processing_ended & (std::uint32_t{1} << index)) == 0) continue;
    // acquire: pairs with detach's release store, the thread's last touch of this scheduler
    while (named[index].attached.load(std::memory_order_acquire) && stall_watch::clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // release: pairs with drop_dead_attachment's acquire load, after which an attached thread
  // knows this scheduler gone
  attachable_serial[slot.index()].store(0, std::memory_order_release);
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    // acquire: pairs with attach's exchange (or detach's release store)
    if (!named[index].attached.load(std::memory_order_acquire)) continue;
    report(diagnostic_kind::misuse,
           "scheduler: destroyed on " + calling_thread_name() + " while the " + thread_name(index) +
               " thread is still attached to it: detach it first; that thread must not touch this scheduler "
               "again, and its next scheduler::current(), attach() or wait detaches it with a report");
  }
}

std::size_t scheduler::process_until_idle(named_thread thread, thread_queue queue) {
  if (!valid(thread)) return 0;
  process_guard guard(*impl_, thread, queue, "process_until_idle");
  if (!guard.claimed()) return 0;
  named_queue& source = impl_->named[thread.index()].queues[static_cast<std::size_t>(queue)];
  std::size_t processed = 0;
  while (work_item* item = pop_next(source)) {
    if (impl_->execute(item, nullptr)) ++processed;  // not the entry of a task a waiter retracted
  }
  return processed;
}

void scheduler::process_until_request_return(named_thread thread, thread_queue queue) {
  if (!valid(thread)) return;
  process_guard guard(*impl_, thread, queue, "process_until_request_return");
  if (!guard.claimed()) return;
  impl_->process_until_return(thread.index(), queue, nullptr);
}

int scheduler::impl::unattached_with_work() const noexcept {
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    const named_thread_state& state = named[index];
    // acquire: pairs with attach's exchange (a thread attached since is seen attached); a
    // stale look only delays the report by one relook
    if (state.attached.load(std::memory_order_acquire)) continue;
    for (const named_queue& each : state.queues) {
      if (!each.high.looks_empty() || !each.normal.looks_empty()) return static_cast<int>(index);
    }
  }
  return -1;
}

void scheduler::impl::process_until_return(std::uint32_t index, thread_queue queue, const detail::awaited_work* awaited) {
  detail::prepare_to_help_or_block();  // it blocks: others may need what this thread holds aside
  named_thread_state& state = named[index];
  named_queue& source = state.queues[static_cast<std::size_t>(queue)];
  stall_watch watch;  // armed once the loop is about to block, for `awaited` only
  bool unattached_reported = awaited != nullptr && awaited->unattached_reported;
  auto next_unattached_look = std::chrono::steady_clock::time_point::min();
  for (;;) {
    bool ran = false;
    while (work_item* item = pop_next(source)) {
      execute(item, nullptr);
      ran = true;
    }
    if (ran) watch.progressed();
    if (source.return_requested.exchange(false, std::memory_order_acq_rel)) return;  // acq_rel: sees what the requester did first
    // Entered after shutdown: nothing will be queued here again.
    if (stopping.load(std::memory_order_acquire)) return;  // acquire: pairs with shutdown's release
    auto key = state.wake.prepare_wait();
    if (!source.high.looks_empty() || !source.normal.looks_empty() ||
        source.return_requested.load(std::memory_order_relaxed)) {  // relaxed: ordered by the event count's fence
      state.wake.cancel_wait();
      continue;
    }
    if (awaited == nullptr) {
      state.wake.commit_wait(key);
      continue;
    }
    // A wait's loop: it reports, about to block, an unattached named thread with work queued
    // (the awaited work may need it), and once a block without progress past stall_after.
    auto now = std::chrono::steady_clock::now();
    auto left = watch.limit(stall_after, now);
    if (!unattached_reported) {
      if (now >= next_unattached_look) {
        if (int idle = unattached_with_work(); idle >= 0) {
          unattached_reported = true;
          report(diagnostic_kind::misuse,
                 awaited->describe(awaited->state) + " waited for on " + calling_thread_name() +
                     " while work is queued on the " + thread_name(static_cast<std::uint32_t>(idle)) +
                     " thread, which no thread has attached: if it needs that work, the wait goes on until a "
                     "thread attaches as " + thread_name(static_cast<std::uint32_t>(idle)) + " and runs its queue",
                 severity::warning);
        } else {
          next_unattached_look = now + unattached_relook;
        }
      }
      if (!unattached_reported) left = std::min<std::chrono::nanoseconds>(left, next_unattached_look - now);
    }
    if (left == std::chrono::nanoseconds::max()) {
      state.wake.commit_wait(key);
    } else {
      state.wake.commit_wait_for(key, left);
    }
    auto after = std::chrono::steady_clock::now();
    if (watch.due(stall_after, after)) {
      report(diagnostic_kind::stalled,
             awaited->describe(awaited->state) + " waited for on " + calling_thread_name() +
                 " (processing its queue " + queue_name(index, queue) + ") has not completed after " +
                 std::to_string(watch.waited_ms(after)) + " ms; the wait goes on",
             severity::warning);
    }
  }
}

void detail::process_until_return_for(scheduler& owner, named_thread thread, thread_queue queue,
                                      const awaited_work& awaited) {
  if (!valid(thread)) return;
  scheduler::impl& state = scheduler_access::of(owner);
  process_guard guard(state, thread, queue, "process_until_request_return");
  if (!guard.claimed()) return;
  state.process_until_return(thread.index(), queue, &awaited);
}

bool scheduler::impl::end_named_processing() {
  bool found = false;
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    named_thread_state& state = named[index];
    for (named_queue& source : state.queues) {
      // acquire: pairs with process_guard's release (what the processing ran is seen)
      if (!source.processing.load(std::memory_order_acquire)) continue;
      found = true;
      processing_ended |= std::uint32_t{1} << index;
      // The processing thread runs what is queued, then sees the request: a loop of
      // process_until_request_return returns, a process_until_idle returns by itself.
      source.return_requested.store(true, std::memory_order_release);  // release: pairs with the loop's acq_rel exchange
      state.wake.notify_all();
      stall_watch watch;
      while (source.processing.load(std::memory_order_acquire)) {  // acquire: as above
        auto now = stall_watch::clock::now();
        (void)watch.limit(stall_after, now);  // arms it
        if (watch.due(stall_after, now)) {
          report(diagnostic_kind::stalled,
                 "scheduler: shutdown on " + calling_thread_name() + " has waited " +
                     std::to_string(watch.waited_ms(now)) + " ms for the " + queue_name(index, queue_of(source, state)) +
                     " to be run empty and its processing call to return",
                 severity::warning);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }
  return found;
}

void scheduler::request_return(named_thread thread, thread_queue queue) {
  if (!valid(thread)) return;
  named_thread_state& state = impl_->named[thread.index()];
  // release: pairs with the acq_rel exchange in process_until_request_return
  state.queues[static_cast<std::size_t>(queue)].return_requested.store(true, std::memory_order_release);
  state.wake.notify_all();
}

bool scheduler::is_processing(named_thread thread, thread_queue queue) const noexcept {
  if (thread.index() >= named_thread::max_count) return false;
  return impl_->named[thread.index()].queues[static_cast<std::size_t>(queue)].processing.load(
      std::memory_order_acquire);  // acquire: pairs with process_guard's release
}

bool scheduler::is_attached(named_thread thread) const noexcept {
  if (thread.index() >= named_thread::max_count) return false;
  return impl_->named[thread.index()].attached.load(std::memory_order_acquire);  // acquire: pairs with attach's exchange
}

std::optional<named_thread> scheduler::current_named_thread() noexcept {
  int index = this_thread_context().named;
  if (index < 0 || drop_dead_attachment()) return std::nullopt;
  return named_thread(static_cast<std::uint32_t>(index));
}

bool scheduler::impl::run_one_named_item(std::uint32_t index) {
  named_thread_state& state = named[index];
  for (named_queue& source : state.queues) {
    // acquire: pairs with the release below or in process_guard, as a process call would
    if (source.processing.exchange(true, std::memory_order_acquire)) continue;  // never re-enter a queue
    work_item* item = pop_next(source);
    if (item != nullptr) execute(item, nullptr);
    source.processing.store(false, std::memory_order_release);  // release: pairs with the acquire above
    if (item != nullptr) return true;
  }
  if (!workers.empty()) return false;  // its deque is the workers' to run (see the declaration)
  if (auto mine = state.deque.pop()) {
    execute(*mine, nullptr);
    return true;
  }
  return false;
}

void scheduler::impl::discard_stranded_named_work() {
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    for (thread_queue queue : {thread_queue::main, thread_queue::local}) {
      named_queue& source = named[index].queues[static_cast<std::size_t>(queue)];
      while (work_item* item = pop_next(source)) {
        // Named before the discard (the handler may free the item), for what it makes ready.
        // Appended piecewise, not "'" + string: GCC 12's -Wrestrict misfires on that at -O3.
        std::string stranded = "'";
        stranded += item->name;
        stranded += "' queued on ";
        stranded += queue_name(index, queue);
        detail::scheduler_tls.discarding_stranded_work = &stranded;  // see discard_late_work
        bool was_work = item->handler(item, detail::work_action::discard);
        detail::scheduler_tls.discarding_stranded_work = nullptr;
        if (was_work) report(diagnostic_kind::never_ran, "scheduler: " + stranded + " never ran: the scheduler shut down");
      }
    }
  }
}

}  // namespace magpie
