// Suite "wait": retraction, blocking, timeouts, waiting on several tasks, and the
// no-deadlock guarantee when every worker waits.
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

namespace {

// fib_blocking waits for its children with get_result(): every worker blocks in waits.
long fib_blocking(int n) {
  if (n < 2) return n;
  task<long> left = magpie::launch("fib", [n] { return fib_blocking(n - 1); });
  task<long> right = magpie::launch("fib", [n] { return fib_blocking(n - 2); });
  return left.get_result() + right.get_result();
}

}  // namespace

TEST_CASE("wait: with no workers, waiting runs the prerequisites first, in dependency order") {
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

TEST_CASE("wait: try_retract_and_execute runs an unstarted task on the calling thread") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::thread::id here = std::this_thread::get_id();
  task<std::thread::id> where = pool.launch("where", [] { return std::this_thread::get_id(); });
  CHECK(where.try_retract_and_execute());
  CHECK(where.is_completed());
  CHECK(where.get_result() == here);
}

TEST_CASE("wait: a task a waiter took back off its own deque goes with its last handle, on any thread") {
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
TEST_CASE("wait stress: two handles dropped at once, after a waiter left the queue's reference to them" *
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

TEST_CASE("wait: waiting on a task from inside itself is reported and returns") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<> self;
  task_event go("go", pool);
  self = pool.launch("self-waiting", [&] {
    self.wait();
    CHECK_FALSE(self.wait(std::chrono::milliseconds(1)));
  }, go);
  go.trigger();
  self.wait();
  CHECK(recorder.count() == 2);
  for (auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::misuse);
}

TEST_CASE("wait: waiting inside a task for a task downstream of it is reported and returns") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event go("go", pool);
  task<> outer;
  task<> follower;
  bool timed_out = false;
  outer = pool.launch("outer", [&] {
    follower = pool.launch("follower", [] {}, outer);
    follower.wait();
    task_event relay("relay");
    relay.add_prerequisites(follower);
    relay.trigger();
    timed_out = !relay.wait(std::chrono::milliseconds(1));
    std::vector<task<>> both{relay, follower};
    CHECK_FALSE(wait_all(both, std::chrono::milliseconds(1)));
  }, go);
  go.trigger();
  CHECK(outer.wait(std::chrono::seconds(10)));
  CHECK(follower.wait(std::chrono::seconds(10)));
  CHECK(timed_out);
  CHECK(recorder.count() == 3);
  for (auto& each : recorder.reports()) {
    CHECK(each.kind == diagnostic_kind::misuse);
    CHECK(each.message.find("dependency cycle") != std::string::npos);
  }
}

TEST_CASE("wait: a task waiting for itself is reported naming it, as the task being run, and the thread") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    bool timed_out = false;
    task<> self_waiter = pool.launch("self waiter", [&] { timed_out = !this_task().wait(std::chrono::milliseconds(1)); });
    CHECK(self_waiter.wait(std::chrono::seconds(10)));
    CHECK(timed_out);
    REQUIRE(recorder.count() == 1);
    const std::string message = recorder.reports()[0].message;
    CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
    CHECK(message.find("'self waiter'") != std::string::npos);
    CHECK(message.find("the task this thread is running") != std::string::npos);
    // The thread: a worker (standby included), or (no workers) the thread that ran it while waiting.
    CHECK((message.find("worker ") != std::string::npos || message.find("on thread ") != std::string::npos));
  }
}

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

TEST_CASE("wait: wait_all takes back what this thread launched, in runs, and runs it here") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // launches go to this thread's deque
  const std::int64_t before = detail::live_tasks();
  const std::thread::id me = std::this_thread::get_id();

  // With no workers, a wait from a thread running nothing of magpie's runs what that thread
  // queued in launch order (as Unreal's no-threading mode does); beneath a body, the runs
  // come back newest first, straight off the top of the deque.
  constexpr int count = 1000;
  auto launch_parts = [&pool, me](std::vector<int>& order, std::vector<task<int>>& handles) {
    for (int i = 0; i < count; ++i) {
      handles.push_back(pool.launch("part", [&order, i, me] {
        CHECK(std::this_thread::get_id() == me);
        order.push_back(i);
        return i;
      }));
    }
  };
  SUBCASE("every task runs once, here, in launch order, across several runs and batches") {
    std::vector<int> order;
    std::vector<task<int>> handles;
    launch_parts(order, handles);
    CHECK(wait_all(handles));
    REQUIRE(order.size() == static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
    for (int i = 0; i < count; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);
    handles.clear();
    CHECK(detail::live_tasks() == before);
  }
  SUBCASE("beneath a body: every task runs once, here, newest first") {
    std::vector<int> order;
    task<> body = pool.launch("launches and waits", [&] {
      std::vector<task<int>> handles;
      launch_parts(order, handles);
      CHECK(wait_all(handles));
      for (int i = 0; i < count; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);
    });
    body.wait();
    REQUIRE(order.size() == static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) CHECK(order[static_cast<std::size_t>(i)] == count - 1 - i);
    body = task<>();
    CHECK(detail::live_tasks() == before);
  }
  SUBCASE("with a timeout: runs are taken back too; false for what cannot complete in time") {
    task_event gate("gate", pool);
    int ran = 0;
    std::vector<task<int>> handles;
    handles.push_back(pool.launch("gated", [] { return -1; }, gate));  // oldest: waited for last
    for (int i = 0; i < 200; ++i) handles.push_back(pool.launch("part", [&ran, i] { return ++ran, i; }));
    // Long enough for the 200 to run here even under a sanitizer on a loaded machine: the
    // deadline stops the runs once it has passed.
    CHECK_FALSE(wait_all(handles, std::chrono::milliseconds(200)));
    CHECK(ran == 200);
    for (std::size_t i = 1; i < handles.size(); ++i) CHECK(handles[i].get_result() == static_cast<int>(i) - 1);
    gate.trigger();
    CHECK(wait_all(handles, std::chrono::seconds(10)));
    CHECK(handles[0].get_result() == -1);
    handles.clear();
    CHECK(detail::live_tasks() == before + 1);  // the gate, until it goes out of scope
  }
  SUBCASE("a body drops one handle still to be waited for and replaces another") {
    task<> below = pool.launch("below", [] {});  // under the run: the whole run comes back at once
    std::vector<task<int>> handles;
    for (int i = 0; i < 10; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
    handles.push_back(pool.launch("meddler", [&handles, &pool] {  // newest: runs first
      handles[0] = task<int>();
      handles[1] = pool.launch("replacement", [] { return 100; });
      return -1;
    }));
    CHECK(wait_all(handles));
    CHECK_FALSE(handles[0].is_valid());
    CHECK(handles[1].get_result() == 100);
    for (std::size_t i = 2; i < handles.size(); ++i) CHECK(handles[i].is_completed());
    handles.clear();
    CHECK(detail::live_tasks() == before + 1);  // `below`: nothing was left behind on the deque
    below.wait();
    below = task<>();
    CHECK(detail::live_tasks() == before);
  }
  SUBCASE("what a run completes keeps its subsequent list open; launches behind it, events, when_any and nesting still see it complete") {
    task<> below = pool.launch("below", [] {});  // under the run: the whole run comes back at once
    std::vector<task<int>> handles;
    for (int i = 0; i < 5; ++i) handles.push_back(pool.launch("part", [i] { return i + 1; }));
    CHECK(wait_all(handles));
    for (auto& each : handles) {
      CHECK(each.is_completed());
      CHECK_FALSE(magpie::detail::task_access::base(each)->subsequents.is_closed());  // completed by its "finished" store alone
    }
    task<int> after = pool.launch("after", [&handles] { return handles[0].get_result() * 10; }, handles[0]);
    CHECK(after.get_result() == 10);
    CHECK(magpie::detail::task_access::base(handles[0])->subsequents.is_closed());  // the launch behind it closed the list
    task_event gate("gate", pool);
    gate.add_prerequisites(handles[1]);
    gate.trigger();
    CHECK(gate.wait(std::chrono::seconds(10)));
    CHECK(when_any(std::vector<task<int>>{handles[2]}).wait(std::chrono::seconds(10)));
    CHECK(wait_any(std::vector<task<int>>{handles[3]}) == std::optional<std::size_t>(0));
    bool parent_ran = false;
    task<> parent = pool.launch("parent", [&handles, &parent_ran] {
      add_nested(handles[4]);
      parent_ran = true;
    });
    CHECK(parent.wait(std::chrono::seconds(10)));
    CHECK(parent_ran);
    int sum = 0;
    for (auto& each : handles) sum += each.get_result();
    CHECK(sum == 15);
    handles.clear();
    after = task<int>();
    parent = task<>();
    below.wait();
    below = task<>();
    CHECK(detail::live_tasks() == before + 1);  // the gate, until it goes out of scope
  }
  SUBCASE("nested tasks, a throwing body, invalid and completed handles in the range") {
    std::atomic<int> inner_done{0};
    std::vector<task<>> handles;
    handles.push_back(task<>());
    handles.push_back(make_completed_task(7));
    for (int i = 0; i < 5; ++i) {
      handles.push_back(pool.launch("outer", [&inner_done] {
        add_nested(magpie::launch("inner", [&inner_done] { inner_done.fetch_add(1); }));
      }));
    }
    handles.push_back(pool.launch("throws", [] { throw std::runtime_error("boom"); }));
    handles.push_back(task<>());
    CHECK(wait_all(handles));
    CHECK(inner_done.load() == 5);
    for (auto& each : handles) CHECK(each.is_completed());
    CHECK(handles[7].has_exception());
    CHECK_THROWS_AS(handles[7].get_result(), std::runtime_error);
    handles.clear();
    CHECK(detail::live_tasks() == before);
  }
  pool.detach();
}

TEST_CASE("wait stress: wait_all takes runs back while workers steal from the same deque" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 20'000;
      std::vector<std::atomic<int>> runs(count);
      std::vector<task<>> handles;
      handles.reserve(count);
      for (int i = 0; i < count; ++i) handles.push_back(pool.launch("part", [&runs, i] { runs[static_cast<std::size_t>(i)].fetch_add(1); }));
      CHECK(wait_all(handles));
      int wrong = 0;
      for (auto& each : runs) wrong += each.load() != 1 ? 1 : 0;
      CHECK(wrong == 0);
      // Fork-join from inside tasks on the workers: each waits for its own children.
      std::atomic<long> total{0};
      std::vector<task<>> outer;
      for (int o = 0; o < 8; ++o) {
        outer.push_back(pool.launch("outer", [&total] {
          std::vector<task<long>> children;
          for (long c = 0; c < 500; ++c) children.push_back(magpie::launch("child", [c] { return c; }));
          wait_all(children);
          long sum = 0;
          for (auto& child : children) sum += child.get_result();
          total.fetch_add(sum);
        }));
      }
      CHECK(wait_all(outer));
      CHECK(total.load() == 8L * (499L * 500L / 2));
      handles.clear();
      pool.detach();
    }
  }
}

