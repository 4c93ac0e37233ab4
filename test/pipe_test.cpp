// Suite "pipe": one task at a time, in ready order, on any worker, without a mutex.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

namespace {

// overlap_guard counts bodies running at once; a pipe must never see two.
struct overlap_guard {
  std::atomic<int> inside{0};
  std::atomic<int> worst{0};
  void enter() {
    int now = inside.fetch_add(1) + 1;
    int seen = worst.load();
    while (now > seen && !worst.compare_exchange_weak(seen, now)) {
    }
  }
  void leave() { inside.fetch_sub(1); }
};

}  // namespace

TEST_CASE("pipe: tasks never overlap and run in launch order") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    magpie::pipe serial("serial", pool);
    overlap_guard guard;
    std::vector<int> order;
    std::vector<task<>> tasks;
    for (int i = 0; i < 500; ++i) {
      tasks.push_back(serial.launch("piped", [&, i] {
        guard.enter();
        CHECK(serial.is_in_context());
        order.push_back(i);  // safe without a lock: the pipe serialises
        guard.leave();
      }));
    }
    wait_all(tasks);
    CHECK(guard.worst.load() == 1);
    REQUIRE(order.size() == 500);
    for (int i = 0; i < 500; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
    CHECK_FALSE(serial.has_work());
  }
}

TEST_CASE("pipe: a task blocked on a prerequisite does not block the pipe; it joins when ready") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  magpie::pipe serial("serial", pool);
  task_event gate("gate", pool);
  std::vector<int> order;
  task<> blocked = serial.launch("blocked", [&] { order.push_back(0); }, gate);
  task<> free_one = serial.launch("free", [&] { order.push_back(1); });
  free_one.wait();
  CHECK_FALSE(blocked.is_completed());
  CHECK(serial.has_work());  // counts the task still waiting for its prerequisite
  CHECK_FALSE(serial.wait_until_empty(std::chrono::milliseconds(1)));
  gate.trigger();
  CHECK(serial.wait_until_empty());
  REQUIRE(order.size() == 2);
  CHECK(order[0] == 1);
  CHECK(order[1] == 0);
}

TEST_CASE("pipe: the next task starts only after the previous one's nested tasks complete") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  magpie::pipe serial("serial", pool);
  task_event hold("hold", pool);
  std::atomic<bool> nested_done{false};
  std::atomic<bool> second_saw_nested_done{false};
  std::atomic<bool> first_returned{false};
  serial.launch("first", [&] {
    add_nested(magpie::launch("nested", [&] { nested_done.store(true); }, hold));
    first_returned.store(true);
  });
  task<> second = serial.launch("second", [&] { second_saw_nested_done.store(nested_done.load()); });
  while (!first_returned.load()) std::this_thread::yield();
  CHECK_FALSE(second.wait(std::chrono::milliseconds(2)));  // suspended by the nested task
  hold.trigger();
  second.wait();
  CHECK(second_saw_nested_done.load());
  serial.wait_until_empty();
}

TEST_CASE("pipe: inline piped tasks released together keep launch order") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  magpie::pipe serial("inline", pool);
  task_event gate("gate", pool);
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) serial.launch("inline piped", [&, i] { order.push_back(i); }, gate, run_inline);
  gate.trigger();  // runs them all here, one after the other
  CHECK_FALSE(serial.has_work());
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("pipe: is_in_context is false outside, and in a task of no pipe") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  magpie::pipe serial("serial", pool);
  CHECK_FALSE(serial.is_in_context());
  CHECK_FALSE(pool.launch("plain", [&] { return serial.is_in_context(); }).get_result());
  CHECK(serial.launch("piped", [&] { return serial.is_in_context(); }).get_result());
}

