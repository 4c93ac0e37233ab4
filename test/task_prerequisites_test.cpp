// Suite "task_prerequisites": what links a task to the tasks it waits for: prerequisites
// as tasks, events and ranges, their release once the task starts (or, for an inline task,
// once the completion that ran it ends), a chain's hops, a prerequisite handed over by
// rvalue, and subsequents linked while their prerequisite completes.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <ranges>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("task_prerequisites: a task runs only after all its prerequisites, given as tasks, events and ranges") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> finished{0};
    std::vector<task<int>> parts;
    for (int i = 0; i < 10; ++i) {
      parts.push_back(pool.launch("part", [&, i] {
        finished.fetch_add(1);
        return i;
      }));
    }
    task_event gate("gate", pool);
    task<> single = pool.launch("single", [&] { finished.fetch_add(1); });
    std::atomic<int> seen_when_run{-1};
    task<int> total = pool.launch("total", [&] {
      seen_when_run.store(finished.load());
      int sum = 0;
      for (auto& part : parts) sum += part.get_result();
      return sum;
    }, parts);
    task<> after = pool.launch("after", [&] { CHECK(total.is_completed()); CHECK(gate.is_completed()); },
                               prerequisites(total, gate, single, task<>()));
    CHECK_FALSE(after.wait(std::chrono::milliseconds(1)));  // the gate is shut
    gate.trigger();
    after.wait();
    CHECK(total.get_result() == 45);
    CHECK(seen_when_run.load() >= 10);
  }
}

TEST_CASE("task_prerequisites: prerequisites from a range that makes its handles as it is read are kept until linked") {
  // Each handle such a range yields is a temporary: without the buffer keeping it, a
  // prerequisite that completed meanwhile could be freed before the launch linked to it.
  for (unsigned workers : {0u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    for (int round = 0; round < 200; ++round) {
      std::atomic<int> finished{0};
      auto launched = std::views::iota(0, 16) | std::views::transform([&](int) {
                        return pool.launch("made while read", [&finished] { finished.fetch_add(1); });
                      });
      int seen = -1;
      pool.launch("after", [&] { seen = finished.load(); }, launched).wait();
      CHECK(seen == 16);
    }
  }
}

TEST_CASE("task_prerequisites: prerequisites are released once the task starts") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));  // one thread: deterministic
  std::int64_t before = detail::live_tasks();
  std::int64_t during = -1;
  task<> starts;
  {
    task_event gate("gate", pool);
    starts = pool.launch("starts", [&] { during = detail::live_tasks(); }, gate);
    gate.trigger();
  }  // the gate now lives only through `starts`'s reference to it
  CHECK(detail::live_tasks() == before + 2);
  starts.wait();
  CHECK(during == before + 1);  // the gate was released before the body ran
}

TEST_CASE("task_prerequisites: a chain runs hop by hop, whether or not anything else holds the hops") {
  // Each hop begins as its prerequisite's completion removes its last lock, and the runner
  // drops both its references to the finished hop at once (lib/tasks/task.cpp, run_queued):
  // the last ones, or not, when the caller or the next body keeps a handle to it.
  enum class holders { none, caller, next_body };
  for (unsigned workers : {0u, 2u}) {
    for (holders held : {holders::none, holders::caller, holders::next_body}) {
      CAPTURE(workers);
      CAPTURE(static_cast<int>(held));
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr int hops = 5000;
      std::vector<task<int>> kept;
      std::vector<int> order;
      task_event gate("gate", pool);
      task<int> last = pool.launch("first", [&order] {
        order.push_back(0);
        return 0;
      }, gate);
      for (int i = 1; i < hops; ++i) {
        if (held == holders::caller) kept.push_back(last);
        if (held == holders::next_body) {
          last = pool.launch("hop", [&order, before = last, i] {
            order.push_back(i);
            return before.get_result() + 1;
          }, last);
        } else {
          last = pool.launch("hop", [&order, i] {
            order.push_back(i);
            return i;
          }, last);
        }
      }
      gate.trigger();
      CHECK(last.get_result() == hops - 1);
      REQUIRE(order.size() == static_cast<std::size_t>(hops));
      for (int i = 0; i < hops; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
      for (std::size_t i = 0; i < kept.size(); ++i) CHECK(kept[i].get_result() == static_cast<int>(i));
    }
  }
}

TEST_CASE("task_prerequisites: a prerequisite handed over by rvalue empties the handle; the task still runs after it") {
  // The link keeps the handle's reference (lib/tasks/task_launch.cpp, link_only_prerequisite)
  // when it is the prerequisite's only handle; else, or when the prerequisite is complete
  // already, the launch holds the handle until it returns and then lets it go.
  for (unsigned workers : test::worker_counts) {
    for (placement where : {placement(), run_inline}) {
      CAPTURE(workers);
      CAPTURE(where.kind() == detail::task_kind::inline_run);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<int> step{0};
      task_event gate("gate", pool);
      task<int> first = pool.launch("first", [&step] { return step.fetch_add(1) == 0 ? 5 : -1; }, gate);
      task<int> second = pool.launch("second", [&step] { return step.fetch_add(1) == 1 ? 6 : -1; }, std::move(first), where);
      CHECK_FALSE(first.is_valid());  // NOLINT(bugprone-use-after-move): emptied by the launch
      CHECK_FALSE(second.is_completed());
      // A prerequisite with another handle: the launch takes the moved one, the copy stays.
      task<int> shared = pool.launch("shared", [] { return 7; }, gate);
      task<int> copy = shared;
      task<int> third = pool.launch("third", [&copy] { return copy.get_result() + 1; }, std::move(shared), where);
      CHECK_FALSE(shared.is_valid());  // NOLINT(bugprone-use-after-move)
      CHECK(copy.is_valid());
      gate.trigger();
      CHECK(second.get_result() == 6);
      CHECK(third.get_result() == 8);
      CHECK(copy.get_result() == 7);
      // Complete already, or invalid: the task runs at once (inline) or soon (queued).
      task<int> done = make_completed_task(3);
      task<int> after_done = pool.launch("after done", [] { return 4; }, std::move(done), where);
      CHECK_FALSE(done.is_valid());  // NOLINT(bugprone-use-after-move)
      CHECK(after_done.get_result() == 4);
      task<int> nothing;
      CHECK(pool.launch("after nothing", [] { return 9; }, std::move(nothing), where).get_result() == 9);
    }
  }
}

TEST_CASE("task_prerequisites: an inline task's one prerequisite is freed once the completion that ran the task ends") {
  // The completer takes over the task's reference to the prerequisite and drops it with its
  // own (lib/tasks/task.cpp, release_subsequents): nothing of the prerequisite is left after.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::int64_t before = detail::live_tasks();
    task<> last;
    {
      task_event gate("gate", pool);
      task<int> first = pool.launch("first", [] { return 1; }, gate);
      last = pool.launch("inline", [] {}, first, run_inline);
      gate.trigger();
    }  // the gate's and first's handles go: only `last`'s reference holds first now
    last.wait();
    // first and the gate go with their completions (the gate's at once, first's at the end of
    // the completion that ran `last`, on whichever thread ran first).
    for (int i = 0; i < 10000 && detail::live_tasks() != before + 1; ++i) std::this_thread::yield();
    CHECK(detail::live_tasks() == before + 1);
  }
}

