// Suite "async": Unreal's Async, TFuture and TPromise on magpie (include/magpie/async.h):
// where each execution runs, futures (get keeps, consume empties, share, waits),
// continuations (on the completing thread, or at once; one per state; long chains),
// promises (completion callback, broken promises), exceptions, misuse.
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
using test::no_leaks;

namespace {

bool reported(const diagnostic_recorder& recorder, const std::string& part) {
  for (const auto& each : recorder.reports()) {
    if (each.message.find(part) != std::string::npos) return true;
  }
  return false;
}

// inside runs `body` inside a task of `pool`, so that the free functions use `pool`.
template <class Body>
auto inside(scheduler& pool, Body body) {
  return std::move(pool.launch("test driver", std::move(body)).get_result());
}

}  // namespace

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

TEST_CASE("async: continuations run on the thread that completes the value, or at once if it is complete") {
  no_leaks leaks;
  std::thread::id caller = std::this_thread::get_id();
  promise<int> source;
  std::thread::id next_ran_on;
  std::thread::id then_ran_on;
  future<int> doubled = source.get_future().next([&](int value) {
    next_ran_on = std::this_thread::get_id();
    return value * 2;
  });
  future<std::string> text = std::move(doubled).then([&](future<int> value) {
    then_ran_on = std::this_thread::get_id();
    return std::to_string(value.get());
  });
  CHECK_FALSE(doubled.is_valid());  // then/next empty the future they continue
  CHECK_FALSE(text.is_ready());
  std::thread setter([&] { source.set_value(21); });
  std::thread::id setter_id = setter.get_id();
  setter.join();
  CHECK(text.is_ready());  // the continuations ran during set_value
  CHECK(text.get() == "42");
  CHECK(next_ran_on == setter_id);
  CHECK(then_ran_on == setter_id);

  // Already complete: the continuation runs at once, on the caller.
  std::thread::id immediate;
  future<int> ready(make_completed_task(7));
  future<int> plus = ready.next([&](int value) {
    immediate = std::this_thread::get_id();
    return value + 1;
  });
  CHECK(plus.is_ready());
  CHECK(immediate == caller);
  CHECK(plus.get() == 8);
}

TEST_CASE("async: one continuation per state: a second then or next is reported and gives an invalid future") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  promise<int> source;
  future<int> first = source.get_future();
  future<int> continued = first.next([](int value) { return value; });
  future<int> second = first.next([](int value) { return value; });
  future<void> third = first.then([](future<int>) {});
  CHECK_FALSE(second.is_valid());
  CHECK_FALSE(third.is_valid());
  CHECK(recorder.count() == 2);
  CHECK(reported(recorder, "future::next on an invalid future"));
  CHECK(reported(recorder, "future::then on an invalid future"));
  CHECK_THROWS_AS(second.get(), std::logic_error);
  CHECK(recorder.count() == 3);
  source.set_value(4);
  CHECK(continued.get() == 4);
}

TEST_CASE("async: a chain of 100,000 next continuations completes in a loop, not a recursion") {
  no_leaks leaks;
  promise<long> head;
  future<long> chain = head.get_future();
  for (int i = 0; i < 100000; ++i) chain = std::move(chain).next([](long value) { return value + 1; });
  CHECK_FALSE(chain.is_ready());
  head.set_value(0);
  CHECK(chain.is_ready());
  CHECK(chain.get() == 100000);
}

TEST_CASE("async: a chain of 100,000 then continuations completes in a loop, not a recursion") {
  no_leaks leaks;
  promise<long> head;
  future<long> chain = head.get_future();
  for (int i = 0; i < 100000; ++i) {
    chain = std::move(chain).then([](future<long> prior) { return prior.consume() + 1; });
  }
  CHECK_FALSE(chain.is_ready());
  head.set_value(0);
  CHECK(chain.is_ready());
  CHECK(chain.get() == 100000);
}

TEST_CASE("async: a continuation whose scheduler is gone before the value is set is reported once and never runs") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    promise<int> source;  // made under no scheduler of the test's: it outlives the pool
    future<int> head = source.get_future();
    std::atomic<bool> ran{false};
    future<int> continued;
    {
      scheduler pool(test::options_with(workers));
      continued = inside(pool, [&head, &ran] {
        return std::move(head).next([&ran](int value) {
          ran = true;
          return value;
        });
      });
    }
    source.set_value(1);
    CHECK_FALSE(ran.load());
    CHECK(continued.is_ready());
    CHECK_THROWS_AS(continued.get(), task_never_ran);
    REQUIRE(recorder.count() == 1);
    CHECK(recorder.reports()[0].kind == diagnostic_kind::never_ran);
  }
}

