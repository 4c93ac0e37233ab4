// Suite "async": Unreal's Async, TFuture and TPromise on magpie (include/magpie/async.h):
// where each execution runs, futures (get keeps, consume empties, share, waits), promises
// (completion callback, broken promises), exceptions, misuse. Continuations (then, next)
// are test/future_next_test.cpp's.
#include "support.h"
#include "task_support.h"

#include <magpie/async.h>
#include <magpie/thread_pool.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace magpie;
using test::diagnostic_recorder;
using test::inside;
using test::no_leaks;
using test::reported;

TEST_SUITE("async") {

TEST_CASE("async: task_graph runs the callable as a task of the calling scheduler, on its workers") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    future<scheduler*> where =
        inside(pool, [] { return async(async_execution::task_graph, [] { return scheduler::current(); }); });
    CHECK(where.get() == &pool);  // with no workers, get() runs it here
    CHECK(where.is_valid());
    CHECK(where.get() == &pool);  // get() keeps the future valid
    if (workers > 0) {
      // Not waited for (a wait would run it here): a worker runs it.
      std::thread::id caller = std::this_thread::get_id();
      future<std::thread::id> ran_on = inside(pool, [] {
        return async(async_execution::task_graph, [] { return std::this_thread::get_id(); });
      });
      while (!ran_on.is_ready()) std::this_thread::yield();
      CHECK(ran_on.get() != caller);
    }
  }
}

TEST_CASE("async: task_graph_main_thread runs on the attached game thread") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  pool.attach(named_thread::game);
  std::thread::id game = std::this_thread::get_id();
  future<std::thread::id> ran_on = async(async_execution::task_graph_main_thread, [] { return std::this_thread::get_id(); });
  CHECK_FALSE(ran_on.is_ready());
  CHECK(pool.process_until_idle(named_thread::game) == 1);
  CHECK(ran_on.is_ready());
  CHECK(ran_on.get() == game);
  pool.detach();
}

TEST_CASE("async: thread runs on a thread of its own; thread_pool on the global queued thread pool") {
  std::thread::id caller = std::this_thread::get_id();
  future<std::thread::id> own = async(async_execution::thread, [] { return std::this_thread::get_id(); });
  CHECK(own.get() != caller);
  future<std::string> pooled = async(async_execution::thread_pool, [] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return std::string(name);
  });
  CHECK(pooled.get().rfind("global pool", 0) == 0);
}

TEST_CASE("async: the completion callback runs after the value is set, for every execution") {
  for (async_execution execution : {async_execution::task_graph, async_execution::thread, async_execution::thread_pool}) {
    CAPTURE(static_cast<int>(execution));
    std::atomic<bool> value_made{false};
    std::atomic<bool> callback_saw_value{false};
    std::atomic<int> callbacks{0};
    future<int> result = async(
        execution,
        [&] {
          value_made = true;
          return 5;
        },
        [&] {
          callback_saw_value = value_made.load();
          ++callbacks;
        });
    CHECK(result.get() == 5);
    while (callbacks.load() == 0) std::this_thread::yield();
    CHECK(callbacks.load() == 1);
    CHECK(callback_saw_value.load());
  }
}

TEST_CASE("async: a promise's completion callback runs during set_value, with the value visible") {
  no_leaks leaks;
  future<int>* watched = nullptr;
  bool ready_in_callback = false;
  int value_in_callback = 0;
  std::thread::id callback_thread;
  promise<int> answer([&] {
    ready_in_callback = watched->is_ready();
    value_in_callback = watched->get();
    callback_thread = std::this_thread::get_id();
  });
  future<int> later = answer.get_future();
  watched = &later;
  std::thread setter([&] { answer.set_value(42); });
  std::thread::id setter_id = setter.get_id();
  setter.join();
  CHECK(ready_in_callback);
  CHECK(value_in_callback == 42);
  CHECK(callback_thread == setter_id);
}

TEST_CASE("async: get() repeats, consume() moves the value out and empties the future, share() copies") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  future<std::unique_ptr<int>> boxed =
      inside(pool, [] { return async(async_execution::task_graph, [] { return std::make_unique<int>(9); }); });
  CHECK(*boxed.get() == 9);
  CHECK(*boxed.get() == 9);
  *boxed.get_mutable() = 10;
  std::unique_ptr<int> taken = boxed.consume();
  CHECK(*taken == 10);
  CHECK_FALSE(boxed.is_valid());
  CHECK_FALSE(boxed.is_ready());

  future<int> single = inside(pool, [] { return async(async_execution::task_graph, [] { return 3; }); });
  shared_future<int> shared = single.share();
  CHECK_FALSE(single.is_valid());
  shared_future<int> copy = shared;
  CHECK(shared.get() == 3);
  CHECK(copy.get() == 3);
  CHECK(copy.is_ready());

  future<void> nothing = inside(pool, [] { return async(async_execution::task_graph, [] {}); });
  nothing.get();
  CHECK(nothing.is_valid());
  nothing.consume();
  CHECK_FALSE(nothing.is_valid());
  nothing.reset();
}