TEST_CASE("pipe: destroying a pipe with unfinished tasks is reported, then waits for them") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event gate("gate", pool);
  std::atomic<bool> ran{false};
  std::thread opener([&] {  // lets the task run once the destructor has reported
    while (recorder.count() == 0) std::this_thread::yield();
    gate.trigger();
  });
  {
    magpie::pipe doomed("doomed", pool);
    doomed.launch("late", [&] { ran.store(true); }, gate);
  }
  opener.join();
  CHECK(ran.load());
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
}

TEST_CASE("pipe: once its tasks are seen complete the pipe has no work, while their completer is still busy") {
  // The completer of `piped` readies `follower` inline, between completing `piped` and
  // leaving the pipe; the follower holds it there while this thread looks.
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::atomic<bool> started{false};
  std::atomic<bool> follower_launched{false};
  std::atomic<bool> looked{false};
  {
    magpie::pipe line("line", pool);
    task<> piped = line.launch("piped", [&] {
      started.store(true);
      // Until the follower is linked: finished first, this thread's launch would find it
      // complete and run the follower itself.
      while (!follower_launched.load()) std::this_thread::yield();
    });
    while (!started.load()) std::this_thread::yield();  // on the worker: not ours to take back
    task<> follower = pool.launch("follower", [&] {
      while (!looked.load()) std::this_thread::yield();
    }, prerequisites(piped), run_inline);
    follower_launched.store(true);
    piped.wait();
    CHECK_FALSE(line.has_work());
    looked.store(true);
    follower.wait();
  }  // destroyed at once: nothing unfinished to report, the completer is waited for quietly
  CHECK(recorder.count() == 0);
}

TEST_CASE("pipe: a pipe outliving its scheduler can be waited on; its tasks complete as never run") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  task_event gate("gate");
  std::atomic<bool> ran{false};
  auto doomed = std::make_unique<scheduler>(test::options_with(0));
  magpie::pipe line("line", *doomed);
  task<> piped = line.launch("piped", [&] { ran.store(true); }, gate);
  doomed.reset();
  CHECK_FALSE(line.wait_until_empty(std::chrono::milliseconds(1)));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.trigger();  // the piped task completes on this thread, which wakes the waiter
  });
  CHECK(line.wait_until_empty(std::chrono::seconds(10)));
  opener.join();
  CHECK_FALSE(line.has_work());
  CHECK_FALSE(ran.load());
  CHECK_THROWS_AS(piped.get_result(), task_never_ran);
  CHECK(recorder.count() == 1);  // "became ready after its scheduler was destroyed"
}

TEST_CASE("pipe stress: many producers into many pipes" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr int pipes_count = 200;
      constexpr int per_pipe = 100;
      std::vector<std::unique_ptr<magpie::pipe>> pipes;
      std::vector<overlap_guard> guards(pipes_count);
      std::vector<std::atomic<int>> runs(pipes_count);
      for (int p = 0; p < pipes_count; ++p) pipes.push_back(std::make_unique<magpie::pipe>("stressed", pool));
      std::vector<std::thread> producers;
      for (int t = 0; t < 4; ++t) {
        producers.emplace_back([&, t] {
          for (int i = 0; i < pipes_count * per_pipe / 4; ++i) {
            auto p = static_cast<std::size_t>((i * 7 + t) % pipes_count);
            pipes[p]->launch("stressed", [&guards, &runs, p] {
              guards[p].enter();
              runs[p].fetch_add(1);
              guards[p].leave();
            });
          }
        });
      }
      for (auto& each : producers) each.join();
      for (auto& each : pipes) CHECK(each->wait_until_empty());
      for (int p = 0; p < pipes_count; ++p) {
        CHECK(guards[static_cast<std::size_t>(p)].worst.load() == 1);
        CHECK(runs[static_cast<std::size_t>(p)].load() == per_pipe);
      }
    }
  }
}

