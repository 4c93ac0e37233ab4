// Tests for named threads at their scheduler's end (include/magpie/scheduler.h): a thread
// processing its queue during shutdown, work stranded there, and a scheduler destroyed while
// threads are still attached.
#include <magpie/coroutine.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>

#include "job.h"
#include "support.h"
#include "task_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using magpie::named_thread;
using magpie::scheduler;
using magpie::thread_queue;
using namespace magpie::test;

TEST_SUITE("named_thread_shutdown") {

// A render thread processing its queue when the scheduler shuts down (or is destroyed) is
// part of the drain: everything queued for it runs, then its processing call returns, and
// only then is the scheduler freed; a destructor also waits for the thread's detach.
TEST_CASE("named_thread: shutdown lets a named thread that is processing run its queue, then ends the processing") {
  for (unsigned workers : worker_counts) {
    for (bool destroy : {false, true}) {
      CAPTURE(workers);
      CAPTURE(destroy);
      diagnostic_recorder recorder;
      auto pool = std::make_unique<scheduler>(small_pool(workers));
      scheduler* shared = pool.get();
      std::atomic<int> commands{0};
      std::atomic<bool> left{false};
      std::atomic<bool> destroyed{false};
      std::thread render([&] {
        shared->attach(named_thread::render);
        shared->process_until_request_return(named_thread::render);
        left.store(true);
        // Process, then detach: a destructor that ended the processing waits for the detach,
        // which the pause puts well after the processing call's return.
        if (destroy) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!destroyed.load()) shared->detach();
      });
      while (!pool->is_processing(named_thread::render)) std::this_thread::yield();
      constexpr int sent = 100;
      for (int i = 0; i < sent; ++i) {
        launch_on(*pool, named_thread::render, [&] {
          commands.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        });
      }
      if (destroy) {
        pool.reset();
        destroyed.store(true);
      } else {
        pool->shutdown();
      }
      // Bounded: a processing call left running would hang the join.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!left.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      CHECK(left.load());
      if (!left.load() && pool != nullptr) pool->request_return(named_thread::render);
      if (left.load() || pool != nullptr) render.join();
      else render.detach();
      CHECK(commands.load() == sent);
      CHECK(recorder.count() == 0);
      pool.reset();
    }
  }
}

TEST_CASE("named_thread: work stranded in a named-thread queue at shutdown is reported by name") {
  diagnostic_recorder recorder;
  std::atomic<int> discarded{0};
  bool ran = false;
  {
    scheduler pool(small_pool());
    magpie::detail::schedule_item(pool, new job([&] { ran = true; }, "draw the frame", &discarded), named_thread::render);
  }
  CHECK_FALSE(ran);
  CHECK(discarded.load() == 1);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::never_ran);
  CHECK(reports[0].message.find("draw the frame") != std::string::npos);
  CHECK(reports[0].message.find("render") != std::string::npos);
}

TEST_CASE("named_thread: a scheduler destroyed on its own attached thread detaches it") {
  // Unreal's shape: the game thread attaches and never detaches; the scheduler goes with
  // it at exit. The thread must not keep naming the freed scheduler: its next launch, or a
  // second scheduler's attach, would use it.
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    diagnostic_recorder recorder;
    auto first = std::make_unique<scheduler>(options_with(workers));
    first->attach(named_thread::game);
    magpie::task<int> one = first->launch("one", [] { return 1; });
    CHECK(one.get_result() == 1);
    first.reset();
    CHECK(scheduler::current() == nullptr);
    CHECK_FALSE(scheduler::current_named_thread().has_value());
    scheduler second(options_with(workers));
    second.attach(named_thread::game);
    CHECK(scheduler::current() == &second);
    REQUIRE(scheduler::current_named_thread().has_value());
    CHECK(*scheduler::current_named_thread() == named_thread::game);
    magpie::task<int> two = second.launch("two", [] { return 2; });
    magpie::task<int> bound = second.launch("bound", [] { return 3; }, magpie::on_thread(named_thread::game));
    CHECK(two.get_result() == 2);
    CHECK(bound.get_result() == 3);
    second.detach();
    CHECK(recorder.count() == 0);
  }
}

