// Tests for the lifetime of tick functions in include/magpie/tick_manager.h: disabling,
// unregistering and destroying them mid-frame, from the game thread, from their own tick and
// from workers, without waiting on a running unit and without races. A running tick
// destroyed by a game-thread command or by another running tick is in
// tick_lifetime_deadlock_test.cpp.
#include <magpie/tick_manager.h>

#include "support.h"
#include "task_support.h"
#include "tick_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using magpie::level_tick;
using magpie::named_thread;
using magpie::scheduler;
using magpie::tick_function;
using magpie::tick_manager;
using magpie::ticking_group;
using namespace magpie::test;

TEST_SUITE("tick_lifetime") {

TEST_CASE("tick_lifetime: disabling, enabling, unregistering and destroying ticks mid-frame") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  logged_tick to_disable("to disable", log), to_enable("to enable", log), to_unregister("to unregister", log);
  auto to_destroy = std::make_unique<logged_tick>("to destroy", log);
  for (logged_tick* tick : {&to_disable, &to_enable, &to_unregister, to_destroy.get()}) {
    tick->set_tick_group(ticking_group::post_physics);
    tick->set_run_on_any_thread(true);
  }
  to_enable.set_tick_function_enable(false);
  bool act = false;
  tick_function actor("actor", [&](float, level_tick) {
    if (!act) return;
    to_disable.set_tick_function_enable(false);
    to_enable.set_tick_function_enable(true);
    to_unregister.unregister_tick_function();
    to_destroy.reset();
  });
  actor.register_tick_function(manager);
  for (logged_tick* tick : {&to_disable, &to_enable, &to_unregister, to_destroy.get()}) {
    tick->register_tick_function(manager);
  }
  run_frame(manager);
  CHECK(log.take().size() == 3);
  act = true;
  run_frame(manager);
  CHECK(log.take() == std::vector<std::string>{"to enable"});
  CHECK_FALSE(to_unregister.is_tick_function_registered());
  CHECK(manager.registered_count() == 3);
  act = false;
  run_frame(manager);
  CHECK(log.take() == std::vector<std::string>{"to enable"});
  CHECK(manager.last_frame_stats().schedule_rebuilt);
}

TEST_CASE("tick_lifetime: a tick that destroys itself mid-frame is not touched again") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  int ran = 0;
  std::unique_ptr<tick_function> self_destroying;
  self_destroying = std::make_unique<tick_function>("self-destroying", [&](float, level_tick) {
    ++ran;
    self_destroying.reset();
  });
  self_destroying->register_tick_function(manager);
  event_log log;
  logged_tick after("after", log);
  after.register_tick_function(manager);
  run_frame(manager);
  run_frame(manager);
  CHECK(ran == 1);
  CHECK(after.runs.load() == 2);
  CHECK(manager.registered_count() == 1);
}

TEST_CASE("tick_lifetime: removing a neighbour of a running tick never waits on it; the game thread's queue keeps draining") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    event_log log;
    std::atomic<bool> waiting{false}, helper_in_time{true};
    bool act = false;
    // waiter runs on a worker and waits (bounded) for a small task queued on the game thread.
    tick_function waiter("waiter", [&](float, level_tick) {
      if (!act || workers == 0) return;
      auto helper = pool.launch("game-thread helper", [] {}, magpie::on_thread(named_thread::game));
      waiting.store(true);
      if (!helper.wait(std::chrono::seconds(3))) helper_in_time.store(false);
    });
    waiter.set_run_on_any_thread(true);
    logged_tick unregistered("unregistered neighbour", log);
    auto destroyed = std::make_unique<logged_tick>("destroyed neighbour", log);
    unregistered.set_run_on_any_thread(true);
    destroyed->set_run_on_any_thread(true);
    tick_function remover("remover", [&](float, level_tick) {
      if (!act) return;
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (workers > 0 && !waiting.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      unregistered.unregister_tick_function();
      destroyed.reset();
    });
    waiter.register_tick_function(manager);  // the three share one any-thread chunk, waiter first
    unregistered.register_tick_function(manager);
    destroyed->register_tick_function(manager);
    remover.register_tick_function(manager);
    run_frame(manager);
    act = true;
    run_frame(manager);
    CHECK(helper_in_time.load());
    int unregistered_runs = workers == 0 ? 2 : 1;  // with no worker the chunk runs before the remover
    CHECK(unregistered.runs.load() == unregistered_runs);
    CHECK(manager.registered_count() == 2);
    act = false;
    run_frame(manager);
    CHECK(unregistered.runs.load() == unregistered_runs);
  }
}

