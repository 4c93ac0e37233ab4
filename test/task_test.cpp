// Suite "task": launching, results, handles, placement, priorities, exceptions and this_task
// (prerequisites: test/task_prerequisites_test.cpp; a task's end, its scheduler's end and
// its memory: test/task_lifetime_test.cpp).
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("task: a launched task runs once and hands back its result") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> runs{0};
    task<int> answer = pool.launch("answer", [&] {
      runs.fetch_add(1);
      return 42;
    });
    CHECK(answer.is_valid());
    CHECK(answer.get_result() == 42);
    CHECK(answer.is_completed());
    CHECK_FALSE(answer.has_exception());
    CHECK(runs.load() == 1);
    CHECK(std::string(answer.name()) == "answer");
  }
}

TEST_CASE("task: runs_on names the named thread a task was placed on, and nothing otherwise") {
  scheduler pool(test::options_with(1));
  pool.attach(named_thread::game);
  task<> anywhere = pool.launch("anywhere", [] {});
  task<> on_render = pool.launch("on render", [] {}, on_thread(named_thread::render, thread_queue::local, true));
  task<> on_game = pool.launch("on game", [] {}, on_thread(named_thread::game));
  CHECK_FALSE(anywhere.runs_on().has_value());
  REQUIRE(on_render.runs_on().has_value());
  CHECK(*on_render.runs_on() == named_thread::render);
  REQUIRE(on_game.runs_on().has_value());
  CHECK(*on_game.runs_on() == named_thread::game);
  CHECK_FALSE(task<>().runs_on().has_value());
  on_game.wait();
  anywhere.wait();
  pool.detach();
  pool.attach(named_thread::render);
  on_render.wait();
  pool.detach();
}

// The handle's task object, the slot it keeps it in, a handle made from a task object and
// the scheduler's work-item queueing are magpie's own (detail::task_access,
// detail::schedule_item), not part of what a user's code can call.
template <class Handle>
concept exposes_task_object = requires(const Handle& handle, magpie::detail::task_base* base) {
  handle.base();
  handle.base_slot();
  Handle::adopt(base);
};
template <class Pool>
concept exposes_work_items = requires(Pool& pool, magpie::detail::work_item* item) { pool.schedule(item); };
static_assert(!exposes_task_object<task<>> && !exposes_task_object<task<int>>);
static_assert(!exposes_work_items<scheduler>);

TEST_CASE("task: the placement's named thread, queue and priority read back as placed") {
  using namespace magpie::detail;
  for (bool high : {false, true}) {
    for (thread_queue queue : {thread_queue::main, thread_queue::local}) {
      for (named_thread thread : {named_thread::game, named_thread::render, named_thread::user(3)}) {
        const std::uint8_t packed = on_thread(thread, queue, high).target();
        CHECK(packed == target_of(thread, queue, high));
        CHECK(target_thread(packed) == thread);
        CHECK(target_queue(packed) == queue);
        CHECK(target_is_high(packed) == high);
      }
    }
  }
  CHECK(placement(priority::high).target() == target_none);
}

TEST_CASE("task: an invalid handle counts as completed; get_result on it is reported and throws") {
  test::diagnostic_recorder recorder;
  task<int> nothing;
  CHECK_FALSE(nothing.is_valid());
  CHECK(nothing.is_completed());
  nothing.wait();
  CHECK(nothing.wait(std::chrono::milliseconds(0)));
  CHECK_THROWS_AS(nothing.get_result(), std::logic_error);
  CHECK(recorder.count() == 1);
}

TEST_CASE("task: handles copy, move and convert to task<void>; the result lives as long as the task") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<std::string> text = pool.launch("text", [] { return std::string(100, 'x'); });
  task<> plain = text;  // the same task
  CHECK(plain == static_cast<const task<>&>(text));
  task<std::string> moved = std::move(text);
  CHECK_FALSE(text.is_valid());
  plain.wait();
  CHECK(moved.get_result().size() == 100);
  moved.get_result() += "y";  // get_result is a reference to the kept result
  CHECK(moved.get_result().size() == 101);
}

