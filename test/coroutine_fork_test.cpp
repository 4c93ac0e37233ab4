// Suite "coroutine_fork": fork-join between coroutines — fork, call and join at depth,
// stolen children, exceptions, cancellation, misuse and memory.
#include "support.h"
#include "task_support.h"

#include <magpie/coroutine.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "counting_new.h"  // the allocation-counting test

using namespace magpie;
using test::no_leaks;

namespace {

long serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

// fork_fib forks its first call, calls its second and joins: every call a forked coroutine.
coro<long> fork_fib(int n) {
  if (n < 2) co_return n;
  long a = 0;
  long b = 0;
  co_await magpie::fork(a, fork_fib(n - 1));
  co_await magpie::call(b, fork_fib(n - 2));
  co_await magpie::join();
  co_return a + b;
}

// bounded_wait_for waits (at most 10 s) until `flag` is set; false if it never was.
bool bounded_wait_for(const std::atomic<bool>& flag) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// one_worker_only is a scheduler of one worker and no background worker: what a stolen child
// leaves on that worker's deque, nothing else takes.
scheduler_options one_worker_only() {
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;
  return options;
}

// live_blocks_settle_at_most waits (at most 10 s) until the task pool's live blocks are at
// most `count`; false if they never were.
bool live_blocks_settle_at_most(std::int64_t count) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (detail::task_pool::live_blocks() > count) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// throws_at_leaf is fork_fib whose leaf at n == 1 on the leftmost path throws.
coro<long> throws_at_leaf(int n, std::atomic<int>& leaves) {
  if (n < 2) {
    leaves.fetch_add(1);
    if (n == 1) throw std::runtime_error("leaf");
    co_return n;
  }
  long a = 0;
  long b = 0;
  co_await magpie::fork(a, throws_at_leaf(n - 1, leaves));
  co_await magpie::call(b, throws_at_leaf(n - 2, leaves));
  co_await magpie::join();
  co_return a + b;
}

}  // namespace

TEST_CASE("coroutine fork: fib of forked coroutines at depth matches the serial answer") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    CHECK(pool.launch("fib", [] { return fork_fib(20); }).get_result() == serial_fib(20));
    // The root may itself fork, and join more than once.
    task<long> twice = pool.launch("fib twice", []() -> coro<long> {
      long first = 0;
      long second = 0;
      co_await magpie::fork(first, fork_fib(15));
      co_await magpie::join();
      co_await magpie::fork(second, fork_fib(16));
      co_await magpie::join();
      co_return first + second;
    });
    CHECK(twice.get_result() == serial_fib(15) + serial_fib(16));
  }
}

TEST_CASE("coroutine fork: a stolen child runs on another thread and the last to finish resumes the parent") {
  for (unsigned workers : test::worker_counts) {
    // Without workers forked children run at once (next case); with one, the worker may run
    // the parent itself, and the thread waiting for the task steals nothing else.
    if (workers < 2) continue;
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<bool> oldest_started{false};
    std::atomic<bool> newest_finished{false};
    std::atomic<bool> saw_steal{false};
    std::thread::id oldest_thread;
    std::thread::id newest_thread;
    task<int> parent = pool.launch("parent", [&]() -> coro<int> {
      int oldest = 0;
      int newest = 0;
      // The oldest child is what a thief takes; the newest, run here by the join, waits
      // until the oldest has started elsewhere, and the oldest outlasts it, so the parent
      // suspends at the join (on a thread outside the pool, once it found none of its
      // subtree's forks to run for a while) and the oldest resumes it.
      co_await magpie::fork(oldest, [&]() -> coro<int> {
        oldest_thread = std::this_thread::get_id();
        oldest_started.store(true);
        if (bounded_wait_for(newest_finished)) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        co_return 1;
      }());
      co_await magpie::fork(newest, [&]() -> coro<int> {
        newest_thread = std::this_thread::get_id();
        saw_steal.store(bounded_wait_for(oldest_started));
        newest_finished.store(true);
        co_return 2;
      }());
      co_await magpie::join();
      co_return oldest + newest;
    });
    CHECK(parent.get_result() == 3);
    CHECK(saw_steal.load());
    CHECK(oldest_thread != newest_thread);
  }
}

