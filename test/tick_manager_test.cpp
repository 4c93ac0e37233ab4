// Tests for include/magpie/tick_manager.h — groups, demotion, cycles, threads, priority and
// nested tasks. Intervals, errors, pause frames, dumps and the frame's own figures are in
// tick_manager_frames_test.cpp, the schedule's own cases (newly spawned ticks, batching,
// caching) in tick_schedule_test.cpp, mid-frame unregistration and destruction in
// tick_lifetime_test.cpp.
#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/tick_manager.h>

#include "support.h"
#include "task_support.h"
#include "tick_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using magpie::level_tick;
using magpie::scheduler;
using magpie::tick_function;
using magpie::tick_manager;
using magpie::ticking_group;
using namespace magpie::test;

namespace {

int count_mentions(const std::vector<diagnostic_recorder::entry>& reports, const std::string& text) {
  int found = 0;
  for (const auto& each : reports) found += each.message.find(text) != std::string::npos ? 1 : 0;
  return found;
}

}  // namespace

TEST_SUITE("tick_manager") {

TEST_CASE("tick_manager: every group's ticks run in that group, groups in frame order") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  std::vector<std::unique_ptr<logged_tick>> ticks;
  for (auto [group, block] : frame_groups) {
    auto& tick = *ticks.emplace_back(std::make_unique<logged_tick>(std::string(magpie::to_string(group)), log));
    tick.set_tick_group(group);
    tick.set_end_tick_group(group);
    tick.register_tick_function(manager);
  }
  CHECK(manager.registered_count() == ticks.size());
  manager.start_frame(0.5f);
  for (const auto& [group_in_frame, blocks] : frame_groups) {
    // Named copies: the checks below capture them, and clang before 16 cannot capture a binding.
    const ticking_group group = group_in_frame;
    const bool block = blocks;
    manager.run_tick_group(group, block);
    if (block) {  // a blocking group returns after its ticks completed
      auto& tick = *ticks[static_cast<std::size_t>(group)];
      CHECK_MESSAGE(tick.runs.load() == 1, magpie::to_string(group));
      CHECK(tick.seen_start == group);
      CHECK(tick.last_delta.load() == 0.5f);
    }
  }
  manager.end_frame();
  auto events = log.take();
  REQUIRE(events.size() == ticks.size());
  for (std::size_t i = 0; i < events.size(); ++i) CHECK(events[i] == ticks[i]->name());
  CHECK(manager.last_frame_stats().ticks_run == ticks.size());
}

TEST_CASE("tick_manager: a tick is done when its end group's run_tick_group returns, during_physics by end_physics") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  logged_tick long_running("spans pre to post", log);
  long_running.set_run_on_any_thread(true);
  long_running.set_end_tick_group(ticking_group::post_physics);
  logged_tick during("during", log);
  during.set_tick_group(ticking_group::during_physics);
  during.set_end_tick_group(ticking_group::during_physics);
  during.set_run_on_any_thread(true);
  long_running.register_tick_function(manager);
  during.register_tick_function(manager);
  for (int frame = 0; frame < 20; ++frame) {
    manager.start_frame(0.01f);
    manager.run_tick_group(ticking_group::pre_physics);
    manager.run_tick_group(ticking_group::start_physics);
    manager.run_tick_group(ticking_group::during_physics, false);
    manager.run_tick_group(ticking_group::end_physics);
    CHECK(during.runs.load() == frame + 1);
    manager.run_tick_group(ticking_group::post_physics);
    CHECK(long_running.runs.load() == frame + 1);
    CHECK(long_running.actual_end_tick_group() == ticking_group::post_physics);
    manager.run_tick_group(ticking_group::post_update_work);
    manager.run_tick_group(ticking_group::last_demotable);
    manager.end_frame();
  }
}

