// Tests for include/magpie/timer_manager.h — UE FTimerManager semantics on a timing wheel.
#include <magpie/config.h>
#include <magpie/timer_manager.h>

#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using magpie::delegate;
using magpie::timer_handle;
using magpie::timer_manager;
using magpie::timer_params;

namespace {

struct target {
  int hits = 0;
  void hit() { ++hits; }
  void look() const {}
};

// splitmix64: a small generator whose sequence is the same on every standard library, so a
// printed seed replays anywhere.
struct random_source {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  float between(double low, double high) { return static_cast<float>(low + (high - low) * unit()); }
  bool chance(double p) { return unit() < p; }
};

}  // namespace

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

TEST_CASE("timer: clear_all_timers_for_object clears the timers set with that object, and only those") {
  timer_manager timers;
  target a;
  target b;
  int lambda_hits = 0;
  timer_handle method;
  timer_handle const_method;
  timer_handle bound_delegate;
  timer_handle on_b;
  timer_handle lambda;
  timers.set_timer(method, &a, &target::hit, 0.5f, true);
  timers.set_timer(const_method, &a, &target::look, 0.5f, timer_params{true, false, 0.25f});
  delegate<void()> on_a;
  on_a.bind(&a, &target::hit);
  timers.set_timer(bound_delegate, on_a, 0.5f);
  timer_handle next_tick = timers.set_timer_for_next_tick(&a, &target::hit);
  timers.set_timer(on_b, &b, &target::hit, 0.5f);
  timers.set_timer(lambda, [&] { ++lambda_hits; }, 0.5f);  // captures a, but is not tracked
  CHECK(timers.live_timer_count() == 6);
  timers.clear_all_timers_for_object(&a);
  for (auto each : {method, const_method, bound_delegate, next_tick}) CHECK_FALSE(timers.timer_exists(each));
  CHECK(timers.timer_exists(on_b));
  CHECK(timers.timer_exists(lambda));
  timers.clear_all_timers_for_object(nullptr);
  timers.clear_all_timers_for_object(&lambda_hits);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(a.hits == 0);
  CHECK(b.hits == 1);
  CHECK(lambda_hits == 1);
}

TEST_CASE("timer: a callback may clear every timer of its object, its own included") {
  timer_manager timers;
  target a;
  int calls = 0;
  timer_handle self;
  timer_handle sibling;
  struct clearer {
    timer_manager* timers;
    int* calls;
    void run() {
      ++*calls;
      timers->clear_all_timers_for_object(this);
    }
  } owner{&timers, &calls};
  timers.set_timer(self, &owner, &clearer::run, 0.25f, true);
  timers.set_timer(sibling, &owner, &clearer::run, 0.5f, true);
  timers.set_timer(sibling, &owner, &clearer::run, 0.5f, true);  // replaced: one sibling
  timer_handle unrelated;
  timers.set_timer(unrelated, &a, &target::hit, 0.5f);
  timers.tick(0.f);
  timers.tick(2.125f);  // self has 8 calls due, sibling 4
  CHECK(calls == 1);
  CHECK_FALSE(timers.timer_exists(self));
  CHECK_FALSE(timers.timer_exists(sibling));
  CHECK(a.hits == 1);
  CHECK(timers.live_timer_count() == 0);
}

TEST_CASE("timer: a looping timer on a weakly held object is removed once the object is gone") {
  timer_manager timers;
  auto a = std::make_shared<target>();
  timer_handle weak_method;
  timers.set_timer(weak_method, std::weak_ptr<target>(a), &target::hit, 0.25f, true);
  timer_handle weak_delegate;
  delegate<void()> bound;
  bound.bind(std::weak_ptr<target>(a), &target::hit);
  timers.set_timer(weak_delegate, bound, 0.25f, true);
  int plain_hits = 0;
  timer_handle plain;
  timers.set_timer(plain, [&] { ++plain_hits; }, 0.25f, true);
  timers.tick(0.f);
  timers.tick(0.375f);
  CHECK(a->hits == 2);
  target* address = a.get();
  a.reset();
  timers.tick(0.25f);
  CHECK_FALSE(timers.timer_exists(weak_method));
  CHECK_FALSE(timers.timer_exists(weak_delegate));
  CHECK(timers.timer_exists(plain));  // lambdas are never removed for a dead object
  CHECK(plain_hits == 2);
  timers.clear_all_timers_for_object(address);
  CHECK(timers.live_timer_count() == 1);
}