TEST_CASE("wait stress: another thread launches behind and waits for the tasks a run is completing" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 4096;
      std::vector<task<int>> handles;
      handles.reserve(count);
      for (int i = 0; i < count; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
      const std::vector<task<int>> copies = handles;  // the other thread's own handles
      std::atomic<bool> go{false};
      std::atomic<long> behind_sum{0};
      long waited_sum = 0;
      std::thread other([&] {
        while (!go.load()) std::this_thread::yield();
        std::vector<task<>> behind;
        for (int i = count - 1; i >= 0; --i) {  // newest first: close behind the run
          const task<int>& part = copies[static_cast<std::size_t>(i)];
          if (i % 2 == 0) {
            behind.push_back(pool.launch("behind", [&behind_sum, part] { behind_sum.fetch_add(part.get_result()); }, part));
          } else {
            part.wait();  // blocks, or finds it complete
            waited_sum += part.get_result();
          }
        }
        wait_all(behind);  // without workers, this wait runs them
      });
      go.store(true);
      CHECK(wait_all(handles));
      other.join();
      CHECK(behind_sum.load() == (count / 2) * static_cast<long>(count - 2) / 2);
      CHECK(waited_sum == (count / 2) * static_cast<long>(count) / 2);
      handles.clear();
      pool.detach();
    }
  }
}

