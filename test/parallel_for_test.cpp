// Suite "parallel_for": parallel_for, parallel_reduce, parallel_invoke.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace magpie;
using test::no_leaks;

namespace {

// thread_number is a small number for the calling thread, the same on every call.
int thread_number() {
  static std::atomic<int> next{0};
  thread_local int mine = next.fetch_add(1, std::memory_order_relaxed);  // relaxed: only distinct values matter
  return mine;
}

// uneven_work spins for a cost that varies with `i` by a factor of about 100.
std::uint64_t uneven_work(std::size_t i) {
  std::uint64_t state = i + 1;
  std::size_t steps = 8 + (i * 2654435761u) % 800;
  for (std::size_t step = 0; step < steps; ++step) state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state;
}

}  // namespace

TEST_CASE("parallel_for: every index runs exactly once, on every worker count and size") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{100'003}}) {
      CAPTURE(count);
      std::vector<std::atomic<int>> hits(count);
      pool.launch("loop", [&] { parallel_for(count, [&](std::size_t i) { hits[i].fetch_add(1); }); }).wait();
      for (auto& each : hits) CHECK(each.load() == 1);
    }
  }
}

TEST_CASE("parallel_for: the calling thread takes part, from outside the scheduler too") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);
  std::thread::id here = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  parallel_for(500, [&](std::size_t) {
    if (std::this_thread::get_id() != here) elsewhere.fetch_add(1);
  });
  CHECK(elsewhere.load() == 0);  // no workers: all on this thread
  pool.detach();
}

TEST_CASE("parallel_for: options — single thread, minimum batch, unbalanced, background priority") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  pool.attach(named_thread::game);
  std::thread::id here = std::this_thread::get_id();
  std::atomic<int> off_thread{0};
  parallel_for(10'000, [&](std::size_t) {
    if (std::this_thread::get_id() != here) off_thread.fetch_add(1);
  }, {.force_single_thread = true});
  CHECK(off_thread.load() == 0);

  CHECK(detail::plan_loop(1000, {.min_batch_size = 300}).grain == 300);
  CHECK(detail::plan_loop(1000, {.min_batch_size = 300}).shared);
  CHECK_FALSE(detail::plan_loop(1000, {.min_batch_size = 501}).shared);  // no two pieces of 501
  CHECK_FALSE(detail::plan_loop(1000, {.force_single_thread = true}).shared);
  CHECK(detail::plan_loop(1000, {.unbalanced = true}).longest_step < detail::plan_loop(1000, {}).longest_step);
  CHECK(detail::plan_loop(1000, {.background_priority = true}).at == priority::background_normal);

  for (parallel_for_options options : {parallel_for_options{.unbalanced = true}, parallel_for_options{.background_priority = true},
                                       parallel_for_options{.min_batch_size = 64}}) {
    std::vector<std::atomic<int>> hits(5000);
    parallel_for(hits.size(), [&](std::size_t i) { hits[i].fetch_add(1); }, options);
    for (auto& each : hits) CHECK(each.load() == 1);
  }
  pool.detach();
}

TEST_CASE("parallel_for: batch sizes near SIZE_MAX still run every iteration") {
  // Once ran nothing: rounding the batch count up as (count + batch - 1) / batch wrapped.
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  pool.attach(named_thread::game);
  constexpr std::size_t huge = std::numeric_limits<std::size_t>::max();
  for (std::size_t min_batch : {huge, huge - 1, huge / 2 + 1, huge / 2}) {
    CAPTURE(min_batch);
    for (std::size_t count : {std::size_t{1}, std::size_t{5}, std::size_t{1000}}) {
      CAPTURE(count);
      std::vector<std::atomic<int>> hits(count);
      parallel_for(count, [&](std::size_t i) { hits[i].fetch_add(1); }, {.min_batch_size = min_batch});
      for (auto& each : hits) CHECK(each.load() == 1);
      long sum = parallel_reduce(count, 0L, [](std::size_t i) { return static_cast<long>(i); },
                                 [](long a, long b) { return a + b; }, {.min_batch_size = min_batch});
      CHECK(sum == static_cast<long>(count * (count - 1) / 2));
    }
  }
  pool.detach();
}