TEST_CASE("task: move-only results and move-only bodies") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  auto owned = std::make_unique<int>(7);
  task<std::unique_ptr<int>> made = pool.launch("move-only", [owned = std::move(owned)]() mutable {
    return std::move(owned);
  });
  REQUIRE(made.get_result() != nullptr);
  CHECK(*made.get_result() == 7);
}

TEST_CASE("task: the body's captures are destroyed before completion is published") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  for (int round = 0; round < 200; ++round) {
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    task<> holder = pool.launch("holder", [keep = std::move(alive)] { (void)keep; });
    task<> observer = pool.launch("observer", [watch] { CHECK(watch.expired()); }, holder);
    observer.wait();
    CHECK(watch.expired());
  }
}

TEST_CASE("task: run_inline runs on the thread that removes the last lock") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::thread::id here = std::this_thread::get_id();
  task<std::thread::id> immediate = pool.launch("inline", [] { return std::this_thread::get_id(); }, run_inline);
  CHECK(immediate.is_completed());  // ran inside launch
  CHECK(immediate.get_result() == here);

  task_event gate("gate", pool);
  task<std::thread::id> later = pool.launch("inline after", [] { return std::this_thread::get_id(); }, gate, run_inline);
  CHECK_FALSE(later.is_completed());
  std::thread other([&] { gate.trigger(); });
  std::thread::id other_id = other.get_id();
  other.join();
  CHECK(later.is_completed());
  CHECK(later.get_result() == other_id);
}

TEST_CASE("task: on_thread runs on the named thread, in the order sent") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  pool.attach(named_thread::game);
  std::vector<int> order;
  std::thread::id game = std::this_thread::get_id();
  std::vector<task<>> sent;
  for (int i = 0; i < 20; ++i) {
    sent.push_back(pool.launch("game work", [&, i] {
      CHECK(std::this_thread::get_id() == game);
      order.push_back(i);
    }, on_thread(named_thread::game)));
  }
  CHECK(pool.process_until_idle(named_thread::game) == 20);
  for (int i = 0; i < 20; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  // A worker's task bound to the game thread waits there; the game thread's wait runs it.
  task<> from_worker = pool.launch("launcher", [&] {
    return pool.launch("bound", [&] { CHECK(std::this_thread::get_id() == game); }, on_thread(named_thread::game));
  }).get_result();
  from_worker.wait();
  pool.detach();
}

namespace {
thread_local int worker_kind_here = -1;  // set by on_worker_start: 0 foreground, 1 background
}

TEST_CASE("task: priorities — background work runs on background workers, high before queued normal work") {
  no_leaks leaks;
  scheduler_options options;
  options.workers = 2;  // one foreground worker and one background worker
  options.background_workers = 1;
  options.on_worker_start = [](const worker_info& info) {
    worker_kind_here = info.kind == worker_kind::background ? 1 : 0;
  };
  scheduler pool(options);
  // Polled, not waited for: a waiting thread would retract and run them itself.
  std::vector<int> kinds(60, -1);
  std::atomic<int> ran{0};
  std::vector<task<>> background;
  int index = 0;
  for (priority p : {priority::background_high, priority::background_normal, priority::background_low}) {
    for (int i = 0; i < 20; ++i, ++index) {
      background.push_back(pool.launch("background", [&kinds, &ran, index] {
        kinds[static_cast<std::size_t>(index)] = worker_kind_here;
        ran.fetch_add(1);
      }, p));
    }
  }
  while (ran.load() < 60) std::this_thread::yield();
  for (int kind : kinds) CHECK(kind == 1);

  // Occupy the only worker, queue normal work, then high work: high runs first. (A second
  // scheduler without a background worker, which would take the normal work at once.)
  scheduler_options single_worker;
  single_worker.workers = 1;
  single_worker.background_workers = 0;
  scheduler ordered(single_worker);
  std::atomic<bool> release{false};
  std::atomic<bool> occupied{false};
  std::vector<int> order;
  std::atomic<int> next{0};
  task<> blocker = ordered.launch("blocker", [&] {
    occupied.store(true);
    while (!release.load()) std::this_thread::yield();
  });
  while (!occupied.load()) std::this_thread::yield();
  std::vector<int> slots(6, -1);
  std::vector<task<>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(ordered.launch("normal", [&, i] { slots[static_cast<std::size_t>(next++)] = i; }));
  for (int i = 3; i < 6; ++i) queued.push_back(ordered.launch("high", [&, i] { slots[static_cast<std::size_t>(next++)] = i; }, priority::high));
  release.store(true);
  blocker.wait();
  while (next.load() < 6) std::this_thread::yield();  // only the worker runs them: no retraction here
  for (int position = 0; position < 3; ++position) CHECK(slots[static_cast<std::size_t>(position)] >= 3);
  wait_all(queued);
}