TEST_CASE("named_thread: a thread still attached when its scheduler is destroyed is reported, and detached at its next use") {
  // The render thread stays attached while another thread destroys the scheduler; it cannot
  // be detached from there. The destruction reports it, and the render thread's next use of
  // its context (a look at its scheduler, which the free launch makes; an attach; a wait)
  // detaches it with a report instead of handing out, or reading, the freed scheduler.
  enum class next_use { current, attach, wait };
  for (next_use use : {next_use::current, next_use::attach, next_use::wait}) {
    for (unsigned workers : worker_counts) {
      CAPTURE(static_cast<int>(use));
      CAPTURE(workers);
      diagnostic_recorder recorder;
      auto first = std::make_unique<scheduler>(options_with(workers));
      scheduler second(options_with(workers));  // made first: it cannot take the freed one's address
      std::atomic<int> stage{0};                // 1: render attached; 2: first destroyed
      bool gone_after = false;
      bool unnamed_after = false;
      bool second_attached = false;
      int bound_result = 0;
      std::thread render([&] {
        first->attach(named_thread::render);
        stage.store(1);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (stage.load() != 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        if (stage.load() != 2) return;
        if (use == next_use::current) {
          gone_after = scheduler::current() == nullptr;  // compared, never followed
        } else if (use == next_use::attach) {
          second.attach(named_thread::render);
          gone_after = scheduler::current() == &second;
          second.detach();
        } else {
          // Behind an event triggered later: the wait cannot run it at once, so it takes
          // the waiting path, which reads the waiting named thread's own queues.
          magpie::task_event gate("gate", second);
          magpie::task<int> elsewhere = second.launch("elsewhere", [] { return 1; }, gate);
          std::thread opener([gate]() mutable {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            gate.trigger();
          });
          gone_after = elsewhere.get_result() == 1;
          opener.join();
        }
        unnamed_after = !scheduler::current_named_thread().has_value();
        second.attach(named_thread::render);
        second_attached = scheduler::current() == &second;
        if (!second_attached) return;  // the thread still names the freed scheduler: touch nothing
        magpie::task<int> bound =
            second.launch("bound to render", [] { return 7; }, magpie::on_thread(named_thread::render));
        second.process_until_idle(named_thread::render);
        bound_result = bound.is_completed() ? bound.get_result() : -1;
        second.detach();
      });
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (stage.load() != 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      REQUIRE(stage.load() == 1);
      first.reset();
      CHECK(recorder.count_naming("still attached") == 1);
      CHECK(recorder.count_naming("render") == 1);
      stage.store(2);
      render.join();
      CHECK(gone_after);
      CHECK(unnamed_after);
      CHECK(second_attached);
      CHECK(bound_result == 7);
      auto reports = recorder.reports();
      REQUIRE(reports.size() == 2);
      CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
      CHECK(reports[0].severity == magpie::severity::error);
      CHECK(reports[1].kind == magpie::diagnostic_kind::misuse);
      CHECK(reports[1].message.find("render") != std::string::npos);
      CHECK(reports[1].message.find("destroyed") != std::string::npos);
    }
  }
}
}  // TEST_SUITE("named_thread_shutdown")

// A named thread runs its queue and returns before the scheduler shuts down; the thread
// that shuts down learns of it only through a relaxed flag, and reads what the queue's job
// wrote once shutdown returns. Shutdown's look at the processing flag (acquire, paired with
// the processing call's release as it returned) is its one edge to that job.
TEST_CASE("named_thread: shutdown after a named thread ran its queue returns seeing what that ran" *
          doctest::test_suite("stress")) {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    for (int round = 0; round < 20; ++round) {
      scheduler pool(small_pool(workers));
      lone_int written;
      std::atomic<bool> ran{false};
      launch_on(pool, named_thread::render, [&written] { written.value = 7; });
      std::thread render([&] {
        pool.attach(named_thread::render);
        CHECK(pool.process_until_idle(named_thread::render) == 1);
        pool.detach();
        ran.store(true, std::memory_order_relaxed);  // relaxed: no edge on purpose
      });
      // Bounded: the render thread runs its queue at once.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!ran.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::yield();
      }
      CHECK(ran.load(std::memory_order_relaxed));
      if (ran.load(std::memory_order_relaxed)) {
        pool.shutdown();
        CHECK(written.value == 7);
      }
      render.join();
    }
  }
}