TEST_CASE("wait: a task its waiter took back completes with its list open; what comes later closes it") {
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

TEST_CASE("wait: a launch behind and a blocked waiter that come while a taken-back task runs are served") {
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

TEST_CASE("wait stress: another thread launches behind and waits for tasks taken back one at a time" *
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

TEST_CASE("wait: recursive fib with blocking waits on 1 and 2 workers does not deadlock") {
  for (unsigned workers : {1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    CHECK(pool.launch("fib", [] { return fib_blocking(16); }).get_result() == 987);
  }
}

TEST_CASE("wait: deep retraction with every worker blocked") {
  no_leaks leaks;
  scheduler_options options = test::options_with(2);
  options.background_workers = 0;
  options.max_standby_workers = 0;  // no rescue: retraction alone must do it
  test::diagnostic_recorder recorder;  // reaching the standby cap of 0 is reported
  scheduler pool(options);
  task_event release("release workers", pool);
  std::atomic<int> blocked{0};
  std::vector<task<>> blockers;
  for (unsigned i = 0; i < 2; ++i) {
    blockers.push_back(pool.launch("blocker", [&] {
      blocked.fetch_add(1);
      release.wait();
    }));
  }
  while (blocked.load() < 2) std::this_thread::yield();
  // Two levels of prerequisites and a nested task, none started: only this thread can run them.
  std::atomic<int> ran{0};
  task<> p1 = pool.launch("p1", [&] { ran.fetch_add(1); });
  task<> p2 = pool.launch("p2", [&] { ran.fetch_add(1); }, p1);
  task<> top = pool.launch("top", [&] {
    ran.fetch_add(1);
    add_nested(magpie::launch("nested", [&] { ran.fetch_add(1); }));
  }, p2);
  top.wait();
  CHECK(ran.load() == 4);
  release.trigger();
  wait_all(blockers);
}

TEST_CASE("wait: a named thread waiting on a task bound to it runs it itself") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  pool.attach(named_thread::game);
  std::thread::id game = std::this_thread::get_id();
  task<std::thread::id> bound = pool.launch("bound", [] { return std::this_thread::get_id(); },
                                            on_thread(named_thread::game));
  CHECK(bound.get_result() == game);
  // Bound behind a worker task: the wait retracts nothing here, blocks, then runs it when scheduled.
  task<> first = pool.launch("first", [] {});
  task<std::thread::id> later = pool.launch("later", [] { return std::this_thread::get_id(); }, first,
                                            on_thread(named_thread::game));
  CHECK(later.get_result() == game);
  pool.detach();
}

TEST_CASE("wait: a task's named thread is woken to run it while another thread waits for it too") {
  // Both wait on one event count with different conditions: "ready, and mine to run" for
  // the game thread, "completed" for the other. Once a wake-up meant for the game thread
  // must not be taken by the other waiter, which would leave the game thread asleep beside a
  // task only it may run. A hang trips the watchdog.
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  for (int round = 0; round < 30; ++round) {
    CAPTURE(round);
    task_event gate("gate", pool);
    task<> bound = pool.launch("bound", [] {}, gate, on_thread(named_thread::game));
    std::atomic<bool> attached{false};
    std::atomic<bool> stop{false};
    std::thread game([&] {
      pool.attach(named_thread::game);
      attached.store(true, std::memory_order_release);  // release: pairs with the acquire below
      bound.wait();  // blocks: the task is locked until the gate opens
      pool.detach();
    });
    while (!attached.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release above
    std::thread other([&] {
      while (!stop.load(std::memory_order_relaxed) && !bound.is_completed()) {  // relaxed: only ends the loop
        bound.wait(std::chrono::microseconds(30));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gate.trigger();
    game.join();
    stop.store(true, std::memory_order_relaxed);  // relaxed: as above
    other.join();
    CHECK(bound.is_completed());
  }
}

TEST_CASE("wait: with no workers, a waiter is not stranded when another waiter makes its prerequisite ready and leaves") {
  // x waits for p, p for q. The helper thread runs q; while it does, the main thread
  // claims x's and p's prerequisites (it can run neither) and blocks on x. Finishing q
  // queues p, and the helper goes: nobody is left to run p, and nothing that happens to p
  // wakes a thread blocked on x. The wait stress test hung this way once in a few hundred
  // runs; here it hung every time. A hang trips the watchdog.
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::atomic<bool> q_running{false};
  task<> x;
  task<> q = pool.launch("q", [&] {
    q_running.store(true, std::memory_order_release);  // release: pairs with the acquire below
    // Finish only once the main thread has announced it blocks on x (it then re-checks x,
    // which is not ready either way, and sleeps).
    while (!x.is_valid() || !magpie::detail::task_access::base(x)->has_flag(detail::has_waiter)) std::this_thread::yield();
  });
  task<> p = pool.launch("p", [] {}, q);
  x = pool.launch("x", [] {}, p);
  std::thread helper([&] { q.wait(); });
  while (!q_running.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release above
  x.wait();
  helper.join();
  CHECK(x.is_completed());
  CHECK(p.is_completed());
}

TEST_CASE("wait stress: many threads wait on random tasks of a random graph" * doctest::test_suite("stress")) {
  std::uint64_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("MAGPIE_SEED")) seed = std::strtoull(fixed, nullptr, 10);
  std::printf("wait stress: MAGPIE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::mt19937_64 random(seed + static_cast<std::uint64_t>(repeat) * 977 + workers);
      constexpr int count = 2000;
      std::vector<task<int>> tasks;
      tasks.reserve(count);
      for (int i = 0; i < count; ++i) {
        std::vector<task<>> before;
        for (int k = 0; k < static_cast<int>(random() % 3) && i > 0; ++k) before.push_back(tasks[random() % static_cast<unsigned>(i)]);
        tasks.push_back(pool.launch("node", [i] { return i; }, before));
      }
      std::vector<std::thread> waiters;
      std::atomic<int> wrong{0};
      for (int t = 0; t < 4; ++t) {
        waiters.emplace_back([&, t] {
          std::mt19937_64 mine(seed + static_cast<std::uint64_t>(t));
          for (int k = 0; k < 300; ++k) {
            std::size_t index = mine() % tasks.size();
            if (tasks[index].get_result() != static_cast<int>(index)) wrong.fetch_add(1);
          }
        });
      }
      for (auto& each : waiters) each.join();
      CHECK(wait_all(tasks));
      CHECK(wrong.load() == 0);
    }
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
      auto handles = jobs | std::views::transform([](const job& each) { return each.handle; });
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

TEST_CASE("wait: get_result on a task that waits for the caller's own task throws instead of reading no result") {
  no_leaks leaks;
  test::diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  task_event go("go", pool);  // the body reads `outer` only once it is assigned
  task<int> outer;
  std::atomic<bool> threw{false};
  outer = pool.launch("outer", [&] {
    task<int> inner = pool.launch("inner", [] { return 1; }, outer);  // waits for outer
    try {
      (void)inner.get_result();  // can never complete while outer runs
    } catch (const task_wait_failed&) {
      threw.store(true);
    }
    return 2;
  }, go);
  go.trigger();
  CHECK(outer.get_result() == 2);
  CHECK(threw.load());
  CHECK(recorder.count() == 1);  // the wait inside itself, reported
}

TEST_CASE("wait: deep chains of waits inside bodies do not overflow a worker's stack") {
  // Each level launches the next and waits for it; on a worker, retraction would run all
  // 10,000 levels on its stack. Past a bound the worker blocks instead and another thread
  // (a standby, past the cap if every worker is blocked) takes the next stretch.
  no_leaks leaks;
  test::diagnostic_recorder recorder;  // the standby cap is reached and reported
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;
  scheduler pool(options);
  std::function<int(int)> level = [&level](int depth) -> int {
    if (depth == 0) return 0;
    task<int> next = magpie::launch("level", [&level, depth] { return level(depth - 1); });
    return next.get_result() + 1;
  };
  std::atomic<bool> done{false};
  task<int> root = pool.launch("root", [&] {
    int result = level(10'000);
    done.store(true);
    return result;
  });
  // Not root.wait(): that would retract the root onto this thread's (unbounded) stack.
  while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(root.get_result() == 10'000);
  CHECK(pool.counters().standby_workers > 1);  // the stretches ran on several threads
}

TEST_CASE("wait: with every thread blocked and no standby left to start, the last one runs queued work") {
  // One worker and a standby cap of 0: each blocker blocks its thread on an event that only
  // the opener, launched last, triggers, and a standby past the cap takes each blocked
  // thread's place, up to the scheduler's 64 more. The blockers outnumber the threads: the
  // last thread standing must run the queued work (the remaining blockers, then the opener)
  // on its own stack rather than block, or the opener stays queued behind blocked threads
  // for ever .
  no_leaks leaks;
  test::diagnostic_recorder recorder;  // reaching the cap is reported
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;
  options.max_standby_workers = 0;
  scheduler pool(options);
  task_event gate("gate", pool);
  constexpr int blockers = 72;  // past 1 worker + 64 standby threads
  std::atomic<int> released{0};
  std::vector<task<>> tasks;
  for (int i = 0; i < blockers; ++i) {
    tasks.push_back(pool.launch("blocker", [&] {
      gate.wait();
      released.fetch_add(1);
    }));
  }
  tasks.push_back(pool.launch("opener", [&] { gate.trigger(); }));
  // Not wait_all: this thread would take the tasks back and run the opener itself. The pool
  // alone must get through (a hang here is named by the test watchdog).
  while (released.load() < blockers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  magpie::wait_all(tasks);
  CHECK(released.load() == blockers);
  CHECK(gate.is_completed());
  // 65 threads, 72 blockers: only a thread that ran queued work instead of blocking got the
  // opener run.
  CHECK(pool.counters().standby_workers == 64);
  CHECK(recorder.count() >= 1);
  for (auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::limit_reached);
}

TEST_CASE("wait: a thread waiting for tasks while their scheduler is destroyed" * doctest::test_suite("stress")) {
  // The waiter retracts tasks (whose bodies may launch a child) while ~scheduler runs: the
  // scheduler must not free what the waiter can still reach. ASan read freed memory in the
  // injection queue before. Tasks either ran or completed as never run; none is left.
  for (int repeat = 0; repeat < 20 * test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u}) {
      for (bool launches_child : {false, true}) {
        CAPTURE(workers);
        CAPTURE(launches_child);
        no_leaks leaks;
        test::diagnostic_recorder recorder;  // late launches and never-run tasks are reported
        std::atomic<int> ran{0};
        auto pool = std::make_unique<scheduler>(test::options_with(workers));
        std::vector<task<>> handles;
        for (int i = 0; i < 200; ++i) {
          handles.push_back(pool->launch("part", [&ran, launches_child] {
            if (launches_child) magpie::launch("child", [&ran] { ran.fetch_add(1); });
            ran.fetch_add(1);
          }));
        }
        std::vector<task<>> copies = handles;
        std::thread waiter([&copies] {
          for (auto& each : copies) each.wait();
        });
        pool.reset();
        waiter.join();
        for (auto& each : handles) CHECK(each.is_completed());
        handles.clear();
        copies.clear();
      }
    }
  }
}

namespace {

// waiting_dag is a random graph whose bodies wait for earlier nodes (get_result inside
// them), mixing prerequisites, inline tasks, task events, pipes, nested tasks and
// high-priority launches. Every wait and every edge points from a lower index to a higher
// one, so the graph can always complete: any hang is the scheduler's.
class waiting_dag {
 public:
  waiting_dag(scheduler& pool, std::uint64_t seed, int count)
      : pool_(pool), random_(seed), expected_(static_cast<std::size_t>(count)),
        side_(static_cast<std::size_t>(count)), side_expected_(static_cast<std::size_t>(count)) {
    nodes_.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) add(i);
    for (auto& each : events_) each.trigger();
  }

  // check waits for every node in random order from this thread; returns wrong results.
  int check() {
    std::vector<std::size_t> order(nodes_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), random_);
    int wrong = 0;
    for (std::size_t i : order) {
      if (nodes_[i].get_result() != expected_[i]) ++wrong;
    }
    for (std::size_t i = 0; i < side_.size(); ++i) {
      if (side_[i].load(std::memory_order_relaxed) != side_expected_[i]) ++wrong;  // relaxed: the parent's completion ordered it
    }
    return wrong;
  }

 private:
  enum class kind { queued, high, inlined, piped, nesting, evented, count };

  std::vector<std::size_t> pick_earlier(int i) {
    std::vector<std::size_t> picked;
    int how_many = i == 0 ? 0 : static_cast<int>(random_() % 3);
    for (int k = 0; k < how_many; ++k) picked.push_back(random_() % static_cast<std::size_t>(i));
    return picked;
  }

  std::uint64_t sum_of(const std::vector<std::size_t>& indices) const {
    std::uint64_t sum = 0;
    for (std::size_t j : indices) sum += expected_[j];
    return sum;
  }

  void add(int i) {
    auto index = static_cast<std::size_t>(i);
    auto which = static_cast<kind>(random_() % static_cast<unsigned>(kind::count));
    std::vector<std::size_t> before = pick_earlier(i);  // prerequisites
    std::vector<std::size_t> waited = pick_earlier(i);  // waited for inside the body
    std::vector<task<>> prerequisites;
    for (std::size_t j : before) prerequisites.push_back(nodes_[j]);
    const std::vector<task<std::uint64_t>>* nodes = &nodes_;
    auto read = [nodes](const std::vector<std::size_t>& indices) {
      std::uint64_t sum = 0;
      for (std::size_t j : indices) sum += (*nodes)[j].get_result();
      return sum;
    };
    const std::uint64_t own = static_cast<std::uint64_t>(i) * 7 + 1;
    switch (which) {
      case kind::queued:
      case kind::high:
        expected_[index] = own + sum_of(before) + sum_of(waited);
        nodes_.push_back(pool_.launch("node", [=] { return own + read(before) + read(waited); }, prerequisites,
                                      which == kind::high ? priority::high : priority::normal));
        break;
      case kind::inlined:  // runs on whichever thread completes its last prerequisite: no waits
        expected_[index] = own + sum_of(before);
        nodes_.push_back(pool_.launch("inline node", [=] { return own + read(before); }, prerequisites, run_inline));
        break;
      case kind::piped:  // no prerequisites, so the pipe runs them in launch order: no cycle
        expected_[index] = own + sum_of(waited);
        nodes_.push_back(pipes_[random_() % pipes_.size()]->launch("piped node", [=] { return own + read(waited); }));
        break;
      case kind::nesting: {
        expected_[index] = own + sum_of(before);
        side_expected_[index] = sum_of(waited);
        std::atomic<std::uint64_t>* side = &side_[index];
        nodes_.push_back(pool_.launch("nesting node", [=] {
          add_nested(magpie::launch("nested", [=] { side->store(read(waited), std::memory_order_relaxed); }));  // relaxed: the parent's completion publishes it
          return own + read(before);
        }, prerequisites));
        break;
      }
      case kind::evented: {
        task_event& gate = events_.emplace_back("gate", pool_);
        gate.add_prerequisites(prerequisites);  // triggered once every node is launched
        expected_[index] = own + sum_of(before) + sum_of(waited);
        nodes_.push_back(pool_.launch("evented node", [=] { return own + read(before) + read(waited); }, gate));
        break;
      }
      case kind::count:
        break;
    }
  }

  scheduler& pool_;
  std::mt19937_64 random_;
  std::vector<std::uint64_t> expected_;
  std::vector<std::atomic<std::uint64_t>> side_;
  std::vector<std::uint64_t> side_expected_;
  std::deque<task_event> events_;
  std::array<std::unique_ptr<magpie::pipe>, 2> pipes_{std::make_unique<magpie::pipe>("pipe a", pool_),
                                                      std::make_unique<magpie::pipe>("pipe b", pool_)};
  std::vector<task<std::uint64_t>> nodes_;  // last: dropped before the pipes and events
};

}  // namespace

TEST_CASE("wait stress: random graphs whose bodies wait for earlier tasks, every worker count and standby cap" *
          doctest::test_suite("stress")) {
  std::uint64_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("MAGPIE_SEED")) seed = std::strtoull(fixed, nullptr, 10);
  std::printf("wait stress (waiting graphs): MAGPIE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  int rounds = 0;
  for (int repeat = 0; repeat < 3 * test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 2u, 4u, 64u}) {
      for (bool no_standby : {false, true}) {
        CAPTURE(workers);
        CAPTURE(no_standby);
        CAPTURE(repeat);
        no_leaks leaks;
        test::diagnostic_recorder recorder;  // the standby cap, when reached, is reported
        scheduler_options options = test::options_with(workers);
        if (no_standby) options.max_standby_workers = 0;
        scheduler pool(options);
        std::uint64_t round_seed = seed + static_cast<std::uint64_t>(repeat) * 1'000'003 + workers * 2 + (no_standby ? 1 : 0);
        waiting_dag graph(pool, round_seed, 300);
        CHECK(graph.check() == 0);
        for (const auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::limit_reached);
        ++rounds;
      }
    }
  }
  std::printf("wait stress (waiting graphs): %d rounds clean\n", rounds);
}

TEST_CASE("wait: past the standby cap, standby workers start only while every thread is blocked, and at most 64") {
  // 200 tasks that each block on one event: every block past the cap leaves the pool with
  // nobody running, so another standby starts, until the ceiling, which is reported.
  test::diagnostic_recorder recorder;
  scheduler_options options;
  options.workers = 2;
  options.background_workers = 0;
  scheduler pool(options);
  task_event gate("gate", pool);
  std::vector<task<>> blocked;
  for (int i = 0; i < 200; ++i) blocked.push_back(pool.launch("blocks", [gate] { gate.wait(); }));
  while (pool.counters().blocked_workers != 2 + 2 + 64) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the pool, its cap, the ceiling
  CHECK(pool.counters().standby_workers == 2 + 64);
  gate.trigger();
  CHECK(wait_all(blocked, std::chrono::seconds(60)));
  std::size_t ceilings = 0;
  for (const auto& each : recorder.reports()) {
    CHECK(each.kind == diagnostic_kind::limit_reached);
    if (each.message.find("no more standby workers") != std::string::npos) ++ceilings;
  }
  CHECK(ceilings == 1);
}

TEST_CASE("wait: waiting for this thread's tasks oldest first takes each back, leaving no stale entry") {
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
TEST_CASE("wait: waiting in random order leaves no stale entries holding tasks, with no workers") {
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
TEST_CASE("wait: waiting in random order over many task types leaves no stale entries, with no workers") {
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

// With no workers, a wait at top level runs the older tasks of its task's type (one launch
// site, as a loop launching a batch) oldest first, as Unreal's no-threading mode runs each
// task at its launch: a task after another may wait for an event that one triggers, and runs
// after it. (Run newest first, down the deque, it would wait for ever.)
TEST_CASE("wait: with no workers, a wait runs the older tasks of its task's type in launch order, up to it") {
  for (bool attached : {true, false}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    std::vector<int> ran;  // one thread runs everything
    task_event triggered_by_1("triggered by task 1", pool);
    auto launch_part = [&](int i) {
      return pool.launch("part", [&ran, &triggered_by_1, i] {
        if (i == 2) CHECK(triggered_by_1.wait(std::chrono::seconds(30)));
        ran.push_back(i);
        if (i == 1) triggered_by_1.trigger();
      });
    };
    std::vector<task<>> handles;
    for (int i = 0; i < 4; ++i) handles.push_back(launch_part(i));
    handles[2].wait();
    CHECK(ran == std::vector<int>{0, 1, 2});
    for (int i = 4; i < 204; ++i) handles.push_back(launch_part(i));
    handles[100].wait();  // up to it, not the rest
    CHECK(ran.size() == 101);
    for (std::size_t i = 0; i < ran.size(); ++i) CHECK(ran[i] == static_cast<int>(i));
    CHECK(wait_all(handles, std::chrono::seconds(30)));
    CHECK(ran.size() == 204);
    if (attached) pool.detach();
  }
}

// The run stops at the oldest entry of another type: a task launched elsewhere, run before
// its wait asks, may wait for what the waiting thread does next (here an event main triggers
// after waiting for a newer task: run first, it would wait for ever). Likewise a pipe to
// drain, a limiter, a task_group to join.
TEST_CASE("wait: with no workers, a wait does not run an older task of another type first") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  task_event later("triggered by main after its wait", pool);
  bool saw_trigger = false;
  task<> older = pool.launch("waits for main", [&] { saw_trigger = later.wait(std::chrono::seconds(30)); });
  task<> newer = pool.launch("newer", [] {});
  newer.wait();
  CHECK_FALSE(older.is_completed());
  later.trigger();
  older.wait();
  CHECK(saw_trigger);

  // The tasks before the other type run; the other goes back, at the newest end (its type is
  // read only once the wait has taken it: a helping thread may have taken it and freed it).
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    if (attached) pool.attach(named_thread::game);
    std::vector<int> ran;
    auto launch_part = [&](int i) { return pool.launch("part", [&ran, i] { ran.push_back(i); }); };
    std::vector<task<>> handles;
    handles.push_back(launch_part(0));
    handles.push_back(launch_part(1));
    task<> other = pool.launch("other", [&ran] { ran.push_back(-1); });
    handles.push_back(launch_part(2));
    handles.push_back(launch_part(3));
    handles[2].wait();  // 0 and 1 run first; 2 is then claimed where it lies
    CHECK(ran == std::vector<int>{0, 1, 2});
    CHECK_FALSE(other.is_completed());
    handles[3].wait();  // the newest, taken back
    CHECK(ran == std::vector<int>{0, 1, 2, 3});
    CHECK(pool.try_run_one());  // what is left: the other type, still queued
    CHECK(other.is_completed());
    CHECK_FALSE(pool.try_run_one());
    if (attached) pool.detach();
  }
}

// A launch site is the body's type, not its code: two lambdas that compile to the same
// instructions are two sites (their handlers keep distinct addresses however the build
// merges identical functions). Told apart, the wait for the newer runs it alone; taken for
// one site, the older would run first and wait for what main triggers after the wait.
TEST_CASE("wait: with no workers, two launch sites whose bodies compile alike are told apart") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    task_event later("triggered by main after its wait", pool);
    task_event already("triggered at once", pool);
    already.trigger();
    bool older_saw = false;
    bool newer_saw = false;
    task<> older = pool.launch("older", [&event = later, &saw = older_saw] { saw = event.wait(std::chrono::seconds(5)); });
    task<> newer = pool.launch("newer", [&event = already, &saw = newer_saw] { saw = event.wait(std::chrono::seconds(5)); });
    newer.wait();
    CHECK(newer_saw);
    CHECK_FALSE(older.is_completed());
    later.trigger();
    older.wait();
    CHECK(older_saw);
    if (attached) pool.detach();
  }
}

// Tasks of other types scattered among the task's own go back at the newest end, unrun, and
// the run goes on past them, even two in a row; an entry of another type met first stops it.
TEST_CASE("wait: with no workers, a wait's run in launch order passes over tasks of other types") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    std::vector<int> ran;
    std::vector<task<>> parts;
    std::vector<task<>> others;
    for (int i = 0; i < 300; ++i) {
      parts.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
      if (i == 10 || i == 11 || i == 40 || i == 41 || i == 42 || i == 200) {
        others.push_back(pool.launch("other", [&ran] { ran.push_back(-1); }));
      }
    }
    parts[250].wait();
    REQUIRE(ran.size() == 251);
    for (std::size_t i = 0; i < ran.size(); ++i) CHECK(ran[i] == static_cast<int>(i));
    for (const task<>& other : others) CHECK_FALSE(other.is_completed());
    parts[299].wait();
    CHECK(ran.size() == 300);
    CHECK(ran.back() == 299);
    for (const task<>& other : others) CHECK_FALSE(other.is_completed());
    CHECK(wait_all(others, std::chrono::seconds(30)));
    CHECK(ran.size() == 306);

    // Another type at the oldest end: the wait runs its own task only.
    ran.clear();
    task<> first = pool.launch("other", [&ran] { ran.push_back(-1); });
    parts.clear();
    for (int i = 0; i < 10; ++i) parts.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
    parts[5].wait();
    CHECK(ran == std::vector<int>{5});
    CHECK_FALSE(first.is_completed());
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    first.wait();
    CHECK(ran.size() == 11);
    if (attached) pool.detach();
  }
}

// Entries this thread left stale (tasks it claimed past their entries) are dropped where the
// run meets them, even first, and the run goes on; a live entry of another type met first
// still stops it, and whatever else the run took goes back (no entry lost: no_leaks).
TEST_CASE("wait: with no workers, a wait's run in launch order drops stale entries of other types") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<int> ran;
  std::vector<task<>> thirds;
  for (int i = 0; i < 4; ++i) thirds.push_back(pool.launch("third", [&ran] { ran.push_back(-3); }));
  std::vector<task<>> others;
  for (int i = 0; i < 4; ++i) others.push_back(pool.launch("other", [&ran] { ran.push_back(-1); }));
  task<> fourth = pool.launch("fourth", [&ran] { ran.push_back(-4); });
  std::vector<task<>> parts;
  for (int i = 0; i < 10; ++i) parts.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
  // Newest first: each wait meets a "third" first, which goes on top; its task, neither end
  // of the deque, is claimed where it lies, so the first three leave stale entries.
  for (int i = 3; i >= 0; --i) others[static_cast<std::size_t>(i)].wait();
  CHECK(ran == std::vector<int>{-1, -1, -1, -1});
  ran.clear();
  parts[5].wait();  // the three stale entries dropped; "fourth" stops the run
  CHECK(ran == std::vector<int>{5});
  CHECK_FALSE(fourth.is_completed());
  fourth.wait();  // the newest, though "part" lies first: taken back
  CHECK(ran == std::vector<int>{5, -4});
  CHECK(wait_all(parts, std::chrono::seconds(30)));
  CHECK(wait_all(thirds, std::chrono::seconds(30)));
  CHECK(ran.size() == 2 + 9 + 4);
  CHECK_FALSE(pool.try_run_one());
}

// What a wait runs in launch order is never hidden from whoever looks for work meanwhile:
// wait_all takes runs of its handles off the deque at once (lib/tasks/held_runs.h), and a body
// that helps or blocks puts the rest back first. Each of these would hang while the rest
// was held aside: a body helping until a later task sets a flag, a join whose
// child lies later in the run, an event a later task triggers, run by a helping thread.
TEST_CASE("wait: with no workers, tasks a wait has taken but not begun stay visible to helpers") {
  for (bool all : {false, true}) {
    CAPTURE(all);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    auto wait_for = [all](std::vector<task<>>& tasks) {
      if (all) {
        CHECK(wait_all(tasks, std::chrono::seconds(30)));
      } else {  // newest first: the first wait runs the rest in launch order
        for (auto each = tasks.rbegin(); each != tasks.rend(); ++each) CHECK(each->wait(std::chrono::seconds(30)));
      }
    };
    SUBCASE("a body helps until a later task sets a flag") {
      std::atomic<bool> flag{false};
      std::atomic<bool> saw_flag{false};
      std::vector<task<>> parts;
      for (int i = 0; i < 8; ++i) {
        parts.push_back(pool.launch("part", [&pool, &flag, &saw_flag, i] {
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (i == 1 && !flag.load() && std::chrono::steady_clock::now() < give_up) pool.try_run_one();
          if (i == 1) saw_flag = flag.load();
          if (i == 2) flag = true;
        }));
      }
      wait_for(parts);
      CHECK(saw_flag.load());
    }
    SUBCASE("a body joins a task_group whose child was launched after it") {
      task_group group(pool);
      std::atomic<bool> child_ran{false};
      auto launch_part = [&pool, &group](int i) { return pool.launch("part", [&group, i] { if (i == 3) group.wait(); }); };
      std::vector<task<>> parts;
      for (int i = 0; i < 4; ++i) parts.push_back(launch_part(i));
      group.run([&child_ran] { child_ran = true; });
      for (int i = 4; i < 8; ++i) parts.push_back(launch_part(i));
      wait_for(parts);
      CHECK(child_ran.load());
    }
    SUBCASE("a body waits for an event a later task triggers, which a helping thread runs") {
      task_event event("triggered by a later task", pool);
      std::atomic<bool> waiting{false};
      std::atomic<bool> stop{false};
      std::atomic<bool> saw_trigger{false};
      std::vector<task<>> parts;
      for (int i = 0; i < 8; ++i) {
        parts.push_back(pool.launch("part", [&, i] {
          if (i == 1) {
            waiting = true;
            saw_trigger = event.wait(std::chrono::seconds(30));
          }
          if (i == 2) event.trigger();
        }));
      }
      std::thread helper([&] {
        while (!waiting.load()) std::this_thread::yield();
        while (!stop.load()) {
          if (!pool.try_run_one()) std::this_thread::yield();
        }
      });
      wait_for(parts);
      stop = true;
      helper.join();
      CHECK(saw_trigger.load());
    }
  }
}

// A spill puts the run's rest back below what the body launched since: a join pops its own
// child only while it is the newest entry, and with a later task of the run on top it
// would help that task, nested inside the body the task waits for (o1 would wait for o0,
// beneath it on the stack).
TEST_CASE("wait: a body of a wait_all run that spills still joins its own task_group child first") {
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event unrelated("never triggered", pool);
    task_event first_done("triggered by o0 after its join", pool);
    std::atomic<bool> o1_saw_trigger{true};
    auto launch_part = [&](int i) {
      return pool.launch("part", [&, i] {
        if (i == 0) {
          task_group group(pool);
          group.run([] {});
          CHECK_FALSE(unrelated.wait(std::chrono::milliseconds(1)));  // helps or blocks: spills the run
          group.wait();
          first_done.trigger();
        }
        if (i == 1 && !first_done.wait(std::chrono::seconds(5))) o1_saw_trigger = false;
      });
    };
    std::vector<task<>> parts;
    for (int i = 0; i < 4; ++i) parts.push_back(launch_part(i));
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    CHECK(o1_saw_trigger.load());
    unrelated.trigger();
  }
}

