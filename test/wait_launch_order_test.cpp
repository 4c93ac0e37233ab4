// Suite "wait_launch_order": with no workers, a wait from a thread at top level runs the
// older tasks of its task's launch site first, in launch order, and wait_all its range oldest
// first (lib/tasks/wait_launch_order.cpp).
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <ranges>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

// With no workers, a wait at top level runs the older tasks of its task's type (one launch
// site, as a loop launching a batch) oldest first, as Unreal's no-threading mode runs each
// task at its launch: a task after another may wait for an event that one triggers, and runs
// after it. (Run newest first, down the deque, it would wait for ever.)
TEST_CASE("wait_launch_order: with no workers, a wait runs the older tasks of its task's type in launch order, up to it") {
  for (bool attached : {true, false}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    std::vector<int> ran;  // one thread runs everything
    task_event triggered_by_1("triggered by task 1", pool);
    auto launch_part = [&](int i) {
      return pool.launch("part", [&ran, &triggered_by_1, i] {
        if (i == 2) CHECK(triggered_by_1.wait(std::chrono::seconds(30)));
        ran.push_back(i);
        if (i == 1) triggered_by_1.trigger();
      });
    };
    std::vector<task<>> handles;
    for (int i = 0; i < 4; ++i) handles.push_back(launch_part(i));
    handles[2].wait();
    CHECK(ran == std::vector<int>{0, 1, 2});
    for (int i = 4; i < 204; ++i) handles.push_back(launch_part(i));
    handles[100].wait();  // up to it, not the rest
    CHECK(ran.size() == 101);
    for (std::size_t i = 0; i < ran.size(); ++i) CHECK(ran[i] == static_cast<int>(i));
    CHECK(wait_all(handles, std::chrono::seconds(30)));
    CHECK(ran.size() == 204);
    if (attached) pool.detach();
  }
}

// The run stops at the oldest entry of another type: a task launched elsewhere, run before
// its wait asks, may wait for what the waiting thread does next (here an event main triggers
// after waiting for a newer task: run first, it would wait for ever). Likewise a pipe to
// drain, a limiter, a task_group to join.
TEST_CASE("wait_launch_order: with no workers, a wait does not run an older task of another type first") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  task_event later("triggered by main after its wait", pool);
  bool saw_trigger = false;
  task<> older = pool.launch("waits for main", [&] { saw_trigger = later.wait(std::chrono::seconds(30)); });
  task<> newer = pool.launch("newer", [] {});
  newer.wait();
  CHECK_FALSE(older.is_completed());
  later.trigger();
  older.wait();
  CHECK(saw_trigger);

  // The tasks before the other type run; the other goes back, at the newest end (its type is
  // read only once the wait has taken it: a helping thread may have taken it and freed it).
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    if (attached) pool.attach(named_thread::game);
    std::vector<int> ran;
    auto launch_part = [&](int i) { return pool.launch("part", [&ran, i] { ran.push_back(i); }); };
    std::vector<task<>> handles;
    handles.push_back(launch_part(0));
    handles.push_back(launch_part(1));
    task<> other = pool.launch("other", [&ran] { ran.push_back(-1); });
    handles.push_back(launch_part(2));
    handles.push_back(launch_part(3));
    handles[2].wait();  // 0 and 1 run first; 2 is then claimed where it lies
    CHECK(ran == std::vector<int>{0, 1, 2});
    CHECK_FALSE(other.is_completed());
    handles[3].wait();  // the newest, taken back
    CHECK(ran == std::vector<int>{0, 1, 2, 3});
    CHECK(pool.try_run_one());  // what is left: the other type, still queued
    CHECK(other.is_completed());
    CHECK_FALSE(pool.try_run_one());
    if (attached) pool.detach();
  }
}

// A launch site is the body's type, not its code: two lambdas that compile to the same
// instructions are two sites (their handlers keep distinct addresses however the build
// merges identical functions). Told apart, the wait for the newer runs it alone; taken for
// one site, the older would run first and wait for what main triggers after the wait.
TEST_CASE("wait_launch_order: with no workers, two launch sites whose bodies compile alike are told apart") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    task_event later("triggered by main after its wait", pool);
    task_event already("triggered at once", pool);
    already.trigger();
    bool older_saw = false;
    bool newer_saw = false;
    task<> older = pool.launch("older", [&event = later, &saw = older_saw] { saw = event.wait(std::chrono::seconds(5)); });
    task<> newer = pool.launch("newer", [&event = already, &saw = newer_saw] { saw = event.wait(std::chrono::seconds(5)); });
    newer.wait();
    CHECK(newer_saw);
    CHECK_FALSE(older.is_completed());
    later.trigger();
    older.wait();
    CHECK(older_saw);
    if (attached) pool.detach();
  }
}