TEST_CASE("parallel_for: plans for ranges near SIZE_MAX keep their steps and pieces in bounds") {
  // Only the plans: running this many iterations would never finish.
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  pool.attach(named_thread::game);
  constexpr std::size_t huge = std::numeric_limits<std::size_t>::max();
  // A thread without a deque halves down to sixteen pieces per thread at most (unbalanced),
  // and looks at its deque at most 256 times per thread's share; the caller counts as a thread.
  std::size_t threads = std::size_t{std::max(pool.worker_count(), pool.background_worker_count())} + 1;
  for (std::size_t count : {huge, huge - 1, huge / 2 + 1, huge / 2}) {
    CAPTURE(count);
    for (parallel_for_options options :
         {parallel_for_options{}, parallel_for_options{.unbalanced = true}, parallel_for_options{.background_priority = true},
          parallel_for_options{.min_batch_size = 3}, parallel_for_options{.min_batch_size = huge / 2 + 1},
          parallel_for_options{.min_batch_size = huge}, parallel_for_options{.force_single_thread = true}}) {
      CAPTURE(options.min_batch_size);
      detail::loop_plan plan = detail::plan_loop(count, options);
      CAPTURE(plan.grain);
      CAPTURE(plan.longest_step);
      CAPTURE(plan.eager_piece);
      CHECK(plan.count == count);
      CHECK(plan.grain >= std::max(options.min_batch_size, std::size_t{1}));
      CHECK(plan.longest_step >= plan.grain);
      CHECK(plan.eager_piece >= plan.grain);
      if (plan.shared) {  // else the caller runs the range in one go
        CHECK(count / plan.eager_piece <= 16 * threads);
        CHECK(count / plan.longest_step <= 256 * threads);
      }
      CHECK(plan.shared == (!options.force_single_thread && count / 2 >= plan.grain));
    }
  }
  pool.detach();
}

TEST_CASE("parallel_for: the first exception is rethrown, and the loop stops") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    bool threw = pool.launch("loop", [&] {
      try {
        parallel_for(1000, [&](std::size_t i) {
          ran.fetch_add(1);
          if (i == 500) throw std::runtime_error("at 500");
        }, {.min_batch_size = 10});
      } catch (const std::runtime_error& error) {
        return std::string(error.what()) == "at 500";
      }
      return false;
    }).get_result();
    CHECK(threw);
    CHECK(ran.load() >= 1);
    CHECK(ran.load() <= 1000);
    if (workers == 0) CHECK(ran.load() == 501);  // one thread, in order: it stopped at the throw
  }
}

TEST_CASE("parallel_for: after a throw, iterations not yet started do not run") {
  // The caller's first iteration throws; the others each take a microsecond or so. Every
  // thread looks for a recorded exception before each step, so the loop ends after a few
  // steps, far short of its million iterations.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    constexpr std::size_t count = 1'000'000;
    std::atomic<std::size_t> ran{0};
    std::atomic<std::uint64_t> sink{0};
    bool threw = pool.execute([&] {
      try {
        parallel_for(count, [&](std::size_t i) {
          ran.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the loop
          if (i == 0) throw std::runtime_error("first");
          sink.fetch_add(uneven_work(i % 16), std::memory_order_relaxed);  // relaxed: only kept alive
        });
      } catch (const std::runtime_error&) {
        return true;
      }
      return false;
    });
    CHECK(threw);
    CHECK(ran.load() < count / 2);
  }
}

TEST_CASE("parallel_for: nested loops") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::vector<std::atomic<int>> cells(64 * 64);
  pool.launch("outer", [&] {
    parallel_for(64, [&](std::size_t row) {
      parallel_for(64, [&](std::size_t column) { cells[row * 64 + column].fetch_add(1); });
    });
  }).wait();
  for (auto& each : cells) CHECK(each.load() == 1);
}

