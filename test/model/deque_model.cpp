// Relacy model of include/magpie/detail/deque.h: the owner pushes past the first ring's
// capacity (so the ring grows while thieves may be reading the old one), pops, and takes
// a run of two back at once (pop_newest), takes the oldest back (steal_if) and the two
// oldest at once (take_oldest), while two thieves steal. Every item must be taken exactly
// once and no slot may be read before it was written.
//
// A second model (thieves_race_model) checks that a thief never comes back empty-handed
// while items are left: three items, the owner pops one while two thieves steal one each,
// so each of the three must get one, whoever loses a race.
//
// Mutants (run with --mutant=…, must fail):
//   seq_cst_to_acq_rel — pop's store of bottom and steal's load of top lose their
//                        Dekker ordering: owner and thief both take the last item.
//   release_to_relaxed — push's store of bottom and grow's store of the ring no longer
//                        publish the slots: a thief reads a slot before it is written.
#include <magpie/detail/deque.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W>
struct deque_model : rl::test_suite<deque_model<W>, 3> {
  static constexpr int items = 5;
  using deque_type = detail::work_stealing_deque<int, relacy_atomics<W>>;

  deque_type* deque = nullptr;
  int taken_by[3][items + 1] = {};  // taken_by[thread][item]: each thread writes only its own row

  void before() { deque = new deque_type(2); }

  void take(unsigned thread, std::optional<int> item) {
    if (!item) return;
    RL_ASSERT(*item >= 1 && *item <= items);
    ++taken_by[thread][*item];
  }

  void thread(unsigned index) {
    if (index == 0) {
      deque->push(1);
      deque->push(2);
      deque->push(3);  // grows the ring from 2 to 4 slots
      take(0, deque->pop());
      if (deque->steal_if(1)) take(0, 1);  // the oldest, the thieves' way: races them for it
      deque->push(4);
      deque->push(5);
      bool hid_items = false;
      if (deque->pop_newest(2, hid_items)) {  // 5 and 4, unless a thief may reach them
        take(0, 5);
        take(0, 4);
      }
      int run[2] = {};  // the two oldest at once, the thieves' way: races them for them
      using take_answer = typename deque_type::oldest_take;
      std::int64_t got = deque->take_oldest(run, 2, deque->end_index(), [](std::int64_t, int) { return take_answer::take; });
      for (std::int64_t i = 0; i < got; ++i) take(0, run[i]);
      take(0, deque->pop());
    } else {
      take(index, deque->steal());
      take(index, deque->steal());
    }
  }

  void after() {
    while (auto item = deque->pop()) take(0, item);
    for (int item = 1; item <= items; ++item) {
      RL_ASSERT(taken_by[0][item] + taken_by[1][item] + taken_by[2][item] == 1);
    }
    delete deque;
  }
};

template <weakening W>
struct thieves_race_model : rl::test_suite<thieves_race_model<W>, 3> {
  static constexpr int items = 3;
  using deque_type = detail::work_stealing_deque<int, relacy_atomics<W>>;

  deque_type* deque = nullptr;
  int got[3] = {};  // got[thread]: the item that thread took; each writes only its own

  void before() {
    deque = new deque_type(4);
    for (int item = 1; item <= items; ++item) deque->push(item);
  }

  void thread(unsigned index) {
    std::optional<int> item = index == 0 ? deque->pop() : deque->steal();
    RL_ASSERT(item.has_value());  // three items for three takers: nobody may come back empty
    got[index] = *item;
  }

  void after() {
    int taken[items + 1] = {};
    for (int item : got) ++taken[item];
    for (int item = 1; item <= items; ++item) RL_ASSERT(taken[item] == 1);
    delete deque;
  }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  using namespace magpie::model;
  int result = model_main<deque_model>(argc, argv, "deque");
  if (result != 0 || weakening_from_args(argc, argv) != weakening::none) return result;
  return run_model<thieves_race_model<weakening::none>>("deque: thieves racing", 200000);
}
