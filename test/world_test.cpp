// Tests for include/magpie/world.h — Unreal's frame order, pause, time dilation and
// tickable objects.
#include <magpie/world.h>

#include "support.h"
#include "task_support.h"
#include "tick_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using magpie::level_tick;
using magpie::scheduler;
using magpie::tick_function;
using magpie::tickable_object;
using magpie::tickable_tick_type;
using magpie::ticking_group;
using magpie::world;
using namespace magpie::test;

namespace {

class logged_tickable : public tickable_object {
 public:
  logged_tickable(world& owner, std::string name, event_log& log,
                  tickable_tick_type type = tickable_tick_type::conditional)
      : tickable_object(owner, type), name_(std::move(name)), log_(&log) {}

  void tick(float delta_seconds) override {
    last_delta = delta_seconds;
    ++runs;
    log_->add(name_);
    if (on_tick) on_tick();
  }
  bool is_tickable() const override { return tickable; }
  bool is_tickable_when_paused() const override { return when_paused; }

  bool tickable = true;
  bool when_paused = false;
  int runs = 0;
  float last_delta = 0;
  std::function<void()> on_tick;

 private:
  std::string name_;
  event_log* log_;
};

}  // namespace

TEST_SUITE("world") {

TEST_CASE("world: a frame runs the groups, then the timers, then the tickables, then the last groups") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  std::vector<std::unique_ptr<logged_tick>> ticks;
  for (auto [group, block] : frame_groups) {
    auto& tick = *ticks.emplace_back(std::make_unique<logged_tick>(std::string(magpie::to_string(group)), log));
    tick.set_tick_group(group);
    tick.set_end_tick_group(group);
    tick.register_tick_function(game.ticks());
  }
  magpie::timer_handle timer;
  game.timers().set_timer(timer, [&] { log.add("timer"); }, 0.25f, true);
  logged_tickable tickable(game, "tickable", log);
  game.tick(0.5f);  // the timer is pending in its first frame: due at 0.75, then 1.0
  log.take();
  game.tick(0.5f);
  auto events = log.take();
  std::vector<std::string> expected = {"pre_physics", "start_physics", "during_physics", "end_physics",
                                       "post_physics", "timer",      "timer",          "tickable",
                                       "post_update_work", "last_demotable"};
  CHECK(events == expected);
  CHECK(game.frame_counter() == 2);
  CHECK(game.timers().has_been_ticked_this_frame());
}

TEST_CASE("world: time dilation scales every delta; time_only runs the tickables only") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  logged_tick tick("tick", log);
  tick.register_tick_function(game.ticks());
  logged_tickable tickable(game, "tickable", log);
  int fired = 0;
  magpie::timer_handle timer;
  game.timers().set_timer(timer, [&] { ++fired; }, 0.375f, true);  // due at 0.5 + 0.375
  game.set_time_dilation(0.5f);
  CHECK(game.time_dilation() == 0.5f);
  game.tick(1.f);
  CHECK(tick.last_delta.load() == 0.5f);
  CHECK(tickable.last_delta == 0.5f);
  game.tick(1.f, level_tick::time_only);  // timers stand still on a time-only frame, as in Unreal
  CHECK(tick.runs.load() == 1);
  CHECK(tickable.runs == 2);
  CHECK(fired == 0);
  CHECK(game.timers().get_timer_remaining(timer) == doctest::Approx(0.375f));
  game.tick(1.f);
  CHECK(fired == 1);
  diagnostic_recorder recorder;
  game.set_time_dilation(-1.f);
  CHECK(recorder.count() == 1);
  CHECK(game.time_dilation() == 0.5f);
}

TEST_CASE("world: paused, only what ticks when paused runs, with pause_tick, and timers stand still") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  logged_tick normal("normal", log), pause_ticker("pause ticker", log);
  pause_ticker.set_tick_even_when_paused(true);
  normal.register_tick_function(game.ticks());
  pause_ticker.register_tick_function(game.ticks());
  logged_tickable menu(game, "menu", log), actor(game, "actor", log);
  menu.when_paused = true;
  int fired = 0;
  magpie::timer_handle timer;
  game.timers().set_timer(timer, [&] { ++fired; }, 0.1f, true);
  game.tick(0.05f);
  log.take();
  game.set_paused(true);
  CHECK(game.is_paused());
  for (int i = 0; i < 5; ++i) game.tick(0.05f);
  auto events = log.take();
  CHECK(events.size() == 10);
  CHECK(event_log::index_of(events, "normal") == -1);
  CHECK(event_log::index_of(events, "actor") == -1);
  CHECK(pause_ticker.last_type.load() == level_tick::pause_tick);
  CHECK(fired == 0);
  CHECK(game.timers().get_timer_remaining(timer) == doctest::Approx(0.1f));
  game.set_paused(false);
  game.tick(0.05f);
  game.tick(0.06f);
  CHECK(fired == 1);
  CHECK(normal.runs.load() == 3);
}