TEST_CASE("parallel_for: unbalanced bodies: every index once, with the right result") {
  // Halves are split again by whichever thread took them: every iteration must still run
  // once, however the halves travel.
  for (unsigned workers : test::wide_worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    for (parallel_for_options options : {parallel_for_options{}, parallel_for_options{.unbalanced = true},
                                         parallel_for_options{.min_batch_size = 3}}) {
      CAPTURE(options.unbalanced);
      CAPTURE(options.min_batch_size);
      constexpr std::size_t count = 20'011;
      std::vector<std::atomic<int>> hits(count);
      std::vector<std::atomic<std::uint64_t>> results(count);
      pool.execute([&] {
        parallel_for(count, [&](std::size_t i) {
          results[i].store(uneven_work(i), std::memory_order_relaxed);  // relaxed: read after the loop
          hits[i].fetch_add(1, std::memory_order_relaxed);  // relaxed: as above
        }, options);
      });
      std::size_t wrong_hits = 0;
      std::size_t wrong_results = 0;
      for (std::size_t i = 0; i < count; ++i) {
        if (hits[i].load() != 1) ++wrong_hits;
        if (results[i].load() != uneven_work(i)) ++wrong_results;
      }
      CHECK(wrong_hits == 0);
      CHECK(wrong_results == 0);
    }
  }
}

TEST_CASE("parallel_for: a costly end of the range is shared between threads") {
  // All the cost is in the last 5 % of the range: each of those iterations sleeps. A range
  // cut into fixed batches would leave that end to the one thread whose batch holds it;
  // halved whenever a thread runs out of work, it must reach at least two threads.
  for (unsigned workers : {1u, 2u, 4u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler_options options = test::options_with(workers);
    options.background_workers = 0;
    options.workers = workers;
    scheduler pool(options);
    constexpr std::size_t count = 1000;
    constexpr std::size_t costly_from = count - count / 20;
    std::vector<std::atomic<int>> ran_on(count);
    pool.execute([&] {
      parallel_for(count, [&](std::size_t i) {
        ran_on[i].store(thread_number(), std::memory_order_relaxed);  // relaxed: read after the loop
        if (i >= costly_from) std::this_thread::sleep_for(std::chrono::microseconds(200));
      });
    });
    std::vector<int> threads;
    for (std::size_t i = costly_from; i < count; ++i) threads.push_back(ran_on[i].load());
    std::sort(threads.begin(), threads.end());
    CHECK(std::unique(threads.begin(), threads.end()) - threads.begin() >= 2);
  }
}

TEST_CASE("parallel_for: threads that take halves never wait for them: no standby worker starts") {
  // Only the loop's caller joins; here it is `main` (inside execute), which is no worker, so
  // its join starts no standby worker either. A taker whose halves are taken in turn goes
  // on without them (their takers pay for them when they finish): no worker ever blocks in
  // a loop, so with no standby workers allowed none starts and the cap is never reported.
  for (unsigned workers : {2u, 4u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    test::diagnostic_recorder reports;
    scheduler_options options = test::options_with(workers);
    options.max_standby_workers = 0;
    scheduler pool(options);
    std::atomic<std::uint64_t> sink{0};
    pool.execute([&] {
      for (int round = 0; round < 40; ++round) {
        parallel_for(4096, [&](std::size_t i) {
          sink.fetch_add(uneven_work(i % 64), std::memory_order_relaxed);  // relaxed: only kept alive
        }, {.unbalanced = true});
      }
    });
    CHECK(pool.counters().standby_workers == 0);
    CHECK(reports.count_naming("standby cap") == 0);
  }
}

TEST_CASE("parallel_for: halves left under the iterations' own work still run once, wherever they run") {
  // Iterations that launch tasks leave them on their thread's deque above the halves split
  // off before them: the thread cannot take those halves back directly and runs them later
  // as any other work, or another thread takes them. Each must still run once and be counted.
  for (unsigned workers : test::wide_worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    constexpr std::size_t count = 2000;
    std::vector<std::atomic<int>> hits(count);
    std::atomic<int> launched_ran{0};
    pool.launch("loop", [&] {
      std::vector<task<>> launched;
      std::mutex launched_lock;
      parallel_for(count, [&](std::size_t i) {
        hits[i].fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the loop
        if (i % 50 == 0) {
          task<> made = launch("launched by a batch", [&] { launched_ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait_all
          std::lock_guard hold(launched_lock);
          launched.push_back(std::move(made));
        }
      }, {.unbalanced = true});
      wait_all(launched);
    }).wait();
    std::size_t wrong = 0;
    for (auto& hit : hits) wrong += hit.load() == 1 ? 0 : 1;
    CHECK(wrong == 0);
    CHECK(launched_ran.load() == static_cast<int>(count / 50));
  }
}

TEST_CASE("parallel_for: throws on every thread rethrow one, and no iteration runs twice") {
  // Iterations throw on whichever thread holds them, the caller or threads that took halves
  // and split them further: one exception must come out of the loop, from an iteration that
  // threw, and no iteration may run twice however the pieces stopped.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    for (std::size_t throwing_offset : {std::size_t{0}, std::size_t{40}}) {
      CAPTURE(throwing_offset);
      constexpr std::size_t count = 4000;
      constexpr std::size_t period = 97;
      std::vector<std::atomic<int>> hits(count);
      std::string message = pool.execute([&] {
        std::string caught;
        try {
          parallel_for(count, [&](std::size_t i) {
            hits[i].fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the loop
            if (i % period == throwing_offset) throw std::runtime_error(std::to_string(i));
            (void)uneven_work(i);
          }, {.min_batch_size = 10});
        } catch (const std::runtime_error& error) {
          caught = error.what();
        }
        return caught;
      });
      REQUIRE_FALSE(message.empty());
      std::size_t thrower = std::stoul(message);
      CHECK(thrower % period == throwing_offset);
      CHECK(hits[thrower].load() == 1);
      std::size_t twice = 0;
      for (auto& hit : hits) twice += hit.load() > 1 ? 1 : 0;
      CHECK(twice == 0);
    }
  }
}

TEST_CASE("parallel_reduce: equals the serial fold, in order, for an associative non-commutative combine") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::string expected;
    for (int i = 0; i < 300; ++i) expected += static_cast<char>('a' + i % 26);
    std::string joined = pool.launch("reduce", [] {
      return parallel_reduce(std::size_t{300}, std::string(),
                             [](std::size_t i) { return std::string(1, static_cast<char>('a' + i % 26)); },
                             [](std::string left, const std::string& right) { return left + right; },
                             {.min_batch_size = 7});
    }).get_result();
    CHECK(joined == expected);
    long sum = pool.launch("sum", [] {
      return parallel_reduce(std::size_t{100'000}, 0L, [](std::size_t i) { return static_cast<long>(i); },
                             [](long a, long b) { return a + b; });
    }).get_result();
    CHECK(sum == 100'000L * 99'999 / 2);
  }
}

TEST_CASE("parallel_reduce: a floating-point sum gives the same answer on every run with the same threads") {
  // The additions' order follows the blocks, which depend on the count, the options and the
  // thread count only: not on which thread ran what, or when. Terms of very different sizes
  // make any other order show in the low bits.
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    auto sum = [&] {
      return pool.execute([] {
        return parallel_reduce(std::size_t{1} << 16, 0.0,
                               [](std::size_t i) { return (i % 3 == 0 ? 1e8 : 1e-8) / (1.0 + static_cast<double>(i % 977)); },
                               [](double left, double right) { return left + right; });
      });
    };
    double first = sum();
    int differing = 0;
    for (int run = 0; run < 40; ++run) differing += sum() != first ? 1 : 0;
    CHECK(differing == 0);
  }
}

