// Suite "wait_retraction": a wait takes its task back off this thread's deque, or claims it
// where it lies, and runs it here after what it waits for; the stale entries such claims
// leave are trimmed (lib/tasks/wait_retraction.cpp).
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <ranges>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("wait_retraction: with no workers, waiting runs the prerequisites first, in dependency order") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<int> order;
  task<> a = pool.launch("a", [&] { order.push_back(1); });
  task<> b = pool.launch("b", [&] { order.push_back(2); }, a);
  task<> c = pool.launch("c", [&] { order.push_back(3); }, b);
  c.wait();
  REQUIRE(order.size() == 3);
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("wait_retraction: try_retract_and_execute runs an unstarted task on the calling thread") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::thread::id here = std::this_thread::get_id();
  task<std::thread::id> where = pool.launch("where", [] { return std::this_thread::get_id(); });
  CHECK(where.try_retract_and_execute());
  CHECK(where.is_completed());
  CHECK(where.get_result() == here);
}

TEST_CASE("wait_retraction: a task a waiter took back off its own deque goes with its last handle, on any thread") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // launches go to this thread's deque; waits take them back
  std::int64_t before = detail::live_tasks();
  auto live = [&] { return detail::live_tasks() - before; };

  SUBCASE("the only handle, dropped by the waiter") {
    {
      task<int> one = pool.launch("one", [] { return 1; });
      CHECK(one.get_result() == 1);
      CHECK(live() == 1);
    }
    CHECK(live() == 0);
  }
  SUBCASE("the waiter's handle first, then a copy on another thread") {
    task<int> one = pool.launch("one", [] { return 1; });
    task<int> copy = one;
    one.wait();
    one = task<int>();
    CHECK(live() == 1);
    std::thread([last = std::move(copy)]() mutable { last = task<int>(); }).join();
    CHECK(live() == 0);
  }
  SUBCASE("a copy dropped on another thread first, then the waiter's") {
    task<int> one = pool.launch("one", [] { return 1; });
    task<int> copy = one;
    CHECK(one.get_result() == 1);
    std::thread([first = std::move(copy)]() mutable { first = task<int>(); }).join();
    CHECK(live() == 1);
    one = task<int>();
    CHECK(live() == 0);
  }
  SUBCASE("its body drops the handle it is waited through") {
    task<int> self;
    self = pool.launch("drops its handle", [&self] {
      self = task<int>();
      return 1;
    });
    CHECK(self.try_retract_and_execute());
    CHECK_FALSE(self.is_valid());
    CHECK(live() == 0);
    self = pool.launch("drops its handle", [&self] {
      self = task<int>();
      return 2;
    });
    self.wait();  // returns: the handle no longer names a task
    CHECK(live() == 0);
  }
  SUBCASE("a later task keeps it until that task starts, after the last handle went") {
    task<int> one = pool.launch("one", [] { return 1; });
    one.wait();
    task<int> later = pool.launch("later", [] { return 2; }, one);
    one = task<int>();
    CHECK(live() == 2);  // `later` holds `one` until it starts
    CHECK(later.get_result() == 2);
    CHECK(live() == 1);
    later = task<int>();
    CHECK(live() == 0);
  }
  pool.detach();
}

// Two handles dropped at once on two threads, after a waiter ran the task through one of
// them and left the queue's reference to the handles: each turns its handle into a plain
// reference, and whichever finds it dropped the last handle releases the left reference
// too. Neither may miss it (a leak) or both take it (a double free).
TEST_CASE("wait_retraction stress: two handles dropped at once, after a waiter left the queue's reference to them" *
          doctest::test_suite("stress")) {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // launches go to this thread's deque; waits take them back
  const std::int64_t before = detail::live_tasks();
  for (int round = 0; round < 200 * test::stress_repeat(); ++round) {
    task<int> one = pool.launch("one", [] { return 1; });
    task<int> copy = one;
    REQUIRE(one.get_result() == 1);  // taken back and run here: the reference goes to the handles
    std::atomic<int> ready{0};
    auto drop = [&ready](task<int> handle) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      handle = task<int>();
    };
    std::thread first(drop, std::move(one));
    std::thread second(drop, std::move(copy));
    first.join();
    second.join();
    CHECK(detail::live_tasks() == before);
  }
  pool.detach();
}

