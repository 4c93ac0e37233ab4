// Relacy model of include/magpie/detail/task_state.h with the subsequent list: task X
// has one prerequisite P and one nested task N.
//   thread 0: adds X's prerequisite lock, registers X with P, launches X;
//   thread 1: completes P (writes P's result, closes P's list, unlocks X — and if that is
//             X's last lock, begins X in the same CAS, as the ready loop does for the task
//             it runs next: try_remove_last_lock_and_begin);
//   thread 2: completes N (closes N's list, releases X's nested part), then retracts X:
//             claims X's prerequisites if X has not begun, then runs X if it is ready
//             and nobody claimed its execution.
// Whoever makes X ready tries to run it. X's body reads P's result, registers as N's
// parent (add_nested_part + push, or end that part at once if N already completed), returns.
// Must hold: X runs exactly once, completes exactly once, its body sees P's result, and
// exactly one thread takes over X's prerequisites (the retracting waiter, or the runner).
//
// Mutant (run with --mutant=release_to_relaxed, must fail): without the releases, X's body
// can read P's result before P wrote it.
//
// A second model below, task_state piped, checks the parts of a piped task.
#include <magpie/detail/subsequent_list.h>
#include <magpie/detail/task_state.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W>
struct task_state_model : rl::test_suite<task_state_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  using state_type = detail::task_state<atomics>;

  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
    bool nested = false;  // true: releases X's nested part; false: unlocks X
  };
  using list_type = detail::subsequent_list<edge, atomics>;

  state_type x;
  list_type p_subsequents;
  list_type n_subsequents;
  edge x_waits_for_p;
  edge x_nests_n;
  typename atomics::template atomic<int> p_result;  // uninitialised until P writes it
  int ran[3] = {0, 0, 0};
  int completed[3] = {0, 0, 0};
  int took_prerequisites[3] = {0, 0, 0};
  int seen_result = 0;

  void body(unsigned thread) {
    ++ran[thread];
    seen_result = p_result.load(std::memory_order::relaxed);
    x_nests_n.nested = true;
    x.add_nested_part();
    if (!n_subsequents.push_if_not_closed(&x_nests_n)) {
      if (x.end_part() == detail::part_outcome::finished) ++completed[thread];  // N had already completed
    }
    if (x.end_part() == detail::part_outcome::finished) ++completed[thread];
  }

  void run_if_ready(unsigned thread) {
    const detail::begin_outcome claim = x.try_begin();
    if (detail::began(claim)) {
      if (detail::holds_prerequisites(claim)) ++took_prerequisites[thread];
      body(thread);
    }
  }

  void resolve(list_type& list, unsigned thread) {
    for (edge* each = list.close(); each != nullptr; each = list_type::next_of(each)) {
      if (each->nested) {
        if (x.end_part() == detail::part_outcome::finished) ++completed[thread];
      } else if (detail::begin_outcome claim = thread == 1 ? x.try_remove_last_lock_and_begin()
                                                           : detail::begin_outcome::refused;
                 detail::began(claim)) {
        if (detail::holds_prerequisites(claim)) ++took_prerequisites[thread];
        body(thread);
      } else if (x.remove_locks() == detail::unlock_outcome::ready) {
        run_if_ready(thread);
      }
    }
  }

  void thread(unsigned index) {
    switch (index) {
      case 0:
        x.add_locks(1);
        if (!p_subsequents.push_if_not_closed(&x_waits_for_p)) (void)x.remove_locks();  // P already done
        if (x.remove_locks() == detail::unlock_outcome::ready) run_if_ready(0);  // the launch
        break;
      case 1:
        p_result.store(42, std::memory_order::relaxed);
        resolve(p_subsequents, 1);
        break;
      default:
        resolve(n_subsequents, 2);
        if (x.try_claim_prerequisites()) ++took_prerequisites[2];  // retraction, first step
        run_if_ready(2);  // then X itself: only wins if X is ready and unclaimed
        break;
    }
  }

  void after() {
    RL_ASSERT(ran[0] + ran[1] + ran[2] == 1);
    RL_ASSERT(completed[0] + completed[1] + completed[2] == 1);
    RL_ASSERT(seen_result == 42);
    RL_ASSERT(took_prerequisites[0] + took_prerequisites[1] + took_prerequisites[2] == 1);
    RL_ASSERT(x.raw() == state_type::execution_flag);
  }
};

// task_state_piped_model is the end of a piped task X with one nested task N still running
// when X's body returns (lib/tasks/task.cpp, end_body and end_part_of): a piped task's
// parts go with end_part_unless_last, so that the last one leaves its pipe's count
// before the release that completes X.
//   (before) X begun, with its body's part and N's part;
//   thread 0: X's body writes its result, sets body_returned (release, as end_body),
//             then ends its part;
//   thread 1: N completes: ends its part of X;
//   thread 2: a waiter: once X's list is closed, reads the flags (as get_result's
//             exception check) and the result.
// Whoever ends the last part completes X: closes its list. Must hold: X completes once, and
// the waiter reads the body's result. The body's part carries the result to N's thread only
// through end_part_unless_last's release half (the flag's release is read, if at all,
// by loads that may see the word as it was), which the single-operation sweep weakens.
template <weakening W>
struct task_state_piped_model : rl::test_suite<task_state_piped_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  using state_type = detail::task_state<atomics>;
  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
  };
  using list_type = detail::subsequent_list<edge, atomics>;
  static constexpr unsigned body_returned = 8;  // as task_flags' body_returned

  state_type x;
  list_type x_subsequents;
  typename atomics::template atomic<unsigned> flags{0};
  typename atomics::template atomic<int> result;  // uninitialised until the body writes it
  int completed[2] = {0, 0};

  void before() {
    (void)x.remove_locks();  // launched, ready
    (void)x.try_begin();     // begun: the body's part
    x.add_nested_part();     // N's part
  }

  void end_part(unsigned thread) {  // end_part_of for a piped task
    if (x.end_part_unless_last() == detail::part_outcome::parts_remain) return;
    // (the pipe's count of uncompleted tasks is left here)
    if (x.end_part() == detail::part_outcome::finished) {
      ++completed[thread];
      (void)x_subsequents.close();
    }
  }

  void thread(unsigned index) {
    if (index == 0) {
      result.store(7, std::memory_order::relaxed);
      flags.fetch_add(body_returned, std::memory_order::release);  // end_body's fetch_or
      end_part(0);
    } else if (index == 1) {
      end_part(1);
    } else if (x_subsequents.is_closed()) {
      (void)flags.load(std::memory_order::acquire);  // has_flag(has_exception)
      RL_ASSERT(result.load(std::memory_order::relaxed) == 7);
    }
  }

  void after() { RL_ASSERT(completed[0] + completed[1] == 1); }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  if (int failed = magpie::model::model_main<magpie::model::task_state_model>(argc, argv, "task_state")) return failed;
  return magpie::model::model_main<magpie::model::task_state_piped_model>(argc, argv, "task_state piped");
}