TEST_CASE("tick_manager: groups out of order, twice or outside a frame are reported and refused") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick post("post", log);
  post.set_tick_group(ticking_group::post_physics);
  post.register_tick_function(manager);
  diagnostic_recorder recorder;
  manager.run_tick_group(ticking_group::pre_physics);
  CHECK(mentions(recorder.reports(), "outside start_frame/end_frame"));
  manager.start_frame(0.1f);
  manager.run_tick_group(ticking_group::post_physics);
  CHECK(mentions(recorder.reports(), "post_physics out of order (next is pre_physics)"));
  CHECK(post.runs.load() == 0);
  manager.run_tick_group(ticking_group::pre_physics);
  manager.run_tick_group(ticking_group::pre_physics);
  CHECK(mentions(recorder.reports(), "pre_physics already ran this frame"));
  manager.run_tick_group(ticking_group::newly_spawned);
  CHECK(mentions(recorder.reports(), "newly_spawned passes run as part of last_demotable"));
  manager.start_frame(0.1f);
  CHECK(mentions(recorder.reports(), "a frame is already running"));
  manager.end_frame();  // the rest is reported, then run
  CHECK(mentions(recorder.reports(), "end_frame: called before run_tick_group(start_physics)"));
  CHECK(post.runs.load() == 1);
  manager.end_frame();
  CHECK(mentions(recorder.reports(), "no frame is running"));
  manager.start_frame(-1.f);
  CHECK(mentions(recorder.reports(), "delta_seconds must be finite"));
  CHECK(recorder.count() == 8);
}

TEST_CASE("tick_manager: a prerequisite demotes a tick to its start group, skipping start and end physics") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick in_start("in start_physics", log), demoted("demoted", log), in_during("in during", log),
      late("late", log), end_late("ends late", log);
  in_start.set_tick_group(ticking_group::start_physics);
  demoted.add_prerequisite(in_start);  // pre_physics, pushed to start_physics: skips to during
  in_during.set_tick_group(ticking_group::during_physics);
  in_during.set_end_tick_group(ticking_group::end_physics);  // its own end: no skipping
  late.add_prerequisite(in_during);                          // ends no earlier than end_physics: skips to post
  end_late.set_tick_group(ticking_group::post_update_work);
  end_late.add_prerequisite(late);
  for (logged_tick* tick : {&in_start, &demoted, &in_during, &late, &end_late}) tick->register_tick_function(manager);
  run_frame(manager);
  CHECK(in_start.actual_start_tick_group() == ticking_group::start_physics);
  CHECK(in_start.actual_end_tick_group() == ticking_group::start_physics);
  CHECK(demoted.actual_start_tick_group() == ticking_group::during_physics);
  CHECK(demoted.actual_end_tick_group() == ticking_group::during_physics);
  CHECK(in_during.actual_end_tick_group() == ticking_group::end_physics);
  CHECK(late.actual_start_tick_group() == ticking_group::during_physics);
  CHECK(late.actual_end_tick_group() == ticking_group::post_physics);
  CHECK(end_late.actual_start_tick_group() == ticking_group::post_update_work);
  auto events = log.take();
  CHECK(event_log::index_of(events, "in start_physics") < event_log::index_of(events, "demoted"));
  CHECK(event_log::index_of(events, "in during") < event_log::index_of(events, "late"));
  CHECK(event_log::index_of(events, "late") < event_log::index_of(events, "ends late"));
  CHECK(manager.last_frame_stats().demoted == 2);
}