TEST_CASE("world: tickable objects tick in creation order by their tick type") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  logged_tickable first(game, "first", log, tickable_tick_type::always);
  logged_tickable conditional(game, "conditional", log);
  logged_tickable never(game, "never", log, tickable_tick_type::never);
  logged_tickable last(game, "last", log, tickable_tick_type::always);
  conditional.tickable = false;
  game.tick(0.1f);
  CHECK(log.take() == std::vector<std::string>{"first", "last"});
  conditional.tickable = true;
  never.set_tickable_tick_type(tickable_tick_type::always);
  first.tickable = false;  // ignored: always
  game.tick(0.1f);
  CHECK(log.take() == std::vector<std::string>{"first", "conditional", "never", "last"});
}

TEST_CASE("world: a tickable made during the tickables' pass ticks next frame; one destroyed is not called") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  std::unique_ptr<logged_tickable> made, doomed;
  logged_tickable maker(game, "maker", log);
  doomed = std::make_unique<logged_tickable>(game, "doomed", log);
  maker.on_tick = [&] {
    if (!made) made = std::make_unique<logged_tickable>(game, "made", log);
    doomed.reset();
  };
  game.tick(0.1f);
  CHECK(log.take() == std::vector<std::string>{"maker"});
  game.tick(0.1f);
  CHECK(log.take() == std::vector<std::string>{"maker", "made"});
}

TEST_CASE("world: a throwing tickable or timer is reported and the frame goes on") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  logged_tickable thrower(game, "thrower", log), after(game, "after", log);
  thrower.on_tick = [] { throw std::runtime_error("tickable boom"); };
  magpie::timer_handle timer;
  game.timers().set_timer(timer, [] { throw std::runtime_error("timer boom"); }, 0.01f);
  logged_tick late("late", log);
  late.set_tick_group(ticking_group::last_demotable);
  late.register_tick_function(game.ticks());
  diagnostic_recorder recorder;
  game.tick(0.1f);
  game.tick(0.1f);
  CHECK(after.runs == 2);
  CHECK(late.runs.load() == 2);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 3);
  CHECK(reports[0].message.find("tickable boom") != std::string::npos);
  CHECK(reports[1].message.find("timer boom") != std::string::npos);
}

TEST_CASE("world: a delta that overflows once dilated is refused with one report naming it; nothing ticks") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  logged_tick tick("tick", log);
  tick.register_tick_function(game.ticks());
  logged_tickable tickable(game, "tickable", log);
  int fired = 0;
  magpie::timer_handle timer;
  game.timers().set_timer(timer, [&] { ++fired; }, 0.01f, true);
  game.set_time_dilation(1e30f);
  diagnostic_recorder recorder;
  game.tick(1e10f);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].message.find("scaled delta") != std::string::npos);
  CHECK(reports[0].message.find("time dilation") != std::string::npos);
  CHECK(tick.runs.load() == 0);
  CHECK(tickable.runs == 0);
  CHECK(fired == 0);
  CHECK(game.frame_counter() == 0);
  game.set_time_dilation(1.f);
  game.tick(0.1f);
  CHECK(tick.runs.load() == 1);
  CHECK(tickable.runs == 1);
  CHECK(tickable.last_delta == 0.1f);
}

TEST_CASE("world: tickables destroyed on workers while the game thread creates others" * doctest::test_suite("stress")) {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    world game(pool);
    event_log log;
    constexpr std::size_t count = 32;
    std::vector<std::unique_ptr<logged_tickable>> doomed, fresh;
    tick_function destroyer("destroyer", [&](float, level_tick) {
      for (auto& each : doomed) each.reset();
    });
    destroyer.set_run_on_any_thread(true);
    tick_function creator("creator", [&](float, level_tick) {
      for (std::size_t i = 0; i < count; ++i) fresh.push_back(std::make_unique<logged_tickable>(game, "fresh", log));
    });
    destroyer.register_tick_function(game.ticks());
    creator.register_tick_function(game.ticks());
    for (int frame = 0; frame < 40 * stress_repeat(); ++frame) {
      game.tick(0.01f);
      for (auto& each : doomed) CHECK_FALSE(each);
      for (auto& each : fresh) CHECK(each->runs == 1);
      doomed = std::move(fresh);
      fresh.clear();
      log.take();
    }
    doomed.clear();
  }
}

TEST_CASE("world: ticks from another thread are refused; tickables outlive their world safely") {
  scheduler pool(tick_pool(1));
  event_log log;
  auto game = std::make_unique<world>(pool);
  logged_tickable survivor(*game, "survivor", log);
  diagnostic_recorder recorder;
  std::thread([&] { game->tick(0.1f); }).join();
  CHECK(recorder.count() == 1);
  CHECK(game->frame_counter() == 0);
  game.reset();  // survivor's destructor must not touch the world afterwards
}