TEST_CASE("tick_lifetime: unregistering a running tick returns at once; destroying it later waits for that run") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    std::atomic<bool> started{false}, go_on{false}, finished{false};
    bool act = false;
    auto running = std::make_unique<tick_function>("running", [&](float, level_tick) {
      if (!act || workers == 0) return;
      started.store(true);
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (!go_on.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished.store(true);
    });
    running->set_run_on_any_thread(true);
    bool returned_while_running = false, finished_when_destroyed = false;
    tick_function remover("remover", [&](float, level_tick) {
      if (!act) return;
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (workers > 0 && !started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      running->unregister_tick_function();
      returned_while_running = !finished.load();
      go_on.store(true);
      running.reset();
      finished_when_destroyed = finished.load();
    });
    running->register_tick_function(manager);
    remover.register_tick_function(manager);
    run_frame(manager);
    act = true;
    run_frame(manager);
    CHECK_FALSE(running);
    CHECK(manager.registered_count() == 1);
    if (workers > 0) {
      CHECK(returned_while_running);
      CHECK(finished_when_destroyed);
    }
    act = false;
    run_frame(manager);
    CHECK(manager.last_frame_stats().ticks_run == 1);
  }
}

TEST_CASE("tick_lifetime: unregistering off the game thread is reported and refused; destroying there is safe") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    std::atomic<int> self_unregistering_runs{0}, self_destroying_runs{0};
    std::atomic<bool> unregistered_on_game_thread{false};
    std::unique_ptr<tick_function> self_unregistering;
    self_unregistering = std::make_unique<tick_function>("self-unregistering", [&](float, level_tick) {
      self_unregistering_runs.fetch_add(1);
      unregistered_on_game_thread.store(scheduler::current_named_thread() == named_thread::game);
      self_unregistering->unregister_tick_function();
    });
    self_unregistering->set_run_on_any_thread(true);
    std::unique_ptr<tick_function> self_destroying;
    self_destroying = std::make_unique<tick_function>("self-destroying", [&](float, level_tick) {
      self_destroying_runs.fetch_add(1);
      self_destroying.reset();
    });
    self_destroying->set_run_on_any_thread(true);
    // holder keeps the game thread busy until both ran, so that with workers a worker runs them.
    tick_function holder("holder", [&](float, level_tick) {
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (workers > 0 && (self_unregistering_runs.load() == 0 || self_destroying_runs.load() == 0) &&
             std::chrono::steady_clock::now() < give_up) {
        std::this_thread::yield();
      }
    });
    holder.register_tick_function(manager);
    self_unregistering->register_tick_function(manager);
    self_destroying->register_tick_function(manager);
    diagnostic_recorder recorder;
    run_frame(manager);
    CHECK(self_destroying_runs.load() == 1);
    CHECK(self_unregistering_runs.load() == 1);
    bool refused = !unregistered_on_game_thread.load();
    CHECK(refused == (workers > 0));
    CHECK(self_unregistering->is_tick_function_registered() == refused);
    CHECK(manager.registered_count() == (refused ? 2u : 1u));
    auto reports = recorder.reports();
    REQUIRE(reports.size() == (refused ? 1u : 0u));
    if (refused) {
      CHECK(mentions(reports, "unregister_tick_function on 'self-unregistering'"));
      CHECK(mentions(reports, "not its tick manager's game thread; refused"));
    }
    run_frame(manager);
    CHECK(self_destroying_runs.load() == 1);
    CHECK(self_unregistering_runs.load() == (refused ? 2 : 1));
    self_unregistering->unregister_tick_function();
    CHECK(manager.registered_count() == 1);
  }
}

