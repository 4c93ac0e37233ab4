// Suite "task_event": events as gates, triggers from many threads, late prerequisites,
// long chains, and an event dropped without trigger().
#include "support.h"
#include "task_support.h"

#include <magpie/config.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("task_event: completes on trigger, and holds back the tasks behind it until then") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event gate("gate", pool);
    std::atomic<int> ran{0};
    std::vector<task<>> behind;
    for (int i = 0; i < 50; ++i) behind.push_back(pool.launch("behind", [&] { ran.fetch_add(1); }, gate));
    CHECK_FALSE(gate.is_completed());
    CHECK_FALSE(gate.wait(std::chrono::milliseconds(1)));
    CHECK(ran.load() == 0);
    gate.trigger();
    CHECK(gate.is_completed());
    wait_all(behind);
    CHECK(ran.load() == 50);
  }
}

TEST_CASE("task_event: a cycle through thousands of edges is reported where debug checks are on") {
  // A release build walks at most 1,024 edges downstream before it gives up on the check
  // (adding to an event many tasks wait for stays cheap); debug checks walk 64 times
  // further. 3,000 events in a chain, then the edge that closes it.
  if (!MAGPIE_DEBUG_CHECKS) return;
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::vector<task_event> chain;
  chain.reserve(3000);
  for (int i = 0; i < 3000; ++i) chain.emplace_back("link", pool);
  for (std::size_t i = 1; i < chain.size(); ++i) chain[i].add_prerequisites(chain[i - 1]);
  CHECK(recorder.count() == 0);
  chain.front().add_prerequisites(chain.back());
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
  CHECK(recorder.reports()[0].message.find("dependency cycle") != std::string::npos);
  // The closing edge was ignored: the chain completes from its front.
  for (auto& link : chain) link.trigger();
  CHECK(chain.back().wait(std::chrono::seconds(10)));
}

TEST_CASE("task_event: trigger is idempotent and may race from many threads") {
  for (int round = 0; round < 200; ++round) {
    no_leaks leaks;
    scheduler pool(test::options_with(2));
    task_event gate("contended", pool);
    std::atomic<int> ran{0};
    task<> behind = pool.launch("behind", [&] { ran.fetch_add(1); }, gate);
    std::vector<std::thread> triggers;
    for (int t = 0; t < 4; ++t) triggers.emplace_back([&] { gate.trigger(); gate.trigger(); });
    for (auto& each : triggers) each.join();
    behind.wait();
    CHECK(ran.load() == 1);
  }
}

TEST_CASE("task_event: its own prerequisites hold it after trigger; adding them after trigger is reported") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event first("first", pool);
  task_event second("second", pool);
  task_event combined("combined", pool);
  combined.add_prerequisites(first, std::vector<task<>>{second});
  combined.trigger();
  CHECK_FALSE(combined.is_completed());
  first.trigger();
  CHECK_FALSE(combined.is_completed());
  second.trigger();
  CHECK(combined.is_completed());  // the last prerequisite's completion completes it, on this thread
  combined.add_prerequisites(first);
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
}

TEST_CASE("task_event: a prerequisite that waits for the event closes a cycle: reported and ignored") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event gate("gate", pool);
  task<> behind = pool.launch("behind", [] {}, gate);
  task_event relay("relay", pool);
  relay.add_prerequisites(behind);
  relay.trigger();
  gate.add_prerequisites(behind);  // behind waits for gate
  gate.add_prerequisites(relay);   // relay waits for behind, which waits for gate
  CHECK(recorder.count() == 2);

  task_event first("first", pool);
  task_event second("second", pool);
  first.add_prerequisites(second);
  second.add_prerequisites(first);  // the second edge of a two-event loop
  CHECK(recorder.count() == 3);
  for (auto& each : recorder.reports()) {
    CHECK(each.kind == diagnostic_kind::misuse);
    CHECK(each.message.find("dependency cycle") != std::string::npos);
  }

  // when_any does not wait for any one input, so feeding it back is no cycle.
  task_event other("other", pool);
  task<> either = when_any(std::vector<task<>>{gate, other});
  gate.add_prerequisites(either);
  task_event unrelated("unrelated", pool);
  gate.add_prerequisites(unrelated);
  CHECK(recorder.count() == 3);

  // The ignored edges hold nothing back.
  other.trigger();
  unrelated.trigger();
  gate.trigger();
  CHECK(relay.wait(std::chrono::seconds(10)));
  CHECK(gate.is_completed());
  second.trigger();
  first.trigger();
  CHECK(first.is_completed());
  CHECK(second.is_completed());
}

