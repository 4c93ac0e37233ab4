// Suite "wait": waiting on tasks — timeouts (the duration's maximum among them), wait_all,
// wait_any, when_all and when_any over ranges, and a wait inside a body with no other
// thread. The waits that are reported are in wait_reports, blocking and the no-deadlock
// guarantee when every worker waits in wait_blocking; retraction, launch order and
// wait_all's runs have suites of their own (wait_retraction, wait_launch_order, held_runs).
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <ranges>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("wait: timeouts — false behind an untriggered event, true once triggered") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event gate("gate", pool);
    task<int> behind = pool.launch("behind", [] { return 7; }, gate);
    CHECK_FALSE(behind.wait(std::chrono::milliseconds(1)));
    CHECK_FALSE(behind.wait(std::chrono::milliseconds(0)));
    gate.trigger();
    CHECK(behind.wait(std::chrono::seconds(30)));
    CHECK(behind.get_result() == 7);
  }
}

TEST_CASE("wait: wait_all and wait_any over ranges, with and without timeouts") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::vector<task<int>> parts;
  for (int i = 0; i < 20; ++i) parts.push_back(pool.launch("part", [i] { return i; }));
  CHECK(wait_all(parts));
  for (auto& each : parts) CHECK(each.is_completed());
  CHECK(wait_all(parts, std::chrono::milliseconds(1)));

  task_event never_a("a", pool);
  task_event never_b("b", pool);
  std::vector<task<>> gates{never_a, never_b};
  CHECK_FALSE(wait_any(gates, std::chrono::milliseconds(1)).has_value());
  CHECK_FALSE(wait_all(gates, std::chrono::milliseconds(1)));
  never_b.trigger();
  auto first = wait_any(gates);
  REQUIRE(first.has_value());
  CHECK(*first == 1);
  never_a.trigger();
  CHECK_FALSE(wait_any(std::vector<task<>>{}).has_value());
  CHECK(wait_any(std::vector<task<>>{task<>()}) == std::optional<std::size_t>(0));  // invalid counts as completed
}

TEST_CASE("wait: when_all completes after all, when_any after the first") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event a("a", pool);
    task_event b("b", pool);
    std::vector<task<>> both{a, b, task<>()};
    task<> all = when_all(both);
    task<> any = when_any(both);
    task<> any_real = when_any(std::vector<task<>>{a, b});
    CHECK(any.is_completed());  // the invalid handle counts as completed
    CHECK_FALSE(all.is_completed());
    CHECK_FALSE(any_real.is_completed());
    b.trigger();
    CHECK(any_real.is_completed());
    CHECK_FALSE(all.is_completed());
    a.trigger();
    all.wait();
    CHECK(all.is_completed());
    CHECK(when_any(std::vector<task<>>{}).is_completed());
  }
}

TEST_CASE("wait: wait_any with no threads runs an input itself") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<task<int>> parts;
  parts.push_back(pool.launch("a", [] { return 1; }));
  parts.push_back(pool.launch("b", [] { return 2; }));
  auto first = wait_any(parts);  // before, nothing ran them: a hang
  REQUIRE(first.has_value());
  CHECK(parts[*first].is_completed());
  CHECK(parts[*first].get_result() == static_cast<int>(*first) + 1);
  CHECK(wait_any(parts, std::chrono::milliseconds(1)).has_value());
  // when_any's event belongs to the inputs' scheduler, so waiting for it helps there too.
  std::vector<task<int>> more{pool.launch("c", [] { return 3; })};
  CHECK(when_any(more).wait(std::chrono::seconds(30)));
  CHECK(more[0].get_result() == 3);
}