TEST_CASE("task_prerequisites stress: a subsequent launched just before the prerequisite's last handle goes always runs" *
          doctest::test_suite("stress")) {
  // A task with no handle left is closed without a locked exchange (lib/tasks/task.cpp,
  // nobody_can_add_subsequents). Here the prerequisite completes on a worker while this
  // thread pushes a subsequent through its last handle and drops it: an edge lost to a
  // close that ignored the push would leave its subsequent waiting for good. The window
  // between the close's load and store is too narrow to hit reliably here; the model
  // test/model/task_close_model.cpp explores it exhaustively.
  for (unsigned workers : {1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    const int rounds = 20000 * test::stress_repeat();
    std::atomic<int> ran{0};
    std::vector<task<>> subsequents;
    subsequents.reserve(static_cast<std::size_t>(rounds));
    std::vector<std::atomic<bool>> go(static_cast<std::size_t>(rounds));
    for (std::size_t i = 0; i < go.size(); ++i) {
      // The body ends as the push begins, so that the completion's close races the push.
      task<> prerequisite = pool.launch("prerequisite", [&flag = go[i]] {
        while (!flag.load()) detail::cpu_relax();
      });
      go[i].store(true);
      subsequents.push_back(pool.launch("subsequent", [&ran] { ran.fetch_add(1); }, prerequisite));
    }  // each prerequisite's last handle goes here, as it completes
    CHECK(wait_all(subsequents, std::chrono::seconds(30)));
    CHECK(ran.load() == rounds);
  }
}

TEST_CASE("task_prerequisites stress: a prerequisite handed over by rvalue while it completes on a worker is freed once" *
          doctest::test_suite("stress")) {
  // The launch links first and uncounts the handle after (task_base.h, "Who frees a task"):
  // meanwhile the prerequisite may complete on a worker, run the inline subsequent and let
  // go of the link's reference. Whichever of the two leaves the count at zero frees it,
  // once (ASan: no use after free; no_leaks: nothing left).
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    const int rounds = 20000 * test::stress_repeat();
    std::atomic<int> ran{0};
    std::vector<task<int>> subsequents;
    subsequents.reserve(static_cast<std::size_t>(rounds));
    std::vector<std::atomic<bool>> go(static_cast<std::size_t>(rounds));
    for (std::size_t i = 0; i < go.size(); ++i) {
      task<int> prerequisite = pool.launch("prerequisite", [&flag = go[i], i] {
        while (!flag.load()) detail::cpu_relax();
        return static_cast<int>(i);
      });
      go[i].store(true);
      subsequents.push_back(pool.launch("subsequent", [&ran] { return ran.fetch_add(1) >= 0 ? 1 : 0; },
                                        std::move(prerequisite), i % 2 == 0 ? run_inline : placement()));
      CHECK_FALSE(prerequisite.is_valid());  // NOLINT(bugprone-use-after-move)
    }
    CHECK(wait_all(subsequents, std::chrono::seconds(30)));
    CHECK(ran.load() == rounds);
  }
}