TEST_CASE("timer: an unbound delegate makes a countdown that calls nothing and stays") {
  timer_manager timers;
  timer_handle countdown;
  timers.set_timer(countdown, delegate<void()>{}, 0.25f, true);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(timers.timer_exists(countdown));
  CHECK(timers.get_timer_remaining(countdown) == 0.25f);
}

TEST_CASE("timer: queries on unknown, stale and foreign handles answer -1 and false") {
  timer_manager timers;
  timer_manager other;
  timer_handle stale;
  timers.set_timer(stale, [] {}, 1.f);
  timer_handle copy = stale;
  timers.clear_timer(stale);
  CHECK_FALSE(stale.is_valid());
  timer_handle foreign;
  other.set_timer(foreign, [] {}, 1.f);
  for (timer_handle each : {timer_handle{}, copy, foreign}) {
    CHECK_FALSE(timers.timer_exists(each));
    CHECK_FALSE(timers.is_timer_active(each));
    CHECK_FALSE(timers.is_timer_paused(each));
    CHECK_FALSE(timers.is_timer_pending(each));
    CHECK(timers.get_timer_rate(each) == -1.f);
    CHECK(timers.get_timer_elapsed(each) == -1.f);
    CHECK(timers.get_timer_remaining(each) == -1.f);
    timers.pause_timer(each);
    timers.unpause_timer(each);
  }
  CHECK(other.timer_exists(foreign));
  CHECK_FALSE(other.is_timer_paused(foreign));
}

TEST_CASE("timer: a handle from another manager never reaches that manager's timer") {
  timer_manager first;
  timer_manager second;
  int first_hits = 0;
  int second_hits = 0;
  timer_handle handle;
  first.set_timer(handle, [&] { ++first_hits; }, 0.5f);
  timer_handle from_first = handle;
  second.set_timer(handle, [&] { ++second_hits; }, 0.5f);  // foreign: a new timer here
  CHECK(handle != from_first);
  CHECK(first.timer_exists(from_first));
  CHECK(second.timer_exists(handle));
  CHECK_FALSE(first.timer_exists(handle));
  timer_handle doomed = from_first;
  second.clear_timer(doomed);
  CHECK_FALSE(doomed.is_valid());
  CHECK(first.timer_exists(from_first));
  for (auto* each : {&first, &second}) {
    each->tick(0.f);
    each->tick(1.f);
  }
  CHECK(first_hits == 1);
  CHECK(second_hits == 1);
}

TEST_CASE("timer: while its callback runs a timer reports 0 remaining and its lateness as elapsed") {
  timer_manager timers;
  timer_handle handle;
  float remaining = -2.f;
  float elapsed = -2.f;
  bool active = false;
  timers.set_timer(handle, [&] {
    remaining = timers.get_timer_remaining(handle);
    elapsed = timers.get_timer_elapsed(handle);
    active = timers.is_timer_active(handle) && !timers.is_timer_pending(handle);
  }, 0.5f, true);
  timers.tick(0.f);
  timers.tick(0.75f);
  CHECK(remaining == 0.f);
  CHECK(elapsed == 0.75f);  // rate - (expiry - now) = 0.5 - (0.5 - 0.75)
  CHECK(active);
}