TEST_CASE("tick_lifetime: ticks destroying themselves on workers while the game thread registers others" *
          doctest::test_suite("stress")) {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    constexpr std::size_t count = 64;
    std::vector<std::unique_ptr<tick_function>> selves(count);
    std::atomic<int> self_runs{0};
    event_log log;
    std::vector<std::unique_ptr<logged_tick>> churn;
    for (int i = 0; i < 16; ++i) churn.push_back(std::make_unique<logged_tick>(numbered("churn ", i), log));
    tick_function churner("churner", [&](float, level_tick) {
      for (auto& each : churn) {
        if (each->is_tick_function_registered()) {
          each->unregister_tick_function();
        } else {
          each->register_tick_function(manager);
        }
      }
    });
    churner.register_tick_function(manager);
    std::size_t churn_registered = 0;
    for (int frame = 0; frame < 40 * stress_repeat(); ++frame) {
      for (std::size_t i = 0; i < count; ++i) {
        selves[i] = std::make_unique<tick_function>(numbered("self ", i), [&, i](float, level_tick) {
          self_runs.fetch_add(1);
          selves[i].reset();
        });
        selves[i]->set_run_on_any_thread(true);
        selves[i]->register_tick_function(manager);
      }
      run_frame(manager);
      churn_registered = churn_registered == 0 ? churn.size() : 0;
      CHECK(manager.registered_count() == 1 + churn_registered);
      for (auto& self : selves) CHECK_FALSE(self);
    }
    CHECK(self_runs.load() == static_cast<int>(count) * 40 * stress_repeat());
    log.take();
  }
}

TEST_CASE("tick_lifetime: a running tick unregistered and registered again, then destroying itself on its worker, is not touched again") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    std::atomic<bool> started{false}, cycled{false};
    std::atomic<int> runs{0};
    bool act = false;
    std::unique_ptr<tick_function> self;
    self = std::make_unique<tick_function>("self", [&](float, level_tick) {
      runs.fetch_add(1);
      if (!act) return;
      started.store(true);
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (workers > 0 && !cycled.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      self.reset();
    });
    self->set_run_on_any_thread(true);
    // cycler, on the game thread, unregisters and registers self again while it runs.
    tick_function cycler("cycler", [&](float, level_tick) {
      if (!act) return;
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (workers > 0 && !started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      if (self) {
        self->unregister_tick_function();
        self->register_tick_function(manager);
      }
      cycled.store(true);
    });
    self->register_tick_function(manager);
    cycler.register_tick_function(manager);
    run_frame(manager);
    act = true;
    run_frame(manager);
    CHECK_FALSE(self);
    CHECK(runs.load() == 2);
    CHECK(manager.registered_count() == 1);
    act = false;
    run_frame(manager);
    CHECK(manager.last_frame_stats().ticks_run == 1);
    CHECK(runs.load() == 2);
  }
}