TEST_CASE("parallel_invoke: runs every callable and rethrows the first exception") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::atomic<int> ran{0};
  pool.launch("invoke", [&] {
    parallel_invoke([&] { ran.fetch_add(1); }, [&] { ran.fetch_add(10); }, [&] { ran.fetch_add(100); });
  }).wait();
  CHECK(ran.load() == 111);
  bool threw = pool.launch("invoke throwing", [&] {
    try {
      parallel_invoke([&] { ran.fetch_add(1); }, [] { throw std::logic_error("second"); });
    } catch (const std::logic_error&) {
      return true;
    }
    return false;
  }).get_result();
  CHECK(threw);
  CHECK(ran.load() == 112);
}

TEST_CASE("parallel_for stress: many loops from many tasks at once" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<long> total{0};
      std::vector<task<>> loops;
      for (int t = 0; t < 32; ++t) {
        loops.push_back(pool.launch("loop", [&total] {
          parallel_for(2000, [&](std::size_t i) { total.fetch_add(static_cast<long>(i)); }, {.unbalanced = true});
        }));
      }
      wait_all(loops);
      CHECK(total.load() == 32L * 2000 * 1999 / 2);
    }
  }
}

TEST_CASE("parallel_for stress: unbalanced loops from every thread at once, some throwing" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 4u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr int loop_count = 24;
      constexpr std::size_t count = 3000;
      std::vector<std::vector<std::atomic<int>>> hits(loop_count);
      for (auto& each : hits) each = std::vector<std::atomic<int>>(count);
      std::atomic<int> caught{0};
      std::vector<task<>> loops;
      for (int loop = 0; loop < loop_count; ++loop) {
        loops.push_back(pool.launch("loop", [&, loop] {
          bool throws = loop % 3 == 0;
          try {
            parallel_for(count, [&](std::size_t i) {
              hits[static_cast<std::size_t>(loop)][i].fetch_add(1, std::memory_order_relaxed);  // relaxed: read after wait_all
              (void)uneven_work(i % 97);
              if (throws && i == count - 1) throw std::runtime_error("last");
            }, {.unbalanced = loop % 2 == 0});
          } catch (const std::runtime_error&) {
            caught.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after wait_all
          }
        }));
      }
      wait_all(loops);
      CHECK(caught.load() == loop_count / 3);
      // A loop that threw may have skipped iterations not yet started; none runs twice.
      std::size_t wrong = 0;
      for (std::size_t loop = 0; loop < hits.size(); ++loop) {
        int least = loop % 3 == 0 ? 0 : 1;
        for (auto& hit : hits[loop]) wrong += hit.load() >= least && hit.load() <= 1 ? 0 : 1;
      }
      CHECK(wrong == 0);
    }
  }
}

