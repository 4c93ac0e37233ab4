// Suite "coroutine": coroutine tasks — co_await, lifetime, placement, exceptions, and the
// task model's features (prerequisites, pipes, waits, nested tasks) on coroutine tasks. A
// coroutine whose scheduler is destroyed before it resumes is in coroutine_shutdown_test.cpp.
#include "support.h"
#include "task_support.h"

#include <magpie/coroutine.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "counting_new.h"  // the allocation-counting tests

using namespace magpie;
using test::no_leaks;

namespace {

// chain_of launches `depth` coroutine tasks, each awaiting the next one, and returns the first.
task<int> chain_of(scheduler& pool, int depth) {
  return pool.launch("link", [&pool, depth]() -> coro<int> {
    if (depth == 0) co_return 0;
    int below = co_await chain_of(pool, depth - 1);
    co_return below + 1;
  });
}

}  // namespace

TEST_CASE("coroutine: a coroutine body makes a task of its result, completed when the coroutine returns") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event gate("gate", pool);
    task<int> other = pool.launch("other", [] { return 41; });
    task<int> plus_one = pool.launch("plus one", [other, gate]() -> coro<int> {
      co_await gate;
      int x = co_await other;
      co_return x + 1;
    });
    CHECK(std::string(plus_one.name()) == "plus one");
    CHECK_FALSE(plus_one.wait(std::chrono::milliseconds(1)));
    CHECK_FALSE(plus_one.is_completed());
    gate.trigger();
    CHECK(plus_one.get_result() == 42);
    task<> nothing = pool.launch("void", []() -> coro<> { co_return; });
    nothing.wait();
    CHECK(nothing.is_completed());
    CHECK_FALSE(nothing.has_exception());
  }
}

TEST_CASE("coroutine: co_await of a completed task continues at once, without suspending") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<int> done = make_completed_task(5);
  task<bool> same = pool.launch("no suspension", [done]() -> coro<bool> {
    detail::task_base* before = detail::current_task();
    std::thread::id thread = std::this_thread::get_id();
    int value = co_await done;
    co_return value == 5 && detail::current_task() == before && std::this_thread::get_id() == thread;
  });
  CHECK(same.get_result());
}

// Work first: an awaited task that has not started (with what it waits for) runs on the
// coroutine's thread at once, as a wait would retract it, and the coroutine goes on in the
// same task, never suspended. With no workers nothing else could take them first.
TEST_CASE("coroutine: co_await of a task not started runs it here first, without suspending") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  task<bool> same = pool.launch("work first", [&pool]() -> coro<bool> {
    detail::task_base* before = detail::current_task();
    std::thread::id thread = std::this_thread::get_id();
    std::thread::id first_thread, second_thread;
    task<int> first = pool.launch("first", [&first_thread] {
      first_thread = std::this_thread::get_id();
      return 3;
    });
    task<int> second = pool.launch("second", [&second_thread, first] {
      second_thread = std::this_thread::get_id();
      return first.get_result() + 4;
    }, first);
    int value = co_await second;
    co_return value == 7 && first_thread == thread && second_thread == thread && detail::current_task() == before;
  });
  CHECK(same.get_result());
}

TEST_CASE("coroutine: a suspended coroutine gives its worker back to other work") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_event gate("gate", pool);
  std::atomic<bool> resumed{false};
  task<> waiting = pool.launch("waiting", [gate, &resumed]() -> coro<> {
    co_await gate;
    resumed.store(true);
  });
  // The only worker took the coroutine and suspended it: it runs this task meanwhile.
  std::atomic<bool> other_ran{false};
  task<> other = pool.launch("other", [&] { other_ran.store(true); });
  while (!other_ran.load()) std::this_thread::yield();  // not wait(): that would retract it
  CHECK_FALSE(resumed.load());
  CHECK_FALSE(waiting.is_completed());
  gate.trigger();
  waiting.wait();
  CHECK(resumed.load());
  other.wait();
}

