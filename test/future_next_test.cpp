// Suite "future_next": continuations of magpie::future (include/magpie/async.h): where then
// and next run (on the completing thread, or at once), one per state, chains long enough
// to overflow a recursion, continuations whose scheduler is gone, exceptions and
// cancellations passed down, and next racing the completion of what it continues.
#include "support.h"
#include "task_support.h"

#include <magpie/async.h>

#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace magpie;
using test::diagnostic_recorder;
using test::inside;
using test::no_leaks;
using test::reported;

TEST_SUITE("future_next") {

TEST_CASE("future_next: continuations run on the thread that completes the value, or at once if it is complete") {
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

TEST_CASE("future_next: one continuation per state: a second then or next is reported and gives an invalid future") {
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

TEST_CASE("future_next: a chain of 100,000 next continuations completes in a loop, not a recursion") {
  no_leaks leaks;
  promise<long> head;
  future<long> chain = head.get_future();
  for (int i = 0; i < 100000; ++i) chain = std::move(chain).next([](long value) { return value + 1; });
  CHECK_FALSE(chain.is_ready());
  head.set_value(0);
  CHECK(chain.is_ready());
  CHECK(chain.get() == 100000);
}

TEST_CASE("future_next: a chain of 100,000 then continuations completes in a loop, not a recursion") {
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

TEST_CASE("future_next: a continuation whose scheduler is gone before the value is set is reported once and never runs") {
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

TEST_CASE("future_next: next on a future whose scheduler was destroyed reads the value it left, or passes task_never_ran down") {
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

TEST_CASE("future_next: next behind a canceled or failed task skips the callable and passes the exception down") {
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

TEST_CASE("future_next stress: continuations attached while another thread sets the values run once each" *
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

TEST_CASE("future_next stress: next on tasks completing on workers meanwhile, and waits that run them first, read each value once" *
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

TEST_CASE("future_next stress: next hands the future's handle to its link while the value completes on a worker" *
          doctest::test_suite("stress")) {
  // next gives the launch the future's handle (an rvalue prerequisite): the link keeps its
  // reference when it is the only handle, here raced by the value's completion on a worker
  // (which runs the continuation and lets go of the link); with a second handle kept, as a
  // task copy, the launch takes a reference of its own. Each value is read once, each state
  // freed once.
  for (int round = 0; round < test::stress_repeat(); ++round) {
    for (unsigned workers : test::wide_worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 4000;
      std::vector<future<long>> results;
      std::vector<task<long>> copies;
      results.reserve(count);
      for (int i = 0; i < count; ++i) {
        task<long> value = launch("value", [i] { return static_cast<long>(i); });
        if (i % 4 == 1) copies.push_back(value);
        future<long> continued = future<long>(std::move(value)).next([](long got) { return got * 2; });
        results.push_back(std::move(continued));
      }
      for (int i = 0; i < count; ++i) CHECK(results[static_cast<std::size_t>(i)].get() == 2L * i);
      for (std::size_t i = 0; i < copies.size(); ++i) CHECK(copies[i].get_result() == static_cast<long>(4 * i + 1));
      pool.detach();
    }
  }
}


}  // TEST_SUITE
