// Suite "wait_reports": waits that cannot go on and are reported, naming the task and the
// thread — a task waiting for itself or for what comes after it, work bound to a named
// thread no thread has attached, waits that stall past stall_report_after, and shutdowns
// waiting for a task that never ends.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

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