TEST_CASE("timer: a throwing callback propagates after the manager is made consistent") {
  timer_manager timers;
  std::vector<std::string> log;
  timer_handle looping;
  timer_handle thrower;
  timer_handle later;
  timer_handle looping_thrower;
  timers.set_timer(looping, [&] { log.push_back("loop"); }, 0.25f, true);
  timers.set_timer(thrower, [&] {
    log.push_back("throw");
    throw std::runtime_error("boom");
  }, 0.5f);
  timers.set_timer(later, [&] { log.push_back("later"); }, 0.75f);
  timers.set_timer(looping_thrower, [&] { throw std::runtime_error("again"); }, 1.f, true);
  timers.tick(0.f);
  timer_handle pending;
  timers.set_timer(pending, [] {}, 1.f);
  CHECK_THROWS_AS(timers.tick(1.125f), std::runtime_error);
  CHECK(log == std::vector<std::string>{"loop", "loop", "loop", "loop", "throw"});
  CHECK_FALSE(timers.timer_exists(thrower));   // a one-shot counts as fired
  CHECK(timers.get_timer_remaining(looping) == 0.125f);
  CHECK(timers.get_timer_remaining(later) == -0.375f);  // still due
  CHECK_FALSE(timers.is_timer_pending(pending));  // the tick's end ran
  CHECK(timers.get_timer_remaining(pending) == 1.f);
  log.clear();
  CHECK_THROWS_AS(timers.tick(0.001f), std::runtime_error);  // later, then looping_thrower
  CHECK(log == std::vector<std::string>{"later"});
  CHECK(timers.get_timer_remaining(looping_thrower) == doctest::Approx(0.874f));  // re-armed
  timers.tick(0.001f);
  CHECK(log == std::vector<std::string>{"later"});
}

TEST_CASE("timer: a callable that throws while being stored leaves no timer behind") {
  struct throws_on_copy {
    throws_on_copy() = default;
    throws_on_copy(const throws_on_copy&) { throw std::runtime_error("copy"); }
    void operator()() const {}
  };
  timer_manager timers;
  timer_handle handle;
  timers.set_timer(handle, [] {}, 1.f);
  throws_on_copy callable;
  CHECK_THROWS_AS(timers.set_timer(handle, callable, 1.f), std::runtime_error);
  CHECK_FALSE(handle.is_valid());  // its old timer was cleared first, as any set_timer does
  CHECK_THROWS_AS(timers.set_timer_for_next_tick(callable), std::runtime_error);
  CHECK(timers.live_timer_count() == 0);
}

TEST_CASE("timer: bad input and misuse are reported and change nothing") {
  magpie::test::diagnostic_recorder recorder;
  timer_manager timers;
  timer_handle handle;
  timers.set_timer(handle, [] {}, std::numeric_limits<float>::quiet_NaN());
  CHECK_FALSE(handle.is_valid());
  timers.set_timer(handle, [] {}, 1.f, false, std::numeric_limits<float>::quiet_NaN());
  CHECK_FALSE(handle.is_valid());
  timers.set_timer(handle, static_cast<target*>(nullptr), &target::hit, 1.f);
  CHECK_FALSE(handle.is_valid());
  CHECK_FALSE(timers.set_timer_for_next_tick(static_cast<target*>(nullptr), &target::hit).is_valid());
  timers.tick(-1.f);
  timers.tick(std::numeric_limits<float>::quiet_NaN());
  timers.tick(std::numeric_limits<float>::infinity());
  timer_handle reentrant;
  timers.set_timer(reentrant, [&] { timers.tick(1.f); }, 0.5f);
  timers.tick(0.f);
  timers.tick(1.f);
  CHECK(timers.live_timer_count() == 0);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 8);
  for (const auto& each : reports) {
    CHECK(each.kind == magpie::diagnostic_kind::misuse);
    CHECK(each.message.find("timer_manager") != std::string::npos);
  }
  CHECK(reports[0].message.find("NaN") != std::string::npos);
  CHECK(reports[2].message.find("null object") != std::string::npos);
  CHECK(reports[4].message.find("delta_seconds") != std::string::npos);
  CHECK(reports[7].message.find("from a timer callback") != std::string::npos);
}

TEST_CASE("timer: a call from a thread that does not own the manager is reported, naming both threads, and refused") {
  magpie::test::diagnostic_recorder recorder;
  timer_manager timers;
  timer_handle handle;
  timers.set_timer(handle, [] {}, 1.f);
  std::thread::id other;
  bool exists = true;
  timer_handle other_handle;
  std::thread([&] {
    other = std::this_thread::get_id();
    exists = timers.timer_exists(handle);
    timers.clear_timer(handle);
    timers.set_timer(other_handle, [] {}, 1.f);
  }).join();
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 3);
  std::ostringstream threads;  // streamed, not "literal" + string: GCC 12's -Wrestrict misfires on that
  threads << "called on thread " << other << ", which does not own the manager (thread " << std::this_thread::get_id();
  for (const auto& each : reports) {
    CHECK(each.kind == magpie::diagnostic_kind::misuse);
    CHECK(each.message.find(threads.str()) != std::string::npos);
    CHECK(each.message.find("refused") != std::string::npos);
  }
  CHECK(reports[0].message.find("timer_exists") != std::string::npos);
  CHECK_FALSE(exists);  // refused: answered as for no timer
  CHECK_FALSE(other_handle.is_valid());
  CHECK(timers.timer_exists(handle));  // the clear was refused
  CHECK(timers.live_timer_count() == 1);
}

