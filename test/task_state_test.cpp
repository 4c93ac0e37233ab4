// Tests for include/magpie/detail/task_state.h — the num_locks transitions, one rule each.
#include <magpie/detail/task_state.h>

#include "support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

using state = magpie::detail::task_state<>;
using magpie::detail::begin_outcome;
using magpie::detail::exclusive_access;
using magpie::detail::part_outcome;
using magpie::detail::unlock_outcome;

TEST_SUITE("task_state") {

TEST_CASE("task_state: a new task holds the launch lock and cannot begin") {
  state task;
  CHECK(task.raw() == 1);
  CHECK(task.try_begin() == begin_outcome::refused);
  CHECK_FALSE(task.has_begun());
  CHECK(task.remove_locks() == unlock_outcome::ready);  // the launch makes it ready
  CHECK(task.try_begin() == begin_outcome::began_holding_prerequisites);
  CHECK(task.has_begun());
}

TEST_CASE("task_state: only the last of the prerequisites and the launch makes it ready") {
  state task;
  task.add_locks(2);
  CHECK(task.remove_locks() == unlock_outcome::locked);         // first prerequisite
  CHECK(task.remove_locks() == unlock_outcome::one_lock_left);  // the launch
  CHECK(task.try_begin() == begin_outcome::refused);
  CHECK(task.remove_locks() == unlock_outcome::ready);  // last prerequisite
  CHECK(began(task.try_begin()));
}

TEST_CASE("task_state: locks found complete go in one removal, which says what is left") {
  state task;
  task.add_locks(3, exclusive_access);  // nothing links to it yet
  CHECK(task.raw() == 4);
  CHECK(task.remove_locks(2) == unlock_outcome::locked);
  CHECK(task.remove_locks(1) == unlock_outcome::one_lock_left);
  CHECK(task.remove_locks(1) == unlock_outcome::ready);

  state behind;
  behind.replace_launch_lock(2, exclusive_access);  // two prerequisites stand in for the launch lock
  CHECK(behind.raw() == 2);
  CHECK(behind.remove_locks(2) == unlock_outcome::ready);

  state alone;
  alone.remove_launch_lock(exclusive_access);
  CHECK(alone.is_ready());
}

TEST_CASE("task_state: execution is claimed once — a second claim (a late retraction) fails") {
  state task;
  REQUIRE(task.remove_locks() == unlock_outcome::ready);
  CHECK(began(task.try_begin()));
  CHECK(task.try_begin() == begin_outcome::refused);
  CHECK(task.try_begin_open() == begin_outcome::refused);
}

TEST_CASE("task_state: the last lock's removal begins the task in one move, unless others remain") {
  state two_left;
  two_left.add_locks(1);
  CHECK_FALSE(two_left.looks_like_last_lock());
  CHECK(two_left.try_remove_last_lock_and_begin() == begin_outcome::refused);
  CHECK(two_left.raw() == 2);  // nothing changed: the caller removes its lock the plain way
  CHECK(two_left.remove_locks() == unlock_outcome::one_lock_left);
  CHECK(two_left.looks_like_last_lock());
  CHECK(two_left.try_remove_last_lock_and_begin() == begin_outcome::began_holding_prerequisites);
  CHECK(two_left.raw() == (state::execution_flag | 1));

  state claimed;
  claimed.add_locks(1);
  REQUIRE(claimed.remove_locks() == unlock_outcome::one_lock_left);
  REQUIRE(claimed.try_claim_prerequisites());
  CHECK(claimed.try_remove_last_lock_and_begin() == begin_outcome::began);  // the waiter has them
}

TEST_CASE("task_state: the task completes when the body and every nested task are done") {
  state task;
  REQUIRE(task.remove_locks() == unlock_outcome::ready);
  REQUIRE(began(task.try_begin()));
  task.add_nested_part();
  task.add_nested_part();
  CHECK(task.end_part() == part_outcome::parts_remain);  // the body returns
  CHECK(task.end_part() == part_outcome::parts_remain);  // first nested task completes
  CHECK(task.end_part() == part_outcome::finished);      // the last one completes the parent
  CHECK(task.raw() == state::execution_flag);
}

TEST_CASE("task_state: end_part_unless_last ends any part but the last, which it keeps") {
  state task;
  REQUIRE(task.remove_locks() == unlock_outcome::ready);
  REQUIRE(began(task.try_begin()));
  task.add_nested_part();
  CHECK(task.end_part_unless_last() == part_outcome::parts_remain);  // the body
  CHECK(task.end_part_unless_last() == part_outcome::last_part_kept);
  CHECK_FALSE(task.has_finished());
  CHECK(task.end_part() == part_outcome::finished);
  CHECK(task.has_finished());
}

TEST_CASE("task_state: a task begun finishes_open has finished once its body and nested tasks are done") {
  state plain;
  CHECK(plain.remove_locks() == unlock_outcome::ready);
  CHECK(plain.try_begin_open() == begin_outcome::began_holding_prerequisites);
  CHECK(plain.has_begun());
  CHECK_FALSE(plain.has_finished());
  CHECK_FALSE(plain.has_finished_after_announcing());  // running: the heavy barrier, then "not yet"
  plain.end_part(exclusive_access);
  CHECK(plain.has_finished());
  CHECK(plain.has_finished_after_announcing());
  CHECK_FALSE(plain.handles_hold_extra_reference());
  plain.leave_reference_to_handles(exclusive_access);
  CHECK(plain.has_finished());
  CHECK(plain.handles_hold_extra_reference());

  state nested;
  CHECK(nested.remove_locks() == unlock_outcome::ready);
  CHECK(began(nested.try_begin_open()));
  nested.add_nested_part();
  CHECK(nested.end_part() == part_outcome::parts_remain);  // the body: a nested task still runs
  CHECK_FALSE(nested.has_finished_after_announcing());
  CHECK(nested.end_part() == part_outcome::finished);  // the nested task: the mark does not hide the last part
  CHECK(nested.has_finished());
  CHECK(nested.has_finished_after_announcing());
  CHECK(nested.try_begin() == begin_outcome::refused);
}

TEST_CASE("task_state: the prerequisites go to one owner — a waiter before execution, else the runner") {
  state unclaimed;
  unclaimed.add_locks(1);
  REQUIRE(unclaimed.remove_locks() == unlock_outcome::one_lock_left);  // the launch
  REQUIRE(unclaimed.remove_locks() == unlock_outcome::ready);          // the prerequisite
  CHECK(unclaimed.try_begin() == begin_outcome::began_holding_prerequisites);
  CHECK_FALSE(unclaimed.try_claim_prerequisites());  // begun: the runner has them
  CHECK_FALSE(unclaimed.still_holds_prerequisites());

  state claimed;
  claimed.add_locks(1);
  REQUIRE(claimed.remove_locks() == unlock_outcome::one_lock_left);
  CHECK(claimed.try_claim_prerequisites());  // a waiter, while a prerequisite still holds it
  CHECK_FALSE(claimed.try_claim_prerequisites());
  CHECK_FALSE(claimed.still_holds_prerequisites());
  CHECK(claimed.try_begin() == begin_outcome::refused);
  CHECK(claimed.remove_locks() == unlock_outcome::ready);  // the claim mark is not a lock
  CHECK(claimed.is_ready());
  CHECK(claimed.try_begin() == begin_outcome::began);  // the waiter drops them, not the runner
  CHECK(claimed.raw() == (state::execution_flag | 1));
  CHECK(claimed.end_part() == part_outcome::finished);

  state never_begun;
  CHECK(never_begun.still_holds_prerequisites());
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
      if (!began(task.try_begin())) return;
      executed.fetch_add(1);
      task.add_nested_part();
      if (task.end_part() == part_outcome::finished) completed.fetch_add(1);  // the body
      if (task.end_part() == part_outcome::finished) completed.fetch_add(1);  // the nested task
    };
    std::vector<std::thread> threads;
    for (int i = 0; i <= prerequisites; ++i) {  // three prerequisites and the launch
      threads.emplace_back([&] {
        if (task.remove_locks() == unlock_outcome::ready) {
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
