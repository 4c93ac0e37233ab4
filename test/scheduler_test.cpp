// Tests for include/magpie/scheduler.h — workers, priorities, parking, standby, shutdown.
#include <magpie/scheduler.h>
#include <magpie/task.h>

#include "job.h"
#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

using magpie::priority;
using magpie::scheduler;
using magpie::scheduler_options;
using namespace magpie::test;

namespace {

scheduler_options pool_of(unsigned workers, unsigned background = 0) {
  scheduler_options options;
  options.workers = workers;
  options.background_workers = background;
  return options;
}

// spawn_tree launches a job that launches `fanout` children, down to `depth`; each job
// counts itself. Total: (fanout^(depth+1) − 1) / (fanout − 1).
void spawn_tree(scheduler& pool, std::atomic<int>& ran, int depth, int fanout) {
  launch(pool, [&ran, depth, fanout] {
    ran.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the run is complete
    if (depth == 0) return;
    // current(): the scheduler running this job, whichever thread (worker or helper) runs it
    for (int i = 0; i < fanout; ++i) spawn_tree(*scheduler::current(), ran, depth - 1, fanout);
  });
}

int tree_size(int depth, int fanout) {
  int total = 0;
  int level = 1;
  for (int d = 0; d <= depth; ++d, level *= fanout) total += level;
  return total;
}

}  // namespace

TEST_SUITE("scheduler") {

TEST_CASE("scheduler: every job launched from outside runs exactly once") {
  for (unsigned workers : wide_worker_counts) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers));
    constexpr int jobs = 1000;
    std::vector<std::atomic<int>> runs(jobs);
    std::atomic<int> done{0};
    for (int i = 0; i < jobs; ++i) {
      launch(pool, [&, i] {
        runs[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);  // relaxed: read after `done`
        done.fetch_add(1, std::memory_order_release);  // release: publishes the run count
      });
    }
    help_until(pool, [&] { return done.load(std::memory_order_acquire) == jobs; });  // acquire: pairs with the release
    CHECK(std::all_of(runs.begin(), runs.end(), [](const std::atomic<int>& r) { return r.load() == 1; }));
  }
}

TEST_CASE("scheduler: the longest spin_for is bounded: idle workers still park, and the scheduler shuts down") {
  // now + spin_for must not overflow (UBSan reports it) and the spin must end.
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler_options options = pool_of(workers);
    options.spin_for = std::chrono::microseconds::max();
    scheduler pool(options);
    for (int round = 0; round < 3; ++round) {
      std::atomic<int> done{0};
      for (int i = 0; i < 100; ++i) launch(pool, [&] { done.fetch_add(1, std::memory_order_release); });  // release: pairs with the acquire below
      help_until(pool, [&] { return done.load(std::memory_order_acquire) == 100; });  // acquire: pairs with the release
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the workers go idle, spin and park
    }
    const auto began = std::chrono::steady_clock::now();
    pool.shutdown();
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(10));
  }
}

TEST_CASE("scheduler: a worker that stole keeps looking four times spin_for before it parks, then parks") {
  // A loop's halves, a fork-join's children come as pieces to steal, one after another: a
  // worker that stole is still looking at twice spin_for after its stolen job ended, where
  // one that only spun spin_for would have parked. A look taken so late that the longer
  // spin may have ended too (a loaded machine) tells nothing: that round is repeated.
  using clock = std::chrono::steady_clock;
  scheduler_options options = pool_of(1);
  options.spin_for = std::chrono::milliseconds(10);
  scheduler pool(options);
  bool measured = false;
  for (int attempt = 0; attempt < 50 && !measured; ++attempt) {
    CAPTURE(attempt);
    wait_until_all_parked(pool);
    std::uint64_t stolen_before = pool.counters().stolen;
    std::atomic<bool> done{false};
    std::atomic<clock::rep> ended{0};
    launch(pool, [&] {  // from a thread of no scheduler: onto a deque the worker steals from
      ended.store(clock::now().time_since_epoch().count(), std::memory_order_relaxed);  // relaxed: published by `done`
      done.store(true, std::memory_order_release);  // release: pairs with the acquire below
    });
    wait_until([&] { return done.load(std::memory_order_acquire); });  // acquire: pairs with the job's release
    const clock::time_point end{clock::duration(ended.load(std::memory_order_relaxed))};  // relaxed: ordered by `done`
    std::this_thread::sleep_until(end + 2 * options.spin_for);
    auto now = pool.counters();
    if (clock::now() - end >= 3 * options.spin_for) continue;  // too late to tell (see above)
    measured = true;
    CHECK(now.stolen == stolen_before + 1);
    CHECK(now.parked_workers == 0);
  }
  CHECK(measured);
  wait_until_all_parked(pool);  // the longer spin ends too: the watchdog fails a worker that never parks
}

