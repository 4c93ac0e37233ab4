// Relacy model of a task's completion without a close (lib/tasks/wait_retraction.cpp, finish_open;
// lib/tasks/task_internal.h, push_subsequent): a waiter that took a task back off its own deque begins
// it finishes_open and, when nothing came meanwhile, leaves its subsequent list open. Its
// "finished" store completes the task; a light barrier orders that store before the
// completer's looks, and a thread that came while the body ran makes the heavy barrier
// before its own look (task_state::has_finished_after_announcing):
//   thread 0: the completer — begins T finishes_open, writes T's result, stores
//             "finished" (end_part with exclusive_access); light barrier; then: list not empty?
//             close it and release what it held. Waiter flag set? notify.
//   thread 1: a launch behind T — pushes an edge; if that succeeded and T has finished
//             (seen as a comer), closes the list itself and releases what it held.
//   thread 2: a waiter — loop { complete (closed or finished)? done. set flag;
//             prepare_wait; re-check as a comer; commit_wait }.
// Must hold: the edge is released exactly once, by whoever's close took it, and whoever
// sees T complete sees its result; the waiter never sleeps forever (Relacy reports a lost
// wake-up as DEADLOCK).
//
// A second model, task_left_open claimed, is the same with the waiter's claim of T's
// prerequisites made before the begin (lib/tasks/wait_retraction.cpp, retract: claim_prerequisites,
// then try_begin_open): the begin is then the begin's second CAS, from the
// claimed word, which must sit in S as the first does.
//
// The policy models both barriers as seq_cst fences (relacy_atomics.h): membarrier makes
// the light side's compiler barrier act as one. Mutants (both must fail):
// seq_cst_to_acq_rel weakens the barriers and the looks into a store-buffering pair — the
// completer misses the edge while the pusher misses "finished", and the edge is never
// released (or the waiter sleeps forever); release_to_relaxed lets "finished" be seen
// before the result.
#include <magpie/detail/event_count.h>
#include <magpie/detail/subsequent_list.h>
#include <magpie/detail/task_state.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W, bool ClaimedFirst>
struct task_left_open_base : rl::test_suite<task_left_open_base<W, ClaimedFirst>, 3> {
  using atomics = relacy_atomics<W>;
  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
    typename atomics::template atomic<int> subsequent;  // uninitialised until its pusher writes it
  };
  using list_type = detail::subsequent_list<edge, atomics>;

  detail::task_state<atomics> t;
  list_type subsequents;
  detail::event_count<atomics> waiters;
  typename atomics::template atomic<unsigned> has_waiter{0};
  typename atomics::template atomic<int> result{0};
  edge behind;
  bool pushed = false;
  int released = 0;

  void before() {
    (void)t.remove_locks();  // launched, ready: thread 0 takes it back and runs it
    if (ClaimedFirst) RL_ASSERT(t.try_claim_prerequisites());  // the retracting waiter's first step
  }

  bool is_completed() const { return subsequents.is_closed() || t.has_finished(); }

  // release_taken is ready_loop::release_subsequents: the subsequent the edge names is let go,
  // and it sees the result of the task it waited for.
  void release_taken(edge* taken) {
    for (edge* each = taken; each != nullptr; each = list_type::next_of(each)) {
      RL_ASSERT(each->subsequent.load(std::memory_order::relaxed) == 7);
      RL_ASSERT(result.load(std::memory_order::relaxed) == 42);
      ++released;
    }
  }

  void thread(unsigned index) {
    if (index == 0) {
      const detail::begin_outcome claim = t.try_begin_open();
      RL_ASSERT(detail::began(claim));
      RL_ASSERT(detail::holds_prerequisites(claim) == !ClaimedFirst);
      result.store(42, std::memory_order::relaxed);  // the body: published by the "finished" store
      t.end_part(detail::exclusive_access);
      atomics::light_barrier();  // as finish_open
      if (!subsequents.is_empty()) release_taken(subsequents.close());
      if (has_waiter.load(std::memory_order::seq_cst) != 0) waiters.notify_all();
      return;
    }
    if (index == 1) {
      behind.subsequent.store(7, std::memory_order::relaxed);
      pushed = subsequents.push_if_not_closed(&behind);
      if (pushed && t.has_finished_after_announcing()) release_taken(subsequents.close());
      if (!pushed) RL_ASSERT(result.load(std::memory_order::relaxed) == 42);  // closed: complete
      return;
    }
    for (;;) {
      if (is_completed()) {
        RL_ASSERT(result.load(std::memory_order::relaxed) == 42);
        return;
      }
      has_waiter.exchange(1, std::memory_order::seq_cst);  // fetch_or in task_base::set_flag
      auto key = waiters.prepare_wait();
      if (subsequents.is_closed() || t.has_finished_after_announcing()) {
        waiters.cancel_wait();
        continue;
      }
      waiters.commit_wait(key);
    }
  }

  void after() { RL_ASSERT(released == (pushed ? 1 : 0)); }
};

template <weakening W>
using task_left_open_model = task_left_open_base<W, false>;
template <weakening W>
using task_left_open_claimed_model = task_left_open_base<W, true>;

}  // namespace magpie::model

int main(int argc, char** argv) {
  if (int failed = magpie::model::model_main<magpie::model::task_left_open_model>(argc, argv, "task_left_open")) {
    return failed;
  }
  return magpie::model::model_main<magpie::model::task_left_open_claimed_model>(argc, argv, "task_left_open claimed");
}