TEST_CASE("world: a tickable destroyed off the game thread while the tickables tick is reported, naming the thread") {
  scheduler pool(tick_pool(1));
  world game(pool);
  event_log log;
  auto ticked_first = std::make_unique<logged_tickable>(game, "ticked first", log);
  logged_tickable destroyer(game, "destroyer", log);
  std::thread::id destroying_thread;
  // ticked_first has ticked already when it is destroyed: the pass never reaches it again.
  destroyer.on_tick = [&] {
    std::thread other([&] {
      destroying_thread = std::this_thread::get_id();
      ticked_first.reset();
    });
    other.join();
  };
  diagnostic_recorder recorder;
  game.tick(0.1f);
  CHECK_FALSE(ticked_first);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  std::ostringstream expected;  // streamed, not "literal" + string: GCC 12's -Wrestrict misfires on that
  expected << "destroyed on thread " << destroying_thread;
  CHECK(reports[0].message.find(expected.str()) != std::string::npos);
  CHECK(reports[0].message.find("while its world's tickables tick") != std::string::npos);
  game.tick(0.1f);
  CHECK(destroyer.runs == 2);
  CHECK(log.take() == std::vector<std::string>{"ticked first", "destroyer", "destroyer"});
}

TEST_CASE("world: its timers belong to the game thread from the start; a call from another thread is reported, naming it, and refused") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    world game(pool);
    diagnostic_recorder recorder;
    // The first call to the world's timers comes from another thread: it does not take them over.
    std::thread::id other_thread;
    magpie::timer_handle set_elsewhere;
    std::thread([&] {
      other_thread = std::this_thread::get_id();
      game.timers().set_timer(set_elsewhere, [] {}, 0.01f, true);
      (void)game.timers().is_timer_active(set_elsewhere);
    }).join();
    auto reports = recorder.reports();
    REQUIRE(reports.size() == 2);
    std::ostringstream named;  // streamed, not "literal" + string: GCC 12's -Wrestrict misfires on that
    named << "thread " << other_thread;
    for (const auto& each : reports) {
      CHECK(each.kind == magpie::diagnostic_kind::misuse);
      CHECK(each.message.find(named.str()) != std::string::npos);
      CHECK(each.message.find("refused") != std::string::npos);
    }
    CHECK(reports[0].message.find("set_timer") != std::string::npos);
    CHECK_FALSE(set_elsewhere.is_valid());  // refused: no timer was set
    // An any-thread tick doing the same on a worker in the first frame is refused as well.
    std::atomic<int> calls{0};
    tick_function worker_call("worker_call", [&](float, level_tick) {
      if (calls.fetch_add(1) != 0) return;
      magpie::timer_handle ignored;
      game.timers().set_timer(ignored, [] {}, 0.01f);
    });
    worker_call.set_run_on_any_thread(true);
    worker_call.register_tick_function(game.ticks());
    game.tick(0.f);
    worker_call.unregister_tick_function();
    std::size_t before = recorder.count();
    CHECK(before <= 3);  // the worker's call, unless the game thread ran the tick itself
    // The game thread's own calls are never reported, and its timers fire.
    int fired = 0;
    magpie::timer_handle looping;
    game.timers().set_timer(looping, [&] { ++fired; }, 0.05f, true);
    for (int frame = 0; frame < 10; ++frame) game.tick(0.05f);
    CHECK(fired >= 9);  // every 0.05 s over 0.5 s, give or take the last one's rounding
    CHECK(game.timers().is_timer_active(looping));
    CHECK(recorder.count() == before);
  }
}

// A tick whose nested task waits for an event nobody triggers holds its group: the frame's
// wait cannot progress, and says so (diagnostic_kind::stalled) once stall_report_after has
// passed, naming the thread that waits. Then the event comes and the frame ends.
TEST_CASE("world: a frame held by a tick's nested task that never completes is reported as stalled") {
  for (unsigned workers : worker_counts) {
    for (bool any_thread : {true, false}) {
      CAPTURE(workers);
      CAPTURE(any_thread);
      auto options = tick_pool(workers);
      options.stall_report_after = std::chrono::milliseconds(50);
      scheduler pool(options);
      world game(pool);
      diagnostic_recorder recorder;
      magpie::task_event asset_loaded("asset_loaded", pool);
      tick_function holder("holder", [&](float, level_tick) {
        magpie::add_nested(magpie::launch("use_asset", [] {}, magpie::prerequisites(asset_loaded)));
      });
      holder.set_run_on_any_thread(any_thread);
      holder.register_tick_function(game.ticks());
      // The event comes once the stall is reported, or after a bound: then the frame fails here.
      std::atomic<bool> reported_in_time{false};
      std::thread loader([&] {
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < give_up) {
          if (recorder.count_naming("has not completed") > 0) {
            reported_in_time.store(true);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        asset_loaded.trigger();
      });
      game.tick(1.f / 60);
      loader.join();
      CHECK(reported_in_time.load());
      auto reports = recorder.reports();
      REQUIRE_FALSE(reports.empty());
      CHECK(reports[0].kind == magpie::diagnostic_kind::stalled);
      CHECK(reports[0].message.find("the game thread") != std::string::npos);
      game.tick(1.f / 60);  // the next frame is not held: the tick's new nested task waits for a triggered event
    }
  }
}

}  // TEST_SUITE("world")