TEST_CASE("scheduler: at most 256 are alive at once; the 257th is refused, and a freed slot is used again") {
  // A task names its scheduler by a one-byte slot: creation past the limit must fail loudly.
  std::vector<std::unique_ptr<scheduler>> alive;
  bool refused = false;
  for (int i = 0; i < 257 && !refused; ++i) {
    try {
      alive.push_back(std::make_unique<scheduler>(pool_of(0)));
    } catch (const std::length_error&) {
      refused = true;
    }
  }
  CHECK(refused);
  CHECK(alive.size() <= 256);
  alive.pop_back();
  CHECK_NOTHROW(alive.push_back(std::make_unique<scheduler>(pool_of(0))));
}

TEST_CASE("scheduler: jobs launched by jobs run, through the workers' deques and stealing") {
  for (unsigned workers : wide_worker_counts) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers));
    std::atomic<int> ran{0};
    spawn_tree(pool, ran, 6, 3);
    help_until(pool, [&] { return ran.load() == tree_size(6, 3); });
    pool.shutdown();
    CHECK(ran.load() == tree_size(6, 3));
  }
}

TEST_CASE("scheduler: with zero workers, work runs only on the thread that waits for it") {
  scheduler pool(pool_of(0));
  std::atomic<int> ran{0};
  std::thread::id runner;
  launch(pool, [&] {
    runner = std::this_thread::get_id();
    ran.fetch_add(1);
  });
  CHECK(ran.load() == 0);
  help_until(pool, [&] { return ran.load() == 1; });
  CHECK(runner == std::this_thread::get_id());
}

TEST_CASE("scheduler: helping inside helping stops at a bounded depth") {
  scheduler pool(pool_of(0));
  constexpr int chain = 500;
  std::atomic<int> ran{0};
  int depth = 0;
  int deepest = 0;
  std::function<void(int)> link = [&](int remaining) {
    ++depth;
    deepest = std::max(deepest, depth);
    ran.fetch_add(1);
    if (remaining > 0) {
      launch(pool, [&, remaining] { link(remaining - 1); });
      pool.try_run_one();  // runs the next link nested, until the depth bound says no
    }
    --depth;
  };
  launch(pool, [&] { link(chain); });
  help_until(pool, [&] { return ran.load() == chain + 1; });
  CHECK(deepest <= 65);
  CHECK(deepest >= 2);
}

TEST_CASE("scheduler: every worker parks once the work drains") {
  for (unsigned workers : wide_worker_counts) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers, workers > 0 ? 1 : 0));
    std::atomic<int> ran{0};
    spawn_tree(pool, ran, 5, 3);
    for (int i = 0; i < 20; ++i) launch(pool, [&] { ran.fetch_add(1); }, priority::background_normal);
    help_until(pool, [&] { return ran.load() == tree_size(5, 3) + 20; });
    // The assertion is reaching the state: a worker that keeps spinning hangs this test and
    // the watchdog names it. (Reading the counter again afterwards would race with
    // harmless spurious wake-ups.)
    wait_until_all_parked(pool);
    CHECK(ran.load() == tree_size(5, 3) + 20);
  }
}

TEST_CASE("scheduler: sleeping workers wake for work — half the jobs wait for the other half") {
  for (unsigned workers : {2u, 4u, 8u, 64u}) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers));
    wait_until_all_parked(pool);  // so every job below needs a wake-up
    int half = static_cast<int>(workers) / 2;
    std::atomic<int> runners_done{0};
    std::atomic<int> finished{0};
    for (int i = 0; i < half; ++i) {
      launch(pool, [&] {
        wait_until([&] { return runners_done.load(std::memory_order_acquire) == half; });  // acquire: pairs with the runners
        finished.fetch_add(1, std::memory_order_release);  // release: pairs with the test's acquire
      });
    }
    for (int i = 0; i < half; ++i) {
      launch(pool, [&] {
        runners_done.fetch_add(1, std::memory_order_release);  // release: pairs with the spinners' acquire
        finished.fetch_add(1, std::memory_order_release);  // release: as above
      });
    }
    wait_until([&] { return finished.load(std::memory_order_acquire) == 2 * half; });  // acquire: as above
    CHECK(runners_done.load() == half);
  }
}

