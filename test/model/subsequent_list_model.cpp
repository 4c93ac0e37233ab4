// Relacy model of include/magpie/detail/subsequent_list.h: two threads push a node each
// while a third closes the list and reads what it got. A push that succeeded must be
// handed to the closer exactly once, with the contents its pusher wrote; a push that
// failed must never be seen.
//
// Mutant (run with --mutant=release_to_relaxed, must fail): the pushers' CAS no longer
// publishes the node, so the closer reads a node's contents before they were written.
#include <magpie/detail/subsequent_list.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W>
struct subsequent_list_model : rl::test_suite<subsequent_list_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  struct node {
    detail::subsequent_list_hook<node, atomics> hook;
    typename atomics::template atomic<int> value;  // uninitialised until its pusher writes it
  };
  using list_type = detail::subsequent_list<node, atomics>;

  list_type list;
  node nodes[2];
  bool pushed[2] = {false, false};
  int seen[2] = {0, 0};

  void thread(unsigned index) {
    if (index < 2) {
      nodes[index].value.store(static_cast<int>(index) + 1, std::memory_order::relaxed);
      pushed[index] = list.push_if_not_closed(&nodes[index]);
      return;
    }
    for (node* each = list.close(); each != nullptr; each = list_type::next_of(each)) {
      int value = each->value.load(std::memory_order::relaxed);
      RL_ASSERT(value == 1 || value == 2);
      ++seen[value - 1];
    }
  }

  void after() {
    for (int i = 0; i < 2; ++i) RL_ASSERT(seen[i] == (pushed[i] ? 1 : 0));
    RL_ASSERT(!list.push_if_not_closed(&nodes[0]));
  }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  return magpie::model::model_main<magpie::model::subsequent_list_model>(argc, argv, "subsequent_list");
}
