// Pipes: the pipe's own state. How piped tasks join the chain is in task.cpp
// (ready_loop::join_pipe); see include/magpie/pipe.h.
#include "wait_internal.h"

#include <magpie/diagnostics.h>
#include <magpie/pipe.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace magpie {

pipe::pipe(const char* name) : pipe(name, detail::scheduler_for_free_functions()) {}

pipe::pipe(const char* name, scheduler& owner)
    : name_(name != nullptr ? name : ""),
      owner_(&owner),
      owner_slot_(detail::scheduler_access::of(owner).slot.index()) {}

namespace {
constexpr std::uint32_t sleeper_bit = std::uint32_t{1} << 31;
constexpr std::uint32_t count_of(std::uint32_t word) noexcept { return word & ~sleeper_bit; }
}  // namespace

pipe::~pipe() {
  // Only tasks not yet completed are misuse: a completed one's completer may still be on
  // its way out of the pipe, and is waited for quietly.
  std::uint32_t uncompleted = uncompleted_.load(std::memory_order_acquire);  // acquire: pairs with task_completing's decrement
  if (uncompleted != 0) {
    report(diagnostic_kind::misuse, std::string("pipe '") + name_ + "' destroyed with " +
                                        std::to_string(uncompleted) + " unfinished tasks; waiting for them");
  }
  // acquire: pairs with task_finished's decrement, so no completer touches the pipe after
  if (count_of(unfinished_.load(std::memory_order_acquire)) != 0) wait_until_empty();
}

bool pipe::has_work() const noexcept {
  return uncompleted_.load(std::memory_order_acquire) != 0;  // acquire: pairs with task_completing's decrement
}

bool pipe::is_in_context() const noexcept { return detail::current_pipe() == this; }

bool pipe::wait_until(const std::chrono::steady_clock::time_point* deadline) noexcept {
  detail::no_worker_nap nap;
  stall_watch watch;  // armed only once the wait is about to block
  detail::unattached_look unattached;
  for (;;) {
    std::uint32_t word = unfinished_.load(std::memory_order_acquire);  // acquire: pairs with task_finished's decrement
    if (count_of(word) == 0) {
      // Clear a sleeper bit left behind, so the next emptying does not wake anyone.
      if (word != 0) unfinished_.compare_exchange_strong(word, 0, std::memory_order_relaxed);  // relaxed: only the bit changes
      return true;
    }
    // Looked up each time, pinned: the scheduler may be destroyed meanwhile. While a piped
    // task lives its slot is not reused (it is retired), and then its tasks complete on the
    // thread that readies them, which wakes us: there is nothing to help with.
    bool napping = false;  // see the block below
    std::chrono::milliseconds stall_after{0};
    {
      scheduler_pin pin(owner_slot_);  // never held while blocked
      if (scheduler::impl* pool = pin.get()) stall_after = pool->stall_after;
      // A named thread attached to the pipe's scheduler runs its own queues meanwhile (a piped
      // task bound to it runs nowhere else), as its task waits do; nothing wakes it for a send
      // there while it sleeps on the pipe, so its blocks are naps.
      if (scheduler::impl* pool = pin.get(); pool != nullptr && this_thread_context().owner == pool &&
                                             this_thread_context().named >= 0) {
        if (detail::run_own_named_work()) {
          nap.helped();
          watch.progressed();
          continue;
        }
        napping = true;
      }
      if (scheduler::impl* pool = pin.get(); pool != nullptr && pool->workers.empty()) {
        // Nobody else runs the tasks. Not from inside a body: see detail::help (task_wait.cpp).
        if (detail::tasks_tls.innermost_running == nullptr && pool->facade.try_run_one()) {
          nap.helped();
          watch.progressed();
          continue;
        }
        napping = true;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (deadline != nullptr && now >= *deadline) return false;
    if ((word & sleeper_bit) == 0 &&
        !unfinished_.compare_exchange_weak(word, word | sleeper_bit,
                                           std::memory_order_seq_cst,    // seq_cst: pairs with task_finished's decrement
                                           std::memory_order_relaxed)) {  // relaxed: we only retry
      continue;
    }
    blocking_scope blocked;
    // Without workers the block is a nap, and the loop helps after it: a piped task's
    // prerequisite may be made ready by another thread that then goes away
    // (detail::no_worker_nap).
    auto left = deadline != nullptr ? std::chrono::duration_cast<std::chrono::nanoseconds>(*deadline - now)
                                    : std::chrono::nanoseconds::max();
    if (napping) left = std::min(left, nap.next());
    left = std::min({left, watch.limit(stall_after, now), unattached.look(owner_slot_, detail::target_none, now)});
    if (int index = unattached.due(); index >= 0) report_unattached(static_cast<std::uint32_t>(index));
    if (left == std::chrono::nanoseconds::max()) {
      detail::std_atomics::wait(unfinished_, word | sleeper_bit);
      continue;
    }
    detail::std_atomics::wait_for(unfinished_, word | sleeper_bit, left.count());
    auto after = std::chrono::steady_clock::now();
    if (watch.due(stall_after, after)) report_stalled(watch.waited_ms(after));
  }
}

void pipe::report_stalled(long long waited_ms) const noexcept {
  report(diagnostic_kind::stalled,
         std::string("pipe '") + name_ + "' waited for on " + calling_thread_name() + " still has " +
             // relaxed: a sample for the report
             std::to_string(count_of(unfinished_.load(std::memory_order_relaxed))) + " unfinished tasks after " +
             std::to_string(waited_ms) + " ms; the wait goes on",
         severity::warning);
}

void pipe::report_unattached(std::uint32_t index) const noexcept {
  std::string thread = named_thread_name(index);
  report(diagnostic_kind::misuse,
         std::string("pipe '") + name_ + "' is waited for on " + calling_thread_name() + " while work is queued on the " +
             thread + " thread, which no thread has attached: if the pipe's tasks need it, the wait goes on until a "
             "thread attaches as " + thread + " and runs its queue",
         severity::warning);
}

namespace detail {

void pipe_access::task_added(magpie::pipe& p) noexcept {
  p.uncompleted_.fetch_add(1, std::memory_order_relaxed);  // relaxed: the launcher itself is not waiting
  p.unfinished_.fetch_add(1, std::memory_order_relaxed);   // relaxed: as above
}

void pipe_access::task_completing(magpie::pipe& p) noexcept {
  // release: a thread that reads the drop (has_work, ~pipe) sees the task's effects
  p.uncompleted_.fetch_sub(1, std::memory_order_release);
}

void pipe_access::task_finished(magpie::pipe& p, task_base* task) noexcept {
  chaos::point(chaos::site::pipe_handover);
  task_base* expected = task;
  // acq_rel: as join_pipe's exchange — emptying the slot takes back its reference
  if (p.last_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed)) {
    drop_reference(task);
  }
  // acq_rel: a waiter that reads zero sees every piped task's effects
  std::uint32_t before = p.unfinished_.fetch_sub(1, std::memory_order_acq_rel);
  // Only the word's address is used from here: the pipe may already be destroyed.
  if (count_of(before) == 1 && (before & sleeper_bit) != 0) std_atomics::wake_all(p.unfinished_);
}

}  // namespace detail
}  // namespace magpie