// Each round launches one job per worker, one at a time from outside, and every job spins
// until all of them run at once: a job left queued while its launch's wake-up went to nobody
// never lets its round end. Launches come while workers are still looking for work (a launch
// may then leave the waking to them, lib/scheduler/scheduler.cpp "searching") and, every fourth round,
// once every worker parked. A round that stalls is given up after 20 s and fails.
TEST_CASE("scheduler stress: jobs launched one by one to idle workers each get a worker of their own" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < stress_repeat(); ++repeat) {
    for (unsigned workers : {2u, 3u, 4u, 8u}) {
      CAPTURE(workers);
      scheduler pool(pool_of(workers));
      for (int round = 0; round < 150; ++round) {
        CAPTURE(round);
        if (round % 4 == 0) wait_until_all_parked(pool);
        std::atomic<unsigned> running{0};
        std::atomic<unsigned> finished{0};
        std::atomic<bool> given_up{false};
        for (unsigned i = 0; i < workers; ++i) {
          launch(pool, [&] {
            running.fetch_add(1);
            wait_until([&] { return running.load() == workers || given_up.load(); });
            finished.fetch_add(1);
          });
        }
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        wait_until([&] { return running.load() == workers || std::chrono::steady_clock::now() > deadline; });
        bool all_at_once = running.load() == workers;
        given_up.store(true);
        wait_until([&] { return finished.load() == workers; });  // a stranded job runs once a worker is free
        CHECK(all_at_once);
        if (!all_at_once) break;
      }
    }
  }
}

TEST_CASE("scheduler: a high-priority job starts before normal jobs queued earlier") {
  // Every worker is held busy while 50 normal jobs and then one high job are queued. Each
  // normal job waits until the high job has run, so if any worker's first dequeue after
  // the release took a normal job instead of the high one, all of them would end up
  // waiting and the watchdog would name this test. With one worker, the order is exact.
  for (unsigned workers : {1u, 2u, 4u}) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers));
    std::atomic<bool> release{false};
    std::atomic<unsigned> blockers_running{0};
    for (unsigned i = 0; i < workers; ++i) {
      launch(pool, [&] {
        blockers_running.fetch_add(1, std::memory_order_release);  // release: pairs with the test's acquire
        wait_until([&] { return release.load(std::memory_order_acquire); });  // acquire: pairs with the release store
      });
    }
    wait_until([&] { return blockers_running.load(std::memory_order_acquire) == workers; });  // acquire: as above
    std::atomic<bool> high_ran{false};
    std::atomic<int> normal_before_high{0};
    std::atomic<int> done{0};
    constexpr int normal_jobs = 50;
    for (int i = 0; i < normal_jobs; ++i) {
      launch(pool, [&] {
        if (!high_ran.load(std::memory_order_acquire)) normal_before_high.fetch_add(1);  // acquire: pairs with the high job
        wait_until([&] { return high_ran.load(std::memory_order_acquire); });  // acquire: as above
        done.fetch_add(1);
      });
    }
    launch(pool, [&] {
      high_ran.store(true, std::memory_order_release);  // release: pairs with the normal jobs
      done.fetch_add(1);
    }, priority::high);
    release.store(true, std::memory_order_release);  // release: pairs with the blockers' acquire
    wait_until([&] { return done.load() == normal_jobs + 1; });
    if (workers == 1) CHECK(normal_before_high.load() == 0);
    CHECK(normal_before_high.load() < static_cast<int>(workers));
  }
}