TEST_CASE("coroutine: a capturing lambda coroutine launched and left reads its captures after every suspension") {
  for (unsigned workers : {1u, 2u, 8u}) {  // with none, only a waiter runs work, and nobody waits here
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event first("first", pool);
    task_event second("second", pool);
    std::atomic<int> sum{0};
    auto done = std::make_shared<std::atomic<bool>>(false);
    {
      auto text = std::make_shared<std::string>("captured text");
      std::vector<int> numbers{1, 2, 3};
      pool.launch("left", [text, numbers, first, second, &sum, done]() -> coro<> {
        co_await first;
        sum.fetch_add(static_cast<int>(text->size()) + numbers[0]);
        co_await second;
        sum.fetch_add(numbers[2]);
        done->store(true);
      });
    }  // the handle and the launcher's copies are gone
    first.trigger();
    second.trigger();
    while (!done->load()) std::this_thread::yield();
    CHECK(sum.load() == 13 + 1 + 3);
  }
}

TEST_CASE("coroutine: exceptions cross co_await, and one the coroutine lets out is the task's") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task<int> thrower = pool.launch("thrower", []() -> int { throw std::runtime_error("inner"); });
    task<std::string> caught = pool.launch("catcher", [thrower]() -> coro<std::string> {
      try {
        co_await thrower;
      } catch (const std::runtime_error& error) {
        co_return std::string("caught ") + error.what();
      }
      co_return std::string("missed");
    });
    CHECK(caught.get_result() == "caught inner");
    task<int> passed_on = pool.launch("passer", [thrower]() -> coro<int> { co_return co_await thrower; });
    passed_on.wait();
    CHECK(passed_on.has_exception());
    CHECK_THROWS_AS(passed_on.get_result(), std::runtime_error);
    CHECK(thrower.has_exception());
    task<> early = pool.launch("early", []() -> coro<> {
      throw std::logic_error("before any suspension");
      co_return;
    });
    CHECK_THROWS_AS(early.get_result(), std::logic_error);
  }
}

TEST_CASE("coroutine: a coroutine task waits for its prerequisites, and others wait for it") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> step{0};
    task_event gate("gate", pool);
    task<> first = pool.launch("first", [&] { step.store(1); });
    task<int> middle = pool.launch("middle", [&, gate]() -> coro<int> {
      int seen = step.load();
      co_await gate;
      step.store(2);
      co_return seen;
    }, prerequisites(first));
    task<int> last = pool.launch("last", [&] { return step.load(); }, prerequisites(middle));
    gate.trigger();
    CHECK(middle.get_result() == 1);
    CHECK(last.get_result() == 2);
  }
}

TEST_CASE("coroutine: a piped coroutine task keeps the pipe busy until it returns") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    magpie::pipe serial("serial", pool);
    std::mutex order_mutex;
    std::vector<std::string> order;
    auto note = [&](const char* what) {
      std::lock_guard lock(order_mutex);
      order.emplace_back(what);
    };
    task_event gate("gate", pool);
    task<> suspended = serial.launch("coroutine", [&, gate]() -> coro<> {
      note("coroutine begins");
      co_await gate;
      note("coroutine ends");
    });
    task<> next = serial.launch("next", [&] { note("next"); });
    CHECK_FALSE(next.wait(std::chrono::milliseconds(2)));
    CHECK(serial.has_work());
    gate.trigger();
    next.wait();
    CHECK(serial.wait_until_empty());
    CHECK(order == std::vector<std::string>{"coroutine begins", "coroutine ends", "next"});
    CHECK(suspended.is_completed());
  }
}

TEST_CASE("coroutine: nested tasks added before and after a suspension hold the coroutine task's completion") {
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event gate("gate", pool);
    task_event hold_before("hold before", pool);
    task_event hold_after("hold after", pool);
    task<> parent = pool.launch("parent", [=]() -> coro<> {
      add_nested(hold_before);
      co_await gate;
      add_nested(hold_after);
    });
    gate.trigger();
    CHECK_FALSE(parent.wait(std::chrono::milliseconds(2)));
    hold_before.trigger();
    CHECK_FALSE(parent.wait(std::chrono::milliseconds(2)));
    hold_after.trigger();
    parent.wait();
    CHECK(parent.is_completed());
  }
}