TEST_CASE("tick_manager: within a group the prerequisite edge orders ticks, on any thread") {
  scheduler pool(tick_pool(2));
  tick_manager manager(pool);
  event_log log;
  std::vector<std::unique_ptr<logged_tick>> chain;
  for (int i = 0; i < 40; ++i) {
    auto& tick = *chain.emplace_back(std::make_unique<logged_tick>(numbered("link ", i), log));
    tick.set_run_on_any_thread(i % 2 == 0);
    if (i > 0) tick.add_prerequisite(*chain[static_cast<std::size_t>(i - 1)]);
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->register_tick_function(manager);
  for (int frame = 0; frame < 5; ++frame) {
    run_frame(manager);
    auto events = log.take();
    REQUIRE(events.size() == chain.size());
    for (std::size_t i = 0; i < chain.size(); ++i) CHECK(events[i] == chain[i]->name());
  }
}

TEST_CASE("tick_manager: a prerequisite that does not tick this frame is ignored; one on itself is refused") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick disabled("disabled", log), cooling("cooling", log), unregistered("unregistered", log),
      after_disabled("after disabled", log), after_cooling("after cooling", log), after_gone("after gone", log);
  for (logged_tick* before : {&disabled, &cooling, &unregistered}) before->set_tick_group(ticking_group::post_physics);
  disabled.set_tick_function_enable(false);
  cooling.set_tick_interval(10.f);
  after_disabled.add_prerequisite(disabled);
  after_cooling.add_prerequisite(cooling);
  after_gone.add_prerequisite(unregistered);
  for (logged_tick* tick : {&disabled, &cooling, &after_disabled, &after_cooling, &after_gone}) {
    tick->register_tick_function(manager);
  }
  run_frame(manager);  // the interval tick runs in its first frame: after_cooling waits for it
  CHECK(after_cooling.actual_start_tick_group() == ticking_group::post_physics);
  run_frame(manager);
  CHECK(after_disabled.actual_start_tick_group() == ticking_group::pre_physics);
  CHECK(after_cooling.actual_start_tick_group() == ticking_group::pre_physics);
  CHECK(after_gone.actual_start_tick_group() == ticking_group::pre_physics);
  CHECK(cooling.runs.load() == 1);
  CHECK(after_cooling.runs.load() == 2);
  diagnostic_recorder recorder;
  after_gone.add_prerequisite(after_gone);
  CHECK(mentions(recorder.reports(), "cannot be its own prerequisite"));
  CHECK(after_gone.prerequisites().size() == 1);
}

TEST_CASE("tick_manager: a cycle is reported once per schedule change, naming every tick on it; all still tick") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick a("a", log), b("b", log), c("c", log), outside("outside", log);
  a.add_prerequisite(b);
  b.add_prerequisite(c);
  c.add_prerequisite(a);
  for (logged_tick* tick : {&a, &b, &c}) tick->register_tick_function(manager);
  diagnostic_recorder recorder;
  for (int frame = 0; frame < 3; ++frame) {
    run_frame(manager);
    auto events = log.take();
    REQUIRE(events.size() == 3);
    // The DFS from a drops only c -> a: c runs first, then b, then a.
    CHECK(events == std::vector<std::string>{"c", "b", "a"});
    CHECK(manager.last_frame_stats().cycles_broken == 1);
  }
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].message.find("'a' waits for 'b' waits for 'c' waits for 'a'") != std::string::npos);
  CHECK(reports[0].severity == magpie::severity::warning);
  outside.register_tick_function(manager);  // a change: the rebuilt schedule reports it again, once
  run_frame(manager);
  run_frame(manager);
  CHECK(count_mentions(recorder.reports(), "cycle") == 2);
  magpie::tick_manager uncached(pool, {.cache_schedule = false});
  a.unregister_tick_function();
  b.unregister_tick_function();
  c.unregister_tick_function();
  for (logged_tick* tick : {&a, &b, &c}) tick->register_tick_function(uncached);
  for (int frame = 0; frame < 3; ++frame) run_frame(uncached);  // rebuilt every frame, reported once
  CHECK(count_mentions(recorder.reports(), "cycle") == 3);
}

