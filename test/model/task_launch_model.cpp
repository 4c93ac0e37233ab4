// Relacy model of launch_behind (lib/tasks/task_launch.cpp) on include/magpie/detail/task_state.h and
// the subsequent list: task X is launched behind prerequisites P and Q, whose locks stand
// in for X's launch lock.
//   thread 0: replace_launch_lock(2), links X to P and to Q, then removes the locks of
//             those it found complete in one remove_locks, running X if that was the last;
//   thread 1: completes P (writes P's result, closes P's list, unlocks X);
//   thread 2: completes Q likewise.
// Whoever removes X's last lock runs it; X's body reads both results.
// Must hold: X runs exactly once, and only after P and Q both completed (it sees both
// results) — never early, though its launch lock is gone from the start.
//
// Mutant (run with --mutant=release_to_relaxed, must fail): without the releases, a
// completer can find X's word before the replaced count, or X's body stale results.
#include <magpie/detail/subsequent_list.h>
#include <magpie/detail/task_state.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W>
struct task_launch_model : rl::test_suite<task_launch_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  using state_type = detail::task_state<atomics>;

  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
  };
  using list_type = detail::subsequent_list<edge, atomics>;

  state_type x;
  list_type p_subsequents;
  list_type q_subsequents;
  edge x_waits_for_p;
  edge x_waits_for_q;
  typename atomics::template atomic<int> p_result;  // uninitialised until P writes it
  typename atomics::template atomic<int> q_result;
  int ran[3] = {0, 0, 0};
  int seen_p = 0;
  int seen_q = 0;

  void run_if_ready(unsigned thread) {
    if (!detail::began(x.try_begin())) return;
    ++ran[thread];
    seen_p = p_result.load(std::memory_order::relaxed);
    seen_q = q_result.load(std::memory_order::relaxed);
    (void)x.end_part();
  }

  void complete(list_type& list, typename atomics::template atomic<int>& result, int value, unsigned thread) {
    result.store(value, std::memory_order::relaxed);
    for (edge* each = list.close(); each != nullptr; each = list_type::next_of(each)) {
      if (x.remove_locks() == detail::unlock_outcome::ready) run_if_ready(thread);
    }
  }

  void thread(unsigned index) {
    switch (index) {
      case 0: {
        x.replace_launch_lock(2, detail::exclusive_access);
        std::uint32_t already_complete = 0;
        if (!p_subsequents.push_if_not_closed(&x_waits_for_p)) ++already_complete;
        if (!q_subsequents.push_if_not_closed(&x_waits_for_q)) ++already_complete;
        if (already_complete != 0 && x.remove_locks(already_complete) == detail::unlock_outcome::ready) run_if_ready(0);
        break;
      }
      case 1:
        complete(p_subsequents, p_result, 1, 1);
        break;
      default:
        complete(q_subsequents, q_result, 2, 2);
        break;
    }
  }

  void after() {
    RL_ASSERT(ran[0] + ran[1] + ran[2] == 1);
    RL_ASSERT(seen_p == 1);
    RL_ASSERT(seen_q == 2);
    RL_ASSERT(x.raw() == state_type::execution_flag);
  }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  return magpie::model::model_main<magpie::model::task_launch_model>(argc, argv, "task_launch");
}