namespace {

// skynet sums the leaves of a tree of fan-out 10 built from nested loops: every level
// joins inside the level above, so joining threads nest work deeply.
std::uint64_t skynet(std::uint64_t number, std::uint64_t size) {
  if (size == 1) return number;
  std::uint64_t sums[10] = {};
  std::uint64_t child = size / 10;
  parallel_for(10, [&](std::size_t i) { sums[i] = skynet(number + i * child, child); });
  std::uint64_t total = 0;
  for (std::uint64_t each : sums) total += each;
  return total;
}

}  // namespace

TEST_CASE("parallel_for stress: deeply nested loops finish when joiners reach the nesting bound" *
          doctest::test_suite("stress")) {
  // A standby worker (it has no deque) nested 64 joins deep keeps its loop's batches to
  // itself: on the shared queue, at that depth, it could not take them back while every
  // other thread slept in a join.
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler_options options = test::options_with(workers);
      options.background_workers = 0;
      scheduler pool(options);
      pool.attach(named_thread::game);
      for (int round = 0; round < 3; ++round) {
        constexpr std::uint64_t leaves = 1'000'000;
        CHECK(skynet(0, leaves) == leaves * (leaves - 1) / 2);
      }
      pool.detach();
    }
  }
}

TEST_CASE("parallel_for: loops inside execute use its scheduler, at every depth and on every thread") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    constexpr std::size_t outer = 64;
    constexpr std::size_t inner = 32;
    std::atomic<std::size_t> right{0};
    auto count_here = [&] {
      if (scheduler::current() == &pool) right.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the loops
    };
    std::size_t total = pool.execute([&] {
      // Planned for this pool's threads, not the default scheduler's.
      detail::loop_plan plan = detail::plan_loop(4 * (pool.worker_count() + 1) * std::size_t{10}, {});
      CHECK(plan.eager_piece == 10);
      parallel_for(outer, [&](std::size_t) {
        count_here();
        parallel_for(inner, [&](std::size_t) { count_here(); });
        parallel_invoke(count_here, count_here);
      });
      return parallel_reduce(
          outer, std::size_t{0},
          [&](std::size_t i) {
            count_here();
            return i;
          },
          [](std::size_t a, std::size_t b) { return a + b; });
    });
    CHECK(total == outer * (outer - 1) / 2);
    CHECK(right.load() == outer * (1 + inner + 2) + outer);
    CHECK(scheduler::current() == nullptr);
  }
}

TEST_CASE("parallel_for: a loop inside a child of a named scheduler's group, joined by a plain thread, uses that scheduler") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> right{0};
    task_group group(pool);
    for (int child = 0; child < 4; ++child) {
      group.run([&] {
        parallel_for(16, [&](std::size_t) {
          if (scheduler::current() == &pool) right.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the join
        });
      });
    }
    group.wait();
    CHECK(right.load() == 4 * 16);
  }
}