TEST_CASE("timer: a manager claimed by a thread belongs to it, whoever calls first") {
  magpie::test::diagnostic_recorder recorder;
  timer_manager timers;
  timers.claim_for_this_thread();
  timer_handle refused;
  std::thread([&] { timers.set_timer(refused, [] {}, 1.f); }).join();
  CHECK(recorder.count() == 1);
  CHECK_FALSE(refused.is_valid());
  timer_handle mine;
  timers.set_timer(mine, [] {}, 1.f);
  CHECK(timers.timer_exists(mine));
  CHECK(recorder.count() == 1);
}

// Every timer fires in the first tick whose clock passes its expiry, however far away it
// is: delays from a millisecond to twelve days reach every level of the wheel.
TEST_CASE("timer: timers from milliseconds to days fire in the tick that passes their expiry") {
  random_source random{42};
  timer_manager timers;
  struct probe {
    double expire;
    int fired_in = -1;
    int fired_count = 0;
  };
  std::vector<probe> probes(3000);
  std::vector<std::size_t> fired_order;
  int tick_number = 0;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    auto delay = static_cast<float>(std::exp2(-10.0 + 30.0 * random.unit()));  // 1 ms .. 12 days
    probes[i].expire = static_cast<double>(delay);
    timer_handle handle;
    timers.set_timer(handle, [&, i] {
      probes[i].fired_in = tick_number;
      ++probes[i].fired_count;
      fired_order.push_back(i);
    }, delay);
  }
  timers.tick(0.f);
  double now = 0;
  std::vector<double> clock{0};
  while (timers.live_timer_count() > 0) {
    float delta = random.chance(0.5) ? random.between(0, 0.1) : static_cast<float>(std::exp2(-5.0 + 25.0 * random.unit()));
    ++tick_number;
    now += static_cast<double>(delta);
    clock.push_back(now);
    timers.tick(delta);
    REQUIRE(tick_number < 100000);
  }
  for (const probe& each : probes) {
    REQUIRE(each.fired_count == 1);
    auto in = static_cast<std::size_t>(each.fired_in);
    CHECK(clock[in] > each.expire);
    CHECK_FALSE(clock[in - 1] > each.expire);
  }
  for (std::size_t i = 1; i < fired_order.size(); ++i) {
    const probe& before = probes[fired_order[i - 1]];
    const probe& after = probes[fired_order[i]];
    CHECK((before.expire < after.expire || (before.expire == after.expire && fired_order[i - 1] < fired_order[i])));
  }
}


// ---------------------------------------------------------------------------------------
// Property test: random sequences of set / clear / pause / unpause / set_timer_for_next_tick
// / clear_all_timers_for_object / tick on many timers, whose callbacks do the same, run on
// the manager and on a reference model — a plain list scanned for the earliest due timer
// before every firing — and compared after every step: fire order, states and times.