// The piped tasks write plain memory, so only the pipe's own orders can publish it to the
// thread that sees the pipe empty: has_work's acquire load (pairs with task_completing's
// release), wait_until_empty's (pairs with task_finished's acq_rel decrement) and ~pipe's.
// Under TSan a weakened order there is a data race on `written`, or on the pipe's memory
// freed under a completer still on its way out (the memory-order sweep's mutants).
TEST_CASE("pipe stress: a pipe seen empty publishes its tasks' effects, and may go at once" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 4u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr int per_round = 32;
      for (int round = 0; round < 100; ++round) {
        CAPTURE(round);
        std::vector<int> written(per_round, 0);  // plain, on purpose
        auto line = std::make_unique<magpie::pipe>("published", pool);
        for (int i = 0; i < per_round; ++i) {
          line->launch("writes", [&written, i] { written[static_cast<std::size_t>(i)] = i + 1; });
        }
        auto wrong = [&written] {
          int count = 0;
          for (int i = 0; i < per_round; ++i) count += written[static_cast<std::size_t>(i)] != i + 1 ? 1 : 0;
          return count;
        };
        if (round % 2 == 0) {
          while (line->has_work()) std::this_thread::yield();
          CHECK(wrong() == 0);  // before the pipe goes: only has_work's acquire orders this
          line.reset();  // at once: a completer may still be on its way out of the pipe
        } else {
          CHECK(line->wait_until_empty());
          line.reset();
          CHECK(wrong() == 0);
        }
      }
    }
  }
}

// A task launched into a pipe whose last task already left the slot runs at once, with no
// edge to that task: only the slot's orders (task_finished's release CAS emptying it, the
// joiner's acquire exchange) publish the previous task's plain writes to it. The launcher
// learns of the completion through a relaxed flag only, so it adds no ordering of its own.
TEST_CASE("pipe stress: a task joining an emptied pipe sees the previous task's effects" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    no_leaks leaks;
    scheduler pool(test::options_with(4));
    magpie::pipe line("handover", pool);
    int value = 0;  // plain, on purpose: written by one piped task, read by the next
    int wrong = 0;  // only the pipe's tasks touch it, one at a time
    std::atomic<bool> done{false};  // outside the loop: re-initialising it would race the relaxed store
    for (int round = 1; round <= 300; ++round) {
      done.store(false, std::memory_order_relaxed);  // relaxed: the writer stored true before we saw it
      line.launch("writer", [&value, &done, round] {
        value = round;
        done.store(true, std::memory_order_relaxed);  // relaxed: must not order `value` itself
      });
      while (!done.load(std::memory_order_relaxed)) std::this_thread::yield();
      for (int spin = 0; spin < round % 8; ++spin) std::this_thread::yield();  // let it leave the slot, often
      line.launch("reader", [&value, &wrong, round] { wrong += value != round ? 1 : 0; });
    }
    CHECK(line.wait_until_empty());
    CHECK(wrong == 0);
  }
}

// A piped task launched behind a prerequisite that completes on a worker while the launch
// is still under way: the completer must see the task either not yet piped (it only removes
// its lock) or fully piped (extras, flag and the pipe's lock all in place), never half of
// it — else the task joins its pipe twice (leaving an edge with no
// subsequent in a completer's list). Under TSan the half-made task is a data race on its
// extras.
TEST_CASE("pipe stress: a prerequisite completing during a piped launch" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 4u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      magpie::pipe line("racing", pool);
      overlap_guard guard;
      constexpr int rounds = 2000;
      std::vector<int> order;  // written only by the pipe's tasks, one at a time
      order.reserve(rounds);
      std::vector<task<>> launched;
      for (int round = 0; round < rounds; ++round) {
        task<> before = pool.launch("quick", [] {});
        for (int spin = 0; spin < round % 5; ++spin) std::this_thread::yield();  // vary where the completion lands
        launched.push_back(line.launch("piped", [&guard, &order, round] {
          guard.enter();
          order.push_back(round);
          guard.leave();
        }, before));
      }
      wait_all(launched);
      CHECK(line.wait_until_empty());
      CHECK(guard.worst.load() == 1);
      CHECK(order.size() == rounds);
    }
  }
}