TEST_CASE("coroutine: resume_on a named thread continues on that thread's queue") {
  no_leaks leaks;
  scheduler_options options = test::options_with(2);
  scheduler pool(options);
  pool.attach(named_thread::render);
  std::atomic<bool> started_elsewhere{false};
  task<bool> moved = pool.launch("to render", [&]() -> coro<bool> {
    started_elsewhere.store(scheduler::current_named_thread() != named_thread::render);
    co_await resume_on(named_thread::render);
    co_return scheduler::current_named_thread() == named_thread::render;
  });
  while (!moved.is_completed()) {
    if (pool.process_until_idle(named_thread::render) == 0) std::this_thread::yield();
  }
  CHECK(started_elsewhere.load());
  CHECK(moved.get_result());
  pool.detach();
}

TEST_CASE("coroutine: resume_on a priority, yield, when_all and when_any") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event a("a", pool);
    task_event b("b", pool);
    task<int> mixed = pool.launch("mixed", [a, b]() -> coro<int> {
      int steps = 0;
      co_await resume_on(priority::high);
      ++steps;
      co_await yield();
      ++steps;
      co_await when_any(prerequisites(a, b));
      ++steps;
      co_await when_all(prerequisites(a, b));
      co_return steps + 1;
    });
    a.trigger();
    CHECK_FALSE(mixed.wait(std::chrono::milliseconds(1)));
    b.trigger();
    CHECK(mixed.get_result() == 4);
  }
}

TEST_CASE("coroutine: suspension and resumption take their memory from the task pool") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  auto round = [&] {
    task_event gate("gate", pool);
    task<int> suspended = pool.launch("pooled", [gate]() -> coro<int> {
      co_await gate;
      co_await yield();
      co_return 3;
    });
    gate.trigger();
    return suspended.get_result();
  };
  CHECK(round() == 3);  // warms up this thread's and the worker's pools
  CHECK(round() == 3);
  test::allocations.store(0);
  test::counting.store(true);
  int result = round();
  test::counting.store(false);
  CHECK(result == 3);
  CHECK(test::allocations.load() == 0);
}

TEST_CASE("coroutine: a chain of 100,000 coroutines each awaiting the next completes without deep recursion") {
  for (unsigned workers : {0u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    CHECK(chain_of(pool, 100'000).get_result() == 100'000);
  }
}

namespace {

// stack_position is how far up the stack the caller's frame is (the stack grows down).
[[gnu::noinline]] std::uintptr_t stack_position() noexcept {
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}

// inline_chain_of is chain_of, counting in `inline_starts` the links that started on the
// stack beneath the link awaiting them (run inline by its co_await) rather than from a queue.
task<int> inline_chain_of(scheduler& pool, int depth, std::uintptr_t awaiter_position, int& inline_starts) {
  return pool.launch("link", [&pool, depth, awaiter_position, &inline_starts]() -> coro<int> {
    std::uintptr_t position = stack_position();
    // A link run inline sits below its awaiter's retract, run_body and handler frames.
    if (position + 256 < awaiter_position) ++inline_starts;
    if (depth == 0) co_return 0;
    int below = co_await inline_chain_of(pool, depth - 1, position, inline_starts);
    co_return below + 1;
  });
}

}  // namespace

// Past the inline bound every link of a deep chain suspends anyway (the one beneath it
// does): running each link inline first only adds to the suspension's cost. Once an await
// was refused at the bound, the thread's awaits suspend at once until an inline run
// completes its task again, so only the first links (and a probe now and then) run inline.
TEST_CASE("coroutine: a chain deeper than the inline bound starts its links from a queue, not inline") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));  // this thread runs every link
  constexpr int depth = 20'000;
  int inline_starts = 0;
  CHECK(inline_chain_of(pool, depth, stack_position(), inline_starts).get_result() == depth);
  CAPTURE(inline_starts);
  CHECK(inline_starts < depth / 16);

  // And work first comes back: within a probe period, an await runs its task here again.
  task<int> inline_again = pool.launch("after the chain", [&pool]() -> coro<int> {
    int without_suspending = 0;
    for (int i = 0; i < 200; ++i) {
      detail::task_base* before = detail::current_task();
      co_await pool.launch("step", [] {});
      if (detail::current_task() == before) ++without_suspending;
    }
    co_return without_suspending;
  });
  CHECK(inline_again.get_result() >= 100);
}