namespace property {

constexpr int per_group = 8;  // timers L = 8 g + m are set on object g with method m

enum class action_kind { none, clear, pause, unpause, set, next_tick, clear_object };

// action is what a timer's callback does to timer `target` (itself included) each call.
struct action {
  action_kind kind = action_kind::none;
  int target = 0;
};

struct set_args {
  float rate;
  timer_params params;
  bool on_object;
  action then;
};

action draw_action(random_source& random, int self, int count) {
  if (random.chance(0.6)) return {};
  return {static_cast<action_kind>(1 + random.below(6)), random.chance(0.3) ? self : random.below(count)};
}

float draw_rate(random_source& random) {
  switch (random.below(4)) {
    case 0: return 0.05f * static_cast<float>(1 + random.below(4));
    case 1: return static_cast<float>(1 + random.below(30)) / 60.f;  // equal expiries abound
    case 2: return 0.25f * static_cast<float>(1 + random.below(16));
    default: return random.between(10, 5000);
  }
}

set_args draw_set(random_source& random, int self, int count) {
  set_args args{};
  args.rate = random.chance(0.03) ? (random.chance(0.5) ? 0.f : -1.f) : draw_rate(random);
  args.params.loop = random.chance(0.4);
  args.params.max_once_per_frame = args.params.loop && random.chance(0.25);
  int delay = random.below(10);
  args.params.first_delay = delay < 5 ? -1.f : delay < 7 ? 0.f : draw_rate(random);
  args.on_object = random.chance(0.5);
  args.then = draw_action(random, self, count);
  return args;
}

float draw_delta(random_source& random) {
  int roll = random.below(1000);
  if (roll < 100) return 0.f;
  if (roll < 600) return 1.f / 60;
  if (roll < 800) return random.between(0, 0.5);
  if (roll < 950) return random.between(0.5, 5);
  if (roll < 995) return random.between(5, 60);
  return random.between(60, 300);
}

// perform runs one callback's action on either side; both draw from their own copy of the
// same random stream, so they draw alike as long as they behave alike.
template <class Side>
void perform(Side& side, action what, random_source& random) {
  switch (what.kind) {
    case action_kind::none: break;
    case action_kind::clear: side.clear(what.target); break;
    case action_kind::pause: side.pause(what.target); break;
    case action_kind::unpause: side.unpause(what.target); break;
    case action_kind::set: side.set(what.target, draw_set(random, what.target, side.count())); break;
    case action_kind::next_tick: side.next_tick(what.target, draw_action(random, what.target, side.count())); break;
    case action_kind::clear_object: side.clear_object(what.target / per_group); break;
  }
}

struct real_side {
  struct group {
    real_side* side;
    int index;
    template <int M>
    void fire() { side->on_fire(index * per_group + M); }
  };
  using method = void (group::*)();
  static constexpr method methods[per_group] = {&group::fire<0>, &group::fire<1>, &group::fire<2>, &group::fire<3>,
                                                &group::fire<4>, &group::fire<5>, &group::fire<6>, &group::fire<7>};

  real_side(int count, const std::uint64_t* frame, std::uint64_t seed)
      : timers(frame != nullptr ? timer_manager::frame_counter([frame] { return *frame; }) : timer_manager::frame_counter()),
        handles(static_cast<std::size_t>(count)),
        actions(static_cast<std::size_t>(count)),
        random{seed} {
    for (int g = 0; g < count / per_group; ++g) groups.push_back({this, g});
  }

  int count() const { return static_cast<int>(handles.size()); }
  timer_handle& handle(int logical) { return handles[static_cast<std::size_t>(logical)]; }

  void on_fire(int logical) {
    log.push_back(logical);
    perform(*this, actions[static_cast<std::size_t>(logical)], random);
  }
  void set(int logical, const set_args& args) {
    actions[static_cast<std::size_t>(logical)] = args.then;
    if (args.on_object) {
      timers.set_timer(handle(logical), &groups[static_cast<std::size_t>(logical / per_group)], methods[logical % per_group],
                       args.rate, args.params);
    } else {
      timers.set_timer(handle(logical), [this, logical] { on_fire(logical); }, args.rate, args.params);
    }
  }
  void next_tick(int logical, action then) {
    timers.clear_timer(handle(logical));
    actions[static_cast<std::size_t>(logical)] = then;
    handle(logical) = timers.set_timer_for_next_tick([this, logical] { on_fire(logical); });
  }
  void clear(int logical) { timers.clear_timer(handle(logical)); }
  void pause(int logical) { timers.pause_timer(handle(logical)); }
  void unpause(int logical) { timers.unpause_timer(handle(logical)); }
  void clear_object(int g) { timers.clear_all_timers_for_object(&groups[static_cast<std::size_t>(g)]); }
  void tick(float delta) { timers.tick(delta); }

