// Suite "nested": add_nested — a parent completes only after its body and every nested
// task, on whichever thread finishes last, without blocking a worker.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
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