TEST_CASE("coroutine fork: a join on a thread outside the pool runs its subtree's forks while its children finish elsewhere") {
  no_leaks leaks;
  scheduler pool(one_worker_only());
  const std::thread::id here = std::this_thread::get_id();
  std::atomic<bool> root_started{false};
  std::atomic<bool> child_started{false};
  std::atomic<bool> grandchild_ran{false};
  std::atomic<bool> child_saw_grandchild{false};
  std::thread::id root_thread;
  std::thread::id grandchild_thread;
  // The blocker holds the one worker until the root has started, so this thread's wait
  // takes the root back and runs it; the worker then steals the child.
  task<> blocker = pool.launch("blocker", [&] { CHECK(bounded_wait_for(root_started)); });
  task<int> root = pool.launch("root", [&]() -> coro<int> {
    root_thread = std::this_thread::get_id();
    root_started.store(true);
    int child = 0;
    co_await magpie::fork(child, [&]() -> coro<int> {
      int grandchild = 0;
      co_await magpie::fork(grandchild, [&]() -> coro<int> {
        grandchild_thread = std::this_thread::get_id();
        grandchild_ran.store(true);
        co_return 2;
      }());
      child_started.store(true);
      // The grandchild lies on this worker's deque: only the root's join can run it now.
      child_saw_grandchild.store(bounded_wait_for(grandchild_ran));
      co_await magpie::join();
      co_return grandchild + 1;
    }());
    CHECK(bounded_wait_for(child_started));
    co_await magpie::join();  // the child is the worker's: this thread takes the grandchild meanwhile
    co_return child;
  });
  CHECK(root.get_result() == 3);
  blocker.wait();
  CHECK(root_thread == here);
  CHECK(child_saw_grandchild.load());
  CHECK(grandchild_thread == here);
}

