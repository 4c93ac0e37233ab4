// Suite "timer_handles": timer_manager's timers bound to objects (cleared with their object,
// removed once a weakly held one is gone), handles that are unknown, stale or another
// manager's, callbacks and callables that throw, reported misuse, and the thread that owns
// a manager.
#include <magpie/timer_manager.h>

#include "support.h"

#include <doctest/doctest.h>

#include <limits>
#include <memory>
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

}  // namespace

TEST_SUITE("timer_handles") {

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

}  // TEST_SUITE("timer_handles")