// Tasks of other types scattered among the task's own go back at the newest end, unrun, and
// the run goes on past them, even two in a row; an entry of another type met first stops it.
TEST_CASE("wait_launch_order: with no workers, a wait's run in launch order passes over tasks of other types") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    std::vector<int> ran;
    std::vector<task<>> parts;
    std::vector<task<>> others;
    for (int i = 0; i < 300; ++i) {
      parts.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
      if (i == 10 || i == 11 || i == 40 || i == 41 || i == 42 || i == 200) {
        others.push_back(pool.launch("other", [&ran] { ran.push_back(-1); }));
      }
    }
    parts[250].wait();
    REQUIRE(ran.size() == 251);
    for (std::size_t i = 0; i < ran.size(); ++i) CHECK(ran[i] == static_cast<int>(i));
    for (const task<>& other : others) CHECK_FALSE(other.is_completed());
    parts[299].wait();
    CHECK(ran.size() == 300);
    CHECK(ran.back() == 299);
    for (const task<>& other : others) CHECK_FALSE(other.is_completed());
    CHECK(wait_all(others, std::chrono::seconds(30)));
    CHECK(ran.size() == 306);

    // Another type at the oldest end: the wait runs its own task only.
    ran.clear();
    task<> first = pool.launch("other", [&ran] { ran.push_back(-1); });
    parts.clear();
    for (int i = 0; i < 10; ++i) parts.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
    parts[5].wait();
    CHECK(ran == std::vector<int>{5});
    CHECK_FALSE(first.is_completed());
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    first.wait();
    CHECK(ran.size() == 11);
    if (attached) pool.detach();
  }
}

// Entries this thread left stale (tasks it claimed past their entries) are dropped where the
// run meets them, even first, and the run goes on; a live entry of another type met first
// still stops it, and whatever else the run took goes back (no entry lost: no_leaks).
TEST_CASE("wait_launch_order: with no workers, a wait's run in launch order drops stale entries of other types") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<int> ran;
  std::vector<task<>> thirds;
  for (int i = 0; i < 4; ++i) thirds.push_back(pool.launch("third", [&ran] { ran.push_back(-3); }));
  std::vector<task<>> others;
  for (int i = 0; i < 4; ++i) others.push_back(pool.launch("other", [&ran] { ran.push_back(-1); }));
  task<> fourth = pool.launch("fourth", [&ran] { ran.push_back(-4); });
  std::vector<task<>> parts;
  for (int i = 0; i < 10; ++i) parts.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
  // Newest first: each wait meets a "third" first, which goes on top; its task, neither end
  // of the deque, is claimed where it lies, so the first three leave stale entries.
  for (int i = 3; i >= 0; --i) others[static_cast<std::size_t>(i)].wait();
  CHECK(ran == std::vector<int>{-1, -1, -1, -1});
  ran.clear();
  parts[5].wait();  // the three stale entries dropped; "fourth" stops the run
  CHECK(ran == std::vector<int>{5});
  CHECK_FALSE(fourth.is_completed());
  fourth.wait();  // the newest, though "part" lies first: taken back
  CHECK(ran == std::vector<int>{5, -4});
  CHECK(wait_all(parts, std::chrono::seconds(30)));
  CHECK(wait_all(thirds, std::chrono::seconds(30)));
  CHECK(ran.size() == 2 + 9 + 4);
  CHECK_FALSE(pool.try_run_one());
}

// Unreal's no-threading mode runs each task at its launch, so a body may wait for what an
// older task does. wait_all over a range that starts at the oldest end of the deque takes it
// oldest first; taken newest first, the newer task ran first and waited for ever with
// nobody to run the older one.
TEST_CASE("wait_launch_order: with no workers, wait_all runs its range in launch order: a body may wait for what an older task triggers") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    task_event triggered("triggered by the older task", pool);
    bool saw_trigger = false;
    std::vector<task<>> handles;
    handles.push_back(pool.launch("older", [&triggered] { triggered.trigger(); }));
    handles.push_back(pool.launch("newer", [&triggered, &saw_trigger] { saw_trigger = triggered.wait(std::chrono::seconds(30)); }));
    CHECK(wait_all(handles));
    CHECK(saw_trigger);
    if (attached) pool.detach();
  }
}

