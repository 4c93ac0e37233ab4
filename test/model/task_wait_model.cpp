// Relacy model of the blocking half of waiting (lib/tasks/task_wait.cpp, lib/tasks/task.cpp): a task
// T becomes ready on one thread and is run by whoever wins its execution flag; a waiter
// blocks on the event count only after setting T's has_waiter flag, and the threads that
// make T ready or complete it notify only if they see that flag.
//   thread 0: the waiter — loop { completed? done. ready? retract (run T). set flag;
//             prepare_wait; re-check completed / ready; commit_wait }
//   thread 1: removes T's last lock (seq_cst), then looks for the flag and notifies
//             ("retry retraction"), then tries to run T itself.
//   thread 2: a second would-be runner (a worker popping T's queue entry).
// Whoever runs T closes its subsequent list (seq_cst), then looks for the flag and notifies.
// Must hold: the waiter never sleeps forever (Relacy reports a lost wake-up as DEADLOCK),
// and T runs exactly once.
//
// Mutant (run with --mutant=seq_cst_to_acq_rel, must fail): the flag and the state are
// then a store-buffering pair — the waiter misses the change while the changer misses the
// flag, and the waiter sleeps forever.
#include <magpie/detail/event_count.h>
#include <magpie/detail/subsequent_list.h>
#include <magpie/detail/task_state.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W>
struct task_wait_model : rl::test_suite<task_wait_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
  };

  detail::task_state<atomics> t;  // one lock left: the launch (or last prerequisite) lock
  detail::subsequent_list<edge, atomics> subsequents;
  detail::event_count<atomics> waiters;
  typename atomics::template atomic<unsigned> has_waiter{0};
  int runs[3] = {0, 0, 0};

  void notify_if_waited() {
    if (has_waiter.load(std::memory_order::seq_cst) != 0) waiters.notify_all();
  }

  void try_run(unsigned thread) {
    if (!detail::began(t.try_begin())) return;
    ++runs[thread];
    (void)t.end_part();
    subsequents.close();
    notify_if_waited();
  }

  void thread(unsigned index) {
    if (index == 1) {
      if (t.remove_locks() == detail::unlock_outcome::ready) notify_if_waited();
      try_run(1);
      return;
    }
    if (index == 2) {
      try_run(2);
      return;
    }
    for (;;) {
      if (subsequents.is_closed()) return;
      if (t.is_ready()) {
        try_run(0);
        continue;
      }
      has_waiter.exchange(1, std::memory_order::seq_cst);  // fetch_or in task_base::set_flag
      auto key = waiters.prepare_wait();
      if (subsequents.is_closed() || t.is_ready()) {
        waiters.cancel_wait();
        continue;
      }
      waiters.commit_wait(key);
    }
  }

  void after() { RL_ASSERT(runs[0] + runs[1] + runs[2] == 1); }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  return magpie::model::model_main<magpie::model::task_wait_model>(argc, argv, "task_wait");
}