TEST_CASE("scheduler: background work never runs on foreground workers") {
  std::mutex ids_mutex;
  std::set<std::thread::id> foreground_ids;
  scheduler_options options = pool_of(3, 1);  // two foreground workers and a background one
  options.on_worker_start = [&](const magpie::worker_info& info) {
    if (info.kind == magpie::worker_kind::foreground) {
      std::lock_guard lock(ids_mutex);
      foreground_ids.insert(std::this_thread::get_id());
    }
  };
  scheduler pool(options);
  std::atomic<int> on_foreground{0};
  std::atomic<int> done{0};
  constexpr int jobs = 300;
  for (int i = 0; i < jobs; ++i) {
    priority p = i % 3 == 0 ? priority::background_high
               : i % 3 == 1 ? priority::background_normal : priority::background_low;
    launch(pool, [&] {
      {
        std::lock_guard lock(ids_mutex);
        if (foreground_ids.count(std::this_thread::get_id()) != 0) on_foreground.fetch_add(1);
      }
      done.fetch_add(1);
    }, p);
    launch(pool, [] {});  // foreground work alongside, so foreground workers are awake and looking
  }
  wait_until([&] { return done.load() == jobs; });
  pool.shutdown();
  CHECK(foreground_ids.size() == 2);
  CHECK(on_foreground.load() == 0);
}

TEST_CASE("scheduler: a standby worker takes the place of a blocked worker") {
  for (unsigned workers : {1u, 2u, 4u}) {
    CAPTURE(workers);
    scheduler pool(pool_of(workers));
    std::atomic<bool> released{false};
    std::atomic<unsigned> blocked{0};
    std::atomic<unsigned> done{0};
    for (unsigned i = 0; i < workers; ++i) {
      launch(pool, [&] {
        magpie::blocking_scope scope;
        blocked.fetch_add(1);
        wait_until([&] { return released.load(std::memory_order_acquire); });  // acquire: pairs with the releasing job
        done.fetch_add(1);
      });
    }
    wait_until([&] { return blocked.load() == workers; });
    // Every worker is blocked; only a standby worker can run the job that releases them.
    launch(pool, [&] { released.store(true, std::memory_order_release); });  // release: pairs with the blockers
    wait_until([&] { return done.load() == workers; });
    CHECK(pool.counters().standby_workers >= 1);
    CHECK(pool.counters().standby_workers <= workers);
    wait_until_all_parked(pool);  // standby workers return to standby when no longer needed
    CHECK(pool.counters().blocked_workers == 0);
  }
}

TEST_CASE("scheduler: reaching the standby cap is reported, and past it the pool keeps one thread running") {
  diagnostic_recorder recorder;
  scheduler_options options = pool_of(1);
  options.max_standby_workers = 0;
  scheduler pool(options);
  std::atomic<bool> released{false};
  std::atomic<bool> blocked{false};
  launch(pool, [&] {
    magpie::blocking_scope scope;
    blocked.store(true);
    wait_until([&] { return released.load(std::memory_order_acquire); });  // acquire: pairs with the releasing job
  });
  wait_until([&] { return blocked.load(); });
  std::atomic<bool> release_ran{false};
  launch(pool, [&] {
    released.store(true, std::memory_order_release);  // release: pairs with the blocker
    release_ran.store(true);
  });
  // Nobody helps: with its only worker blocked and no standby allowed, the pool still runs
  // one thread, or the releasing job would wait for ever behind the blocked one.
  wait_until([&] { return release_ran.load(); });
  pool.shutdown();
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::limit_reached);
  CHECK(reports[0].severity == magpie::severity::warning);
  CHECK(pool.counters().standby_workers == 1);
}

TEST_CASE("scheduler: start and exit hooks run once on every worker thread") {
  std::atomic<int> started{0};
  std::atomic<int> exited{0};
  std::atomic<int> background{0};
  {
    scheduler_options options = pool_of(3, 2);
    options.on_worker_start = [&](const magpie::worker_info& info) {
      started.fetch_add(1);
      if (info.kind == magpie::worker_kind::background) background.fetch_add(1);
    };
    options.on_worker_exit = [&](const magpie::worker_info&) { exited.fetch_add(1); };
    scheduler pool(options);
    CHECK(pool.worker_count() == 3);
    CHECK(pool.background_worker_count() == 2);
  }
  CHECK(started.load() == 3);  // the background workers are two of the three
  CHECK(exited.load() == 3);
  CHECK(background.load() == 2);
}

