// Suite "concurrency_limiter": at most N at once, unique slots, wait, lifetime.
#include "limiter_support.h"
#include "support.h"
#include "task_support.h"

#include <magpie/concurrency_limiter.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

using test::occupancy_probe;
using test::push_probed;

TEST_CASE("concurrency_limiter: every pushed piece runs once, never more than N at once, in unique slots") {
  for (unsigned workers : test::worker_counts) {
    for (std::uint32_t limit : {1u, 2u, 3u}) {
      CAPTURE(workers);
      CAPTURE(limit);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      occupancy_probe probe(limit);
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      CHECK(limiter.max_concurrency() == limit);
      push_probed(limiter, probe, 200);
      CHECK(limiter.wait());
      CHECK(probe.ran.load() == 200);
      CHECK(probe.most.load() <= static_cast<int>(limit));
      CHECK(probe.most.load() >= 1);
      CHECK(probe.bad_slots.load() == 0);
    }
  }
}

TEST_CASE("concurrency_limiter: wait returns false on time-out while work is held, true once it ran") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_concurrency_limiter limiter(1, priority::normal, pool);
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  limiter.push("holder", [&](std::uint32_t) {
    started.store(true);
    while (!release.load()) std::this_thread::yield();
    ran.fetch_add(1);
  });
  limiter.push("queued", [&](std::uint32_t) { ran.fetch_add(1); });
  // Running on a worker already: a wait cannot take it back (a wait retracts first, as a
  // task's timed wait does, so one that found it unstarted would run it here).
  while (!started.load()) std::this_thread::yield();
  CHECK_FALSE(limiter.wait(std::chrono::milliseconds(5)));
  release.store(true);
  CHECK(limiter.wait());
  CHECK(ran.load() == 2);
  CHECK(limiter.wait(std::chrono::milliseconds(0)));  // nothing pushed since: at once
}

TEST_CASE("concurrency_limiter: pieces queued behind busy slots run in every slot, not one holder's after another") {
  // Holders take queued pieces one at a time: each of the pieces below waits until a piece
  // has run in the other slot, which one holder that took them all at once would never see.
  // Each holder below runs on a worker of its own, one of them the background worker.
  std::atomic<unsigned> slots_seen{0};
  std::atomic<int> ran_alone{0};
  test::slot_holders holders;
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_concurrency_limiter limiter(2, priority::normal, pool);
  holders.hold(limiter);
  for (int i = 0; i < 8; ++i) {
    limiter.push("queued", [&](std::uint32_t slot) {
      slots_seen.fetch_or(1u << slot);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (slots_seen.load() != 0b11u && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      if (slots_seen.load() != 0b11u) ran_alone.fetch_add(1);
    });
  }
  holders.release();
  CHECK(limiter.wait());
  CHECK(slots_seen.load() == 0b11u);
  CHECK(ran_alone.load() == 0);
}

TEST_CASE("concurrency_limiter: a piece that waits for a piece queued after it gets it run by the other slot") {
  // With both slots held, four pieces queue; the first waits until the second has run. The
  // holder that takes the first must leave the second in the queue for the other holder,
  // not hold it aside behind the one that waits for it.
  std::atomic<bool> second_ran{false};
  std::atomic<bool> first_gave_up{false};
  test::slot_holders holders;
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_concurrency_limiter limiter(2, priority::normal, pool);
  holders.hold(limiter);
  limiter.push("first", [&](std::uint32_t) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!second_ran.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    first_gave_up.store(!second_ran.load());
  });
  limiter.push("second", [&](std::uint32_t) { second_ran.store(true); });
  for (int i = 0; i < 2; ++i) limiter.push("more", [](std::uint32_t) {});
  holders.release();
  CHECK(limiter.wait());
  CHECK_FALSE(first_gave_up.load());
}

TEST_CASE("concurrency_limiter: wait from inside a task retracts queued work rather than deadlock") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    // With 0 or 1 workers the waiting task occupies every thread there is: nothing else
    // runs the limiter's tasks unless the wait takes them back.
    task<bool> waiter = pool.launch("waiter", [&] {
      task_concurrency_limiter limiter(2);
      for (int i = 0; i < 50; ++i) limiter.push("piece", [&](std::uint32_t) { ran.fetch_add(1); });
      return limiter.wait();
    });
    CHECK(waiter.get_result());
    CHECK(ran.load() == 50);
  }
}

// With no workers, a wait runs this thread's queue in launch order; the limiter's wait holds
// its runner out of reach meanwhile, so it must not: an older body waiting for the limiter
// would wait for the piece in that runner for ever (the bounded wait below would time out).
TEST_CASE("concurrency_limiter: with no workers, a body launched before a piece may wait for the limiter") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    {
      task_concurrency_limiter limiter(1, priority::normal, pool);
      bool emptied = false;
      task<> older = pool.launch("waits for the limiter", [&] { emptied = limiter.wait(std::chrono::seconds(30)); });
      bool ran = false;
      limiter.push("piece", [&ran](std::uint32_t) { ran = true; });
      CHECK(limiter.wait());
      CHECK(ran);
      older.wait();
      CHECK(emptied);
    }
    if (attached) pool.detach();
  }
}

