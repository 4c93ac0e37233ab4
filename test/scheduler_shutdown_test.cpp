// Suite "scheduler_shutdown": a scheduler's end (include/magpie/scheduler.h) — shutdown
// runs what is queued and what that launches, refuses launches from outside afterwards and
// shutdown from its own work, reports work stranded on a named thread as never run, and
// reports a shutdown that waits on a task that never ends.
#include <magpie/scheduler.h>
#include <magpie/task.h>

#include "job.h"
#include "scheduler_support.h"
#include "support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

using magpie::priority;
using magpie::scheduler;
using magpie::scheduler_options;
using namespace magpie::test;

TEST_SUITE("scheduler_shutdown") {

TEST_CASE("scheduler: shutdown runs every queued job, and jobs launched by running jobs") {
  for (unsigned workers : wide_worker_counts) {
    CAPTURE(workers);
    for (int repeat = 0; repeat < 5; ++repeat) {
      std::atomic<int> ran{0};
      {
        scheduler pool(pool_of(workers));
        for (int i = 0; i < 1000; ++i) launch(pool, [&] { ran.fetch_add(1); });
        spawn_tree(pool, ran, 4, 3);
      }
      CHECK(ran.load() == 1000 + tree_size(4, 3));
    }
  }
}

TEST_CASE("scheduler: a launch from outside after shutdown is reported and discarded") {
  diagnostic_recorder recorder;
  scheduler pool(pool_of(2));
  pool.shutdown();
  std::atomic<int> discarded{0};
  std::atomic<bool> ran{false};
  magpie::detail::schedule_item(pool, new job([&] { ran.store(true); }, "late job", &discarded));
  CHECK_FALSE(ran.load());
  CHECK(discarded.load() == 1);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].message.find("late job") != std::string::npos);
}

TEST_CASE("scheduler: shutdown called from the scheduler's own work is reported, not a deadlock") {
  diagnostic_recorder recorder;
  for (unsigned workers : {0u, 2u}) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers));
    std::atomic<bool> ran{false};
    launch(pool, [&] {
      scheduler::current()->shutdown();
      ran.store(true);
    });
    help_until(pool, [&] { return ran.load(); });
  }
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].message.find("shutdown") != std::string::npos);
}

TEST_CASE("scheduler: shutdown with 1,000 jobs queued and jobs spawning jobs, 100 times" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < 100 * stress_repeat(); ++repeat) {
    for (unsigned workers : wide_worker_counts) {
      std::atomic<int> ran{0};
      {
        scheduler pool(pool_of(workers, workers % 2));
        for (int i = 0; i < 1000; ++i) {
          launch(pool, [&] { ran.fetch_add(1, std::memory_order_relaxed); },  // relaxed: read after the join
                 i % 10 == 0 ? priority::background_normal : priority::normal);
        }
        spawn_tree(pool, ran, 3, 4);
      }
      REQUIRE(ran.load() == 1000 + tree_size(3, 4));
    }
  }
}

TEST_CASE("scheduler: a task behind work stranded on a named thread is reported as never run at shutdown") {
  // The render thread never runs again: its task is discarded at shutdown, which makes the
  // task launched behind it (before shutdown) ready. That one never ran either; it was not
  // launched from outside after shutdown began.
  for (unsigned workers : {0u, 1u, 2u, 8u}) {
    CAPTURE(workers);
    diagnostic_recorder recorder;
    std::atomic<bool> ran{false};
    magpie::task<> behind;
    {
      scheduler pool(pool_of(workers, workers == 0 ? 0 : 1));
      magpie::task<> stranded = pool.launch("stranded draw", [] {}, magpie::on_thread(magpie::named_thread::render));
      behind = pool.launch("after the draw", [&] { ran.store(true); }, stranded);
    }
    CHECK_FALSE(ran.load());
    CHECK(behind.is_completed());
    auto reports = recorder.reports();
    CHECK(reports.size() == 2);
    bool stranded_reported = false;
    bool behind_reported = false;
    for (const auto& each : reports) {
      INFO(each.message);
      CHECK(each.kind == magpie::diagnostic_kind::never_ran);
      CHECK(each.message.find("outside") == std::string::npos);
      if (each.message.find("'stranded draw'") != std::string::npos) stranded_reported = true;
      if (each.message.find("'after the draw'") != std::string::npos) {
        behind_reported = true;
        // It names what it waited for, and where that was stranded.
        CHECK(each.message.find("'stranded draw' queued on render") != std::string::npos);
      }
    }
    CHECK(stranded_reported);
    CHECK(behind_reported);
  }
}

TEST_CASE("scheduler: a shutdown waiting on a task that never ends is reported once, after stall_report_after") {
  // The body spins until a flag is set after the destructor returns: a real program hangs
  // there. Here a helper stands for "after": it releases the body once the report came (or
  // after 10 s, and the check fails).
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    diagnostic_recorder recorder;
    scheduler_options options = pool_of(workers, 1);
    options.stall_report_after = std::chrono::milliseconds(50);
    auto pool = std::make_unique<scheduler>(options);
    std::atomic<bool> started{false};
    std::atomic<bool> released{false};
    (void)pool->launch("spins until main returns", [&] {
      started.store(true);
      while (!released.load()) std::this_thread::yield();
    });
    while (!started.load()) std::this_thread::yield();
    std::thread releaser([&] {
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (recorder.count() == 0 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      released.store(true);
    });
    pool.reset();
    releaser.join();
    auto reports = recorder.reports();
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].kind == magpie::diagnostic_kind::stalled);
    CHECK(reports[0].severity == magpie::severity::warning);
    CHECK(reports[0].message.find("shutdown") != std::string::npos);
  }
}

}  // TEST_SUITE("scheduler_shutdown")