TEST_CASE("coroutine fork: a join outside the pool runs nothing but its own subtree beneath the parent's body") {
  no_leaks leaks;
  scheduler pool(one_worker_only());
  std::atomic<bool> root_started{false};
  std::atomic<bool> child_started{false};
  std::atomic<bool> root_joining{false};
  std::atomic<bool> waiter_saw_event{false};
  task_event ready("ready", pool);
  task<> waiter;
  task<> blocker = pool.launch("blocker", [&] { CHECK(bounded_wait_for(root_started)); });
  task<int> root = pool.launch("root", [&]() -> coro<int> {
    root_started.store(true);
    int child = 0;
    co_await magpie::fork(child, [&]() -> coro<int> {
      child_started.store(true);
      if (bounded_wait_for(root_joining)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      co_return 1;
    }());
    CHECK(bounded_wait_for(child_started));
    // Queued beside the join, and waiting for what the root does after it: run beneath the
    // root's body, it would wait for itself.
    waiter = magpie::launch("waiter", [&] { waiter_saw_event.store(ready.wait(std::chrono::seconds(2))); });
    root_joining.store(true);
    co_await magpie::join();
    ready.trigger();
    co_return child;
  });
  CHECK(root.get_result() == 1);
  blocker.wait();
  waiter.wait();
  CHECK(waiter_saw_event.load());
}

TEST_CASE("coroutine fork: others' work that a join outside the pool takes from its thief's deque goes back unrun") {
  no_leaks leaks;
  scheduler pool(one_worker_only());
  const std::thread::id here = std::this_thread::get_id();
  std::atomic<bool> root_started{false};
  std::atomic<bool> child_launched{false};
  std::atomic<bool> root_joining{false};
  std::atomic<bool> root_joined{false};
  std::atomic<bool> other_ran_in_join{false};
  task<> other;
  task<> blocker = pool.launch("blocker", [&] { CHECK(bounded_wait_for(root_started)); });
  task<int> root = pool.launch("root", [&]() -> coro<int> {
    root_started.store(true);
    int child = 0;
    co_await magpie::fork(child, [&]() -> coro<int> {
      // A task, not a fork of the root's subtree, on top of this worker's deque.
      other = magpie::launch("other", [&] {
        other_ran_in_join.store(std::this_thread::get_id() == here && !root_joined.load());
      });
      child_launched.store(true);
      if (bounded_wait_for(root_joining)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      co_return 1;
    }());
    CHECK(bounded_wait_for(child_launched));
    root_joining.store(true);
    co_await magpie::join();
    root_joined.store(true);
    co_return child;
  });
  CHECK(root.get_result() == 1);
  blocker.wait();
  other.wait();  // may take `other` back and run it here, after the root
  CHECK_FALSE(other_ran_in_join.load());
}

TEST_CASE("coroutine fork: without workers the awaiting thread runs every child") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::thread::id here = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  task<long> root = pool.launch("root", [&]() -> coro<long> {
    long total = 0;
    std::vector<long> parts(8, 0);
    for (long& part : parts) {
      co_await magpie::fork(part, [&]() -> coro<long> {
        if (std::this_thread::get_id() != here) elsewhere.fetch_add(1);
        co_return co_await magpie::launch("leaf", [] { return 5L; });
      }());
    }
    co_await magpie::join();
    for (long part : parts) total += part;
    co_return total;
  });
  CHECK(root.get_result() == 40);
  CHECK(elsewhere.load() == 0);
}

TEST_CASE("coroutine fork: many siblings, each result readable after the join") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    constexpr int count = 2000;
    task<bool> root = pool.launch("siblings", []() -> coro<bool> {
      std::vector<int> results(count, -1);
      for (int i = 0; i < count; ++i) {
        co_await magpie::fork(results[static_cast<std::size_t>(i)], [](int value) -> coro<int> {
          co_return value * 3;
        }(i));
      }
      co_await magpie::join();
      bool right = true;
      for (int i = 0; i < count; ++i) right = right && results[static_cast<std::size_t>(i)] == i * 3;
      co_return right;
    });
    CHECK(root.get_result());
  }
}

TEST_CASE("coroutine fork: a child's exception is rethrown at the join; its siblings still run") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> leaves{0};
    // Caught at each join on the way up, and let out of the task's coroutine at the root.
    task<long> failing = pool.launch("failing fib", [&leaves] { return throws_at_leaf(12, leaves); });
    failing.wait();
    CHECK(failing.has_exception());
    CHECK_THROWS_WITH_AS(failing.get_result(), "leaf", std::runtime_error);
    CHECK(leaves.load() == 144 + 89);  // fib(13) + fib(11): every leaf ran, thrown or not
    // Caught in the parent, which goes on: the next join starts clean.
    task<int> caught = pool.launch("catching", []() -> coro<int> {
      int a = 0;
      int b = 0;
      co_await magpie::fork(a, []() -> coro<int> { throw std::logic_error("child"); co_return 0; }());
      co_await magpie::fork(b, []() -> coro<int> { co_return 7; }());
      int seen = 0;
      try {
        co_await magpie::join();
      } catch (const std::logic_error&) {
        seen = 100;
      }
      co_await magpie::call(a, []() -> coro<int> { co_return 1; }());
      co_await magpie::join();  // nothing to rethrow
      co_return seen + a + b;
    });
    CHECK(caught.get_result() == 108);
  }
}

