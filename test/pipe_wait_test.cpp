// Suite "pipe_wait": waiting on a pipe and on its tasks — a wait that runs the task before
// its own first, wait_until_empty's time-outs and stall reports, and the game thread emptying
// its own pipe.
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

TEST_CASE("pipe: waiting inside a task for a piped task runs the one before it in its pipe first") {
  SUBCASE("no workers: the waiting body's thread is the only one, and must run both") {
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    magpie::pipe serial("serial", pool);
    std::vector<int> order;
    task<> first = serial.launch("first", [&] { order.push_back(1); });
    task<> second = serial.launch("second", [&] { order.push_back(2); });
    task<> waiter = pool.launch("waiter", [&] {
      second.wait();
      order.push_back(3);
    });
    waiter.wait();  // runs the waiter here; inside it, only retraction can reach `first`
    CHECK(order == std::vector<int>{1, 2, 3});
    serial.wait_until_empty();
  }
  SUBCASE("one worker, busy while the waiters are queued ahead of the pipe's tasks") {
    // Before, the worker and its one standby blocked in two waiters, the main thread in the
    // third, and `first` stayed queued: a hang.
    no_leaks leaks;
    scheduler pool(test::options_with(1));  // one worker, one background worker, the default cap
    magpie::pipe serial("serial", pool);
    std::atomic<bool> busy_started{false};
    std::atomic<bool> release{false};
    task<> busy = pool.launch("busy", [&] {
      busy_started.store(true);
      while (!release.load()) std::this_thread::yield();
    });
    while (!busy_started.load()) std::this_thread::yield();
    std::atomic<int> ran{0};
    task<> first = serial.launch("first", [&] { ran.fetch_add(1); });
    task<> second = serial.launch("second", [&] { ran.fetch_add(1); });
    std::vector<task<>> waiters;
    for (int i = 0; i < 3; ++i) waiters.push_back(pool.launch("waiter", [second] { second.wait(); }, priority::high));
    release.store(true);
    CHECK(wait_all(waiters, std::chrono::seconds(30)));
    CHECK(ran.load() == 2);
    busy.wait();
    serial.wait_until_empty();
  }
}

TEST_CASE("pipe: wait_until_empty with the duration's maximum means no time-out") {
  // now + max would overflow into the past: the wait would return false at once.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    magpie::pipe line("line", pool);
    task_event gate("gate", pool);
    task<> piped = line.launch("piped", [] {}, gate);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate.trigger();
    });
    CHECK(line.wait_until_empty(std::chrono::nanoseconds::max()));
    opener.join();
    CHECK_FALSE(line.has_work());
    task<> second = line.launch("second", [] {}, gate);
    CHECK(line.wait_until_empty(std::chrono::hours::max()));
  }
}

TEST_CASE("pipe: a wait_until_empty that makes no progress for stall_report_after is reported once") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    scheduler_options options = test::options_with(workers);
    options.stall_report_after = std::chrono::milliseconds(50);
    scheduler pool(options);
    magpie::pipe line("slow line", pool);
    task_event gate("gate", pool);
    task<> piped = line.launch("piped", [] {}, gate);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      gate.trigger();
    });
    CHECK(line.wait_until_empty());
    opener.join();
    auto reports = recorder.reports();
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].kind == diagnostic_kind::stalled);
    CHECK(reports[0].message.find("'slow line'") != std::string::npos);
  }
}

TEST_CASE("pipe: a wait_until_empty while the pipe's task waits on a named thread no thread has attached is reported") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    magpie::pipe commands("render commands", pool);
    commands.launch("draw", [] {}, on_thread(named_thread::render));
    CHECK_FALSE(commands.wait_until_empty(std::chrono::milliseconds(80)));
    auto reports = recorder.reports();
    CHECK(reports.size() == 1);
    for (const auto& each : reports) {
      CHECK(each.kind == diagnostic_kind::misuse);
      CHECK(each.message.find("'render commands'") != std::string::npos);
      CHECK(each.message.find("render thread") != std::string::npos);
      CHECK(each.message.find("waited for on thread ") != std::string::npos);
    }
    pool.attach(named_thread::render);
    pool.process_until_idle(named_thread::render);
    CHECK(commands.wait_until_empty(std::chrono::seconds(10)));
    pool.detach();
  }
}

