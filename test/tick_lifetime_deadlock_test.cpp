// Suite "tick_lifetime_deadlock": destroying a tick function (include/magpie/tick_manager.h)
// while it runs, from a game-thread command or from other running ticks (two destroying each
// other, three in a ring): the destruction waits for the run, and nothing deadlocks. Each
// frame runs bounded, so a hang fails its case.
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
#include <thread>

using magpie::level_tick;
using magpie::named_thread;
using magpie::scheduler;
using magpie::tick_function;
using magpie::tick_manager;
using namespace magpie::test;

TEST_SUITE("tick_lifetime_deadlock") {

namespace {

// run_bounded runs `frames` on a thread of its own (the game thread of whatever it makes) and
// waits up to ten seconds for it: a hang there fails here, naming `what`, and aborts.
template <class Frames>
void run_bounded(const char* what, unsigned workers, Frames frames) {
  std::atomic<bool> done{false};
  std::thread game([&] {
    frames();
    done.store(true);
  });
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(done.load());
  if (!done.load()) {
    std::fprintf(stderr, "tick_lifetime: %s still hangs after 10 s (workers %u); aborting\n", what, workers);
    std::abort();
  }
  game.join();
}

}  // namespace

// Unreal's "destroy the actor on the game thread": a running any-thread tick sends the game
// thread a command that destroys it, and the game thread runs that command from its queue —
// the frame's own run of the queue, or a game-thread tick's (process_until_idle). The
// destruction waits for the running tick, the game thread's queue being processed further
// down its stack: no report, no re-entry.
TEST_CASE("tick_lifetime: a game-thread command destroying a running any-thread tick waits for it quietly") {
  for (bool pumped : {false, true}) {
    for (unsigned workers : worker_counts) {
      CAPTURE(pumped);
      CAPTURE(workers);
      diagnostic_recorder recorder;
      std::atomic<bool> started{false}, finished_before_destroyed{false};
      bool destroyed = false;
      run_bounded("the destroy-actor command", workers, [&] {
        scheduler pool(tick_pool(workers));
        tick_manager manager(pool);
        std::atomic<bool> finished{false};
        std::unique_ptr<tick_function> actor;
        actor = std::make_unique<tick_function>("actor", [&](float, level_tick) {
          (void)pool.launch("destroy_actor", [&] {
            actor.reset();
            finished_before_destroyed.store(finished.load());
          }, magpie::on_thread(named_thread::game));
          started.store(true);
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          finished.store(true);
        });
        actor->set_run_on_any_thread(true);
        tick_function pump("pump", [&](float, level_tick) {
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          while (workers > 0 && !started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
          if (pumped) pool.process_until_idle(named_thread::game);
        });
        actor->register_tick_function(manager);
        pump.register_tick_function(manager);
        run_frame(manager);
        destroyed = actor == nullptr;
        run_frame(manager);
        CHECK(manager.registered_count() == 1);
      });
      CHECK(started.load());
      CHECK(destroyed);
      CHECK(finished_before_destroyed.load());
      CHECK(recorder.count() == 0);
    }
  }
}

// As above, the running tick then waiting for a task of the game thread's own: the game
// thread, waiting for it from a command of its queue, runs that task from the same queue.
TEST_CASE("tick_lifetime: a game-thread command destroying a running tick that waits for the game thread does not deadlock") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    diagnostic_recorder recorder;
    std::atomic<bool> waited_in_time{true};
    bool destroyed = false;
    run_bounded("the destroy-actor command, its tick waiting for the game thread", workers, [&] {
      scheduler pool(tick_pool(workers));
      tick_manager manager(pool);
      std::atomic<bool> started{false};
      std::unique_ptr<tick_function> actor;
      actor = std::make_unique<tick_function>("actor", [&](float, level_tick) {
        (void)pool.launch("destroy_actor", [&] { actor.reset(); }, magpie::on_thread(named_thread::game));
        started.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto needs_game = pool.launch("needs_game", [] {}, magpie::on_thread(named_thread::game));
        if (!needs_game.wait(std::chrono::seconds(3))) waited_in_time.store(false);
      });
      actor->set_run_on_any_thread(true);
      tick_function pump("pump", [&](float, level_tick) {
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (workers > 0 && !started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      });
      actor->register_tick_function(manager);
      pump.register_tick_function(manager);
      run_frame(manager);
      destroyed = actor == nullptr;
    });
    CHECK(destroyed);
    CHECK(waited_in_time.load());
    CHECK(recorder.count() == 0);
  }
}

// Two running ticks destroy each other: a game-thread one and an any-thread one on a worker.
// Each destruction would wait for the other's run, which waits for it: the one that sees
// the other waiting goes on without waiting.
TEST_CASE("tick_lifetime: two running ticks destroying each other do not deadlock" * doctest::test_suite("stress")) {
  for (int round = 0; round < stress_repeat(); ++round) {
    for (unsigned workers : worker_counts) {
      if (workers == 0) continue;  // the two never run at once
      CAPTURE(workers);
      diagnostic_recorder recorder;
      bool both_gone = false;
      run_bounded("the mutual destruction", workers, [&] {
        scheduler pool(tick_pool(workers));
        tick_manager manager(pool);
        std::atomic<bool> any_running{false}, game_running{false};
        std::unique_ptr<tick_function> on_worker, on_game;
        // Neither body touches its own captures after the reset: its tick may be gone by then.
        on_worker = std::make_unique<tick_function>("on_worker", [&](float, level_tick) {
          any_running.store(true);
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          while (!game_running.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
          on_game.reset();
        });
        on_worker->set_run_on_any_thread(true);
        on_game = std::make_unique<tick_function>("on_game", [&](float, level_tick) {
          game_running.store(true);
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          while (!any_running.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
          on_worker.reset();
        });
        on_worker->register_tick_function(manager);
        on_game->register_tick_function(manager);
        run_frame(manager);
        both_gone = on_worker == nullptr && on_game == nullptr;
        run_frame(manager);
        CHECK(manager.registered_count() == 0);
      });
      CHECK(both_gone);
      CHECK(recorder.count() == 0);
    }
  }
}

// Three running ticks destroy one another in a ring: the game thread's destroys the first
// worker's, that one the second's, and the second the game thread's. Each destruction would
// wait for a run that waits, through the ring, for it: the one that sees the ring closed
// through its own thread goes on without waiting.
TEST_CASE("tick_lifetime: three running ticks destroying one another in a ring do not deadlock" * doctest::test_suite("stress")) {
  for (int round = 0; round < stress_repeat(); ++round) {
    for (unsigned workers : worker_counts) {
      if (workers < 2) continue;  // the three never run at once
      CAPTURE(workers);
      diagnostic_recorder recorder;
      bool all_gone = false;
      run_bounded("the destruction ring", workers, [&] {
        scheduler pool(tick_pool(workers));
        tick_manager manager(pool);
        std::atomic<int> running{0};
        std::unique_ptr<tick_function> on_game, first, second;
        // Each body destroys the next tick once all three run; none touches its own captures
        // after the reset: its own tick may be gone by then.
        auto destroys = [&](std::unique_ptr<tick_function>& next) {
          return [&running, &next](float, level_tick) {
            running.fetch_add(1);
            auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
            while (running.load() < 3 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
            next.reset();
          };
        };
        on_game = std::make_unique<tick_function>("on_game", destroys(first));
        first = std::make_unique<tick_function>("first", destroys(second));
        second = std::make_unique<tick_function>("second", destroys(on_game));
        // Apart in three units: a high-priority any-thread tick is not chunked with a normal one.
        first->set_run_on_any_thread(true);
        first->set_high_priority(true);
        second->set_run_on_any_thread(true);
        on_game->register_tick_function(manager);
        first->register_tick_function(manager);
        second->register_tick_function(manager);
        run_frame(manager);
        all_gone = on_game == nullptr && first == nullptr && second == nullptr;
        run_frame(manager);
        CHECK(manager.registered_count() == 0);
      });
      CHECK(all_gone);
      CHECK(recorder.count() == 0);
    }
  }
}

}  // TEST_SUITE("tick_lifetime_deadlock")
