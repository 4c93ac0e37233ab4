// Suite "tick_manager_frames": a frame of include/magpie/tick_manager.h beyond its schedule
// — interval ticks and their cooldowns, a throwing tick, registration from another thread,
// pause frames, dumps, the game thread's share of a frame and the frame's lower bound and
// efficiency.
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

TEST_SUITE("tick_manager_frames") {

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

}  // TEST_SUITE("tick_manager_frames")