// A chain behind an event, waited for with no workers, runs in launch order: an untimed
// wait's run takes the whole chain (each completion runs the next link at once, as a
// worker's does), and a timed wait runs one link per round and stops once its deadline has
// passed, the rest of the chain still queued for a later wait.
TEST_CASE("wait_launch_order: with no workers, a wait runs a chain's links one run after another, up to its deadline") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    constexpr int links = 100;
    std::vector<int> ran;
    for (bool timed : {true, false}) {
      CAPTURE(timed);
      ran.clear();
      task_event gate("gate", pool);
      task<> last = gate;
      for (int i = 0; i < links; ++i) {
        last = pool.launch("link", [&ran, i, timed] {
          if (timed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          ran.push_back(i);
        }, last);
      }
      gate.trigger();
      if (timed) {
        CHECK_FALSE(last.wait(std::chrono::milliseconds(20)));  // 100 links take 200 ms at least
        CHECK_FALSE(ran.empty());
        CHECK(ran.size() < static_cast<std::size_t>(links));
      }
      last.wait();
      REQUIRE(ran.size() == static_cast<std::size_t>(links));
      for (int i = 0; i < links; ++i) CHECK(ran[static_cast<std::size_t>(i)] == i);
    }
    if (attached) pool.detach();
  }
}

// What a run's last entry readies as it completes is of whatever launch site: a task of
// another site, run then, before its wait asks, may wait for what the waiting thread does
// next (here an event main triggers after its wait), which would hang. From a plain main it
// is queued and waits for its own wait or a help.
TEST_CASE("wait_launch_order: with no workers, a task of another type readied by a run does not run before its wait") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    task_event later("triggered by main after its wait", pool);
    bool saw_trigger = false;
    auto launch_part = [&](task<> after) { return pool.launch("part", [] {}, after); };
    task<> first = launch_part(task<>());  // queued: the run's last entry
    task<> other = pool.launch("waits for main", [&] { saw_trigger = later.wait(std::chrono::milliseconds(200)); },
                               first);
    task<> second = launch_part(first);  // the task waited for, readied with `other`
    second.wait();
    CHECK_FALSE(other.is_completed());
    later.trigger();
    other.wait();
    CHECK(saw_trigger);
    if (attached) pool.detach();
  }
}

// Beneath a body the rule does not hold (an entry launched after the body's task may wait
// for it to complete): a wait there for a task in the middle of the deque runs that task alone.
TEST_CASE("wait_launch_order: with no workers, a wait inside a body for a task in the middle of the deque runs that task alone") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<int> ran;
  task<> outer = pool.launch("outer", [&] {
    std::vector<task<>> handles;
    for (int i = 0; i < 3; ++i) handles.push_back(pool.launch("part", [&ran, i] { ran.push_back(i); }));
    handles[1].wait();
    CHECK(ran == std::vector<int>{1});
    CHECK(wait_all(handles));
  });
  outer.wait();
  CHECK(ran == std::vector<int>{1, 2, 0});
}

// Running older tasks in launch order runs bodies other than the task waited for. They may
// free it (drop its last handle) or move the handle waited through (grow the vector holding
// it): the wait holds the task itself meanwhile and never reads the handle again (these
// cases need ASan, which shows a read of a freed task or a freed handle).
TEST_CASE("wait_launch_order: with no workers, older bodies that drop or move the handle waited through are harmless") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::vector<task<>> handles;
  task<> target;
  // One launch site (the rule runs older tasks of the waited one's type): part 0 drops the
  // last handle of the task waited for, part 1 grows the vector holding another one.
  auto launch_part = [&](int i) {
    return pool.launch("part", [&, i] {
      if (i == 0) target = task<>();
      if (i == 1) {
        for (int more = 0; more < 100; ++more) handles.push_back(pool.launch("more", [] {}));
      }
    });
  };
  handles.reserve(3);
  handles.push_back(launch_part(0));
  target = launch_part(2);
  target.wait();
  CHECK_FALSE(target.is_valid());  // part 0 ran first, and dropped it
  handles.push_back(launch_part(1));
  handles.push_back(launch_part(3));
  handles[2].wait();
  CHECK(handles.size() == 103);  // part 1 ran first, and moved the handle waited through
  CHECK(wait_all(handles));
}