TEST_CASE("tick_lifetime: a running tick unregistered and handed to another thread to destroy: that waits for the run" *
          doctest::test_suite("stress")) {
  for (unsigned workers : worker_counts) {
    for (bool registered_again : {false, true}) {
      for (bool destroyed_late : {false, true}) {
        CAPTURE(workers);
        CAPTURE(registered_again);
        CAPTURE(destroyed_late);
        scheduler pool(tick_pool(workers));
        tick_manager manager(pool);
        std::atomic<bool> started{false}, go_on{false}, finished{false}, finished_when_destroyed{false};
        bool act = false;
        auto running = std::make_unique<tick_function>("running", [&](float, level_tick) {
          if (!act || workers == 0) return;
          started.store(true);
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          while (!go_on.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          finished.store(true);
        });
        running->set_run_on_any_thread(true);
        magpie::task<> destroyer;
        // remover unregisters `running` while it runs (and, registered_again, registers and
        // unregisters it once more), then hands it to a task that destroys it: at once, or
        // once the frame is likely over (destroyed_late).
        tick_function remover("remover", [&](float, level_tick) {
          if (!act) return;
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          while (workers > 0 && !started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
          running->unregister_tick_function();
          if (registered_again) {
            running->register_tick_function(manager);
            running->unregister_tick_function();
          }
          destroyer = pool.launch("destroyer", [&] {
            if (destroyed_late) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            running.reset();
            finished_when_destroyed.store(finished.load());
          });
          go_on.store(true);
        });
        running->register_tick_function(manager);
        remover.register_tick_function(manager);
        run_frame(manager);
        act = true;
        run_frame(manager);
        REQUIRE(destroyer.wait(std::chrono::seconds(5)));
        CHECK_FALSE(running);
        if (workers > 0) CHECK(finished_when_destroyed.load());
        CHECK(manager.registered_count() == 1);
        act = false;
        run_frame(manager);
        CHECK(manager.last_frame_stats().ticks_run == 1);
      }
    }
  }
}

TEST_CASE("tick_lifetime: a tick destroyed by a unit run inside its own unit's tick does not wait for that unit") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    std::atomic<bool> done{false}, runner_inside{false}, destroyed_inside{false};
    std::atomic<int> neighbour_runs{0};
    // The frames run on a thread of their own, so that a hang is seen here, within a bound.
    std::thread game([&] {
      scheduler pool(tick_pool(workers));
      tick_manager manager(pool);
      event_log log;
      bool act = false;
      // runner and neighbour share the high-priority game-thread unit, which runs first; the
      // runner runs the game thread's queue, and with it the unit of destroyer.
      tick_function runner("runner", [&](float, level_tick) {
        if (!act) return;
        runner_inside.store(true);
        pool.process_until_idle(named_thread::game);
        runner_inside.store(false);
      });
      auto neighbour = std::make_unique<logged_tick>("neighbour", log);
      tick_function destroyer("destroyer", [&](float, level_tick) {
        if (!act || !neighbour) return;
        neighbour_runs.store(neighbour->runs.load());
        destroyed_inside.store(runner_inside.load());
        neighbour.reset();
      });
      runner.set_high_priority(true);
      neighbour->set_high_priority(true);
      runner.register_tick_function(manager);
      neighbour->register_tick_function(manager);
      destroyer.register_tick_function(manager);
      run_frame(manager);
      act = true;
      run_frame(manager);
      act = false;
      run_frame(manager);
      CHECK(manager.registered_count() == 2);
      CHECK(manager.last_frame_stats().ticks_run == 2);
      done.store(true);
    });
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(done.load());
    if (!done.load()) {
      std::fprintf(stderr, "tick_lifetime: the frame still hangs after 10 s (workers %u); aborting\n", workers);
      std::abort();
    }
    game.join();
    CHECK(destroyed_inside.load());
    CHECK(neighbour_runs.load() == 1);  // it ran in the first frame only: destroyed before its turn
  }
}

// A frame run by a thread_local's destructor, after the thread's other thread_locals (those
// made by the thread's first frame among them) were destroyed: an engine object torn down at
// thread exit that ticks once more. The frame may keep nothing of its own in them.
TEST_CASE("tick_lifetime: a frame run from a thread_local's destructor at thread exit") {
  scheduler pool(tick_pool());
  event_log log;
  std::atomic<int> frames_at_exit{0};
  std::atomic<int> runs{0};
  std::thread([&] {
    struct last_frame_at_exit {
      std::unique_ptr<tick_manager> manager;
      std::vector<std::unique_ptr<logged_tick>> ticks;
      std::atomic<int>* frames = nullptr;
      std::atomic<int>* runs = nullptr;
      ~last_frame_at_exit() {
        run_frame(*manager, 1.f);
        frames->fetch_add(1);
        for (auto& tick : ticks) runs->fetch_add(tick->runs.load());
        ticks.clear();
        manager.reset();
      }
    };
    // Made before the first frame, so destroyed after what that frame made.
    thread_local last_frame_at_exit at_exit;
    at_exit.frames = &frames_at_exit;
    at_exit.runs = &runs;
    at_exit.manager = std::make_unique<tick_manager>(pool);
    for (int i = 0; i < 4; ++i) {
      // An interval far below the frame's delta, and a tick that waits for it.
      auto& every = *at_exit.ticks.emplace_back(std::make_unique<logged_tick>(numbered("every", i), log));
      every.set_tick_interval(0.125f);
      every.register_tick_function(*at_exit.manager);
      auto& after = *at_exit.ticks.emplace_back(std::make_unique<logged_tick>(numbered("after", i), log));
      after.add_prerequisite(every);
      after.register_tick_function(*at_exit.manager);
    }
    run_frame(*at_exit.manager, 1.f);
    run_frame(*at_exit.manager, 1.f);
  }).join();
  CHECK(frames_at_exit.load() == 1);
  CHECK(runs.load() == 3 * 8);  // two frames on the thread and the last one, every tick each
}

}  // TEST_SUITE("tick_lifetime")