TEST_CASE("coroutine: a canceled coroutine task is skipped; a running one sees the cancel after a suspension") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    cancellation_token canceled;
    canceled.cancel();
    std::atomic<int> started{0};
    task<int> skipped = pool.launch("skipped", [&]() -> coro<int> {
      started.fetch_add(1);
      co_return 1;
    }, canceled);
    skipped.wait();
    CHECK(skipped.has_exception());
    CHECK_THROWS_AS(skipped.get_result(), task_canceled);
    CHECK(started.load() == 0);

    if (workers == 0) continue;  // below, a worker must start the coroutine while this thread watches
    cancellation_token token;
    task_event gate("gate", pool);
    std::atomic<bool> suspended{false};
    task<bool> running = pool.launch("running", [gate, &suspended]() -> coro<bool> {
      bool before = is_current_work_canceled();
      suspended.store(true);
      co_await gate;
      co_return !before && is_current_work_canceled();
    }, token);
    while (!suspended.load()) std::this_thread::yield();
    token.cancel();
    gate.trigger();
    CHECK(running.get_result());
    CHECK_FALSE(is_current_work_canceled());
  }
}

TEST_CASE("coroutine: many coroutines awaiting tasks completed by other threads" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 2u, 4u, 8u, 64u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr int count = 300;
      std::vector<task<int>> coroutines;
      std::vector<task_event> gates;
      for (int i = 0; i < count; ++i) gates.emplace_back("gate", pool);
      for (int i = 0; i < count; ++i) {
        task<int> work = pool.launch("work", [i] { return i; });
        coroutines.push_back(pool.launch("awaiter", [work, gate = gates[static_cast<std::size_t>(i)]]() -> coro<int> {
          int first = co_await work;
          co_await gate;
          co_await yield();
          co_return first * 2;
        }));
      }
      std::thread trigger([&] {
        for (task_event& each : gates) each.trigger();
      });
      trigger.join();
      long sum = 0;
      for (task<int>& each : coroutines) sum += each.get_result();
      CHECK(sum == static_cast<long>(count) * (count - 1));
    }
  }
}

TEST_CASE("coroutine: the game thread waiting inside its own queue's item for a coroutine that resumes on it runs "
          "that resumption itself") {
  // An engine frame: an item of the game thread's queue waits for a coroutine whose next
  // step is sent back to that queue, which process_until_idle is processing beneath it.
  for (unsigned workers : test::worker_counts) {
    for (bool through_wait_all : {false, true}) {
      CAPTURE(workers);
      CAPTURE(through_wait_all);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      std::atomic<int> outcome{0};
      task<> frame = pool.launch("frame", [&pool, &outcome, through_wait_all] {
        task<int> hop = pool.launch("hop to game", []() -> coro<int> {
          co_await yield();  // elsewhere first, where there are workers
          co_await resume_on(named_thread::game);
          co_return scheduler::current_named_thread() == named_thread::game ? 7 : -1;
        });
        // Bounded, so that a wait that never runs the resumption fails instead of hanging.
        bool completed = through_wait_all ? wait_all(std::vector<task<int>>{hop}, std::chrono::seconds(5))
                                          : hop.wait(std::chrono::seconds(5));
        outcome = completed ? hop.get_result() : 0;
      }, on_thread(named_thread::game));
      pool.process_until_idle(named_thread::game);  // the frame's item runs inside this call
      CHECK(frame.is_completed());
      CHECK(outcome.load() == 7);
      pool.detach();
    }
  }
}

// --- fork-join between coroutines (magpie::fork, call, join) --------------------------------
