// Suite "nested": add_nested — a parent completes only after its body and every nested
// task, on whichever thread finishes last, without blocking a worker.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("nested: the parent completes after its nested task, and its subsequents wait for both") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event release_child("release child", pool);
    std::atomic<bool> child_done{false};
    task<> parent = pool.launch("parent", [&] {
      add_nested(magpie::launch("child", [&] { child_done.store(true); }, release_child));
    });
    task<bool> after = pool.launch("after", [&] { return child_done.load(); }, parent);
    // The body has returned (or will), but the child is held by the event.
    CHECK_FALSE(parent.wait(std::chrono::milliseconds(2)));
    release_child.trigger();
    parent.wait();
    CHECK(child_done.load());
    CHECK(after.get_result());
  }
}

TEST_CASE("nested: a nested event suspends the parent without occupying a worker") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event resume("resume", pool);
  std::atomic<bool> body_returned{false};
  task<> parent = pool.launch("parent", [&] {
    add_nested(resume);
    body_returned.store(true);
  });
  while (!body_returned.load()) std::this_thread::yield();
  // The only worker is free again: other work runs on it while the parent is suspended.
  std::atomic<bool> other_ran{false};
  pool.launch("other", [&] { other_ran.store(true); });
  while (!other_ran.load()) std::this_thread::yield();
  CHECK_FALSE(parent.is_completed());
  resume.trigger();  // the last nested part: completes the parent on this thread
  CHECK(parent.is_completed());
}

TEST_CASE("nested: several nested tasks, some already complete when added") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::atomic<int> done{0};
  task<> parent = pool.launch("parent", [&] {
    task<> finished = make_completed_task<void>();
    add_nested(finished);
    add_nested(task<>());  // invalid: counts as complete
    for (int i = 0; i < 10; ++i) add_nested(magpie::launch("child", [&] { done.fetch_add(1); }));
  });
  parent.wait();
  CHECK(done.load() == 10);
}

TEST_CASE("nested: nested in square — nested tasks that have nested tasks") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::atomic<int> leaves{0};
  task<> root = pool.launch("root", [&] {
    for (int i = 0; i < 4; ++i) {
      add_nested(magpie::launch("middle", [&] {
        for (int j = 0; j < 4; ++j) add_nested(magpie::launch("leaf", [&] { leaves.fetch_add(1); }));
      }));
    }
  });
  root.wait();
  CHECK(leaves.load() == 16);
}

TEST_CASE("nested: add_nested outside a running task is reported") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<> loose = pool.launch("loose", [] {});
  add_nested(loose);
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
  loose.wait();
}

TEST_CASE("nested: a nested task that waits for its parent closes a cycle: reported and ignored") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event go("go", pool);
  task_event relay("relay", pool);
  task<> parent;
  task<> follower;
  task<> last;
  std::atomic<int> ran{0};
  parent = pool.launch("parent", [&] {
    follower = pool.launch("follower", [&] { ran.fetch_add(1); }, parent);
    add_nested(follower);  // follower waits for parent
    relay.add_prerequisites(follower);
    relay.trigger();
    last = pool.launch("last", [&] { ran.fetch_add(1); }, relay);
    add_nested(last);  // last waits for relay, relay for follower, follower for parent
  }, go);
  go.trigger();
  CHECK(parent.wait(std::chrono::seconds(10)));
  CHECK(last.wait(std::chrono::seconds(10)));
  CHECK(ran.load() == 2);
  REQUIRE(recorder.count() == 2);
  for (auto& each : recorder.reports()) {
    CHECK(each.kind == diagnostic_kind::misuse);
    CHECK(each.message.find("dependency cycle") != std::string::npos);
  }
}

TEST_CASE("nested: waiting on a parent retracts its nested tasks too") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));  // only the waiting thread runs anything
  std::vector<int> order;
  task<> parent = pool.launch("parent", [&] {
    order.push_back(0);
    add_nested(magpie::launch("child", [&] { order.push_back(1); }));
  });
  parent.wait();
  REQUIRE(order.size() == 2);
  CHECK(order[1] == 1);
}

TEST_CASE("nested stress: 10,000 parents each with nested children on 2 and 8 workers" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<int> children{0};
      std::vector<task<>> parents;
      parents.reserve(10'000);
      for (int i = 0; i < 10'000; ++i) {
        parents.push_back(pool.launch("parent", [&, i] {
          for (int k = 0; k < i % 3; ++k) add_nested(magpie::launch("child", [&] { children.fetch_add(1); }));
        }));
      }
      wait_all(parents);
      int expected = 0;
      for (int i = 0; i < 10'000; ++i) expected += i % 3;
      CHECK(children.load() == expected);
    }
  }
}