  timer_manager timers;
  std::vector<timer_handle> handles;
  std::vector<action> actions;
  std::vector<group> groups;
  std::vector<int> log;
  random_source random;
};

struct model_side {
  enum class status { pending, active, paused, executing, removed, dead };
  struct timer {
    int logical;
    status state;
    double time;  // expiry when active or executing, remaining when pending or paused
    float rate;
    bool loop;
    bool max_once_per_frame;
    int group;  // -1: not set on an object
    std::uint64_t sequence = 0;
  };

  model_side(int count, const std::uint64_t* frame, std::uint64_t seed)
      : current(static_cast<std::size_t>(count), -1), actions(static_cast<std::size_t>(count)), random{seed}, frame(frame) {}

  int count() const { return static_cast<int>(current.size()); }
  int& current_of(int logical) { return current[static_cast<std::size_t>(logical)]; }
  timer& at(int id) { return timers[static_cast<std::size_t>(id)]; }
  bool alive(int id) const {
    if (id < 0) return false;
    status state = timers[static_cast<std::size_t>(id)].state;
    return state != status::removed && state != status::dead;
  }
  const timer* find(int logical) const {
    int id = current[static_cast<std::size_t>(logical)];
    return alive(id) ? &timers[static_cast<std::size_t>(id)] : nullptr;
  }
  std::size_t live() const {
    std::size_t n = 0;
    for (int id : current) n += alive(id) ? 1 : 0;
    return n;
  }
  bool at_once() const { return frame != nullptr && !ticking && last_ticked && *last_ticked == *frame; }

  void activate(int id, double expire) {
    at(id).time = expire;
    at(id).state = status::active;
    at(id).sequence = sequence++;
  }
  void make_pending(int id) {
    at(id).state = status::pending;
    pending.push_back(id);
  }
  void kill(int id) {
    if (at(id).state == status::pending) pending.erase(std::find(pending.begin(), pending.end(), id));
    at(id).state = at(id).state == status::executing ? status::removed : status::dead;
  }
  int add(int logical, float rate, bool loop, bool max_once, int group) {
    if (alive(current_of(logical))) kill(current_of(logical));
    timers.push_back({logical, status::dead, 0, rate, loop, max_once, group});
    current_of(logical) = static_cast<int>(timers.size()) - 1;
    return current_of(logical);
  }

  void on_fire(int logical) {
    log.push_back(logical);
    perform(*this, actions[static_cast<std::size_t>(logical)], random);
  }
  void set(int logical, const set_args& args) {
    actions[static_cast<std::size_t>(logical)] = args.then;
    if (!(args.rate > 0)) {
      if (alive(current_of(logical))) kill(current_of(logical));
      current_of(logical) = -1;
      return;
    }
    int id = add(logical, args.rate, args.params.loop, args.params.max_once_per_frame,
                 args.on_object ? logical / per_group : -1);
    double delay = args.params.first_delay >= 0 ? args.params.first_delay : args.rate;
    if (at_once()) {
      activate(id, now + delay);
    } else {
      at(id).time = delay;
      make_pending(id);
    }
  }
  void next_tick(int logical, action then) {
    actions[static_cast<std::size_t>(logical)] = then;
    activate(add(logical, 0.f, false, false, -1), now);
  }
  void clear(int logical) {
    if (alive(current_of(logical))) kill(current_of(logical));
    current_of(logical) = -1;
  }
  void pause(int logical) {
    int id = current_of(logical);
    if (!alive(id)) return;
    timer& t = at(id);
    switch (t.state) {
      case status::pending: pending.erase(std::find(pending.begin(), pending.end(), id)); break;
      case status::active: t.time -= now; break;
      case status::executing:
        if (!t.loop) {
          kill(id);
          return;
        }
        t.time -= now;
        break;
      default: return;
    }
    t.state = status::paused;
  }
  void unpause(int logical) {
    int id = current_of(logical);
    if (!alive(id) || at(id).state != status::paused) return;
    if (at_once()) {
      activate(id, now + at(id).time);
    } else {
      make_pending(id);
    }
  }
  void clear_object(int g) {
    for (int id : current) {
      if (alive(id) && at(id).group == g) kill(id);
    }
  }
  void tick(float delta) {
    if (frame != nullptr && last_ticked && *last_ticked == *frame) return;
    now += static_cast<double>(delta);
    ticking = true;
    std::uint64_t tick_start = sequence;  // timers activated during this tick wait for the next
    for (;;) {
      int best = -1;
      for (int id : current) {
        if (!alive(id)) continue;
        const timer& t = at(id);
        if (t.state != status::active || !(t.time < now) || t.sequence >= tick_start) continue;
        if (best < 0 || t.time < at(best).time || (t.time == at(best).time && t.sequence < at(best).sequence)) best = id;
      }
      if (best < 0) break;
      fire(best);
    }
    ticking = false;
    if (frame != nullptr) last_ticked = *frame;
    std::vector<int> waiting;
    waiting.swap(pending);
    for (int id : waiting) activate(id, now + at(id).time);
  }
  void fire(int id) {
    at(id).state = status::executing;
    std::uint64_t calls = at(id).loop ? static_cast<std::uint64_t>((now - at(id).time) / at(id).rate) + 1 : 1;
    for (std::uint64_t call = 0; call < calls; ++call) {
      on_fire(at(id).logical);
      if (at(id).state != status::executing || at(id).max_once_per_frame) break;
    }
    timer& t = at(id);
    if (t.state == status::removed) {
      t.state = status::dead;
    } else if (t.state == status::executing) {
      if (t.loop) {
        activate(id, t.time + static_cast<double>(calls) * static_cast<double>(t.rate));
      } else {
        t.state = status::dead;
      }
    }
  }