// The same when a body of the run first takes back a task from below where the run was
// taken, and that task launches the child: the child lies below the run's old end, and the
// spill must still put the run's rest beneath it (the deque's low water); otherwise x1 is
// helped inside a's join, inside x0, and waits for a.
TEST_CASE("wait: a task taken back below a wait_all's run still joins its own child first when the run spills") {
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event unrelated("never triggered", pool);
    task_event a_done("triggered by a after its join", pool);
    std::atomic<bool> a_joined{false};
    std::atomic<bool> x1_saw_trigger{true};
    task<> filler = pool.launch("below", [] {});
    task<> a = pool.launch("a", [&] {
      task_group group(pool);
      group.run([] {});
      CHECK_FALSE(unrelated.wait(std::chrono::milliseconds(1)));  // helps or blocks: spills the run
      group.wait();
      a_joined = true;
      a_done.trigger();
    });
    task<> x1 = pool.launch("x1", [&] {
      if (!a_joined.load() && !a_done.wait(std::chrono::seconds(5))) x1_saw_trigger = false;
    });
    task<> x0 = pool.launch("x0", [&a] { a.wait(); });
    std::vector<task<>> parts{x1, x0};  // taken as a run, newest first, above a
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    CHECK(x1_saw_trigger.load());
    unrelated.trigger();
    filler.wait();
  }
}

