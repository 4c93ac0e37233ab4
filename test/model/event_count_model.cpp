// Relacy model of include/magpie/detail/event_count.h: two waiters park on the event
// count until each claims a ticket; a producer publishes two tickets, calling notify_one
// after each. A lost wake-up leaves a waiter asleep forever, which Relacy reports as a
// DEADLOCK.
//
// The tickets themselves are published and claimed with acquire/release only: the event
// count's own fences must carry the Dekker ordering, as they do for the scheduler, whose
// deque pushes are release stores.
//
// Mutant (run with --mutant=seq_cst_to_acq_rel, must fail): with the fences weakened to
// acq_rel, the producer can miss the waiter's announcement while the waiter misses the
// ticket (store buffering) — the lost wake-up.
#include <magpie/detail/event_count.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W>
struct event_count_model : rl::test_suite<event_count_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  detail::event_count<atomics> events;
  typename atomics::template atomic<int> tickets{0};

  bool take_ticket() {
    int seen = tickets.load(std::memory_order::acquire);
    while (seen > 0) {
      if (tickets.compare_exchange_weak(seen, seen - 1, std::memory_order::acq_rel,
                                        std::memory_order::acquire)) {
        return true;
      }
    }
    return false;
  }

  void thread(unsigned index) {
    if (index == 0) {
      for (int i = 0; i < 2; ++i) {
        tickets.fetch_add(1, std::memory_order::release);
        events.notify_one();
      }
      return;
    }
    for (;;) {
      if (take_ticket()) return;
      auto key = events.prepare_wait();
      if (take_ticket()) {
        events.cancel_wait();
        return;
      }
      events.commit_wait(key);
    }
  }

  void after() {
    RL_ASSERT(tickets.load(std::memory_order::relaxed) == 0);
    // Every announcement ended and took its wake-up (if any) with it: a signal left over
    // would wake the next waiter for nothing, and one taken twice would strand a sleeper.
    RL_ASSERT(events.waiters() == 0);
    RL_ASSERT(events.signals() == 0);
  }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  return magpie::model::model_main<magpie::model::event_count_model>(argc, argv, "event_count");
}
