// Tests for include/magpie/scheduler.h — workers, stealing, helping, parking and waking,
// priorities, standby workers and worker hooks. Options, thread counts and the default
// scheduler are in scheduler_options_test.cpp, shutdown in scheduler_shutdown_test.cpp.
#include <magpie/scheduler.h>
#include <magpie/task.h>

#include "job.h"
#include "scheduler_support.h"
#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

using magpie::priority;
using magpie::scheduler;
using magpie::scheduler_options;
using namespace magpie::test;

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

// One foreground and one background worker. Launches made while the foreground worker
// searches leave their wake-ups to that search; a search that ends with work must wake the
// background worker, as such a launch would have, or the second job waits while a worker
// sleeps (here: for ever, as the first waits for it). Before the two jobs, the foreground
// worker takes a first job and then searches for up to 10 ms.
TEST_CASE("scheduler: a job left to the lone foreground worker's search wakes the background worker") {
  scheduler_options options = pool_of(2, 1);
  options.spin_for = std::chrono::milliseconds(10);  // the longest search: the launches below land in it
  scheduler pool(options);
  for (int round = 0; round < 10; ++round) {
    CAPTURE(round);
    wait_until_all_parked(pool);
    std::atomic<bool> primed{false};
    launch(pool, [&] { primed.store(true); });  // wakes the foreground worker, which then searches
    wait_until([&] { return primed.load(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::atomic<int> running{0};
    std::atomic<int> finished{0};
    std::atomic<bool> given_up{false};
    for (int i = 0; i < 2; ++i) {
      launch(pool, [&] {
        running.fetch_add(1);
        wait_until([&] { return running.load() == 2 || given_up.load(); });
        finished.fetch_add(1);
      });
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    wait_until([&] { return running.load() == 2 || std::chrono::steady_clock::now() > deadline; });
    bool both_at_once = running.load() == 2;
    given_up.store(true);
    wait_until([&] { return finished.load() == 2; });
    CHECK(both_at_once);
    if (!both_at_once) break;
  }
}

// One foreground and one background worker. While the foreground worker blocks, a standby
// worker stands in and, idle, parks as a foreground worker; once the block ends it is no
// longer wanted but still parked there. The next launch's wake-up goes to it; it must pass
// the wake-up on to the background worker, as the launch would have had it not been
// parked, or the job waits while a worker sleeps (here: for ever, as the foreground
// worker waits for it).
TEST_CASE("scheduler: a standby worker that is no longer wanted passes a launch's wake-up to the background worker") {
  scheduler pool(pool_of(2, 1));
  wait_until_all_parked(pool);
  std::atomic<bool> blocking{false};
  std::atomic<bool> unblock{false};
  std::atomic<bool> unblocked{false};
  std::atomic<bool> second_ran{false};
  std::atomic<bool> gave_up{false};
  std::atomic<bool> first_done{false};
  launch(pool, [&] {  // taken by the foreground worker, woken first
    {
      magpie::blocking_scope scope;  // a standby worker starts in its place
      blocking.store(true);
      wait_until([&] { return unblock.load(); });
    }
    unblocked.store(true);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    wait_until([&] { return second_ran.load() || std::chrono::steady_clock::now() > deadline; });
    gave_up.store(!second_ran.load());
    first_done.store(true);
  });
  wait_until([&] { return blocking.load(); });
  // The background worker and the standby worker, idle, both parked.
  wait_until([&] {
    auto now = pool.counters();
    return now.standby_workers == 1 && now.parked_workers == 2;
  });
  unblock.store(true);
  wait_until([&] { return unblocked.load(); });
  launch(pool, [&] { second_ran.store(true); });
  wait_until([&] { return first_done.load(); });
  CHECK_FALSE(gave_up.load());
}

TEST_CASE("scheduler: a high-priority job starts before normal jobs queued earlier") {
  // Every worker is held busy while 50 normal jobs and then one high job are queued. Each
  // normal job waits until the high job has run, so if any worker's first dequeue after
  // the release took a normal job instead of the high one, all of them would end up
  // waiting and the watchdog would name this test. With one worker, the order is exact.
  for (unsigned workers : {1u, 2u, 4u}) {
    CAPTURE(workers);
    // Declared before the pool: a blocker may still be reading `release` when the last job
    // is counted, and the pool's end waits for it.
    std::atomic<bool> release{false};
    std::atomic<unsigned> blockers_running{0};
    std::atomic<bool> high_ran{false};
    std::atomic<int> normal_before_high{0};
    std::atomic<int> done{0};
    scheduler pool(pool_of(workers));
    for (unsigned i = 0; i < workers; ++i) {
      launch(pool, [&] {
        blockers_running.fetch_add(1, std::memory_order_release);  // release: pairs with the test's acquire
        wait_until([&] { return release.load(std::memory_order_acquire); });  // acquire: pairs with the release store
      });
    }
    wait_until([&] { return blockers_running.load(std::memory_order_acquire) == workers; });  // acquire: as above
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

}  // TEST_SUITE("scheduler")