TEST_CASE("task: free functions use the running task's scheduler, else the attached one, else the default") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<scheduler*> inner = pool.launch("outer", [] {
    return magpie::launch("inner", [] { return scheduler::current(); }).get_result();
  });
  CHECK(inner.get_result() == &pool);
  pool.attach(named_thread::render);
  task<scheduler*> attached = magpie::launch("attached", [] { return scheduler::current(); });
  CHECK(attached.get_result() == &pool);
  pool.detach();
  task<scheduler*> fallback = magpie::launch("fallback", [] { return scheduler::current(); });
  CHECK(fallback.get_result() == &default_scheduler());
}

TEST_CASE("task: a body's exception is kept; wait never throws, get_result rethrows, subsequents still run") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task<int> failing = pool.launch("failing", []() -> int { throw std::runtime_error("broken"); });
    task<bool> after = pool.launch("after", [failing] { return failing.has_exception(); }, failing);
    failing.wait();
    CHECK(failing.is_completed());
    CHECK(failing.has_exception());
    CHECK_THROWS_WITH_AS(failing.get_result(), "broken", std::runtime_error);
    CHECK(after.get_result());
  }
}

TEST_CASE("task: an exception nobody asked about is reported as unhandled, by task name") {
  test::diagnostic_recorder recorder;
  {
    no_leaks leaks;
    scheduler pool(test::options_with(1));
    pool.launch("fire and forget", [] { throw std::runtime_error("lost"); });
    task<> observed = pool.launch("observed", [] { throw std::runtime_error("seen"); });
    observed.wait();
    CHECK(observed.has_exception());
  }
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == diagnostic_kind::unhandled_exception);
  CHECK(reports[0].message.find("fire and forget") != std::string::npos);
  CHECK(reports[0].message.find("lost") != std::string::npos);
}

TEST_CASE("task: this_task hands a body its own handle, and nothing outside task bodies") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    CHECK_FALSE(this_task().is_valid());
    task<> seen_inside;
    task<> outer = pool.launch("outer", [&] { seen_inside = this_task(); });
    outer.wait();
    CHECK(seen_inside == outer);
    CHECK(std::string(seen_inside.name()) == "outer");
    // A handle made inside keeps the task alive after every other handle is gone, and the
    // task still completes: the completion looks at the handles when it happens.
    task<> kept;
    pool.launch("dropped at once", [&] { kept = this_task(); }).wait();
    CHECK(kept.is_completed());
    CHECK(std::string(kept.name()) == "dropped at once");
    seen_inside = {};
    kept = {};
    // A fire-and-forget task (its handle dropped at launch) makes a handle to itself and
    // chains a follower behind it: the follower runs after it.
    std::atomic<int> order{0};
    std::atomic<int> follower_saw{-1};
    task<> follower;
    std::atomic<bool> follower_set{false};
    pool.launch("forgotten", [&] {
      follower = pool.launch("follower", [&] { follower_saw = order.load(); }, this_task());
      follower_set = true;
      order = 1;
    });
    while (!follower_set.load()) pool.try_run_one();
    follower.wait();
    CHECK(follower_saw.load() == 1);
    follower = {};
  }
}

TEST_CASE("task: make_completed_task is completed at once") {
  no_leaks leaks;
  task<int> ready = make_completed_task(5);
  CHECK(ready.is_completed());
  CHECK(ready.get_result() == 5);
  task<std::string> text = make_completed_task<std::string>(3, 'a');
  CHECK(text.get_result() == "aaa");
}
