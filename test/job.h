// The smallest job the scheduler tests need: a work_item that runs a std::function and
// deletes itself. (The task model, layer 3, is the real way to launch work.)
#pragma once

#include <magpie/scheduler.h>

#include <atomic>
#include <functional>
#include <thread>
#include <utility>

namespace magpie::test {

struct job : detail::work_item {
  explicit job(std::function<void()> work, const char* label = "test job",
               std::atomic<int>* discards = nullptr)
      : body(std::move(work)), discarded(discards) {
    handler = &handle;
    name = label;
  }

  static bool handle(detail::work_item* self, detail::work_action action) noexcept {
    auto* me = static_cast<job*>(self);
    if (action == detail::work_action::run) {
      me->body();
    } else if (me->discarded != nullptr) {
      me->discarded->fetch_add(1);
    }
    delete me;
    return true;
  }

  std::function<void()> body;
  std::atomic<int>* discarded;
};

// launch schedules `body` on `pool` as a job.
inline void launch(scheduler& pool, std::function<void()> body, priority p = priority::normal) {
  detail::schedule_item(pool, new job(std::move(body)), p);
}

// launch_on schedules `body` on a named thread's queue.
inline void launch_on(scheduler& pool, named_thread thread, std::function<void()> body,
                      thread_queue queue = thread_queue::main, bool high = false) {
  detail::schedule_item(pool, new job(std::move(body)), thread, queue, high);
}

// help_until runs queued work on this thread until `done()` holds — how a waiting thread
// takes part, and the only way anything runs with zero workers.
template <class Done>
void help_until(scheduler& pool, Done done) {
  while (!done()) {
    if (!pool.try_run_one()) std::this_thread::yield();
  }
}

// wait_until polls `done()` without helping, so that only workers run the work.
template <class Done>
void wait_until(Done done) {
  while (!done()) std::this_thread::yield();
}

// wait_until_all_parked returns once every worker of `pool` (standby ones included) is
// parked: the "idle scheduler parks every worker" property, asserted without timing.
inline void wait_until_all_parked(scheduler& pool) {
  wait_until([&] {
    scheduler_counters now = pool.counters();
    return now.parked_workers == pool.worker_count() + now.standby_workers;
  });
}

}  // namespace magpie::test