TEST_CASE("nested: a waiter reaches a nested task stranded on the deque of the worker it blocks") {
  // The parent's body has returned; all that is left of it is its nested task, on the deque
  // of the only worker, which then blocks waiting for the parent (a high-priority waiter
  // comes first). Retraction must follow the nested edge after the body returned. Before,
  // every waiter blocked and nothing ran the child: a hang (the watchdog names it).
  no_leaks leaks;
  scheduler pool(test::options_with(1));  // one worker, one background worker, the default cap
  std::atomic<bool> parent_started{false};
  std::atomic<bool> waiters_launched{false};
  std::atomic<bool> child_ran{false};
  task<> parent = pool.launch("parent", [&] {
    add_nested(magpie::launch("nested child", [&] { child_ran.store(true); }));  // onto this worker's deque
    parent_started.store(true);
    while (!waiters_launched.load()) std::this_thread::yield();
  });
  while (!parent_started.load()) std::this_thread::yield();
  std::vector<task<>> waiters;
  for (int i = 0; i < 3; ++i) waiters.push_back(pool.launch("waiter", [parent] { parent.wait(); }, priority::high));
  waiters_launched.store(true);
  CHECK(wait_all(waiters, std::chrono::seconds(30)));
  CHECK(child_ran.load());
  CHECK(parent.is_completed());
}

TEST_CASE("nested: waiting for a parent whose body returned runs its nested tasks here, with no workers") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::thread::id ran_on;
  task<> parent = pool.launch("parent", [&] {
    add_nested(magpie::launch("child", [&] { ran_on = std::this_thread::get_id(); }));
  });
  // Run the parent's body only (the child stays queued), by helping once.
  REQUIRE(pool.try_run_one());
  REQUIRE_FALSE(parent.is_completed());
  std::thread([&] { parent.wait(); }).join();  // another thread, which retracts the child
  CHECK(parent.is_completed());
  CHECK(ran_on != std::this_thread::get_id());
}

TEST_CASE("nested: a nested task's exception becomes the parent's, unless the body threw its own") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    test::diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    task<int> parent = pool.launch("parent", [] {
      add_nested(magpie::launch("ok child", [] {}));
      add_nested(magpie::launch("failing child", [] { throw std::runtime_error("child failed"); }));
      return 5;
    });
    parent.wait();
    CHECK(parent.has_exception());
    CHECK_THROWS_WITH_AS(parent.get_result(), "child failed", std::runtime_error);

    task<> own = pool.launch("throws itself", [] {
      add_nested(magpie::launch("failing child", [] { throw std::logic_error("child"); }));
      throw std::runtime_error("parent");
    });
    CHECK_THROWS_WITH_AS(own.get_result(), "parent", std::runtime_error);

    task<> clean = pool.launch("clean", [] { add_nested(magpie::launch("fine", [] {})); });
    CHECK_NOTHROW(clean.get_result());
    parent = task<int>();
    own = task<>();
    clean = task<>();
    pool.shutdown();
    // A child's exception handed on (kept, or dropped behind the parent's own) is not
    // reported as unobserved.
    CHECK(recorder.count() == 0);
  }
}

TEST_CASE("nested stress: a waiter that sees the body returned walks the nested list the body made" *
          doctest::test_suite("stress")) {
  // The parent's body, on another thread, adds nested tasks held back by an event and
  // returns, while this waiter loops retracting the parent. A waiter whose look at the
  // parent's state came before the body's part ended, but whose look at the flags sees the
  // body returned, walks the list the body wrote: the return flag is its only edge to it.
  constexpr int rounds = 150;
  constexpr int children = 8;
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<int> children_ran{0};
      for (int round = 0; round < rounds; ++round) {
        task_event hold_children("hold children", pool);
        std::atomic<bool> body_started{false};
        std::atomic<bool> waiter_looping{false};
        std::atomic<bool> body_returning{false};
        std::atomic<bool> stop{false};
        std::atomic<long> retractions{0};
        task<> parent = pool.launch("parent", [&] {
          body_started.store(true, std::memory_order_release);
          // bounded: the waiter starts looping at once, unless it ran this body itself
          while (!waiter_looping.load(std::memory_order_acquire)) std::this_thread::yield();
          for (int i = 0; i < children; ++i) {
            add_nested(magpie::launch("nested", [&] { children_ran.fetch_add(1, std::memory_order_relaxed); },
                                      hold_children));
          }
          body_returning.store(true, std::memory_order_relaxed);  // relaxed: no edge to the waiter
        });
        std::thread waiter([&] {
          // The body runs on a worker (or, with none, on the thread below that helps).
          while (!body_started.load(std::memory_order_acquire) && !stop.load(std::memory_order_relaxed)) {
            std::this_thread::yield();
          }
          waiter_looping.store(true, std::memory_order_release);
          while (!stop.load(std::memory_order_relaxed)) {
            parent.try_retract_and_execute();
            retractions.fetch_add(1, std::memory_order_relaxed);
          }
        });
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!body_started.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up) {
          if (workers == 0) {
            pool.try_run_one();
          } else {
            std::this_thread::yield();
          }
        }
        while (!body_returning.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::yield();
        }
        // A few more retractions past the body's return, then the children may run.
        const long seen = retractions.load(std::memory_order_relaxed);
        while (retractions.load(std::memory_order_relaxed) < seen + 20 && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::yield();
        }
        hold_children.trigger();
        const bool completed = parent.wait(std::chrono::seconds(20));
        stop.store(true, std::memory_order_relaxed);
        waiter.join();
        REQUIRE(completed);
      }
      CHECK(children_ran.load() == rounds * children);
    }
  }
}