TEST_CASE("wait: wait_all over a range that makes its handles as it is read waits for every task") {
  struct job {
    task<> handle;
  };
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    for (int round = 0; round < 20; ++round) {
      std::vector<job> jobs;
      for (int i = 0; i < 8; ++i) {
        jobs.push_back({pool.launch("sleeper", [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); })});
      }
      test::made_while_read handles(jobs.size(), [&jobs](std::size_t index) { return jobs[index].handle; });
      static_assert(std::ranges::bidirectional_range<const decltype(handles)&>);
      if (round % 2 == 0) {
        CHECK(wait_all(handles));
      } else {
        CHECK(wait_all(handles, std::chrono::seconds(30)));
      }
      for (const job& each : jobs) CHECK(each.handle.is_completed());
    }
  }
}

TEST_CASE("wait: with no threads, a wait inside a body runs no unrelated task on top of it") {
  // a waits for an event another thread triggers later; y waits for a. Helping with y on
  // top of a's body (blocked on the event) made y wait for a task below it on the same
  // stack: a false cycle reported as misuse, and y read a's result before it existed.
  no_leaks leaks;
  test::diagnostic_recorder recorder;
  scheduler pool(test::options_with(0));
  task_event gate("gate", pool);
  task<std::string> a = pool.launch("a", [gate] {
    gate.wait();
    return std::string("hello world");
  });
  task<std::size_t> y = pool.launch("y", [a] { return a.get_result().size(); });
  std::thread trigger([gate]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.trigger();
  });
  CHECK(a.get_result() == "hello world");
  CHECK(y.get_result() == 11);
  trigger.join();
  CHECK(recorder.count() == 0);
}

TEST_CASE("wait: a timeout of the duration's maximum means no time-out") {
  // Each wait below is for a task behind a gate another thread opens after a while: a
  // deadline computed as now + max would overflow into the past and return false at once.
  auto open_later = [](task_event& gate) {
    return std::thread([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate.trigger();
    });
  };
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    {
      task_event gate("gate", pool);
      task<int> behind = pool.launch("behind", [] { return 1; }, gate);
      std::thread opener = open_later(gate);
      CHECK(behind.wait(std::chrono::nanoseconds::max()));
      opener.join();
    }
    {
      task_event gate("gate", pool);
      task<int> behind = pool.launch("behind", [] { return 2; }, gate);
      std::thread opener = open_later(gate);
      CHECK(behind.wait(std::chrono::hours::max()));
      opener.join();
    }
    {
      task_event gate("gate", pool);
      task<int> behind = pool.launch("behind", [] { return 3; }, gate);
      std::thread opener = open_later(gate);
      CHECK(behind.wait(std::chrono::steady_clock::duration::max()));
      opener.join();
    }
    {
      task_event gate("gate", pool);
      std::vector<task<int>> parts;
      for (int i = 0; i < 3; ++i) parts.push_back(pool.launch("part", [i] { return i; }, gate));
      std::thread opener = open_later(gate);
      CHECK(wait_all(parts, std::chrono::nanoseconds::max()));
      opener.join();
    }
    {
      task_event gate("gate", pool);
      std::vector<task<int>> parts;
      for (int i = 0; i < 3; ++i) parts.push_back(pool.launch("part", [i] { return i; }, gate));
      std::thread opener = open_later(gate);
      CHECK(wait_any(parts, std::chrono::hours::max()).has_value());
      opener.join();
      wait_all(parts);
    }
  }
}

TEST_CASE("wait: deadline_after saturates at the clock's end and keeps short timeouts exact") {
  using clock = std::chrono::steady_clock;
  CHECK(detail::deadline_after(std::chrono::nanoseconds::max()) == clock::time_point::max());
  CHECK(detail::deadline_after(std::chrono::hours::max()) == clock::time_point::max());
  CHECK(detail::deadline_after(clock::duration::max()) == clock::time_point::max());
  CHECK(detail::deadline_after(std::chrono::duration<double>(1e300)) == clock::time_point::max());
  auto before = clock::now();
  auto deadline = detail::deadline_after(std::chrono::seconds(5));
  CHECK(deadline >= before + std::chrono::seconds(5));
  CHECK(deadline <= clock::now() + std::chrono::seconds(5));
  auto past = detail::deadline_after(std::chrono::nanoseconds(-5));
  CHECK(past <= clock::now());
}