TEST_CASE("wait_retraction: a task its waiter took back completes with its list open; what comes later closes it") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);
  task<int> first = pool.launch("first", [] { return 1; });
  CHECK(first.get_result() == 1);  // taken back off this thread's deque, run here
  CHECK(first.is_completed());
  CHECK_FALSE(magpie::detail::task_access::base(first)->subsequents.is_closed());  // its "finished" store completed it
  task<int> behind = pool.launch("behind", [&first] { return first.get_result() + 1; }, first);
  CHECK(behind.get_result() == 2);
  CHECK(magpie::detail::task_access::base(first)->subsequents.is_closed());  // the launch behind it closed the list
  task<int> second = pool.launch("second", [] { return 3; });
  CHECK(second.wait(std::chrono::seconds(10)));
  CHECK(wait_any(std::vector<task<int>>{second}) == std::optional<std::size_t>(0));
  CHECK(when_all(std::vector<task<int>>{second}).wait(std::chrono::seconds(10)));
  task<> throws = pool.launch("throws", [] { throw std::runtime_error("boom"); });
  throws.wait();  // completes the ordinary way: the exception is extra
  CHECK(magpie::detail::task_access::base(throws)->subsequents.is_closed());
  CHECK_THROWS_AS(throws.get_result(), std::runtime_error);
  pool.detach();
}

TEST_CASE("wait_retraction: a launch behind and a blocked waiter that come while a taken-back task runs are served") {
  for (int repeat = 0; repeat < 20 * test::stress_repeat(); ++repeat) {
    no_leaks leaks;
    scheduler_options one_worker = test::options_with(1);
    one_worker.background_workers = 0;
    scheduler pool(one_worker);
    pool.attach(named_thread::game);
    // The only worker is kept busy, so the task below is taken back by this thread, not stolen.
    std::atomic<bool> release_worker{false};
    std::atomic<bool> worker_busy{false};
    task<> occupier = pool.launch("occupier", [&] {
      worker_busy.store(true);
      while (!release_worker.load()) std::this_thread::yield();
    });
    while (!worker_busy.load()) std::this_thread::yield();
    std::atomic<bool> started{false};
    std::atomic<bool> timed_out{false};
    std::thread::id runner;
    task<int> running = pool.launch("running", [&] {
      runner = std::this_thread::get_id();
      started.store(true);
      // Finish only once the other thread has pushed behind this task and set its waiter
      // flag: both came while it ran, so both made the heavy barrier.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      detail::task_base* self = detail::current_task();
      while (self->subsequents.is_empty() || !self->has_flag(detail::has_waiter)) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out.store(true);
          break;
        }
        std::this_thread::yield();
      }
      return 5;
    });
    task<int> behind;
    bool waited = false;
    std::thread other([&] {
      while (!started.load()) std::this_thread::yield();
      task<int> copy = running;
      behind = pool.launch("behind", [copy] { return copy.get_result() * 2; }, copy);
      waited = copy.wait(std::chrono::seconds(10));  // blocks while the body runs
    });
    CHECK(running.get_result() == 5);
    other.join();
    CHECK(runner == std::this_thread::get_id());  // taken back and run by its waiter
    CHECK_FALSE(timed_out.load());
    CHECK(waited);
    release_worker.store(true);
    CHECK(behind.wait(std::chrono::seconds(10)));
    CHECK(behind.get_result() == 10);
    running = task<int>();
    behind = task<int>();
    occupier.wait();
    occupier = task<>();
    pool.detach();
  }
}

TEST_CASE("wait_retraction stress: another thread launches behind and waits for tasks taken back one at a time" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 2u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 4096;
      std::vector<task<int>> handles(count);
      std::atomic<int> published{0};
      std::atomic<long> behind_sum{0};
      long waited_sum = 0;
      std::thread other([&] {
        std::vector<task<>> behind;
        for (int i = 0; i < count; ++i) {
          while (published.load() <= i) std::this_thread::yield();
          const task<int> part = handles[static_cast<std::size_t>(i)];  // copied while it is waited for
          if (i % 2 == 0) {
            behind.push_back(pool.launch("behind", [&behind_sum, part] { behind_sum.fetch_add(part.get_result()); }, part));
          } else {
            waited_sum += part.get_result();  // blocks, or finds it complete
          }
        }
        wait_all(behind);
      });
      long sum = 0;
      for (int i = 0; i < count; ++i) {
        handles[static_cast<std::size_t>(i)] = pool.launch("part", [i] {
          for (int spin = 0; spin < (i % 7) * 50; ++spin) detail::cpu_relax();  // some bodies run long enough to be come to
          return i;
        });
        published.store(i + 1);
        sum += handles[static_cast<std::size_t>(i)].get_result();
      }
      other.join();
      CHECK(sum == static_cast<long>(count) * (count - 1) / 2);
      CHECK(behind_sum.load() == (count / 2) * static_cast<long>(count - 2) / 2);
      CHECK(waited_sum == (count / 2) * static_cast<long>(count) / 2);
      handles.clear();
      pool.detach();
    }
  }
}

TEST_CASE("wait_retraction: waiting for this thread's tasks oldest first takes each back, leaving no stale entry") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // launches go to this thread's deque
  const std::int64_t before = detail::live_tasks();
  {
    std::vector<task<int>> handles;
    for (int i = 0; i < 1000; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
    for (int i = 0; i < 1000; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);  // oldest first
  }
  // A task run in place while its entry stayed queued would still be held by that entry.
  CHECK(detail::live_tasks() == before);
  pool.detach();
}