TEST_CASE("scheduler: several schedulers live side by side and current() names the right one") {
  scheduler first(pool_of(2));
  scheduler second(pool_of(1));
  std::atomic<int> right{0};
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) {
    launch(first, [&] { right.fetch_add(scheduler::current() == &first ? 1 : 0); done.fetch_add(1); });
    launch(second, [&] { right.fetch_add(scheduler::current() == &second ? 1 : 0); done.fetch_add(1); });
  }
  wait_until([&] { return done.load() == 100; });
  CHECK(right.load() == 100);
  CHECK(scheduler::current() == nullptr);
}

TEST_CASE("scheduler: the default scheduler is created on first use and runs work") {
  scheduler& shared = magpie::default_scheduler();
  CHECK(&shared == &magpie::default_scheduler());
  CHECK(shared.worker_count() == magpie::default_worker_count());
  std::atomic<bool> ran{false};
  launch(shared, [&] { ran.store(true); });
  help_until(shared, [&] { return ran.load(); });
}

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

}  // TEST_SUITE("scheduler")

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

// counters() promises that a caller who sees every worker parked sees what they ran: the
// parking add (release) and the counters' load (acquire) are its only edge to the workers'
// plain writes here — the jobs are never waited for, and `executed` is a relaxed statistic.
TEST_CASE("scheduler: counters that show every worker parked publish the work they ran" *
          doctest::test_suite("stress")) {
  constexpr int jobs = 64;
  for (int repeat = 0; repeat < 40 * stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 4u}) {
      CAPTURE(workers);
      scheduler pool(pool_of(workers));
      std::vector<int> written(jobs, 0);  // plain: published only by the workers' parking
      for (int i = 0; i < jobs; ++i) launch(pool, [&written, i] { written[static_cast<std::size_t>(i)] = i + 1; });
      wait_until([&] { return pool.counters().executed == jobs; });
      wait_until_all_parked(pool);
      for (int i = 0; i < jobs; ++i) REQUIRE(written[static_cast<std::size_t>(i)] == i + 1);
    }
  }
}

TEST_CASE("scheduler: launches from many threads while workers steal, all run exactly once" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < stress_repeat(); ++repeat) {
    for (unsigned workers : wide_worker_counts) {
      CAPTURE(workers);
      scheduler pool(pool_of(workers, 1));
      std::atomic<int> ran{0};
      std::vector<std::thread> producers;
      for (int p = 0; p < 3; ++p) {
        producers.emplace_back([&] {
          for (int i = 0; i < 2000; ++i) launch(pool, [&] { ran.fetch_add(1); });
          spawn_tree(pool, ran, 3, 3);
        });
      }
      for (auto& producer : producers) producer.join();
      help_until(pool, [&] { return ran.load() == 3 * (2000 + tree_size(3, 3)); });
      wait_until_all_parked(pool);
      CHECK(ran.load() == 3 * (2000 + tree_size(3, 3)));
    }
  }
}

TEST_CASE("scheduler: a random mix of launches, priorities, named-thread sends and helping from several threads" *
          doctest::test_suite("stress")) {
  // Replay a failure with MAGPIE_SEED=<the seed printed below>.
  const char* seed_text = std::getenv("MAGPIE_SEED");
  const std::uint64_t seed = seed_text != nullptr ? std::strtoull(seed_text, nullptr, 10) : std::random_device{}();
  CAPTURE(seed);
  for (int repeat = 0; repeat < stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 3u, 8u}) {
      CAPTURE(workers);
      scheduler pool(pool_of(workers, 1));
      constexpr int actors = 3;
      constexpr int actions_per_actor = 3000;
      std::atomic<int> launched{0};
      std::atomic<int> ran{0};
      std::atomic<bool> game_ready{false};
      std::thread game([&] {
        pool.attach(magpie::named_thread::game);
        game_ready.store(true);
        pool.process_until_request_return(magpie::named_thread::game);
        pool.detach();
      });
      wait_until([&] { return game_ready.load(); });
      auto count_run = [&] { ran.fetch_add(1, std::memory_order_relaxed); };  // relaxed: compared after all joins
      std::vector<std::thread> threads;
      for (int actor = 0; actor < actors; ++actor) {
        threads.emplace_back([&, actor] {
          std::mt19937_64 random(seed + static_cast<std::uint64_t>(actor));
          for (int step = 0; step < actions_per_actor; ++step) {
            switch (random() % 6) {
              case 0:
                launched.fetch_add(1);
                launch(pool, count_run, priority::high);
                break;
              case 1:
                launched.fetch_add(2);
                launch(pool, [&] {  // a job that launches a child from wherever it runs
                  count_run();
                  launch(*scheduler::current(), count_run);
                });
                break;
              case 2:
                launched.fetch_add(1);
                launch(pool, count_run, static_cast<priority>(2 + random() % 3));
                break;
              case 3:
                launched.fetch_add(1);
                launch_on(pool, magpie::named_thread::game, count_run, magpie::thread_queue::main, random() % 2 == 0);
                break;
              case 4:
                pool.try_run_one();
                break;
              default:
                launched.fetch_add(1);
                launch(pool, count_run);
                break;
            }
          }
        });
      }
      for (auto& thread : threads) thread.join();
      help_until(pool, [&] { return ran.load() == launched.load(); });
      pool.request_return(magpie::named_thread::game);
      game.join();
      CHECK(ran.load() == launched.load());
    }
  }
}

