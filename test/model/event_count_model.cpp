// Relacy model of include/magpie/detail/event_count.h: two waiters park on the event
// count until each claims a ticket; a producer publishes two tickets, calling notify_one
// after each. A lost wake-up leaves a waiter asleep forever, which Relacy reports as a
// DEADLOCK.
//
// The tickets themselves are published and claimed with acquire/release only: the event
// count's own fences must carry the Dekker ordering, as they do for the scheduler, whose
// deque pushes are release stores.
//
// A second model wakes with notify_all only, waiters waiting for different things: P sets
// x and broadcasts; X waits for x, then sets y and broadcasts; Y waits for y. Y may announce
// itself after P's broadcast and before X leaves: it must not take X's wake-up. (A version
// whose notify_all granted signals that any waiter could take deadlocked here at once.)
//
// Mutant (run with --mutant=seq_cst_to_acq_rel, must fail): with the fences weakened to
// acq_rel, the producer can miss the waiter's announcement while the waiter misses the
// ticket (store buffering) — the lost wake-up.
#include <magpie/detail/event_count.h>

#include "relacy_atomics.h"

namespace magpie::model {

template <weakening W, bool Timed = false>
struct event_count_model : rl::test_suite<event_count_model<W, Timed>, 3> {
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
      if constexpr (Timed) {
        (void)events.commit_wait_for(key, std::chrono::hours(1));
      } else {
        events.commit_wait(key);
      }
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

// event_count_timed_model is the first model with timed waits (commit_wait_for, as the
// scheduler's timed parking uses): a time-out may come at any moment (the policy's
// wait_for), then the waiter withdraws and looks again. A waiter woken for real must still
// see its wake-up: the memory-order sweep's mutant of commit_wait_for's acquire reload of the
// epoch sleeps again on the new epoch, and once the time-outs are spent nobody wakes it
// (DEADLOCK).
template <weakening W>
using event_count_timed_model = event_count_model<W, true>;

template <weakening W>
struct event_count_broadcast_model : rl::test_suite<event_count_broadcast_model<W>, 3> {
  using atomics = relacy_atomics<W>;
  detail::event_count<atomics> events;
  typename atomics::template atomic<int> x{0};
  typename atomics::template atomic<int> y{0};

  void wait_until_set(typename atomics::template atomic<int>& flag) {
    for (;;) {
      if (flag.load(std::memory_order::acquire) != 0) return;
      auto key = events.prepare_wait();
      if (flag.load(std::memory_order::acquire) != 0) {
        events.cancel_wait();
        return;
      }
      events.commit_wait(key);
    }
  }

  void thread(unsigned index) {
    if (index == 0) {
      x.store(1, std::memory_order::release);
      events.notify_all();
    } else if (index == 1) {
      wait_until_set(x);
      y.store(1, std::memory_order::release);
      events.notify_all();
    } else {
      wait_until_set(y);
    }
  }

  void after() {
    RL_ASSERT(events.waiters() == 0);
    RL_ASSERT(events.signals() == 0);
  }
};

}  // namespace magpie::model

int main(int argc, char** argv) {
  using namespace magpie::model;
  if (int failed = model_main<event_count_model>(argc, argv, "event_count")) return failed;
  if (int failed = model_main<event_count_timed_model>(argc, argv, "event_count timed")) return failed;
  return model_main<event_count_broadcast_model>(argc, argv, "event_count broadcast");
}