// Waiting in random order claims most tasks out of the middle of the waiter's deque, where
// their entries stay, each holding its task, until someone pops them. With no workers
// nobody else would: the waiter drops the ones that reach its end of the deque, so rounds of
// random-order waits leave no task alive — from an attached thread and from a plain one.
TEST_CASE("wait_retraction: waiting in random order leaves no stale entries holding tasks, with no workers") {
  for (bool attached : {true, false}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    const std::int64_t before = detail::live_tasks();
    std::mt19937 shuffler(20261127);
    for (int round = 0; round < 20; ++round) {
      CAPTURE(round);
      std::vector<task<int>> handles;
      for (int i = 0; i < 500; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
      std::vector<std::size_t> order(handles.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::shuffle(order.begin(), order.end(), shuffler);
      for (std::size_t index : order) CHECK(handles[index].get_result() == static_cast<int>(index));
      handles.clear();
      CHECK(detail::live_tasks() == before);
    }
    if (attached) pool.detach();
  }
}

namespace {

// launch_typed launches a task whose body is of a type of its own for each `Type`.
template <int Type>
task<int> launch_typed(scheduler& pool, int i) {
  return pool.launch("typed part", [i] { return i + 0 * Type; });
}

}  // namespace

// An entry says itself whether it is a task, whatever the task's type: random-order waits
// over a batch of many task types (here six, each launched from its own place) drop every
// stale entry they uncover, as with one type, and leave no task alive.
TEST_CASE("wait_retraction: waiting in random order over many task types leaves no stale entries, with no workers") {
  for (bool attached : {true, false}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    const std::int64_t before = detail::live_tasks();
    std::mt19937 shuffler(20261128);
    for (int round = 0; round < 10; ++round) {
      CAPTURE(round);
      std::vector<task<int>> handles;
      for (int i = 0; i < 600; ++i) {
        switch (i % 6) {
          case 0: handles.push_back(launch_typed<0>(pool, i)); break;
          case 1: handles.push_back(launch_typed<1>(pool, i)); break;
          case 2: handles.push_back(launch_typed<2>(pool, i)); break;
          case 3: handles.push_back(launch_typed<3>(pool, i)); break;
          case 4: handles.push_back(launch_typed<4>(pool, i)); break;
          default: handles.push_back(launch_typed<5>(pool, i)); break;
        }
      }
      std::vector<std::size_t> order(handles.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::shuffle(order.begin(), order.end(), shuffler);
      for (std::size_t index : order) CHECK(handles[index].get_result() == static_cast<int>(index));
      handles.clear();
      CHECK(detail::live_tasks() == before);
    }
    if (attached) pool.detach();
  }
}

// try_retract_and_execute says it ran a task it took back off this thread's deque, even
// while that task's nested task still runs.
TEST_CASE("wait_retraction: retracting a task taken back whose nested task is still running says it ran") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // launches go to this thread's deque
  task_event gate("gate", pool);
  task<> outer = pool.launch("outer", [&] { add_nested(pool.launch("nested", [] {}, prerequisites(gate))); });
  CHECK(outer.try_retract_and_execute());
  CHECK_FALSE(outer.is_completed());
  gate.trigger();
  outer.wait();
  pool.detach();
}

// The trimming above races the thieves: workers steal from the same deque while the waiter
// pops its newest entries to drop the stale ones, and other threads wait for some of the
// same tasks (with no workers, only the waiter and the other thread). Every task runs once,
// every result is right, nothing stays alive.
TEST_CASE("wait_retraction stress: random-order waits trim stale entries while workers steal and others wait" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 2u, 4u}) {
      for (bool attached : {true, false}) {
        CAPTURE(workers);
        CAPTURE(attached);
        no_leaks leaks;
        scheduler pool(test::options_with(workers));
        if (attached) pool.attach(named_thread::game);
        std::mt19937 shuffler(workers * 2 + (attached ? 1 : 0));
        for (int round = 0; round < 30; ++round) {
          std::vector<std::atomic<int>> runs(400);
          std::vector<task<int>> handles;
          for (int i = 0; i < 400; ++i) {
            handles.push_back(pool.launch("part", [&runs, i] {
              runs[static_cast<std::size_t>(i)].fetch_add(1);
              return i;
            }));
          }
          std::vector<std::size_t> order(handles.size());
          std::iota(order.begin(), order.end(), std::size_t{0});
          std::shuffle(order.begin(), order.end(), shuffler);
          std::thread other([&handles, &order] {  // waits for the same tasks, from the other end
            for (auto each = order.rbegin(); each != order.rbegin() + 100; ++each) handles[*each].wait();
          });
          for (std::size_t index : order) CHECK(handles[index].get_result() == static_cast<int>(index));
          other.join();
          for (const auto& count : runs) CHECK(count.load() == 1);
        }
        if (attached) pool.detach();
      }
    }
  }
}
