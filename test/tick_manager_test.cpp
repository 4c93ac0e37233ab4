// Tests for include/magpie/tick_manager.h — groups, demotion, cycles, threads, priority,
// nested tasks, intervals, errors, pause frames and dumps. The schedule's own cases (newly
// spawned ticks, batching, caching) are in tick_schedule_test.cpp, mid-frame unregistration
// and destruction in tick_lifetime_test.cpp.
#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/tick_manager.h>

#include "support.h"
#include "task_support.h"
#include "tick_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
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
  for (auto [group, block] : frame_groups) {
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

TEST_CASE("tick_manager: an interval tick runs when registered, then when its cooldown is below the frame's delta") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick every_half("every half second", log);
  every_half.set_tick_interval(0.5f);
  every_half.register_tick_function(manager);
  std::vector<int> ran_in;
  std::vector<float> deltas;
  for (int frame = 1; frame <= 8; ++frame) {
    int before = every_half.runs.load();
    run_frame(manager, 0.25f);
    if (every_half.runs.load() != before) {
      ran_in.push_back(frame);
      deltas.push_back(every_half.last_delta.load());
    }
    if (frame > 1) CHECK_FALSE(manager.last_frame_stats().schedule_rebuilt);  // cooldowns never rebuild
  }
  // Frame 3 ends exactly at the expiry (0.75 s): strictly below is required, so frame 4.
  CHECK(ran_in == std::vector<int>{1, 4, 6, 8});
  CHECK(deltas == std::vector<float>{0.25f, 0.75f, 0.5f, 0.5f});
}

TEST_CASE("tick_manager: a late interval tick runs at most once per frame and keeps its phase") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick fast("fast", log);
  fast.set_tick_interval(0.25f);
  fast.register_tick_function(manager);
  for (int frame = 1; frame <= 4; ++frame) {
    run_frame(manager, 1.f);
    CHECK(fast.runs.load() == frame);
  }
  logged_tick phased("phased", log);
  phased.set_tick_interval(0.75f);
  phased.register_tick_function(manager);
  std::vector<int> ran_in;
  for (int frame = 1; frame <= 9; ++frame) {
    int before = phased.runs.load();
    run_frame(manager, 0.5f);
    if (phased.runs.load() != before) ran_in.push_back(frame);
  }
  // Registered at t=0.5 (end of frame 1): due at 1.25, 2.0 (strict: not at 2.0), 2.75, 3.5, 4.25.
  CHECK(ran_in == std::vector<int>{1, 3, 5, 6, 8, 9});
}

TEST_CASE("tick_manager: update_tick_interval_and_cool_down restarts the cooldown from the current frame") {
  scheduler pool(tick_pool());
  tick_manager manager(pool);
  event_log log;
  logged_tick slow("slow", log);
  slow.set_tick_interval(0.5f);
  slow.register_tick_function(manager);
  run_frame(manager, 0.25f);  // runs (first frame); due again at 0.75
  run_frame(manager, 0.25f);
  slow.update_tick_interval_and_cool_down(1.f);  // now 0.5: due at 1.5
  std::vector<int> ran_in;
  for (int frame = 3; frame <= 8; ++frame) {
    int before = slow.runs.load();
    run_frame(manager, 0.25f);
    if (slow.runs.load() != before) ran_in.push_back(frame);
  }
  CHECK(ran_in == std::vector<int>{7});
  slow.update_tick_interval_and_cool_down(0.f);  // every frame again
  run_frame(manager, 0.25f);
  run_frame(manager, 0.25f);
  CHECK(slow.runs.load() == 4);
}

TEST_CASE("tick_manager: a throwing tick is reported, the frame goes on and its dependents run") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  tick_function thrower("thrower", [](float, level_tick) { throw std::runtime_error("boom"); });
  thrower.set_run_on_any_thread(true);
  logged_tick dependent("dependent", log), neighbour("neighbour", log);
  dependent.add_prerequisite(thrower);
  thrower.register_tick_function(manager);
  dependent.register_tick_function(manager);
  neighbour.register_tick_function(manager);
  diagnostic_recorder recorder;
  run_frame(manager);
  CHECK(dependent.runs.load() == 1);
  CHECK(neighbour.runs.load() == 1);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::unhandled_exception);
  CHECK(reports[0].message.find("'thrower' threw: boom") != std::string::npos);
}

