// Relacy model of a completion's close (lib/tasks/task.cpp, ready_loop::finish): a task none of
// whose handles is left is closed with subsequent_list::close_unshared — a load and a
// store — because every push onto a task's list goes through a handle
// (close_subsequents).
//   threads 0 and 1: each holds one of the task's two handles: pushes an edge through it
//                    (a launch behind the task), then drops the handle (acq_rel, as
//                    drop_handle does);
//   thread 2:        completes the task: looks at the handle count (acquire) and closes
//                    with close_unshared when no handle is left, else with close.
// Must hold: every successful push is handed to the completer exactly once, whole.
//
// Mutant (run with --mutant=release_to_relaxed, must fail): the pushes and the handles'
// drops no longer publish what came before them, so the completer can count no handle yet
// miss an edge, or read an edge before its pusher wrote it.
#include <magpie/detail/subsequent_list.h>

#include "relacy_atomics.h"

#include <cstdint>

namespace magpie::model {

template <weakening W>
struct task_close_model : rl::test_suite<task_close_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
    typename atomics::template atomic<int> subsequent;  // uninitialised until its pusher writes it
  };
  using list_type = detail::subsequent_list<edge, atomics>;

  // The task's references word as task_base keeps it: handles in the high half, every
  // reference (handles included) in the low half. Two handles and the completer's own.
  static constexpr std::uint64_t one_handle = (std::uint64_t{1} << 32) | 1;
  typename atomics::template atomic<std::uint64_t> references;
  list_type subsequents;
  edge edges[2];
  bool pushed[2] = {false, false};
  int seen[2] = {0, 0};
  bool closed_unshared = false;

  void before() { references.store(2 * one_handle + 1, std::memory_order::relaxed); }

  void thread(unsigned index) {
    if (index < 2) {
      edges[index].subsequent.store(static_cast<int>(index) + 1, std::memory_order::relaxed);
      pushed[index] = subsequents.push_if_not_closed(&edges[index]);
      references.fetch_sub(one_handle, std::memory_order::acq_rel);  // the handle goes
      return;
    }
    closed_unshared = (references.load(std::memory_order::acquire) >> 32) == 0;
    edge* taken = closed_unshared ? subsequents.close_unshared() : subsequents.close();
    for (edge* each = taken; each != nullptr; each = list_type::next_of(each)) {
      int subsequent = each->subsequent.load(std::memory_order::relaxed);
      RL_ASSERT(subsequent == 1 || subsequent == 2);
      ++seen[subsequent - 1];
    }
  }

  void after() {
    for (int i = 0; i < 2; ++i) RL_ASSERT(seen[i] == (pushed[i] ? 1 : 0));
    RL_ASSERT(!subsequents.push_if_not_closed(&edges[0]));
  }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  return magpie::model::model_main<magpie::model::task_close_model>(argc, argv, "task_close");
}