// A join that finds another task on top puts it back; that look takes nothing, so a spill
// must not lift that task, older than the run, above the run's rest (the join would then
// run it nested inside the body it waits for).
TEST_CASE("wait: a join's look at an older task does not lift it above a wait_all's run when the run spills") {
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler_options options;
    options.workers = workers;
    options.background_workers = 0;
    scheduler pool(options);
    task_event h0_done("triggered by h0 after its join", pool);
    std::atomic<bool> h0_joined{false};
    std::atomic<bool> flag{false};
    std::atomic<bool> child_started{false};
    std::atomic<bool> child_finished{false};
    std::atomic<bool> older_saw_trigger{true};
    std::thread helper;
    task<> filler = pool.launch("below", [] {});
    task<> older = pool.launch("older than the run", [&] {
      if (!h0_joined.load() && !h0_done.wait(std::chrono::seconds(5))) older_saw_trigger = false;
    });
    task<> h1 = pool.launch("h1", [&] {
      flag = true;
      while (!child_finished.load()) std::this_thread::yield();
    });
    task<> h0 = pool.launch("h0", [&] {
      task_group group(pool);
      // Another thread runs the child (this helper, or a worker that takes it first): the
      // join finds only "older" on top.
      helper = std::thread([&] {
        group.run([&] {
          child_started = true;
          while (!flag.load()) std::this_thread::yield();
          child_finished = true;
        });
        while (!child_finished.load()) {
          if (!pool.try_run_one()) std::this_thread::yield();
        }
      });
      while (!child_started.load()) std::this_thread::yield();
      group.wait();  // puts "older" back after looking at it, then helps: spills
      h0_joined = true;
      h0_done.trigger();
    });
    std::vector<task<>> parts{h1, h0};
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    older.wait();
    filler.wait();
    helper.join();
    CHECK(older_saw_trigger.load());
  }
}