TEST_CASE("async: set_value copies an lvalue and moves an rvalue") {
  no_leaks leaks;
  promise<std::string> copied;
  future<std::string> first = copied.get_future();
  std::string kept = "kept";
  copied.set_value(kept);
  CHECK(kept == "kept");
  CHECK(first.get() == "kept");
  promise<std::unique_ptr<int>> moved;
  future<std::unique_ptr<int>> second = moved.get_future();
  moved.set_value(std::make_unique<int>(5));
  CHECK(*second.get() == 5);
}

TEST_CASE("async: timed waits time out on a pending future and succeed once it is set") {
  no_leaks leaks;
  promise<int> pending;
  future<int> later = pending.get_future();
  CHECK_FALSE(later.wait_for(std::chrono::milliseconds(1)));
  CHECK_FALSE(later.wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(1)));
  CHECK_FALSE(later.wait_until(std::chrono::system_clock::now() - std::chrono::seconds(1)));
  pending.set_value(1);
  CHECK(later.wait_for(std::chrono::milliseconds(0)));
  CHECK(later.wait_until(std::chrono::steady_clock::now()));
  later.wait();
  future<int> invalid;
  CHECK_FALSE(invalid.wait_for(std::chrono::milliseconds(0)));
  invalid.wait();  // returns at once
}

TEST_CASE("async: exceptions are kept: get rethrows, next passes them down, then sees them, unasked is reported") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  future<int> failed = inside(pool, [] {
    return async(async_execution::task_graph, []() -> int { throw std::runtime_error("callable threw"); });
  });
  CHECK_THROWS_WITH_AS(failed.get(), "callable threw", std::runtime_error);
  CHECK_THROWS_WITH_AS(failed.get(), "callable threw", std::runtime_error);  // still there
  bool skipped = true;
  future<int> passed = std::move(failed).next([&](int value) {
    skipped = false;
    return value;
  });
  CHECK_THROWS_WITH_AS(passed.get(), "callable threw", std::runtime_error);
  CHECK(skipped);
  bool then_saw_it = false;
  future<void> handled = std::move(passed).then([&](future<int> upstream) {
    try {
      upstream.get();
    } catch (const std::runtime_error&) {
      then_saw_it = true;
    }
  });
  handled.get();
  CHECK(then_saw_it);
  CHECK(recorder.count() == 0);

  promise<int> explicit_error;
  future<int> errored = explicit_error.get_future();
  explicit_error.set_exception(std::make_exception_ptr(std::out_of_range("set_exception")));
  CHECK_THROWS_AS(errored.get(), std::out_of_range);

  // A future dropped with an exception nobody asked about: reported as unhandled.
  {
    future<int> dropped = inside(pool, [] {
      return async(async_execution::task_graph, []() -> int { throw std::runtime_error("nobody asked"); });
    });
    dropped.wait();
  }
  // The report comes as the task is freed, by whoever drops its last reference: the handle
  // above, or the worker that ran it, which may let go only after the wait returned.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (recorder.count() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  CHECK(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::unhandled_exception);
}

TEST_CASE("async: a broken promise is reported and its future holds broken_promise") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  future<int> orphan;
  {
    promise<int> forgotten;
    orphan = forgotten.get_future();
  }
  CHECK(recorder.count() == 1);
  CHECK(reported(recorder, "broken promise"));
  CHECK(orphan.is_ready());
  CHECK_THROWS_AS(orphan.get(), broken_promise);
}

TEST_CASE("async: setting a promise twice or asking for its future twice is reported") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  promise<void> once;
  future<void> first = once.get_future();
  future<void> second = once.get_future();
  CHECK_FALSE(second.is_valid());
  once.set_value();
  once.set_value();
  once.set_exception(std::make_exception_ptr(std::runtime_error("late")));
  CHECK(recorder.count() == 3);
  CHECK(reported(recorder, "get_future called twice"));
  CHECK(reported(recorder, "set_value on a promise already set"));
  CHECK(reported(recorder, "set_exception on a promise already set"));
  first.get();  // the first value stands
  promise<int> moved_from;
  promise<int> moved_to = std::move(moved_from);
  moved_to.set_value(1);
  CHECK(recorder.count() == 3);  // neither promise is broken: the value went through the moved-to one
}