TEST_CASE("tick_manager: game-thread ticks run on the game thread, any-thread ones on workers unless demoted") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  std::atomic<bool> worker_ran{false};
  logged_tick game("game", log), demoted_any("demoted any", log);
  logged_tick any("any", log);
  any.set_run_on_any_thread(true);
  demoted_any.set_run_on_any_thread(true);
  demoted_any.add_prerequisite(game);
  demoted_any.set_tick_group(ticking_group::pre_physics);
  game.set_tick_group(ticking_group::during_physics);
  // Holds the game thread until the any-thread tick ran: it can only have run on a worker.
  tick_function holder("holder", [&](float, level_tick) {
    while (!worker_ran.load()) std::this_thread::yield();
  });
  tick_function marker("marker", [&](float, level_tick) { worker_ran.store(true); });
  marker.set_run_on_any_thread(true);
  for (tick_function* tick : {static_cast<tick_function*>(&game), static_cast<tick_function*>(&demoted_any),
                              static_cast<tick_function*>(&any), &holder, &marker}) {
    tick->register_tick_function(manager);
  }
  CHECK_FALSE(scheduler::current_named_thread().has_value());
  run_frame(manager);
  CHECK_FALSE(scheduler::current_named_thread().has_value());  // attached for the frame only
  CHECK(worker_ran.load());
  CHECK(game.last_thread == std::this_thread::get_id());
  CHECK(demoted_any.actual_start_tick_group() == ticking_group::during_physics);
  CHECK(demoted_any.last_thread == std::this_thread::get_id());
  SUBCASE("without async ticks everything runs on the game thread") {
    tick_manager serial(pool, {.allow_async_ticks = false});
    any.unregister_tick_function();
    any.register_tick_function(serial);
    run_frame(serial);
    CHECK(any.last_thread == std::this_thread::get_id());
  }
  SUBCASE("without workers everything runs on the game thread") {
    scheduler lonely(tick_pool(0));
    tick_manager serial(lonely);
    any.unregister_tick_function();
    any.register_tick_function(serial);
    run_frame(serial);
    CHECK(any.last_thread == std::this_thread::get_id());
  }
}

TEST_CASE("tick_manager: high-priority ticks are released first within their group") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  std::vector<std::unique_ptr<logged_tick>> normal;
  for (int i = 0; i < 5; ++i) {
    normal.push_back(std::make_unique<logged_tick>(numbered("normal ", i), log));
    normal.back()->register_tick_function(manager);
  }
  logged_tick urgent("urgent", log);
  urgent.set_high_priority(true);
  urgent.register_tick_function(manager);
  run_frame(manager);
  auto events = log.take();
  REQUIRE(events.size() == 6);
  CHECK(events.front() == "urgent");
}

TEST_CASE("tick_manager: a tick that adds a nested task completes, with its end group, only after it") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  std::atomic<bool> body_returned{false}, go{false}, nested_done{false}, seen_by_dependent{false};
  std::thread opener;
  tick_function parent("parent", [&](float, level_tick) {
    magpie::add_nested(pool.launch("nested", [&] {
      while (!go.load()) std::this_thread::yield();
      nested_done.store(true);
    }));
    body_returned.store(true);
  });
  parent.set_run_on_any_thread(true);
  tick_function dependent("dependent", [&](float, level_tick) { seen_by_dependent.store(nested_done.load()); });
  dependent.add_prerequisite(parent);
  dependent.set_tick_group(ticking_group::post_physics);
  parent.register_tick_function(manager);
  dependent.register_tick_function(manager);
  // Lets the nested task finish a little after the body returned; correctness never depends
  // on the pause, it only gives a broken add_nested the chance to show.
  opener = std::thread([&] {
    while (!body_returned.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    go.store(true);
  });
  manager.start_frame(0.1f);
  manager.run_tick_group(ticking_group::pre_physics);
  CHECK(nested_done.load());
  for (std::size_t i = 1; i < std::size(frame_groups); ++i) {
    manager.run_tick_group(frame_groups[i].first, frame_groups[i].second);
  }
  manager.end_frame();
  opener.join();
  CHECK(seen_by_dependent.load());
}

}  // TEST_SUITE("tick_manager")