TEST_CASE("tick_manager: registration from another thread is refused; a destroyed manager unregisters its ticks") {
  scheduler pool(tick_pool(1));
  event_log log;
  logged_tick tick("tick", log);
  {
    tick_manager manager(pool);
    diagnostic_recorder recorder;
    std::thread([&] { tick.register_tick_function(manager); }).join();
    CHECK(mentions(recorder.reports(), "not its tick manager's game thread; refused"));
    CHECK_FALSE(tick.is_tick_function_registered());
    std::thread([&] { manager.start_frame(0.1f); }).join();
    CHECK(mentions(recorder.reports(), "start_frame: called from a thread other than the game thread"));
    tick.register_tick_function(manager);
    logged_tick other("other", log);
    tick.add_prerequisite(other);
    other.register_tick_function(manager);
    std::thread([&] { tick.set_tick_group(ticking_group::post_physics); }).join();
    CHECK(tick.tick_group() == ticking_group::pre_physics);
    run_frame(manager);
    CHECK(tick.runs.load() == 1);
  }  // `other` went first: the edge went with it
  CHECK_FALSE(tick.is_tick_function_registered());
  CHECK(tick.prerequisites().empty());
  tick_manager next(pool);
  tick.register_tick_function(next);
  run_frame(next);
  CHECK(tick.runs.load() == 2);
}

TEST_CASE("tick_manager: a pause frame runs only the ticks that tick when paused, on the game thread") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  logged_tick paused("ticks when paused", log), normal("normal", log);
  paused.set_tick_even_when_paused(true);
  paused.set_run_on_any_thread(true);
  paused.register_tick_function(manager);
  normal.register_tick_function(manager);
  manager.run_pause_frame(0.2f);
  CHECK(log.take() == std::vector<std::string>{"ticks when paused"});
  CHECK(paused.last_type.load() == level_tick::pause_tick);
  CHECK(paused.last_thread == std::this_thread::get_id());
  CHECK(manager.last_frame_stats().ticks_run == 1);
}

TEST_CASE("tick_manager: dump lists the ticks by group with their prerequisites") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  logged_tick physics("physics", log), camera("camera", log);
  physics.set_tick_group(ticking_group::during_physics);
  camera.add_prerequisite(physics);
  camera.set_tick_interval(0.5f);
  physics.register_tick_function(manager);
  camera.register_tick_function(manager);
  run_frame(manager);
  std::ostringstream out;
  manager.dump(out);
  std::string text = out.str();
  CHECK(text.find("2 registered") != std::string::npos);
  CHECK(text.find("during_physics:\n  'physics'") != std::string::npos);
  CHECK(text.find("'camera'") != std::string::npos);
  CHECK(text.find("every 0.5 s; after 'physics'") != std::string::npos);
}

TEST_CASE("tick_manager: the game thread runs its own ticks before any-thread ones, which the workers take meanwhile") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    std::thread::id game = std::this_thread::get_id();
    std::mutex guard;
    std::vector<bool> game_thread_ran;  // on the game thread, in order: whether each was a game-thread tick
    std::atomic<int> on_workers{0};
    std::atomic<int> runs{0};
    std::vector<std::unique_ptr<tick_function>> ticks;
    for (int i = 0; i < 96; ++i) {
      bool any_thread = i % 3 != 0;
      auto body = [&, any_thread, first = i == 0](float, level_tick) {
        runs.fetch_add(1);
        if (std::this_thread::get_id() != game) {
          on_workers.fetch_add(1);
          return;
        }
        if (first && workers > 0) {  // the workers have any-thread chunks while the game thread is busy
          auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (on_workers.load() == 0 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
          CHECK(on_workers.load() > 0);
        }
        std::lock_guard lock(guard);
        game_thread_ran.push_back(!any_thread);
      };
      auto& tick = *ticks.emplace_back(std::make_unique<tick_function>(numbered("t", i), body));
      tick.set_run_on_any_thread(any_thread);
      tick.register_tick_function(manager);
    }
    for (int frame = 0; frame < 3; ++frame) {
      run_frame(manager);
      CHECK(runs.exchange(0) == 96);
      std::lock_guard lock(guard);
      if (workers == 0) {  // every tick is the game thread's
        CHECK(game_thread_ran.size() == 96);
      } else {  // its own 32 first, then any it took back
        auto first_taken_back = std::find(game_thread_ran.begin(), game_thread_ran.end(), false);
        CHECK(first_taken_back - game_thread_ran.begin() == 32);
        CHECK(std::find(first_taken_back, game_thread_ran.end(), true) == game_thread_ran.end());
      }
      game_thread_ran.clear();
      on_workers.store(0);
    }
  }
}