// A wait on a limiter whose pieces all run elsewhere sleeps: first it puts back the tasks a
// wait_all of this thread holds aside (lib/tasks/held_runs.h), one of which the running piece
// waits for; otherwise the wait sleeps its whole time-out while the task that
// triggers the piece's event lies held aside by the thread asleep.
TEST_CASE("concurrency_limiter: a wait that sleeps inside a wait_all's run puts the rest of the run back") {
  no_leaks leaks;
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;  // the one worker runs the piece: nobody else could take the run
  scheduler pool(options);
  task_event event("triggered by a task of the run", pool);
  {
    task_concurrency_limiter limiter(1, priority::normal, pool);
    std::atomic<bool> go{false};
    std::atomic<bool> piece_started{false};
    limiter.push("piece", [&](std::uint32_t) {
      piece_started = true;
      while (!go.load()) std::this_thread::yield();
      event.wait();
    });
    while (!piece_started.load()) std::this_thread::yield();  // the worker runs the piece
    std::thread other([&] { CHECK(limiter.wait(std::chrono::seconds(30))); });  // holds the runner, asleep
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::atomic<bool> emptied{false};
    task<> filler = pool.launch("below the run", [] {});
    std::vector<task<>> parts;
    parts.push_back(pool.launch("triggers", [&event] { event.trigger(); }));
    parts.push_back(pool.launch("waits for the limiter", [&] {
      go = true;
      emptied = limiter.wait(std::chrono::seconds(20));
    }));
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    CHECK(emptied.load());
    event.trigger();
    other.join();
    filler.wait();
  }
}

TEST_CASE("concurrency_limiter: a limiter destroyed before its work finished lets the work finish") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    task_event go("go", pool);
    {
      task_concurrency_limiter limiter(2, priority::normal, pool);
      for (int i = 0; i < 20; ++i) {
        limiter.push("late", [&, go](std::uint32_t) {
          go.wait();
          ran.fetch_add(1);
        });
      }
    }
    go.trigger();
    // The pieces are tasks of `pool`; its shutdown runs whatever is left.
    pool.shutdown();
    CHECK(ran.load() == 20);
  }
}

TEST_CASE("concurrency_limiter: work pushed from inside limited work runs under the same limit") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    occupancy_probe probe(2);
    task_concurrency_limiter limiter(2, priority::normal, pool);
    for (int i = 0; i < 10; ++i) {
      limiter.push("parent", [&](std::uint32_t slot) {
        probe.enter(slot);
        for (int j = 0; j < 3; ++j) {
          limiter.push("child", [&](std::uint32_t child_slot) {
            probe.enter(child_slot);
            probe.leave(child_slot);
          });
        }
        probe.leave(slot);
      });
    }
    CHECK(limiter.wait());
    CHECK(probe.ran.load() == 40);
    CHECK(probe.most.load() <= 2);
    CHECK(probe.bad_slots.load() == 0);
  }
}

TEST_CASE("concurrency_limiter: a throwing piece is reported and the rest still run") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_concurrency_limiter limiter(1, priority::normal, pool);
  std::atomic<int> ran{0};
  limiter.push("thrower", [](std::uint32_t) { throw std::runtime_error("boom"); });
  limiter.push("after", [&](std::uint32_t) { ran.fetch_add(1); });
  CHECK(limiter.wait());
  CHECK(ran.load() == 1);
  auto seen = recorder.reports();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].kind == diagnostic_kind::unhandled_exception);
  CHECK(seen[0].message.find("thrower") != std::string::npos);
  CHECK(seen[0].message.find("boom") != std::string::npos);
}

TEST_CASE("concurrency_limiter: max_concurrency 0 is reported and runs as 1") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_concurrency_limiter limiter(0, priority::normal, pool);
  CHECK(recorder.count() == 1);
  CHECK(limiter.max_concurrency() == 1);
  std::atomic<int> ran{0};
  limiter.push("one", [&](std::uint32_t slot) { ran.fetch_add(slot == 0 ? 1 : 100); });
  CHECK(limiter.wait());
  CHECK(ran.load() == 1);
}

TEST_CASE("concurrency_limiter: a max_concurrency past what can run at once is clamped, not allocated") {
  for (unsigned workers : test::worker_counts) {
    for (std::uint32_t limit : {task_concurrency_limiter::most_at_once + 1, 0xFFFFFFC1u, 0xFFFFFFFFu}) {
      CAPTURE(workers);
      CAPTURE(limit);
      test::diagnostic_recorder recorder;
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      CHECK(limiter.max_concurrency() == task_concurrency_limiter::most_at_once);
      occupancy_probe probe(task_concurrency_limiter::most_at_once);
      push_probed(limiter, probe, 100);
      CHECK(limiter.wait());
      CHECK(probe.ran.load() == 100);
      CHECK(probe.bad_slots.load() == 0);
      CHECK(recorder.count() == 0);
    }
  }
}

TEST_CASE("concurrency_limiter: a wait with a timeout too long to add to the clock waits for the work") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_concurrency_limiter limiter(1, priority::normal, pool);
    std::atomic<bool> release{false};
    std::atomic<int> ran{0};
    limiter.push("held", [&](std::uint32_t) {
      while (!release.load()) std::this_thread::yield();
      ran.fetch_add(1);
    });
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.store(true);
    });
    CHECK(limiter.wait(std::chrono::nanoseconds::max() - std::chrono::nanoseconds(1)));
    CHECK(ran.load() == 1);
    releaser.join();
  }
}