TEST_CASE("scheduler: {.workers = n} starts n workers, the background ones among them, and all take foreground work") {
  std::atomic<int> started{0};
  {
    // Designated initialisers naming only some fields: every other field has a default
    // member initialiser, so this compiles under -Wextra -Werror as users write it.
    scheduler_options options{.workers = 2,
                              .on_worker_start = [&](const magpie::worker_info&) { started.fetch_add(1); }};
    scheduler pool(options);
    CHECK(pool.worker_count() == 2);
    CHECK(pool.background_worker_count() == 1);  // the default: one of the two
    // Two normal jobs that each wait (bounded) for the other to start: both workers must
    // take foreground work, the background one included, while this thread only watches.
    std::atomic<int> running{0};
    std::atomic<int> met{0};
    std::atomic<int> done{0};
    wait_until_all_parked(pool);  // each must be woken for the work, not find it while starting
    for (int i = 0; i < 2; ++i) {
      launch(pool, [&] {
        running.fetch_add(1);
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (running.load() < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        if (running.load() == 2) met.fetch_add(1);
        done.fetch_add(1);
      });
    }
    wait_until([&] { return done.load() == 2; });
    CHECK(met.load() == 2);
  }
  CHECK(started.load() == 2);
}

TEST_CASE("scheduler: background_workers beyond workers means all of them; zero workers have none") {
  scheduler_options options = pool_of(2, 5);
  scheduler wide(options);
  CHECK(wide.worker_count() == 2);
  CHECK(wide.background_worker_count() == 2);
  scheduler none({.workers = 0});
  CHECK(none.worker_count() == 0);
  CHECK(none.background_worker_count() == 0);
  std::atomic<bool> ran{false};
  launch(none, [&] { ran.store(true); }, priority::background_low);
  help_until(none, [&] { return ran.load(); });
}

TEST_CASE("scheduler: thread counts come from any integer type, range-checked") {
  static_assert(std::is_convertible_v<std::int64_t, magpie::thread_count>);
  static_assert(std::is_convertible_v<std::size_t, magpie::thread_count>);
  static_assert(std::is_convertible_v<short, magpie::thread_count>);
  static_assert(!std::is_constructible_v<magpie::thread_count, bool>);
  static_assert(!std::is_constructible_v<magpie::thread_count, double>);
  std::int64_t from_benchmark = 3;  // e.g. benchmark::State::range(0)
  scheduler_options options{.workers = from_benchmark - 1, .background_workers = std::size_t{0},
                            .max_standby_workers = from_benchmark};
  CHECK(options.workers == 2u);
  CHECK(options.background_workers == 0u);
  CHECK(*options.max_standby_workers == 3u);
  scheduler pool(options);
  CHECK(pool.worker_count() == 2);
  CHECK(pool.background_worker_count() == 0);
  CHECK_THROWS_AS(magpie::thread_count(from_benchmark - 4), std::out_of_range);
  CHECK_THROWS_AS(magpie::thread_count(std::int64_t{1} << 40), std::out_of_range);
  constexpr magpie::thread_count at_compile_time = 7;
  static_assert(at_compile_time == 7u);
}

namespace {

// with_environment sets an environment variable for its lifetime, then restores it.
class with_environment {
 public:
  with_environment(const char* name, const char* value) : name_(name) {
    if (const char* before = std::getenv(name)) before_ = before;
    had_ = std::getenv(name) != nullptr;
    setenv(name, value, 1);
  }
  ~with_environment() {
    if (had_) {
      setenv(name_, before_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  with_environment(const with_environment&) = delete;
  with_environment& operator=(const with_environment&) = delete;

 private:
  const char* name_;
  std::string before_;
  bool had_ = false;
};

// default_scheduler_child names the child-process mode of the case below.
constexpr const char* default_scheduler_child = "MAGPIE_TEST_DEFAULT_SCHEDULER_CHILD";

// child_passed is the exit status of a child that passed every check.
constexpr int child_passed = 42;

// run_child runs this test binary again on the case below, in `mode`, with
// MAGPIE_NUM_THREADS=`threads`, and returns its exit status.
int run_child(const char* mode, const char* threads) {
  with_environment child(default_scheduler_child, mode);
  with_environment count("MAGPIE_NUM_THREADS", threads);
  std::string filter = "--test-case=scheduler: child: the default scheduler's size";
  char program[] = "/proc/self/exe";
  char no_intro[] = "--no-intro=true";
  char* argv[] = {program, filter.data(), no_intro, nullptr};
  pid_t child_id = 0;
  if (posix_spawn(&child_id, program, nullptr, nullptr, argv, environ) != 0) return -1;
  int status = 0;
  if (waitpid(child_id, &status, 0) != child_id || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("scheduler: MAGPIE_NUM_THREADS=N means N threads of foreground work, the caller included") {
  diagnostic_recorder recorder;
  {
    with_environment count("MAGPIE_NUM_THREADS", "3");
    CHECK(magpie::default_worker_count() == 2);
    CHECK(scheduler_options{}.workers == 2u);
    scheduler pool;
    CHECK(pool.worker_count() == 2);
  }
  {
    with_environment count("MAGPIE_NUM_THREADS", "1");
    CHECK(magpie::default_worker_count() == 0);
  }
  CHECK(recorder.count() == 0);
  unsigned hardware = std::thread::hardware_concurrency() > 1 ? std::thread::hardware_concurrency() - 1 : 1;
  for (const char* wrong : {"0", "-2", "three", "4x", ""}) {
    CAPTURE(wrong);
    with_environment count("MAGPIE_NUM_THREADS", wrong);
    CHECK(magpie::default_worker_count() == hardware);
  }
  // Reported once per process, with the value it ignored.
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(recorder.reports()[0].message.find("'0'") != std::string::npos);
}

TEST_CASE("scheduler: the default scheduler's size is set by MAGPIE_NUM_THREADS or by options, before first use") {
  // A fresh process each: in this one the default scheduler may exist already.
  CHECK(run_child("environment", "3") == child_passed);
  CHECK(run_child("options", "5") == child_passed);
  diagnostic_recorder recorder;
  (void)magpie::default_scheduler();
  CHECK_FALSE(magpie::set_default_scheduler_options({.workers = 1}));
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == magpie::diagnostic_kind::misuse);
}

TEST_CASE("scheduler: child: the default scheduler's size") {
  // Runs its checks only as the child process the case above starts.
  const char* mode = std::getenv(default_scheduler_child);
  if (mode == nullptr) return;
  bool passed = false;
  if (std::string(mode) == "environment") {  // MAGPIE_NUM_THREADS=3, read when it is made
    scheduler& shared = magpie::default_scheduler();
    passed = shared.worker_count() == 2 && shared.background_worker_count() == 1;
  } else if (std::string(mode) == "options") {  // options given win over MAGPIE_NUM_THREADS=5
    diagnostic_recorder recorder;
    bool taken = magpie::set_default_scheduler_options({.workers = 1, .background_workers = 0});
    scheduler& shared = magpie::default_scheduler();
    bool refused = !magpie::set_default_scheduler_options({.workers = 3});
    passed = taken && refused && shared.worker_count() == 1 && shared.background_worker_count() == 0 &&
             recorder.count() == 1 && recorder.reports()[0].kind == magpie::diagnostic_kind::misuse;
  }
  std::fflush(nullptr);
  std::_Exit(passed ? child_passed : 1);
}

TEST_SUITE("scheduler") {

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

}  // TEST_SUITE("scheduler")

TEST_SUITE("scheduler") {

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

}  // TEST_SUITE("scheduler")
