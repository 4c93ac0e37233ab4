// Tests for include/magpie/timer_manager.h — UE FTimerManager semantics on a timing wheel:
// setting, looping, catching up, firing order, callbacks that set, clear or pause timers,
// pausing, and when a timer set outside tick becomes active. Objects, handles, errors and
// threads are in timer_handles_test.cpp; the wheel across its range and the reference-model
// property test in timer_model_test.cpp.
#include <magpie/config.h>
#include <magpie/timer_manager.h>

#include "support.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using magpie::timer_handle;
using magpie::timer_manager;
using magpie::timer_params;

TEST_SUITE("timer") {

TEST_CASE("timer: a handle is 64 bits, invalid by default, and invalidate forgets the timer") {
  timer_handle none;
  CHECK_FALSE(none.is_valid());
  CHECK(none.value() == 0);
  timer_manager timers;
  timer_handle handle;
  timers.set_timer(handle, [] {}, 1.f);
  REQUIRE(handle.is_valid());
  CHECK((handle.value() >> 24) != 0);  // the serial is never 0
  timer_handle copy = handle;
  handle.invalidate();
  CHECK_FALSE(handle.is_valid());
  CHECK(timers.timer_exists(copy));
}

TEST_CASE("timer: a timer set outside tick is pending and the next tick's delta does not count") {
  timer_manager timers;
  int fired = 0;
  timer_handle handle;
  timers.set_timer(handle, [&] { ++fired; }, 1.f);
  CHECK(timers.is_timer_pending(handle));
  CHECK(timers.is_timer_active(handle));  // pending counts as active
  CHECK(timers.get_timer_remaining(handle) == 1.f);
  timers.tick(0.75f);  // activated at its end: expiry 0.75 + 1
  CHECK(fired == 0);
  CHECK_FALSE(timers.is_timer_pending(handle));
  CHECK(timers.get_timer_remaining(handle) == 1.f);
  timers.tick(1.f);  // the clock reaches the expiry exactly: not strictly after it
  CHECK(fired == 0);
  CHECK(timers.get_timer_remaining(handle) == 0.f);
  timers.tick(0.001f);
  CHECK(fired == 1);
  CHECK_FALSE(timers.timer_exists(handle));  // a one-shot timer is gone once it fired
  CHECK(timers.live_timer_count() == 0);
}

TEST_CASE("timer: a looping timer that fell behind fires once per missed period, back to back") {
  timer_manager timers;
  int fired = 0;
  timer_handle handle;
  timers.set_timer(handle, [&] { ++fired; }, 0.25f, true);
  timers.tick(0.f);       // active, expiry 0.25
  timers.tick(1.125f);    // trunc((1.125 - 0.25) / 0.25) + 1 = 4 calls
  CHECK(fired == 4);
  CHECK(timers.get_timer_remaining(handle) == 0.125f);  // expiry 0.25 + 4 * 0.25
  timers.tick(0.125f);  // at the expiry: not yet
  CHECK(fired == 4);
  timers.tick(0.0625f);
  CHECK(fired == 5);
  CHECK(timers.timer_exists(handle));
}

TEST_CASE("timer: max_once_per_frame fires once but keeps the timer's phase") {
  timer_manager timers;
  int fired = 0;
  timer_handle handle;
  timers.set_timer(handle, [&] { ++fired; }, 0.25f, timer_params{true, true, -1.f});
  timers.tick(0.f);
  timers.tick(1.125f);
  CHECK(fired == 1);
  CHECK(timers.get_timer_remaining(handle) == 0.125f);  // the missed periods are dropped
}

TEST_CASE("timer: first_delay sets the first firing, rate the following ones") {
  timer_manager timers;
  int fired = 0;
  timer_handle handle;
  timers.set_timer(handle, [&] { ++fired; }, 1.f, true, 0.25f);
  timers.tick(0.f);
  CHECK(timers.get_timer_remaining(handle) == 0.25f);
  CHECK(timers.get_timer_elapsed(handle) == 0.75f);  // rate - remaining, first_delay aside
  timers.tick(0.5f);
  CHECK(fired == 1);
  CHECK(timers.get_timer_remaining(handle) == 0.75f);
  timer_handle at_once;
  timers.set_timer(at_once, [&] { fired += 10; }, 1.f, false, 0.f);
  timers.tick(0.f);  // activated with expiry now
  timers.tick(0.f);  // no time passed: not strictly after
  CHECK(fired == 1);
  timers.tick(0.001f);
  CHECK(fired == 11);
}

TEST_CASE("timer: a rate <= 0 clears the timer and invalidates the handle") {
  timer_manager timers;
  int fired = 0;
  for (float rate : {0.f, -1.f}) {
    timer_handle handle;
    timers.set_timer(handle, [&] { ++fired; }, 1.f);
    timer_handle old = handle;
    timers.set_timer(handle, [&] { ++fired; }, rate);
    CHECK_FALSE(handle.is_valid());
    CHECK_FALSE(timers.timer_exists(old));
  }
  timers.tick(0.f);
  timers.tick(5.f);
  CHECK(fired == 0);
  CHECK(timers.live_timer_count() == 0);
}

TEST_CASE("timer: set_timer on a live handle replaces the timer with a new serial") {
  timer_manager timers;
  std::vector<int> order;
  timer_handle handle;
  timers.set_timer(handle, [&] { order.push_back(1); }, 0.5f);
  timer_handle first = handle;
  timers.set_timer(handle, [&] { order.push_back(2); }, 0.25f);
  CHECK(handle != first);
  CHECK_FALSE(timers.timer_exists(first));
  CHECK(timers.live_timer_count() == 1);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(order == std::vector<int>{2});
}

TEST_CASE("timer: timers due in one tick fire in expiry order, ties in the order they were set") {
  timer_manager timers;
  std::vector<int> order;
  std::vector<timer_handle> handles(12);
  // Set and clear first, so the slots come back in reverse: order must follow setting, not slots.
  for (auto& each : handles) timers.set_timer(each, [] {}, 1.f);
  for (auto& each : handles) timers.clear_timer(each);
  for (int i = 0; i < 10; ++i) timers.set_timer(handles[static_cast<std::size_t>(i)], [&order, i] { order.push_back(i); }, 0.5f);
  timers.set_timer(handles[10], [&] { order.push_back(10); }, 0.25f);
  timers.set_timer(handles[11], [&] { order.push_back(11); }, 0.75f);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(order == std::vector<int>{10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11});
}

TEST_CASE("timer: set_timer_for_next_tick fires in the next tick with a positive delta") {
  timer_manager timers;
  int fired = 0;
  timer_handle handle = timers.set_timer_for_next_tick([&] { ++fired; });
  CHECK(handle.is_valid());
  CHECK(timers.is_timer_active(handle));
  CHECK_FALSE(timers.is_timer_pending(handle));  // active at once, expiry now
  CHECK(timers.get_timer_rate(handle) == 0.f);
  timers.tick(0.f);
  CHECK(fired == 0);
  timers.tick(1.f / 60);
  CHECK(fired == 1);
  CHECK_FALSE(timers.timer_exists(handle));
  timers.tick(1.f / 60);
  CHECK(fired == 1);
}

TEST_CASE("timer: set_timer_for_next_tick from a callback fires in the next tick, not the current one") {
  timer_manager timers;
  std::vector<std::string> log;
  timer_handle first;
  timers.set_timer(first, [&] {
    log.push_back("first");
    timers.set_timer_for_next_tick([&] { log.push_back("next"); });
  }, 0.25f);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(log == std::vector<std::string>{"first"});
  timers.tick(0.01f);
  CHECK(log == std::vector<std::string>{"first", "next"});
}

TEST_CASE("timer: a timer set from a callback is pending and counts from the end of that tick") {
  timer_manager timers;
  int inner_fired = 0;
  timer_handle inner;
  timer_handle outer;
  bool pending_in_callback = false;
  timers.set_timer(outer, [&] {
    timers.set_timer(inner, [&] { ++inner_fired; }, 0.5f, false, 0.f);
    pending_in_callback = timers.is_timer_pending(inner);
  }, 0.25f);
  timers.tick(0.f);
  timers.tick(1.f);  // outer fires at 1.0; inner becomes active at the end, expiry 1.0
  CHECK(pending_in_callback);
  CHECK(inner_fired == 0);
  CHECK_FALSE(timers.is_timer_pending(inner));
  CHECK(timers.get_timer_remaining(inner) == 0.f);
  timers.tick(0.001f);
  CHECK(inner_fired == 1);
}

TEST_CASE("timer: a callback that clears or pauses another due timer keeps it from firing") {
  timer_manager timers;
  std::vector<std::string> log;
  timer_handle cleared;
  timer_handle paused;
  timer_handle first;
  timers.set_timer(first, [&] {
    log.push_back("first");
    timers.clear_timer(cleared);
    timers.pause_timer(paused);
  }, 0.25f);
  timers.set_timer(cleared, [&] { log.push_back("cleared"); }, 0.5f);
  timers.set_timer(paused, [&] { log.push_back("paused"); }, 0.5f);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(log == std::vector<std::string>{"first"});
  CHECK_FALSE(cleared.is_valid());
  CHECK(timers.is_timer_paused(paused));
  CHECK(timers.get_timer_remaining(paused) == -0.5f);  // paused half a second late
  timers.unpause_timer(paused);
  timers.tick(0.f);  // pending until the end of this tick
  CHECK(log.size() == 1);
  timers.tick(0.001f);
  CHECK(log == std::vector<std::string>{"first", "paused"});
}

TEST_CASE("timer: a callback that clears its own timer ends its catch-up calls") {
  timer_manager timers;
  int calls = 0;
  timer_handle handle;
  timers.set_timer(handle, [&] {
    if (++calls == 3) timers.clear_timer(handle);
  }, 0.25f, true);
  timers.tick(0.f);
  timers.tick(2.125f);  // 8 calls due
  CHECK(calls == 3);
  CHECK_FALSE(handle.is_valid());
  CHECK(timers.live_timer_count() == 0);
}

TEST_CASE("timer: a callback that re-sets its own handle ends its catch-up calls and starts a new timer") {
  timer_manager timers;
  int calls = 0;
  timer_handle handle;
  timer_handle old;
  timers.set_timer(handle, [&] {
    if (++calls == 2) {
      old = handle;
      timers.set_timer(handle, [] {}, 1.f);
    }
  }, 0.25f, true);
  timers.tick(0.f);
  timers.tick(2.125f);
  CHECK(calls == 2);
  CHECK(handle != old);
  CHECK_FALSE(timers.timer_exists(old));
  CHECK(timers.timer_exists(handle));
  CHECK(timers.get_timer_remaining(handle) == 1.f);  // pending, then active from the tick's end
  CHECK(timers.live_timer_count() == 1);
}

TEST_CASE("timer: a captured object lives until its callback returns, even when the callback clears itself") {
  timer_manager timers;
  auto witness = std::make_shared<int>(7);
  std::weak_ptr<int> watch = witness;
  int seen = 0;
  timer_handle handle;
  timers.set_timer(handle, [&, witness] {
    timers.clear_timer(handle);
    seen = *witness;  // still alive: the callable is destroyed after it returns
  }, 0.25f);
  witness.reset();
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(seen == 7);
  CHECK(watch.expired());
}

TEST_CASE("timer: pausing a one-shot timer from its own callback deletes it; a looping one keeps its time") {
  timer_manager timers;
  timer_handle once;
  timers.set_timer(once, [&] { timers.pause_timer(once); }, 0.25f);
  int loops = 0;
  timer_handle looping;
  timers.set_timer(looping, [&] {
    if (++loops == 1) timers.pause_timer(looping);
  }, 0.25f, true);
  timers.tick(0.f);
  timers.tick(1.125f);
  CHECK_FALSE(timers.timer_exists(once));
  CHECK(loops == 1);  // the pause ended the catch-up calls
  CHECK(timers.is_timer_paused(looping));
  CHECK(timers.get_timer_remaining(looping) == -0.875f);  // expiry 0.25 at 1.125
  timers.unpause_timer(looping);
  timers.tick(0.f);  // active again: expiry 1.125 - 0.875 = 0.25
  CHECK(loops == 1);
  timers.tick(0.125f);  // trunc((1.25 - 0.25) / 0.25) + 1 = 5 calls
  CHECK(loops == 6);
}

TEST_CASE("timer: pause keeps the remaining time and unpause resumes it") {
  timer_manager timers;
  int fired = 0;
  timer_handle handle;
  timers.set_timer(handle, [&] { ++fired; }, 1.f);
  timers.tick(0.f);
  timers.tick(0.25f);
  CHECK(timers.get_timer_remaining(handle) == 0.75f);
  CHECK(timers.get_timer_elapsed(handle) == 0.25f);  // elapsed + remaining = rate
  timers.pause_timer(handle);
  CHECK(timers.is_timer_paused(handle));
  CHECK_FALSE(timers.is_timer_active(handle));
  timers.pause_timer(handle);  // twice is once
  timers.tick(10.f);
  CHECK(fired == 0);
  CHECK(timers.get_timer_remaining(handle) == 0.75f);
  CHECK(timers.get_timer_elapsed(handle) == 0.25f);
  timers.unpause_timer(handle);
  CHECK(timers.is_timer_pending(handle));
  timers.tick(5.f);  // the tick that activates it does not count
  CHECK(timers.get_timer_remaining(handle) == 0.75f);
  timers.tick(0.75f);
  CHECK(fired == 0);
  timers.tick(0.001f);
  CHECK(fired == 1);
}

TEST_CASE("timer: pausing a pending timer keeps its delay") {
  timer_manager timers;
  timer_handle handle;
  timers.set_timer(handle, [] {}, 2.f);
  timers.pause_timer(handle);
  CHECK(timers.is_timer_paused(handle));
  CHECK(timers.get_timer_remaining(handle) == 2.f);
  timers.tick(1.f);
  timers.unpause_timer(handle);
  timers.tick(1.f);
  CHECK(timers.get_timer_remaining(handle) == 2.f);
}

TEST_CASE("timer: with a frame counter, timers set or unpaused after this frame's tick are active at once") {
  std::uint64_t frame = 0;
  timer_manager timers([&] { return frame; });
  int fired = 0;
  timer_handle before;
  timers.set_timer(before, [&] { ++fired; }, 0.5f);
  CHECK(timers.is_timer_pending(before));
  CHECK_FALSE(timers.has_been_ticked_this_frame());
  timers.tick(0.25f);
  CHECK(timers.has_been_ticked_this_frame());
  timer_handle after;
  timers.set_timer(after, [&] { ++fired; }, 0.5f);
  CHECK_FALSE(timers.is_timer_pending(after));
  CHECK(timers.get_timer_remaining(after) == 0.5f);
  timers.pause_timer(after);
  timers.unpause_timer(after);
  CHECK_FALSE(timers.is_timer_pending(after));
  timers.tick(5.f);  // a second tick in the same frame does nothing
  CHECK(fired == 0);
  CHECK(timers.get_timer_remaining(after) == 0.5f);
  ++frame;
  CHECK_FALSE(timers.has_been_ticked_this_frame());
  timer_handle next_frame;
  timers.set_timer(next_frame, [&] { ++fired; }, 0.5f);
  CHECK(timers.is_timer_pending(next_frame));
  timers.tick(0.75f);
  CHECK(fired == 2);
  CHECK(timers.timer_exists(next_frame));
}

TEST_CASE("timer: without a frame counter every timer set outside tick is pending") {
  timer_manager timers;
  timers.tick(0.1f);
  timer_handle handle;
  timers.set_timer(handle, [] {}, 0.5f);
  CHECK(timers.is_timer_pending(handle));
  CHECK_FALSE(timers.has_been_ticked_this_frame());
}

}  // TEST_SUITE("timer")
