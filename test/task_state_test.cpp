// Tests for include/magpie/detail/task_state.h — the num_locks transitions, one rule each.
#include <magpie/detail/task_state.h>

#include "support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

using state = magpie::detail::task_state<>;

TEST_SUITE("task_state") {

TEST_CASE("task_state: a new task holds the launch lock and cannot begin") {
  state task;
  CHECK(task.raw() == 1);
  CHECK_FALSE(task.try_begin_execution());
  CHECK_FALSE(task.has_begun());
  CHECK(task.unlock());  // the launch makes it ready
  CHECK(task.try_begin_execution());
  CHECK(task.has_begun());
}

TEST_CASE("task_state: only the last of the prerequisites and the launch makes it ready") {
  state task;
  task.add_locks(2);
  CHECK_FALSE(task.unlock());  // first prerequisite
  CHECK_FALSE(task.unlock());  // the launch
  CHECK_FALSE(task.try_begin_execution());
  CHECK(task.unlock());        // last prerequisite
  CHECK(task.try_begin_execution());
}

TEST_CASE("task_state: execution is claimed once — a second claim (a late retraction) fails") {
  state task;
  REQUIRE(task.unlock());
  CHECK(task.try_begin_execution());
  CHECK_FALSE(task.try_begin_execution());
}

TEST_CASE("task_state: the task completes when the body and every nested task are done") {
  state task;
  REQUIRE(task.unlock());
  REQUIRE(task.try_begin_execution());
  task.add_nested_lock();
  task.add_nested_lock();
  CHECK_FALSE(task.release_part());  // the body returns
  CHECK_FALSE(task.release_part());  // first nested task completes
  CHECK(task.release_part());        // the last one completes the parent
  CHECK(task.raw() == state::execution_flag);
}

TEST_CASE("task_state: a task begun finishes_open has finished once its body and nested tasks are done") {
  state plain;
  CHECK(plain.unlock());
  bool takes_prerequisites = false;
  CHECK(plain.try_begin_execution(takes_prerequisites, /*open=*/true));
  CHECK(takes_prerequisites);
  CHECK(plain.has_begun());
  CHECK_FALSE(plain.has_finished());
  CHECK_FALSE(plain.has_finished_for_comer());  // running: the comer's heavy barrier, then "not yet"
  plain.release_unshared_part();
  CHECK(plain.has_finished());
  CHECK(plain.has_finished_for_comer());
  plain.leave_reference_to_handles();
  CHECK(plain.has_finished());
  CHECK(plain.handles_hold_extra_reference());

  state nested;
  CHECK(nested.unlock());
  CHECK(nested.try_begin_execution(takes_prerequisites, /*open=*/true));
  nested.add_nested_lock();
  CHECK_FALSE(nested.release_part());  // the body: a nested task still runs
  CHECK_FALSE(nested.has_finished_for_comer());
  CHECK(nested.release_part());  // the nested task: the mark does not hide the last part
  CHECK(nested.has_finished());
  CHECK(nested.has_finished_for_comer());
  CHECK_FALSE(nested.try_begin_execution());
}

TEST_CASE("task_state: the prerequisites go to one owner — a waiter before execution, else the runner") {
  state unclaimed;
  unclaimed.add_locks(1);
  REQUIRE_FALSE(unclaimed.unlock());  // the launch
  REQUIRE(unclaimed.unlock());        // the prerequisite: ready
  bool takes = false;
  CHECK(unclaimed.try_begin_execution(takes));
  CHECK(takes);
  CHECK_FALSE(unclaimed.try_claim_prerequisites());  // begun: the runner has them

  state claimed;
  claimed.add_locks(1);
  REQUIRE_FALSE(claimed.unlock());
  CHECK(claimed.try_claim_prerequisites());  // a waiter, while a prerequisite still holds it
  CHECK_FALSE(claimed.try_claim_prerequisites());
  CHECK_FALSE(claimed.prerequisites_unclaimed());
  CHECK_FALSE(claimed.try_begin_execution(takes));
  CHECK(claimed.unlock());  // the claim bit is not a lock
  CHECK(claimed.is_ready());
  takes = true;
  CHECK(claimed.try_begin_execution(takes));
  CHECK_FALSE(takes);
  CHECK(claimed.raw() == (state::execution_flag | 1));
  CHECK(claimed.release_part());

  state never_begun;
  CHECK(never_begun.prerequisites_unclaimed());
}

}  // TEST_SUITE("task_state")

TEST_CASE("task_state: racing unlockers and claimers — one ready, one execution, one completion" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < 500 * magpie::test::stress_repeat(); ++repeat) {
    state task;
    constexpr int prerequisites = 3;
    task.add_locks(prerequisites);
    std::atomic<int> made_ready{0};
    std::atomic<int> executed{0};
    std::atomic<int> completed{0};
    auto claim_and_run = [&] {
      if (!task.try_begin_execution()) return;
      executed.fetch_add(1);
      task.add_nested_lock();
      if (task.release_part()) completed.fetch_add(1);  // the body
      if (task.release_part()) completed.fetch_add(1);  // the nested task
    };
    std::vector<std::thread> threads;
    for (int i = 0; i <= prerequisites; ++i) {  // three prerequisites and the launch
      threads.emplace_back([&] {
        if (task.unlock()) {
          made_ready.fetch_add(1);
          claim_and_run();
        }
      });
    }
    threads.emplace_back([&] {  // a waiter retracting while the others race
      for (int attempt = 0; attempt < 100 && !task.has_begun(); ++attempt) claim_and_run();
    });
    for (auto& thread : threads) thread.join();
    claim_and_run();  // if nobody ran it yet, the ready task is still claimable
    REQUIRE(made_ready.load() == 1);
    REQUIRE(executed.load() == 1);
    REQUIRE(completed.load() == 1);
  }
}