  std::vector<timer> timers;  // every timer ever set; each live one is some logical timer's current
  std::vector<int> current;   // logical timer -> its timer, or -1
  std::vector<int> pending;
  std::vector<action> actions;
  std::vector<int> log;
  random_source random;
  const std::uint64_t* frame;
  std::optional<std::uint64_t> last_ticked;
  double now = 0;
  bool ticking = false;
  std::uint64_t sequence = 0;
};

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int each : values) text += std::to_string(each) + ' ';
  return text;
}

// mismatch describes the first difference between the manager and the model, or is empty.
std::string mismatch(real_side& real, const model_side& model) {
  if (real.log != model.log) return "fired " + join(real.log) + "/ model fired " + join(model.log);
  if (real.timers.live_timer_count() != model.live()) {
    return "live timers " + std::to_string(real.timers.live_timer_count()) + ", model " + std::to_string(model.live());
  }
  for (int logical = 0; logical < real.count(); ++logical) {
    timer_handle handle = real.handle(logical);
    const model_side::timer* expected = model.find(logical);
    std::string name = "timer " + std::to_string(logical) + ": ";
    if (real.timers.timer_exists(handle) != (expected != nullptr)) return name + "exists differs";
    if (expected == nullptr) continue;
    using status = model_side::status;
    bool active = expected->state == status::active;
    double remaining = active ? expected->time - model.now : expected->time;
    if (real.timers.is_timer_paused(handle) != (expected->state == status::paused)) return name + "paused differs";
    if (real.timers.is_timer_pending(handle) != (expected->state == status::pending)) return name + "pending differs";
    if (real.timers.is_timer_active(handle) != (expected->state != status::paused)) return name + "active differs";
    if (real.timers.get_timer_rate(handle) != expected->rate) return name + "rate differs";
    if (real.timers.get_timer_remaining(handle) != static_cast<float>(remaining)) {
      return name + "remaining " + std::to_string(real.timers.get_timer_remaining(handle)) + ", model " +
             std::to_string(remaining);
    }
    if (real.timers.get_timer_elapsed(handle) != static_cast<float>(static_cast<double>(expected->rate) - remaining)) {
      return name + "elapsed differs";
    }
  }
  return {};
}