TEST_CASE("task_event: a chain of 100,000 events completes without recursion") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::vector<task_event> chain;
  chain.reserve(100'000);
  chain.emplace_back("link", pool);
  for (int i = 1; i < 100'000; ++i) {
    chain.emplace_back("link", pool);
    chain.back().add_prerequisites(chain[chain.size() - 2]);
  }
  for (std::size_t i = chain.size(); i-- > 1;) chain[i].trigger();  // all but the head, last first
  CHECK_FALSE(chain.back().is_completed());
  chain.front().trigger();  // one trigger completes the whole chain on this thread
  CHECK(chain.back().is_completed());
}

TEST_CASE("task_event: a chain of 100,000 tasks runs, the ready successor running next on the same worker") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event gate("gate", pool);
  std::vector<int> order;
  order.reserve(100'000);
  task<> previous = gate;
  for (int i = 0; i < 100'000; ++i) {
    previous = pool.launch("hop", [&order, i] { order.push_back(i); }, previous);
  }
  gate.trigger();
  // Polled: a waiting thread would retract the chain; here the worker must run it all.
  while (!previous.is_completed()) std::this_thread::yield();
  REQUIRE(order.size() == 100'000);
  for (int i = 0; i < 100'000; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("task_event: a 100,000-event chain feeding a pipe releases the piped tasks in chain order") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  constexpr int length = 100'000;
  std::vector<int> order;
  order.reserve(length);
  {
    magpie::pipe feed("fed by the chain", pool);
    std::vector<task_event> chain;
    chain.reserve(length);
    for (int i = 0; i < length; ++i) {
      chain.emplace_back("link", pool);
      if (i > 0) chain.back().add_prerequisites(chain[static_cast<std::size_t>(i - 1)]);
      feed.launch("fed", [&order, i] { order.push_back(i); }, chain.back());  // the pipe: no data race on order
    }
    for (std::size_t i = chain.size(); i-- > 1;) chain[i].trigger();
    chain.front().trigger();
    CHECK(feed.wait_until_empty());
  }
  REQUIRE(order.size() == static_cast<std::size_t>(length));
  for (int i = 0; i < length; ++i) {
    if (order[static_cast<std::size_t>(i)] != i) FAIL("out of order at " << i);
  }
}

namespace {
// A thread_local that triggers an event when its thread exits: after the thread's other
// thread_locals constructed later than it are gone, the ready loop's spill stack included.
task_event* gate_at_exit = nullptr;
struct trigger_at_exit {
  ~trigger_at_exit() {
    if (gate_at_exit != nullptr) gate_at_exit->trigger();
  }
};
thread_local trigger_at_exit exit_trigger;

// fan_out_behind launches `count` inline tasks behind `gate`: triggering it completes more
// of them at once than the ready loop holds without spilling.
void fan_out_behind(scheduler& pool, const task_event& gate, std::atomic<int>& ran, std::vector<task<>>& into,
                    int count) {
  for (int i = 0; i < count; ++i) into.push_back(pool.launch("fan", [&ran] { ran.fetch_add(1); }, gate, run_inline));
}
}  // namespace

TEST_CASE("task_event: a wide fan-out completes from a thread_local destructor at thread exit") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::atomic<int> ran{0};
  std::vector<task<>> tasks;
  task_event at_exit("at exit", pool);
  fan_out_behind(pool, at_exit, ran, tasks, 10);
  gate_at_exit = &at_exit;
  std::thread([&] {
    (void)&exit_trigger;  // constructed first, so destroyed after the spill stack's storage
    task_event now("now", pool);
    fan_out_behind(pool, now, ran, tasks, 10);
    now.trigger();  // spills on this thread
  }).join();
  gate_at_exit = nullptr;
  CHECK(ran.load() == 20);
  CHECK(at_exit.is_completed());
}

TEST_CASE("task_event: dropping the last handle of an untriggered event that tasks wait for is reported") {
  test::diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  task<> stuck;
  {
    task_event forgotten("forgotten", pool);
    stuck = pool.launch("stuck", [] {}, forgotten);
  }
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == diagnostic_kind::never_ran);
  CHECK(reports[0].message.find("forgotten") != std::string::npos);
  CHECK_FALSE(stuck.is_completed());
  // (the event and `stuck` stay allocated: they can never complete)
}