TEST_CASE("pipe: the game thread waiting for its pipe to empty runs the pipe's game-thread tasks itself") {
  for (unsigned workers : test::worker_counts) {
    for (bool inside_its_queue : {false, true}) {
      CAPTURE(workers);
      CAPTURE(inside_its_queue);
      test::diagnostic_recorder recorder;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      magpie::pipe frame("frame", pool);
      std::atomic<int> ran{0};
      auto fill_and_wait = [&] {
        frame.launch("any thread", [&ran] { ++ran; });
        frame.launch("on game", [&ran] { ran += scheduler::current_named_thread() == named_thread::game ? 1 : 100; },
                     on_thread(named_thread::game));
        frame.launch("after", [&ran] { ++ran; });
        // Bounded: a wait that never runs the game thread's queue times out.
        return frame.wait_until_empty(std::chrono::seconds(5));
      };
      bool emptied = false;
      if (inside_its_queue) {
        task<> item = pool.launch("frame item", [&] { emptied = fill_and_wait(); }, on_thread(named_thread::game));
        pool.process_until_idle(named_thread::game);
        CHECK(item.is_completed());
      } else {
        emptied = fill_and_wait();
      }
      CHECK(emptied);
      CHECK(ran.load() == 3);
      CHECK(recorder.count() == 0);
      pool.process_until_idle(named_thread::game);  // what a failed wait left, so that the pipe empties
      CHECK(frame.wait_until_empty(std::chrono::seconds(10)));
      pool.detach();
    }
  }
}

// A waiter retracting a piped task B runs the task before it in its pipe, A, first, which
// it takes from B's predecessor slot. The thread that joined B behind A got A from the
// pipe (and with it A's making); the waiter, which got B from a thread that never saw A,
// has only the slot's store and its own exchange as edge to A. Its first look at A, when
// it comes before anything else of A's was released to anyone, reads what A's launcher
// wrote: under TSan a data race on A when either order is weakened.
TEST_CASE("pipe stress: a waiter that takes the task before its own from the pipe sees it made" *
          doctest::test_suite("stress")) {
  constexpr int rounds = 2500;
  using clock = std::chrono::steady_clock;
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      magpie::pipe line("handed over", pool);
      // Round numbers published with release before A is made: nothing after it reaches the
      // waiter through them. Every flag read while A is new is relaxed, for the same reason.
      std::atomic<int> round_started{-1};
      std::atomic<int> round_done{-1};
      std::atomic<task<>*> handed{nullptr};  // B, from its launcher to the waiter
      std::atomic<int> handed_round{-1};     // the round whose B `handed` names
      std::atomic<int> waiter_finished{-1};
      std::atomic<long> retractions{0};
      std::atomic<int> a_started{-1};
      std::atomic<int> a_launched{-1};
      std::atomic<int> b_joined{-1};
      std::atomic<int> a_released{-1};
      std::atomic<int> waiter_ran_b{0};
      const auto deadline = clock::now() + std::chrono::seconds(60);
      auto waiting = [&] { return clock::now() < deadline; };
      std::thread launcher([&] {  // makes B behind an event, hands it over, then joins it behind A
        for (int round = 0; round < rounds; ++round) {
          while (round_started.load(std::memory_order_acquire) < round && waiting()) std::this_thread::yield();
          task_event gate("gate", pool);
          task<> b = line.launch("B", [] {}, gate);
          const long before = retractions.load(std::memory_order_relaxed);
          handed.store(&b, std::memory_order_relaxed);  // relaxed: published by the round's release below
          handed_round.store(round, std::memory_order_release);
          while (retractions.load(std::memory_order_relaxed) < before + 2 && waiting()) std::this_thread::yield();
          while (a_launched.load(std::memory_order_relaxed) < round && waiting()) std::this_thread::yield();
          gate.trigger();  // B joins the pipe behind A here
          b_joined.store(round, std::memory_order_relaxed);
          CHECK(b.wait(std::chrono::seconds(20)));
          while (waiter_finished.load(std::memory_order_acquire) < round && waiting()) std::this_thread::yield();
          round_done.store(round, std::memory_order_release);
        }
      });
      std::thread waiter([&] {  // loops retracting B, with no edge to A's launcher
        for (int round = 0; round < rounds; ++round) {
          while (handed_round.load(std::memory_order_acquire) < round && waiting()) std::this_thread::yield();
          if (handed_round.load(std::memory_order_acquire) < round) break;
          task<>* b = handed.load(std::memory_order_relaxed);  // relaxed: after its round's acquire
          while (!b->is_completed() && waiting()) {
            if (b->try_retract_and_execute()) waiter_ran_b.fetch_add(1, std::memory_order_relaxed);
            retractions.fetch_add(1, std::memory_order_relaxed);
          }
          waiter_finished.store(round, std::memory_order_release);
        }
      });
      int a_ran = 0;
      for (int round = 0; round < rounds && waiting(); ++round) {
        round_started.store(round, std::memory_order_release);
        task<> a = line.launch("A", [&, round] {
          a_started.store(round, std::memory_order_relaxed);
          while (a_released.load(std::memory_order_relaxed) < round && waiting()) std::this_thread::yield();
        });
        // A is begun by a worker before B joins, so the waiter only looks at it; with no
        // workers the waiter runs it, after looking.
        const auto started_by = clock::now() + std::chrono::milliseconds(workers == 0 ? 0 : 200);
        while (a_started.load(std::memory_order_relaxed) < round && clock::now() < started_by) std::this_thread::yield();
        a_launched.store(round, std::memory_order_relaxed);
        // The waiter's look that matters comes while B joins; A may go once it has.
        while (b_joined.load(std::memory_order_relaxed) < round && waiting()) std::this_thread::yield();
        a_released.store(round, std::memory_order_relaxed);
        CHECK(a.wait(std::chrono::seconds(20)));
        while (round_done.load(std::memory_order_acquire) < round && waiting()) std::this_thread::yield();
        ++a_ran;
      }
      a_released.store(rounds, std::memory_order_relaxed);
      launcher.join();
      waiter.join();
      CHECK(a_ran == rounds);
      CHECK(round_done.load() == rounds - 1);
      CHECK(line.wait_until_empty(std::chrono::seconds(20)));
    }
  }
}