// Unreal's no-threading mode runs each task at its launch, so a body may wait for what an
// older task does. wait_all over a range that starts at the oldest end of the deque takes it
// oldest first; taken newest first, the newer task ran first and waited for ever with
// nobody to run the older one.
TEST_CASE("wait: with no workers, wait_all runs its range in launch order: a body may wait for what an older task triggers") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    task_event triggered("triggered by the older task", pool);
    bool saw_trigger = false;
    std::vector<task<>> handles;
    handles.push_back(pool.launch("older", [&triggered] { triggered.trigger(); }));
    handles.push_back(pool.launch("newer", [&triggered, &saw_trigger] { saw_trigger = triggered.wait(std::chrono::seconds(30)); }));
    CHECK(wait_all(handles));
    CHECK(saw_trigger);
    if (attached) pool.detach();
  }
}

// A chain behind an event, waited for from a plain main, runs one link per run in launch
// order (each link readies the next only as it completes, onto the lent deque): the runs
// follow one another within one wait, and a timed wait stops them once its deadline has
// passed, the rest of the chain still queued for a later wait. (An attached thread's
// completion runs the next link at once, as a worker's does: one run takes the chain.)
TEST_CASE("wait: with no workers, a wait runs a chain's links one run after another, up to its deadline") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    constexpr int links = 100;
    std::vector<int> ran;
    for (bool timed : {true, false}) {
      CAPTURE(timed);
      ran.clear();
      task_event gate("gate", pool);
      task<> last = gate;
      for (int i = 0; i < links; ++i) {
        last = pool.launch("link", [&ran, i, timed] {
          if (timed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          ran.push_back(i);
        }, last);
      }
      gate.trigger();
      if (timed && !attached) {
        CHECK_FALSE(last.wait(std::chrono::milliseconds(20)));  // 100 links take 200 ms at least
        CHECK_FALSE(ran.empty());
        CHECK(ran.size() < static_cast<std::size_t>(links));
      }
      last.wait();
      REQUIRE(ran.size() == static_cast<std::size_t>(links));
      for (int i = 0; i < links; ++i) CHECK(ran[static_cast<std::size_t>(i)] == i);
    }
    if (attached) pool.detach();
  }
}