TEST_CASE("task_event: an untriggered event nobody waits for is released silently") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  { task_event unused("unused", pool); }
  CHECK(recorder.count() == 0);
}

TEST_CASE("task_event stress: storms of prerequisites and triggers from many threads" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    no_leaks leaks;
    scheduler pool(test::options_with(2));
    constexpr int events_count = 64;
    constexpr int tasks_count = 4000;
    std::vector<task_event> events;
    for (int i = 0; i < events_count; ++i) events.emplace_back("storm", pool);
    std::atomic<int> ran{0};
    std::vector<task<>> tasks;
    tasks.reserve(tasks_count);
    for (int i = 0; i < tasks_count; ++i) {
      tasks.push_back(pool.launch("stormed", [&] { ran.fetch_add(1); },
                                  prerequisites(events[static_cast<std::size_t>(i % events_count)],
                                                events[static_cast<std::size_t>((i * 7) % events_count)])));
    }
    std::vector<std::thread> triggers;
    for (int t = 0; t < 4; ++t) {
      triggers.emplace_back([&, t] {
        for (int i = 0; i < events_count; ++i) events[static_cast<std::size_t>((i + t * 16) % events_count)].trigger();
      });
    }
    for (auto& each : triggers) each.join();
    wait_all(tasks);
    CHECK(ran.load() == tasks_count);
  }
}

// Adding a prerequisite to an event first walks the tasks waiting for the event (the cycle
// check, lib/tasks/task_cycles.cpp). Another thread launching behind the event meanwhile pushes
// edges onto its list; the walk's acquire of the list head is its only edge to them (the
// launcher got its handle before the walks began, and `done` is relaxed).
TEST_CASE("task_event stress: adding prerequisites walks edges that another thread is launching behind the event" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    no_leaks leaks;
    scheduler pool(test::options_with(2));
    for (int round = 0; round < 20; ++round) {
      task_event gate("gate", pool);
      task_event event("event", pool);
      // Neither complete nor ready, so the cycle check walks from the event to look for it.
      task<> held = pool.launch("held", [] {}, gate);
      std::atomic<int> ran{0};
      std::atomic<bool> done{false};
      std::thread launcher([&pool, &ran, &done, copy = event] {
        for (int i = 0; i < 50; ++i) pool.launch("behind", [&ran] { ran.fetch_add(1); }, copy);
        done.store(true, std::memory_order_relaxed);  // relaxed: no edge to the walks
      });
      int added = 0;
      bool last = false;
      do {
        last = done.load(std::memory_order_relaxed);  // relaxed: as above
        event.add_prerequisites(held);
        ++added;
      } while (!last && added < 100000);
      launcher.join();
      gate.trigger();
      event.trigger();
      event.wait();
      while (ran.load() != 50) std::this_thread::yield();  // the tasks behind it, fire-and-forget
    }
  }
}

TEST_CASE("task_event stress: the last handle drops while another thread triggers or a worker completes" *
          doctest::test_suite("stress")) {
  // CI once caught drop_handle reading a task after giving up its handle, while a worker
  // freed it: only ASan sees that, and only when the two threads race closely.
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    scheduler pool(test::options_with(2));
    constexpr int rounds = 300;
    constexpr int launchers = 4;
    constexpr int per_launcher = 5000;
    std::atomic<int> ran{0};
    for (int i = 0; i < rounds; ++i) {
      std::optional<task_event> gate(std::in_place, "gate", pool);
      task<> behind = pool.launch("behind", [&] { ran.fetch_add(1); }, *gate);
      // The thread triggers through its own copy and drops it; this thread drops the other.
      std::thread trigger_thread([copy = *gate]() mutable { copy.trigger(); });
      gate.reset();
      trigger_thread.join();
      behind.wait();
    }
    // Handles dropped as soon as launched race the workers that complete and free the tasks.
    std::vector<std::thread> threads;
    for (int t = 0; t < launchers; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < per_launcher; ++i) pool.launch("dropped", [&] { ran.fetch_add(1); });
      });
    }
    for (auto& each : threads) each.join();
    pool.shutdown();
    CHECK(ran.load() == rounds + launchers * per_launcher);
    CHECK(recorder.count() == 0);
  }
}