// A waiter retracting B takes A, the task before it in its pipe, out of B's predecessor
// slot, finds it complete and puts it back. B's completion then takes it from the slot and
// drops what may be A's last reference; A's block goes back to its pool, and the next
// launch made there reuses it. The waiter's look at A came before that only through its
// release put-back and the completion's acquire exchange (it held no reference of its
// own): under TSan, weakened, the waiter's read of A races with the reuse. B runs on the
// game thread (this one), which the waiter may not run, so that it only looks at A.
TEST_CASE("pipe stress: a waiter's look at the task before its own comes before that task is freed" *
          doctest::test_suite("stress")) {
  constexpr int rounds = 400;
  using clock = std::chrono::steady_clock;
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      magpie::pipe line("freed behind", pool);
      // Kept until the waiter is gone: it reads the handles, and this thread must not
      // acquire anything the waiter released while A's block may be reused.
      std::unique_ptr<task<>[]> bs(new task<>[rounds]);
      std::atomic<int> handed_round{-1};
      std::atomic<long> retractions{0};
      std::atomic<bool> abandoned{false};
      const auto deadline = clock::now() + std::chrono::seconds(60);
      auto waiting = [&] { return clock::now() < deadline && !abandoned.load(std::memory_order_relaxed); };
      std::thread waiter([&] {
        for (int round = 0; round < rounds; ++round) {
          while (handed_round.load(std::memory_order_acquire) < round && waiting()) std::this_thread::yield();
          if (handed_round.load(std::memory_order_acquire) < round) break;
          const task<>& b = bs[static_cast<std::size_t>(round)];
          while (!b.is_completed() && waiting()) {
            b.try_retract_and_execute();  // never runs B: it is bound to the game thread
            retractions.fetch_add(1, std::memory_order_relaxed);
          }
        }
      });
      int b_ran = 0;
      for (int round = 0; round < rounds && waiting(); ++round) {
        task<> a = line.launch("A", [] {});
        bs[static_cast<std::size_t>(round)] = line.launch("B", [&b_ran] { ++b_ran; }, on_thread(named_thread::game));
        handed_round.store(round, std::memory_order_release);
        const auto ran_by = clock::now() + std::chrono::seconds(20);
        while (!a.is_completed() && clock::now() < ran_by) {
          if (workers == 0) pool.try_run_one();  // else a worker (or the waiter) runs it
        }
        if (!a.is_completed()) break;  // counted below
        a = task<>();  // the slot's is now A's last reference
        // relaxed: the waiter's looks must reach this thread through nothing but the slot
        const long seen = retractions.load(std::memory_order_relaxed);
        const auto looked_by = clock::now() + std::chrono::milliseconds(2);
        while (retractions.load(std::memory_order_relaxed) < seen + 1 + round % 3 && clock::now() < looked_by) {
          std::this_thread::yield();
        }
        // B, once A's completer queued it: completes, and frees A.
        const task<>& b = bs[static_cast<std::size_t>(round)];
        while (!b.is_completed() && waiting()) pool.process_until_idle(named_thread::game);
        if (!b.is_completed()) break;  // counted below
      }
      abandoned.store(true, std::memory_order_relaxed);  // a waiter still looking for a round stops
      waiter.join();
      CHECK(b_ran == rounds);
      CHECK(line.wait_until_empty(std::chrono::seconds(20)));
      pool.detach();
    }
  }
}