TEST_CASE("coroutine fork: a forked child awaits a task and a yield, then its parent's join sees its result") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event gate("gate", pool);
    task<int> root = pool.launch("root", [gate]() -> coro<int> {
      int a = 0;
      int b = 0;
      co_await magpie::fork(a, [](task_event waited) -> coro<int> {
        co_await waited;
        co_await yield();
        co_return 20;
      }(gate));
      co_await magpie::call(b, []() -> coro<int> { co_return 2; }());
      co_await magpie::join();
      co_return a + b;
    });
    CHECK_FALSE(root.wait(std::chrono::milliseconds(1)));
    gate.trigger();
    CHECK(root.get_result() == 22);
  }
}

TEST_CASE("coroutine fork: children run under their task's cancellation token") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    cancellation_token token;
    task<int> root = pool.launch("root", [&token]() -> coro<int> {
      token.cancel();  // from inside: the task has begun, its segments see the cancel
      std::vector<int> seen(16, 0);
      for (int& each : seen) {
        co_await magpie::fork(each, []() -> coro<int> { co_return is_current_work_canceled() ? 1 : 0; }());
      }
      co_await magpie::join();
      int total = 0;
      for (int each : seen) total += each;
      co_return total;
    }, token);
    CHECK(root.get_result() == 16);
  }
}

TEST_CASE("coroutine fork: returning with children not joined is reported, and waits for them") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    task<int> careless = pool.launch("careless parent", [&ran]() -> coro<int> {
      // void children: a result would outlive its variable, whose scope ends at co_return
      for (int i = 0; i < 4; ++i) {
        co_await magpie::fork([](std::atomic<int>& counter) -> coro<> {
          counter.fetch_add(1);
          co_return;
        }(ran));
      }
      co_return 5;
    });
    CHECK(careless.get_result() == 5);
    CHECK(ran.load() == 4);
    CHECK(recorder.count_naming("careless parent") == 1);
  }
}

TEST_CASE("coroutine fork: a fork-join round takes its memory from the task pool") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  auto round = [&] { return pool.launch("fib", [] { return fork_fib(12); }).get_result(); };
  CHECK(round() == serial_fib(12));  // warms up this thread's and the worker's pools
  CHECK(round() == serial_fib(12));
  test::allocations.store(0);
  test::counting.store(true);
  long result = round();
  test::counting.store(false);
  CHECK(result == serial_fib(12));
  CHECK(test::allocations.load() == 0);
}

TEST_CASE("coroutine fork: a thread keeps no coroutine frame once its run is over") {
  // Frames that end while a thread runs coroutines are kept for the thread's next ones; the
  // run's end hands them back. The pool's live count is global: it is compared as no_leaks
  // does, never above (a block of an earlier test may be released meanwhile, not taken).
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    scheduler pool(test::options_with(workers));
    auto round = [&] { return pool.launch("fib", [] { return fork_fib(14); }).get_result(); };
    CHECK(round() == serial_fib(14));  // warms up the threads' pools
    const std::int64_t before = detail::task_pool::live_blocks();
    CHECK(round() == serial_fib(14));
    CHECK(live_blocks_settle_at_most(before));  // a worker may close its run just after the result is set
    { coro<long> never_started = fork_fib(5); }  // made and freed outside any run: not kept either
    CHECK(detail::task_pool::live_blocks() <= before);
  }
}

TEST_CASE("coroutine fork: fib and wide fan-outs of forked coroutines across many workers" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 2u, 4u, 8u, 64u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      for (int round = 0; round < 20; ++round) {
        CHECK(pool.launch("fib", [] { return fork_fib(16); }).get_result() == serial_fib(16));
        task<long> wide = pool.launch("wide", []() -> coro<long> {
          std::vector<long> parts(64, 0);
          for (std::size_t i = 0; i < parts.size(); ++i) co_await magpie::fork(parts[i], fork_fib(static_cast<int>(i % 10)));
          co_await magpie::join();
          long total = 0;
          for (long part : parts) total += part;
          co_return total;
        });
        long expected = 0;
        for (int i = 0; i < 64; ++i) expected += serial_fib(i % 10);
        CHECK(wide.get_result() == expected);
      }
    }
  }
}