TEST_CASE("async: async_pool runs on the given pool; abandoned work leaves broken_promise") {
  queued_thread_pool pool;
  REQUIRE(pool.create(1, 0, "async pool"));
  future<std::string> named = async_pool(pool, [] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return std::string(name);
  });
  CHECK(named.get().rfind("async pool", 0) == 0);

  // Hold the only thread, queue one more, destroy: the queued one is abandoned.
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  future<void> held = async_pool(pool, [&] {
    holding = true;
    release.wait(false);
  });
  while (!holding.load()) std::this_thread::yield();
  future<int> abandoned = async_pool(pool, [] { return 1; });
  std::thread destroyer([&] { pool.destroy(); });
  CHECK_THROWS_AS(abandoned.get(), broken_promise);
  release = true;
  release.notify_all();
  destroyer.join();
  held.get();
}

TEST_CASE("async: a wait for duration::max() or until time_point::max() waits for the value, over every scheduler") {
  using std::chrono::steady_clock;
  using std::chrono::system_clock;
  // Each wait, on a future whose value comes 50 ms later, returns true once it came.
  std::vector<std::function<bool(future<int>&)>> forever_waits = {
      [](future<int>& f) { return f.wait_for(std::chrono::nanoseconds::max()); },
      [](future<int>& f) { return f.wait_for(std::chrono::hours::max()); },
      [](future<int>& f) { return f.wait_for(std::chrono::duration<double>::max()); },
      [](future<int>& f) { return f.wait_until(steady_clock::time_point::max()); },
      [](future<int>& f) { return f.wait_until(system_clock::time_point::max()); },
      [](future<int>& f) {
        return f.wait_until(std::chrono::time_point<steady_clock, std::chrono::seconds>::max());
      },
      [](future<int>& f) { return f.share().wait_for(std::chrono::nanoseconds::max()); },
      [](future<int>& f) { return f.share().wait_until(steady_clock::time_point::max()); },
  };
  for (std::size_t which = 0; which < forever_waits.size(); ++which) {
    CAPTURE(which);
    promise<int> source;
    future<int> later = source.get_future();
    std::thread setter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      source.set_value(5);
    });
    CHECK(forever_waits[which](later));
    setter.join();
  }
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    future<int> later = inside(pool, [] {
      return async(async_execution::task_graph, [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return 5;
      });
    });
    CHECK(later.wait_for(std::chrono::nanoseconds::max()));
    CHECK(later.get() == 5);
    future<int> again = inside(pool, [] {
      return async(async_execution::task_graph, [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return 6;
      });
    });
    CHECK(again.wait_until(steady_clock::time_point::max()));
    CHECK(again.get() == 6);
  }
}

TEST_CASE("async: a promise made inside a task of a scheduler destroyed since is still set, with no report") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    std::optional<promise<int>> made;
    future<int> later;
    {
      scheduler pool(test::options_with(workers));
      inside(pool, [&] {
        made.emplace();
        later = made->get_future();
        return 0;
      });
    }
    future<int> doubled = std::move(later).next([](int value) { return value * 2; });  // attached outside
    made->set_value(21);
    CHECK(doubled.is_ready());
    CHECK(doubled.get() == 42);
    promise<void> unset;  // and one made under no scheduler of the test's, set from a thread
    future<void> done = unset.get_future();
    std::thread setter([&] { unset.set_value(); });
    setter.join();
    CHECK(done.wait_for(std::chrono::seconds(10)));
    CHECK_NOTHROW(done.get());
    CHECK(recorder.count() == 0);
  }
}

}  // TEST_SUITE

TEST_CASE("async: a wait for a promise's value by a scheduler's thread is reported as stalled after that scheduler's setting") {
  test::diagnostic_recorder recorder;
  scheduler_options options = test::options_with(1);
  options.stall_report_after = std::chrono::milliseconds(50);
  scheduler pool(options);
  promise<int> value;
  future<int> later = value.get_future();
  std::thread setter([&] {
    // Set once the wait was reported, or after 2 s, well short of the promise scheduler's
    // own 5 s (then the check below fails).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (recorder.count_naming("promise value") == 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    value.set_value(7);
  });
  int got = pool.execute([&] { return later.get(); });  // this thread works for `pool` meanwhile
  setter.join();
  CHECK(got == 7);
  CHECK(recorder.count_naming("promise value") == 1);
  for (const auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::stalled);
}

TEST_CASE("async: task_graph_main_thread from main with no game thread attached is reported, runs once attached") {
  // Its task runs only on the game thread: a wait for it from a thread when no thread is
  // attached as game would hang silently.
  test::diagnostic_recorder recorder;
  future<int> result = async(async_execution::task_graph_main_thread, [] { return 16; });
  CHECK_FALSE(result.wait_for(std::chrono::milliseconds(400)));
  std::size_t reported = 0;
  for (const auto& each : recorder.reports()) {
    if (each.kind == diagnostic_kind::misuse && each.message.find("game") != std::string::npos &&
        each.message.find("attached") != std::string::npos) {
      ++reported;
    }
  }
  CHECK(reported == 1);
  default_scheduler().attach(named_thread::game);
  CHECK(result.wait_for(std::chrono::seconds(10)));
  CHECK(result.get() == 16);
  default_scheduler().detach();
}
