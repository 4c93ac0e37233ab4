// Suite "cancellation": tokens, skipped tasks, the current work's token, pipes.
#include "support.h"
#include "task_support.h"

#include <magpie/cancellation.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("cancellation: a task canceled before it starts skips its body, holds task_canceled, and its subsequents run") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    cancellation_token token;
    task_event gate("gate", pool);
    std::atomic<int> runs{0};
    task<int> skipped = pool.launch("skipped", [&] { runs.fetch_add(1); return 1; }, prerequisites(gate), token);
    std::atomic<bool> saw_exception{false};
    task<> after = pool.launch("after", [&] { saw_exception.store(skipped.has_exception()); }, prerequisites(skipped));
    token.cancel();
    gate.trigger();
    after.wait();
    CHECK(skipped.is_completed());
    CHECK(skipped.has_exception());
    CHECK_THROWS_AS(skipped.get_result(), task_canceled);
    CHECK(saw_exception.load());
    CHECK(runs.load() == 0);
  }
}

TEST_CASE("cancellation: a token canceled before launch skips the body of every placement and prerequisite form") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  cancellation_token token;
  token.cancel();
  std::atomic<int> runs{0};
  task<> plain = pool.launch("plain", [&] { runs.fetch_add(1); }, token);
  task<> placed = pool.launch("placed", [&] { runs.fetch_add(1); }, priority::high, token);
  task<> behind = pool.launch("behind", [&] { runs.fetch_add(1); }, prerequisites(plain), token);
  task<> both = pool.launch("both", [&] { runs.fetch_add(1); }, prerequisites(plain), run_inline, token);
  task<> free_function = launch("free function", [&] { runs.fetch_add(1); }, token);
  for (const task<>& each : {plain, placed, behind, both, free_function}) {
    each.wait();
    CHECK(each.has_exception());
  }
  CHECK(runs.load() == 0);
}

TEST_CASE("cancellation: a running body sees is_current_work_canceled and completes with its result") {
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    cancellation_token token;
    std::atomic<bool> started{false};
    task<int> running = pool.launch("running", [&] {
      CHECK_FALSE(is_current_work_canceled());
      started.store(true);
      while (!is_current_work_canceled()) std::this_thread::yield();
      return 7;
    }, token);
    while (!started.load()) std::this_thread::yield();
    token.cancel();
    CHECK(running.get_result() == 7);
    CHECK_FALSE(running.has_exception());
  }
}

TEST_CASE("cancellation: is_current_work_canceled is false outside work carrying a token, and scopes nest") {
  CHECK_FALSE(is_current_work_canceled());
  cancellation_token outer_token;
  cancellation_token inner_token;
  inner_token.cancel();
  {
    cancellation_token_scope outer(outer_token);
    CHECK_FALSE(is_current_work_canceled());
    {
      cancellation_token_scope inner(inner_token);
      CHECK(is_current_work_canceled());
    }
    CHECK_FALSE(is_current_work_canceled());
    outer_token.cancel();
    CHECK(is_current_work_canceled());
  }
  CHECK_FALSE(is_current_work_canceled());
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::atomic<bool> seen_inside{true};
  pool.launch("no token", [&] { seen_inside.store(is_current_work_canceled()); }).wait();
  CHECK_FALSE(seen_inside.load());
}

TEST_CASE("cancellation: a token shared by a graph stops the rest of it, and canceling twice is harmless") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    cancellation_token token;
    std::atomic<int> runs{0};
    std::vector<task<>> chain;
    chain.push_back(pool.launch("first", [&] {
      runs.fetch_add(1);
      token.cancel();
      token.cancel();
    }, token));
    for (int i = 0; i < 20; ++i) {
      chain.push_back(pool.launch("link", [&] { runs.fetch_add(1); }, prerequisites(chain.back()), token));
    }
    chain.back().wait();
    CHECK(runs.load() == 1);
    CHECK_FALSE(chain.front().has_exception());
    for (std::size_t i = 1; i < chain.size(); ++i) CHECK(chain[i].has_exception());
    CHECK(token.is_canceled());
  }
}

TEST_CASE("cancellation: a pipe skips its canceled tasks in order and stays consistent") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    magpie::pipe serial("serial", pool);
    cancellation_token canceled;
    canceled.cancel();
    cancellation_token kept;
    std::mutex order_mutex;
    std::vector<int> order;
    std::vector<task<>> launched;
    for (int i = 0; i < 12; ++i) {
      auto record = [&, i] {
        std::lock_guard lock(order_mutex);
        order.push_back(i);
      };
      launched.push_back(i % 3 == 1 ? serial.launch("skipped", record, canceled) : serial.launch("kept", record, kept));
    }
    wait_all(launched);
    CHECK(serial.wait_until_empty());
    CHECK_FALSE(serial.has_work());
    CHECK(order == std::vector<int>{0, 2, 3, 5, 6, 8, 9, 11});
    for (int i = 0; i < 12; ++i) CHECK(launched[static_cast<std::size_t>(i)].has_exception() == (i % 3 == 1));
    // The pipe still runs what comes after.
    CHECK(serial.launch("later", [] { return 5; }).get_result() == 5);
  }
}

TEST_CASE("cancellation: a skipped task whose handle is dropped unread is not reported as an unhandled exception") {
  test::diagnostic_recorder recorder;
  {
    no_leaks leaks;
    scheduler pool(test::options_with(1));
    cancellation_token token;
    token.cancel();
    task_event done("done", pool);
    {
      task<> dropped = pool.launch("dropped", [] {}, token);
      done.add_prerequisites(dropped);
    }
    done.trigger();
    done.wait();
  }
  CHECK(recorder.count() == 0);
}

TEST_CASE("cancellation: a skipped task destroys its captures and never the result it did not make") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  cancellation_token token;
  token.cancel();
  auto captured = std::make_shared<int>(3);
  std::weak_ptr<int> watch = captured;
  task<std::vector<int>> skipped = pool.launch("skipped", [captured] { return std::vector<int>(100, *captured); }, token);
  captured.reset();
  skipped.wait();
  CHECK(watch.expired());
  CHECK_THROWS_AS(skipped.get_result(), task_canceled);
}

TEST_CASE("cancellation: cancel racing launches leaves every task either run or skipped, never both" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      cancellation_token token;
      constexpr int count = 2000;
      std::vector<std::atomic<int>> runs(count);
      std::vector<task<int>> launched;
      launched.reserve(count);
      std::thread canceler([&] {
        std::this_thread::yield();
        token.cancel();
      });
      for (int i = 0; i < count; ++i) {
        launched.push_back(pool.launch("racing", [&runs, i] { runs[static_cast<std::size_t>(i)].fetch_add(1); return i; }, token));
      }
      canceler.join();
      wait_all(launched);
      for (int i = 0; i < count; ++i) {
        const task<int>& each = launched[static_cast<std::size_t>(i)];
        if (each.has_exception()) {
          CHECK(runs[static_cast<std::size_t>(i)].load() == 0);
        } else {
          CHECK(runs[static_cast<std::size_t>(i)].load() == 1);
          CHECK(each.get_result() == i);
        }
      }
    }
  }
}

TEST_CASE("cancellation: a skipped nested task hands task_canceled on to its parent") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    cancellation_token token;
    token.cancel();
    task<> parent = pool.launch("parent", [&] { add_nested(launch("skipped child", [] {}, token)); });
    parent.wait();
    CHECK(parent.has_exception());
    CHECK_THROWS_AS(parent.get_result(), task_canceled);
  }
}