// Beneath a body the rule does not hold (an entry launched after the body's task may wait
// for it to complete): a wait there for a task in the middle of the deque runs that task alone.
TEST_CASE("wait: with no workers, a wait inside a body for a task in the middle of the deque runs that task alone") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<int> ran;
  task<> outer = pool.launch("outer", [&] {
    std::vector<task<>> handles;
    for (int i = 0; i < 3; ++i) handles.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
    handles[1].wait();
    CHECK(ran == std::vector<int>{1});
    CHECK(wait_all(handles));
  });
  outer.wait();
  CHECK(ran == std::vector<int>{1, 2, 0});
}

// Running older tasks in launch order runs bodies other than the task waited for. They may
// free it (drop its last handle) or move the handle waited through (grow the vector holding
// it): the wait holds the task itself meanwhile and never reads the handle again (these
// cases need ASan, which shows a read of a freed task or a freed handle).
TEST_CASE("wait: with no workers, older bodies that drop or move the handle waited through are harmless") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<task<>> handles;
  task<> target;
  // One launch site (the rule runs older tasks of the waited one's type): part 0 drops the
  // last handle of the task waited for, part 1 grows the vector holding another one.
  auto launch_part = [&](int i) {
    return pool.launch("part", [&, i] {
      if (i == 0) target = task<>();
      if (i == 1) {
        for (int more = 0; more < 100; ++more) handles.push_back(pool.launch("more", [] {}));
      }
    });
  };
  handles.reserve(3);
  handles.push_back(launch_part(0));
  target = launch_part(2);
  target.wait();
  CHECK_FALSE(target.is_valid());  // part 0 ran first, and dropped it
  handles.push_back(launch_part(1));
  handles.push_back(launch_part(3));
  handles[2].wait();
  CHECK(handles.size() == 103);  // part 1 ran first, and moved the handle waited through
  CHECK(wait_all(handles));
}

// A body of a run wait_all takes back empties the handle that starts its next run: the next
// look must not read through it (newest first and oldest first).
TEST_CASE("wait: wait_all goes on past a handle a body emptied at the start of the next run") {
  for (int mode = 0; mode < 3; ++mode) {  // plain main, attached, beneath a worker's body
    CAPTURE(mode);
    no_leaks leaks;
    scheduler_options options = test::options_with(mode == 2 ? 1 : 0);
    options.background_workers = 0;  // one pool thread at most: the bodies touch `handles`
    scheduler pool(options);
    if (mode == 1) pool.attach(named_thread::game);
    std::atomic<int> ran{0};
    auto waits_for_batch = [&pool, &ran] {
      std::vector<task<>> handles(4);
      handles[0] = pool.launch("empties a later handle", [&handles, &ran] { ++ran, handles[2] = task<>(); });
      handles[1] = pool.launch("b", [&ran] { ++ran; });
      task<> between = pool.launch("not waited for", [] {});  // ends the run
      handles[2] = pool.launch("c", [&ran] { ++ran; });
      handles[3] = pool.launch("d", [&ran] { ++ran; });
      CHECK(wait_all(handles));
      CHECK_FALSE(handles[2].is_valid());
      between.wait();
      wait_all(std::vector<task<>>{between});
    };
    if (mode == 2) {
      // On the worker alone: this thread waits only once the worker has taken it (a wait
      // before would take it back and run it here, beside the worker).
      std::atomic<bool> started{false};
      task<> outer = pool.launch("outer", [&] {
        started.store(true);
        waits_for_batch();
      });
      while (!started.load()) std::this_thread::yield();
      outer.wait();
    } else {
      waits_for_batch();
    }
    CHECK(ran >= 3);
    if (mode == 1) pool.detach();
  }
}