TEST_CASE("async: next on a future whose scheduler was destroyed reads the value it left, or passes task_never_ran down") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    future<std::string> finished;
    promise<int> release;
    future<int> gate = release.get_future();
    future<int> stranded;
    {
      scheduler pool(test::options_with(workers));
      finished = inside(pool, [] {
        return async(async_execution::task_graph, [] { return std::string(64, 'x'); });
      });
      finished.wait();
      // Behind a value that comes only after the pool is gone: its task never runs.
      stranded = inside(pool, [&gate] { return std::move(gate).next([](int value) { return value; }); });
    }
    release.set_value(5);
    // The continuations belong to the scheduler of this thread, which is alive.
    future<std::size_t> length = std::move(finished).next([](std::string text) { return text.size(); });
    CHECK(length.is_ready());
    CHECK(length.get() == 64);
    bool ran = false;
    future<int> after = std::move(stranded).next([&ran](int value) {
      ran = true;
      return value;
    });
    CHECK_THROWS_AS(after.get(), task_never_ran);
    CHECK_FALSE(ran);
    REQUIRE(recorder.count() == 1);
    CHECK(recorder.reports()[0].kind == diagnostic_kind::never_ran);
  }
}

TEST_CASE("async: next behind a canceled or failed task skips the callable and passes the exception down") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    cancellation_token token;
    token.cancel();
    bool canceled_ran = false;
    bool failed_ran = false;
    auto [canceled, failed] = inside(pool, [&] {
      future<int> skipped(launch("skipped", [] { return 1; }, token));
      future<int> threw(launch("threw", []() -> int { throw std::runtime_error("upstream"); }));
      return std::pair(std::move(skipped).next([&canceled_ran](int value) {
                         canceled_ran = true;
                         return value;
                       }),
                       std::move(threw).next([&failed_ran](int value) {
                         failed_ran = true;
                         return std::to_string(value);
                       }));
    });
    CHECK_THROWS_AS(canceled.get(), task_canceled);
    CHECK_THROWS_WITH_AS(failed.get(), "upstream", std::runtime_error);
    CHECK_FALSE(canceled_ran);
    CHECK_FALSE(failed_ran);
    CHECK(recorder.count() == 0);  // each exception was asked for, through the last future
  }
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

TEST_CASE("async stress: continuations attached while another thread sets the values run once each" *
          doctest::test_suite("stress")) {
  for (int round = 0; round < test::stress_repeat(); ++round) {
    no_leaks leaks;
    constexpr int count = 5000;
    std::vector<promise<int>> sources(count);
    std::vector<future<int>> heads(count);
    for (std::size_t i = 0; i < heads.size(); ++i) heads[i] = sources[i].get_future();
    std::atomic<int> runs{0};
    std::thread setter([&] {
      for (std::size_t i = 0; i < sources.size(); ++i) sources[i].set_value(static_cast<int>(i));
    });
    std::vector<future<int>> results(count);
    for (std::size_t i = 0; i < heads.size(); ++i) {
      results[i] = std::move(heads[i]).next([&runs](int value) {
        ++runs;
        return value * 3;
      });
    }
    setter.join();
    for (std::size_t i = 0; i < results.size(); ++i) CHECK(results[i].get() == 3 * static_cast<int>(i));
    CHECK(runs.load() == count);
  }
}

TEST_CASE("async stress: next on tasks completing on workers meanwhile, and waits that run them first, read each value once" *
          doctest::test_suite("stress")) {
  for (int round = 0; round < test::stress_repeat(); ++round) {
    for (unsigned workers : test::wide_worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 2000;
      std::atomic<int> runs{0};
      std::vector<future<std::string>> results;
      results.reserve(count);
      for (int i = 0; i < count; ++i) {
        // The value's task may complete on a worker before, during or after the next call.
        future<std::string> value = async(async_execution::task_graph, [i] { return std::string(40, 'a') + std::to_string(i); });
        future<std::string> continued = std::move(value).next([&runs](std::string text) {
          runs.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after every wait
          return text + "!";
        });
        if (i % 3 == 0) {
          // A wait now takes the value's task back (its prerequisite) and runs it here,
          // dropping the continuation's hold on it before the continuation runs.
          CHECK(continued.get() == std::string(40, 'a') + std::to_string(i) + "!");
        }
        results.push_back(std::move(continued));
      }
      for (int i = 0; i < count; ++i) CHECK(results[static_cast<std::size_t>(i)].get() == std::string(40, 'a') + std::to_string(i) + "!");
      CHECK(runs.load() == count);
      // Chains built while their heads complete on the workers.
      for (int i = 0; i < 200; ++i) {
        future<long> chain = async(async_execution::task_graph, [i] { return static_cast<long>(i); });
        for (int link = 0; link < 50; ++link) chain = std::move(chain).next([](long value) { return value + 1; });
        CHECK(chain.get() == i + 50);
      }
      pool.detach();
    }
  }
}

}  // TEST_SUITE

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