TEST_CASE("tick_manager: a frame's lower bound and efficiency come from its own tick times") {
  using std::chrono::microseconds;
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool, {.measure_tick_times = true});
    std::vector<std::unique_ptr<tick_function>> ticks;
    auto add = [&](const char* name, microseconds length, ticking_group group, bool any_thread) -> tick_function& {
      auto& tick = *ticks.emplace_back(std::make_unique<tick_function>(name, [length](float, level_tick) { spin_for(length); }));
      tick.set_tick_group(group);
      tick.set_end_tick_group(group);
      tick.set_run_on_any_thread(any_thread);
      tick.register_tick_function(manager);
      return tick;
    };
    for (const char* name : {"g1", "g2", "g3", "g4"}) add(name, microseconds(1000), ticking_group::pre_physics, false);
    for (const char* name : {"a1", "a2", "a3", "a4"}) add(name, microseconds(1000), ticking_group::post_physics, true);
    tick_function* chain = nullptr;  // c1 -> c2 -> c3: a critical path of 3 ms
    for (const char* name : {"c1", "c2", "c3"}) {
      tick_function& link = add(name, microseconds(1000), ticking_group::post_physics, true);
      if (chain != nullptr) link.add_prerequisite(*chain);
      chain = &link;
    }
    for (int frame = 0; frame < 2; ++frame) {
      run_frame(manager);
      auto stats = manager.last_frame_stats();
      double game = stats.game_thread_seconds, any = stats.any_thread_seconds, bound = stats.lower_bound_seconds;
      if (workers == 0) {  // every tick is the game thread's
        CHECK(game >= 0.011);
        CHECK(any == 0);
      } else {
        CHECK(game >= 0.004);
        CHECK(any >= 0.007);
      }
      CHECK(bound >= 0.004 + 0.003);
      CHECK(bound >= game);
      CHECK(bound >= (game + any) / (workers + 1));
      CHECK(bound <= game + any);
      CHECK(stats.frame_seconds >= bound);
      CHECK(stats.efficiency == doctest::Approx(bound / stats.frame_seconds));
      CHECK(stats.efficiency <= 1);
    }
  }
  scheduler pool(tick_pool(1));
  // A tick that may run across the waits from pre_physics to post_physics is in no segment.
  tick_manager measured(pool, {.measure_tick_times = true});
  tick_function spanning("spanning", [](float, level_tick) { spin_for(microseconds(2000)); });
  spanning.set_end_tick_group(ticking_group::post_physics);
  spanning.register_tick_function(measured);
  run_frame(measured);
  auto stats = measured.last_frame_stats();
  CHECK(stats.frame_seconds >= 0.002);
  CHECK(stats.game_thread_seconds + stats.any_thread_seconds + stats.lower_bound_seconds == 0);
  // Unmeasured, a frame has its wall time only.
  tick_manager unmeasured(pool);
  tick_function tick("tick", [](float, level_tick) { spin_for(microseconds(100)); });
  tick.register_tick_function(unmeasured);
  run_frame(unmeasured);
  stats = unmeasured.last_frame_stats();
  CHECK(stats.frame_seconds >= 0.0001);
  CHECK(stats.lower_bound_seconds == 0);
  CHECK(stats.efficiency == 0);
}

}  // TEST_SUITE("tick_manager")