// try_retract_and_execute says it ran a task it took back off this thread's deque, even
// while that task's nested task still runs.
TEST_CASE("wait: retracting a task taken back whose nested task is still running says it ran") {
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
TEST_CASE("wait stress: random-order waits trim stale entries while workers steal and others wait" *
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

namespace {

// reported_with counts the recorded reports of `kind` whose message holds every one of `parts`.
std::size_t reported_with(const test::diagnostic_recorder& recorder, diagnostic_kind kind,
                          std::initializer_list<const char*> parts) {
  std::size_t found = 0;
  for (const auto& each : recorder.reports()) {
    bool all = each.kind == kind;
    for (const char* part : parts) all = all && each.message.find(part) != std::string::npos;
    if (all) ++found;
  }
  return found;
}

}  // namespace

TEST_CASE("wait: waiting on work bound to a named thread no thread has attached is reported") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    {
      scheduler pool(test::options_with(workers));
      task<int> bound = pool.launch("draw on game", [] { return 1; }, on_thread(named_thread::game));
      CHECK_FALSE(bound.wait(std::chrono::milliseconds(400)));
      CHECK(reported_with(recorder, diagnostic_kind::misuse, {"'draw on game'", "game", "attached"}) == 1);
      // A coroutine resuming there: what the wait needs is queued on the unattached thread.
      task<int> hop = pool.launch("hop to game", []() -> coro<int> {
        co_await resume_on(named_thread::game);
        co_return 2;
      });
      CHECK_FALSE(hop.wait(std::chrono::milliseconds(2500)));
      CHECK(reported_with(recorder, diagnostic_kind::misuse, {"'hop to game'", "game", "attached"}) == 1);
      // Once a thread attaches and runs the queue, both complete.
      pool.attach(named_thread::game);
      CHECK(bound.wait(std::chrono::seconds(10)));
      CHECK(hop.wait(std::chrono::seconds(10)));
      CHECK(bound.get_result() == 1);
      CHECK(hop.get_result() == 2);
      pool.detach();
    }
  }
}

TEST_CASE("wait: a wait on a task bound to a named thread no thread has attached is reported as it blocks") {
  // Each wait is short (80 ms): the report comes when the wait is about to
  // block, naming the task, the named thread and the waiting thread.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    {
      scheduler pool(test::options_with(workers));
      auto bound = [&pool](const char* name) { return pool.launch(name, [] { return 1; }, on_thread(named_thread::game)); };
      task<int> alone = bound("alone on game");
      CHECK_FALSE(alone.wait(std::chrono::milliseconds(80)));
      CHECK(reported_with(recorder, diagnostic_kind::misuse, {"'alone on game'", "game thread", "attached", "waited for on thread "}) == 1);
      std::vector<task<int>> batch{bound("in a batch"), bound("in a batch")};
      CHECK_FALSE(wait_all(batch, std::chrono::milliseconds(80)));
      CHECK(reported_with(recorder, diagnostic_kind::misuse, {"'in a batch'", "game thread", "attached"}) >= 1);
      std::vector<task<int>> either{bound("either")};
      CHECK_FALSE(wait_any(either, std::chrono::milliseconds(80)).has_value());
      CHECK(reported_with(recorder, diagnostic_kind::misuse, {"game thread", "attached"}) >= 3);
      // From inside a body: the waiting thread is a worker, or this thread where none.
      task<int> inner = bound("waited inside a body");
      task<bool> outer = pool.launch("outer", [inner] { return inner.wait(std::chrono::milliseconds(80)); });
      CHECK(outer.wait(std::chrono::seconds(10)));
      CHECK_FALSE(outer.get_result());
      CHECK(reported_with(recorder, diagnostic_kind::misuse, {"'waited inside a body'", "game thread", "attached"}) == 1);
      // Once a thread attaches and runs the queue, all of them complete.
      pool.attach(named_thread::game);
      CHECK(wait_all(std::vector<task<int>>{alone, batch[0], batch[1], either[0], inner}, std::chrono::seconds(10)));
      pool.detach();
    }
  }
}

TEST_CASE("wait: a wait that makes no progress for stall_report_after is reported once, naming the task") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    scheduler_options options = test::options_with(workers);
    options.stall_report_after = std::chrono::milliseconds(50);
    scheduler pool(options);
    task_event gate("gate", pool);
    task<int> behind = pool.launch("stuck behind the gate", [] { return 5; }, gate);
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      gate.trigger();
    });
    CHECK(behind.get_result() == 5);
    opener.join();
    CHECK(reported_with(recorder, diagnostic_kind::stalled, {"'stuck behind the gate'", "ms"}) == 1);
    CHECK(recorder.count() == 1);
  }
}

TEST_CASE("wait: with stall_report_after 0 a long wait is not reported") {
  test::diagnostic_recorder recorder;
  scheduler_options options = test::options_with(1);
  options.stall_report_after = std::chrono::milliseconds(0);
  scheduler pool(options);
  task_event gate("gate", pool);
  task<int> behind = pool.launch("behind", [] { return 5; }, gate);
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gate.trigger();
  });
  CHECK(behind.get_result() == 5);
  opener.join();
  CHECK(recorder.count() == 0);
}

TEST_CASE("wait: a shutdown waiting for a task that a thread outside the pool runs and that never ends is reported once") {
  // The body spins until a flag is set after the destructor returns: a real program hangs
  // there. A thread outside the pool launched it and runs it in its wait (with no workers,
  // only it can; with workers, one may steal it first: then the shutdown waits for that
  // worker). The releaser stands for "after": it lets the body go once the shutdown's report
  // came, or after 10 s, and the check fails. (Where a worker took the task, the outside
  // thread's wait reports first: released then, the shutdown would never stall.)
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    scheduler_options options = test::options_with(workers);
    options.stall_report_after = std::chrono::milliseconds(50);
    auto pool = std::make_unique<scheduler>(options);
    std::atomic<bool> started{false};
    std::atomic<bool> released{false};
    std::thread outside([&] {
      task<> spinning = pool->launch("spins until main returns", [&] {
        started.store(true);
        while (!released.load()) std::this_thread::yield();
      });
      spinning.wait();
    });
    while (!started.load()) std::this_thread::yield();
    std::thread releaser([&] {
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (reported_with(recorder, diagnostic_kind::stalled, {"shutdown on thread "}) == 0 &&
             std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      released.store(true);
    });
    pool.reset();
    releaser.join();
    outside.join();
    // The shutdown's report, and where a worker took the task, the outside thread's wait's.
    CHECK(reported_with(recorder, diagnostic_kind::stalled, {"shutdown on thread ", "has waited"}) == 1);
    for (const auto& each : recorder.reports()) {
      CHECK(each.kind == diagnostic_kind::stalled);
      CHECK(each.severity == severity::warning);
    }
  }
}

TEST_CASE("wait: a task body waiting for what comes after its scheduler's destructor is reported, naming the task and "
          "the thread") {
  // The body waits for an event that is triggered only after the destructor returns. Its
  // wait reports the stall naming the event and the waiting thread (a worker, or with no
  // workers this thread, whose shutdown runs the body); where a worker waits, the
  // shutdown's wait for that worker is reported too.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    scheduler_options options = test::options_with(workers);
    options.stall_report_after = std::chrono::milliseconds(50);
    auto pool = std::make_unique<scheduler>(options);
    task_event after("set after the destructor", *pool);
    (void)pool->launch("waits for main", [after] { after.wait(); });
    std::thread releaser([&] {
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (reported_with(recorder, diagnostic_kind::stalled, {"'set after the destructor'"}) == 0 &&
             std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      after.trigger();
    });
    pool.reset();
    releaser.join();
    // The waiting thread: this one (its shutdown ran the body) or a worker.
    std::size_t by_this_thread = reported_with(recorder, diagnostic_kind::stalled, {"'set after the destructor'", "waited for on thread "});
    std::size_t by_a_worker = reported_with(recorder, diagnostic_kind::stalled, {"'set after the destructor'", "worker "});
    CHECK(by_this_thread + by_a_worker == 1);
    if (workers == 0) CHECK(by_this_thread == 1);
  }
}
