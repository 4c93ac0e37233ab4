// Fork-join: spawning task_group children and joining them (include/magpie/task_group.h).
#include "../tasks/held_runs.h"
#include "../scheduler/scheduler_impl.h"
#include "thread_state.h"

#include <magpie/detail/task_base.h>
#include <magpie/diagnostics.h>
#include <magpie/task_group.h>

#include <string>
#include <thread>
#include <utility>

namespace magpie {

constinit thread_local detail::forkjoin_thread_state detail::forkjoin_tls;

namespace {

// where_called names, for a report, the calling thread and the task it runs, if any.
std::string where_called() {
  std::string where = "on " + calling_thread_name();
  if (const detail::task_base* running = detail::current_task()) where += std::string(" inside task '") + running->name + "'";
  return where;
}

}  // namespace

scheduler::impl* task_group::default_owner() { return &detail::scheduler_access::of(default_scheduler()); }

task_group::task_group(scheduler& owner)
    : owner_(&detail::scheduler_access::of(owner)), home_(detail::this_thread_tag()) {
  remember_home();
}

void task_group::join_unjoined() noexcept {
  // acquire: pairs with child_done
  std::uint32_t left = outstanding(unfinished_.load(std::memory_order_acquire), 0);
  // An exception between run() and wait() is not misuse: join, and drop the children's.
  if (std::uncaught_exceptions() == 0) {
    report(diagnostic_kind::misuse, "task_group destroyed " + where_called() + " with " + std::to_string(left) +
                                        " children not joined; joining them now");
  }
  join(0);
}

void task_group::wake_workers() noexcept { owner_->wake_for(priority::normal); }

void task_group::spawn_general(detail::group_child_base* child, priority at) {
  const bool home = is_home();
  if (home) {
    // relaxed: this thread is the only writer; the joiner reads it as outstanding() says
    spawned_at_home_.store(spawned_at_home_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    unfinished_.fetch_add(one_child, std::memory_order_relaxed);  // relaxed: published to the child's runner by the queue push
  }
  try {
    queue(child, at, home);
  } catch (...) {
    // No memory to grow a queue: the child is not queued, so it must not be counted either
    // (run() destroys it and rethrows), or the join would wait for it for ever.
    if (home) {
      // relaxed: as the increment above
      spawned_at_home_.store(spawned_at_home_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    } else {
      child_done();  // as a finished child: wakes a joiner that slept on this one
    }
    throw;
  }
}

void task_group::queue(detail::group_child_base* child, priority at, bool home) {
  thread_context& context = this_thread_context();
  auto* own = owner_->own_deque(context);
  // Only joining threads run anything, and this one has no deque: a queue would hand the
  // children back oldest first, nesting joins without bound. Or the home thread has no
  // deque (a standby worker) or is nested as deep as help() goes: its join could not
  // take them back from the shared queue. Either way the joiner keeps them.
  bool keep_private = own == nullptr && (owner_->workers.empty() ||
                                         (home && (context.self != nullptr ||
                                                                detail::forkjoin_tls.foreign_depth >= detail::max_foreign_depth)));
  if (keep_private) {
    child->next_private = private_children_.load(std::memory_order_relaxed);  // relaxed: only the CAS's guess
    while (!private_children_.compare_exchange_weak(child->next_private, child,
                                                    std::memory_order_release,    // release: the joiner's exchange sees the child whole
                                                    std::memory_order_relaxed)) {  // relaxed: we only retry
    }
    return;
  }
  // The common case without schedule()'s second look at the thread: normal work onto our
  // own deque (an attached thread's only while the scheduler accepts work from outside).
  if (own != nullptr && at == priority::normal &&
      (context.self != nullptr || owner_->accepting.load(std::memory_order_relaxed))) {  // relaxed: see task_group.h's spawn
    own->push(child);
    owner_->wake_for(at);
    return;
  }
  owner_->schedule(child, at);
}

bool task_group::run_private_children() noexcept {
  // acquire: pairs with spawn's release CAS. Taking the whole stack means no pop races a push.
  detail::group_child_base* taken = private_children_.exchange(nullptr, std::memory_order_acquire);
  if (taken == nullptr) return false;
  while (taken != nullptr) {
    detail::group_child_base* next = taken->next_private;  // read before running: the child frees itself
    owner_->execute(taken, nullptr);
    taken = next;
  }
  return true;
}

void task_group::child_started() noexcept {
  const thread_context& context = this_thread_context();
  // A standby worker keeps a child's children private (it has no deque to steal from).
  if (context.owner == owner_ && context.self != nullptr && !context.self->standby) {
    // relaxed: the pool's workers are made in the scheduler's constructor, before anyone can
    // reach a group of it, and help() only steals from the worker's deque, whose own atomics
    // publish the items (a standby worker, made later, is never named: TSan once caught a
    // joiner reading one made after it started)
    thief_.store(context.self, std::memory_order_relaxed);
  }
}

void task_group::child_failed(std::exception_ptr error) noexcept {
  // acq_rel: one child wins the right to keep its exception; wait() reads it after the
  // join, ordered by the children's count decrements
  if (!failed_.exchange(true, std::memory_order_acq_rel)) first_exception_ = std::move(error);
}

void task_group::child_done() noexcept {
  // acq_rel: the joiner's acquire load of zero sees everything every child did
  std::uint32_t before = unfinished_.fetch_sub(one_child, std::memory_order_acq_rel);
  // Only the word's address is used from here: the joiner may already be gone.
  if ((before >> 1 & (~std::uint32_t{0} >> 1)) == 1 && (before & sleeper_bit) != 0) {
    detail::std_atomics::wake_all(unfinished_);
  }
}

bool task_group::help(int joiner_depth) noexcept {
  if (joiner_depth >= detail::max_foreign_depth) return false;
  detail::spill_held_runs();  // a child may lie among what this thread holds aside
  thread_context& context = this_thread_context();
  worker* self = context.owner == owner_ ? context.self : nullptr;
  work_item* item = nullptr;
  // Leapfrog: the thief of one of our children has our grandchildren on its deque.
  auto* thief = static_cast<worker*>(thief_.load(std::memory_order_relaxed));  // relaxed: a worker made with the scheduler (child_started)
  if (thief != nullptr && thief != self) {
    if (auto loot = thief->deque.steal()) item = *loot;
  }
  if (item == nullptr) item = self != nullptr ? owner_->find_work(self) : owner_->find_work_as_helper();
  if (item == nullptr) return false;
  ++detail::forkjoin_tls.foreign_depth;
  owner_->execute(item, self);
  --detail::forkjoin_tls.foreign_depth;
  return true;
}

void task_group::join(std::uint32_t ran_here) noexcept {
  const thread_context& context = this_thread_context();
  // Looked up once a child is outstanding: a group whose children have all finished is
  // joined without touching its scheduler, which may be gone (destroyed after it ran them).
  detail::work_stealing_deque<work_item*>* own = nullptr;
  bool own_found = false;
  // A joiner outside the scheduler (`main` with a group of a scheduler it names) runs its
  // children in the scheduler's context, as any thread runs its work: what they make
  // (groups, loops, launches) uses that scheduler too. They then count themselves done.
  const bool in_context = context.owner == owner_;
  int spins = 0;
  // ran_here counts own children this thread ran and has not yet taken off the count: it
  // subtracts them in one go (before sleeping, or at the end), not one read-modify-write each.
  for (;;) {
    std::uint32_t word = unfinished_.load(std::memory_order_acquire);  // acquire: pairs with child_done
    if (outstanding(word, ran_here) == 0) break;
    if (!std::exchange(own_found, true)) own = owner_->own_deque(context);
    // Our own children first, newest first: cache-hot, and never anything else's frames.
    if (own != nullptr) {
      bool pushed_back = false;
      if (auto mine = own->pop_matching([this](detail::work_item* item) { return is_child(item); }, pushed_back)) {
        if (in_context) {
          (*mine)->handler(*mine, detail::work_action::run_joined);
          ++ran_here;
        } else {
          owner_->execute(*mine, nullptr);
        }
        spins = 0;
        continue;
      }
      if (pushed_back) wake_workers();  // for what went back: a thief may have found it gone (pop_matching)
    }
    if (run_private_children()) {
      spins = 0;
      continue;
    }
    if (help(detail::forkjoin_tls.foreign_depth)) {
      spins = 0;
      continue;
    }
    if (++spins < detail::join_spin_checks) {
      for (int pause = 0; pause < 16; ++pause) detail::cpu_relax();
      continue;
    }
    // Before sleeping, the word must hold the true count, so the last child knows to wake us.
    std::uint32_t unaccounted_home = spawned_at_home_.load(std::memory_order_relaxed) - home_counted_;  // relaxed: as in outstanding
    if (unaccounted_home != 0 || ran_here != 0) {
      unfinished_.fetch_add((unaccounted_home - ran_here) * one_child, std::memory_order_acq_rel);  // acq_rel: as child_done's
      home_counted_ += unaccounted_home;
      ran_here = 0;
      continue;
    }
    // Sleep until the last child finishes, announcing it in the word itself.
    if ((word & sleeper_bit) == 0 &&
        !unfinished_.compare_exchange_weak(word, word | sleeper_bit,
                                           std::memory_order_seq_cst,    // seq_cst: pairs with child_done's decrement
                                           std::memory_order_relaxed)) {  // relaxed: we only retry
      continue;
    }
    blocking_scope blocked;  // on a worker: a standby worker takes this one's place
    detail::std_atomics::wait(unfinished_, word | sleeper_bit);
    spins = 0;
  }
  // Every child has finished (their last touch was the decrement): the home spawns are all
  // accounted for, and the word starts again from zero, its sleeper bit clear.
  end_join();
}

void task_group::rethrow_first() {
  std::exception_ptr error = std::move(first_exception_);
  first_exception_ = nullptr;
  failed_.store(false, std::memory_order_relaxed);  // relaxed: the children are done; the next wait() starts clean
  std::rethrow_exception(error);
}

void task_group::wait_general() {
  const void* me = detail::this_thread_tag();
  const void* other = nullptr;
  if (me == home_) {
    // The usual joiner marks its wait with a plain store: an exchange would cost a locked
    // instruction per fork-join (a sixth of fib's time). A second thread that enters
    // within the same few instructions goes unreported; any later one is caught below.
    other = joiner_.load(std::memory_order_relaxed);  // relaxed: only a misuse check
    if (other == nullptr) joiner_.store(me, std::memory_order_relaxed);  // relaxed: only a misuse check
  } else {
    // acquire: pairs with the release store that ends the other wait
    joiner_.compare_exchange_strong(other, me, std::memory_order_acquire, std::memory_order_acquire);
  }
  if (other == me) {
    report(diagnostic_kind::misuse, "task_group::wait called " + where_called() +
                                        ", in one of the group's own children: it would wait for itself");
    return;
  }
  if (other != nullptr) {
    report(diagnostic_kind::misuse, "task_group::wait called " + where_called() +
                                        " while another thread waits for the group; this second wait waits for the first");
    // acquire: pairs with the release store that ends the other wait
    while (joiner_.load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
    return;  // the first wait joined every child run before it ended
  }
  join(0);
  joiner_.store(nullptr, std::memory_order_release);  // release: a second waiter sees the joined children's effects
  if (failed_.load(std::memory_order_acquire)) rethrow_first();  // acquire: pairs with child_failed's exchange
}

}  // namespace magpie