void run(std::uint64_t seed, int steps, int count, bool with_frames) {
  INFO("replay with MAGPIE_TIMER_SEED=" << seed << (with_frames ? " (with a frame counter)" : ""));
  std::uint64_t frame = 0;
  const std::uint64_t* frames = with_frames ? &frame : nullptr;
  real_side real(count, frames, seed);
  model_side model(count, frames, seed);
  random_source driver{seed ^ 0xd1b54a32d192ed03ull};
  for (int step = 0; step < steps; ++step) {
    int roll = driver.below(100);
    int logical = driver.below(count);
    if (roll < 35) {
      set_args args = draw_set(driver, logical, count);
      real.set(logical, args);
      model.set(logical, args);
    } else if (roll < 45) {
      real.clear(logical);
      model.clear(logical);
    } else if (roll < 55) {
      real.pause(logical);
      model.pause(logical);
    } else if (roll < 65) {
      real.unpause(logical);
      model.unpause(logical);
    } else if (roll < 70) {
      action then = draw_action(driver, logical, count);
      real.next_tick(logical, then);
      model.next_tick(logical, then);
    } else if (roll < 73) {
      real.clear_object(logical / per_group);
      model.clear_object(logical / per_group);
    } else {
      float delta = draw_delta(driver);
      real.tick(delta);
      model.tick(delta);
      if (driver.chance(0.7)) ++frame;
    }
    if (driver.chance(0.05)) ++frame;
    std::string difference = mismatch(real, model);
    REQUIRE_MESSAGE(difference.empty(), "step " << step << ": " << difference);
    real.log.clear();
    model.log.clear();
  }
}

// first_seed is MAGPIE_TIMER_SEED when set (to replay a failure), else a fresh one.
std::uint64_t first_seed() {
  if (const char* text = std::getenv("MAGPIE_TIMER_SEED")) return std::strtoull(text, nullptr, 10);
  return (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

}  // namespace property

TEST_CASE("timer: random operations match a reference model (printed seed replays)") {
  std::uint64_t seed = property::first_seed();
  MESSAGE("timer property seed " << seed << " (MAGPIE_TIMER_SEED=" << seed << " replays it)");
  for (bool with_frames : {false, true}) property::run(seed, 1500, 64, with_frames);
}

TEST_CASE("timer: random operations match a reference model, many seeds" * doctest::test_suite("stress")) {
  std::uint64_t seed = property::first_seed();
  MESSAGE("timer stress seed " << seed << " (seeds " << seed << " .. +" << 40 * magpie::test::stress_repeat() - 1 << ")");
  for (int i = 0; i < 40 * magpie::test::stress_repeat(); ++i) {
    property::run(seed + static_cast<std::uint64_t>(i), 3000, 128, i % 2 == 1);
  }
}

// A million live timers: each fires exactly once, in the first tick past its expiry, in
// expiry order with ties in the order set.
TEST_CASE("timer: a million one-shot timers each fire once, on time, in order" * doctest::test_suite("stress")) {
  constexpr std::size_t count = 1000000;
  random_source random{7};
  timer_manager timers;
  std::vector<double> expire(count);
  std::vector<int> fired_in(count, -1);
  std::vector<std::uint32_t> order;
  order.reserve(count);
  int tick_number = 0;
  std::size_t fired_twice = 0;
  timer_handle handle;
  for (std::size_t i = 0; i < count; ++i) {
    float delay = random.between(0.1, 10);
    expire[i] = static_cast<double>(delay);
    timers.set_timer(handle, [&, i] {
      if (fired_in[i] != -1) ++fired_twice;
      fired_in[i] = tick_number;
      order.push_back(static_cast<std::uint32_t>(i));
    }, delay);
    handle.invalidate();
  }
  CHECK(timers.live_timer_count() == count);
  timers.tick(0.f);
  std::vector<double> clock{0};
  while (timers.live_timer_count() > 0 && tick_number < 1000) {
    ++tick_number;
    timers.tick(1.f / 60);
    clock.push_back(clock.back() + static_cast<double>(1.f / 60));
  }
  REQUIRE(order.size() == count);
  CHECK(fired_twice == 0);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    auto in = static_cast<std::size_t>(fired_in[i]);
    if (!(clock[in] > expire[i]) || clock[in - 1] > expire[i]) ++wrong;
  }
  CHECK(wrong == 0);
  std::size_t out_of_order = 0;
  for (std::size_t i = 1; i < count; ++i) {
    double before = expire[order[i - 1]];
    double after = expire[order[i]];
    if (before > after || (before == after && order[i - 1] > order[i])) ++out_of_order;
  }
  CHECK(out_of_order == 0);
}

}  // TEST_SUITE("timer")
