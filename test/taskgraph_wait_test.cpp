// Suite "taskgraph_wait": a named thread's waits in the TaskGraph layer
// (task_graph_interface::wait_until_tasks_complete, graph_event::wait): retraction first,
// then Unreal's return-task pattern, never re-entering a queue being processed, the order of
// a thread's own commands, batches whose tasks are partly run here and partly by workers.
#include "support.h"
#include "task_support.h"
#include "taskgraph_support.h"

#include <magpie/taskgraph.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace magpie;
using namespace magpie::taskgraph;
using test::attached_as;
using test::diagnostic_recorder;
using test::no_leaks;
using test::reported;

TEST_SUITE("taskgraph_wait") {

TEST_CASE("taskgraph: a named thread's wait runs its own queue meanwhile (Unreal's return-task pattern)") {
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    attached_as game(pool, named_thread::game);
    // A worker task needs the game thread to run something before it can finish.
    std::atomic<bool> game_part_ran{false};
    std::atomic<int> queued_before_ran{0};
    graph_event_ref queued_before = function_graph_task::create_and_dispatch_when_ready(
        [&] { ++queued_before_ran; }, "queued before", nullptr, named_threads::game_thread);
    std::atomic<bool> started{false};
    graph_event_ref worker_task = function_graph_task::create_and_dispatch_when_ready([&] {
      started = true;
      graph_event_ref on_game = function_graph_task::create_and_dispatch_when_ready(
          [&] { game_part_ran = true; }, "game part", nullptr, named_threads::game_thread);
      // Not blocked in a wait until the queue ran: a wait names what it waits for, which
      // the game thread's retraction would run at once, out of its queue's turn.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (queued_before_ran.load() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      graph_event_array wait_for{on_game};
      // A worker's wait retracts and helps; the game thread pumps its queue meanwhile.
      task_graph_interface::get().wait_until_tasks_complete(wait_for);
    });
    // Started on a worker, so the game thread's wait cannot retract it and must pump.
    while (!started.load()) std::this_thread::yield();
    CHECK(graph.get_current_thread_if_known() == named_threads::game_thread);
    graph.wait_until_task_completes(worker_task, named_threads::game_thread);
    CHECK(worker_task->is_complete());
    CHECK(game_part_ran.load());
    CHECK(queued_before_ran.load() == 1);  // unrelated work on the queue ran too
    CHECK_FALSE(graph.is_thread_processing_tasks(named_threads::game_thread));
  }
}

TEST_CASE("taskgraph: a game-thread task the game thread waits for is retracted and runs there at once") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_graph_interface graph(pool);
  attached_as game(pool, named_thread::game);
  std::vector<int> order;
  graph_event_ref first = function_graph_task::create_and_dispatch_when_ready([&] { order.push_back(1); }, "first",
                                                                              nullptr, named_threads::game_thread);
  graph_event_ref second = function_graph_task::create_and_dispatch_when_ready([&] { order.push_back(2); }, "second",
                                                                               nullptr, named_threads::game_thread);
  second->wait(named_threads::game_thread);
  CHECK(order == std::vector<int>{2});  // taken out of the queue and run here
  CHECK_FALSE(first->is_complete());
  // The retracted one's queue entry runs nothing, and is not counted.
  CHECK(graph.process_thread_until_idle(named_threads::game_thread) == 1);
  CHECK(order == std::vector<int>{2, 1});
}

TEST_CASE("taskgraph: a wait inside the game thread's own processing never re-enters that queue") {
  for (unsigned workers : {0u, 1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    attached_as game(pool, named_thread::game);
    std::atomic<bool> inner_ran{false};
    bool processing_seen = false;
    function_graph_task::create_and_dispatch_when_ready([&] {
      processing_seen = graph.is_thread_processing_tasks(named_threads::game_thread);
      graph_event_ref inner = function_graph_task::create_and_dispatch_when_ready(
          [&] { inner_ran = true; }, "inner", nullptr, named_threads::game_thread);
      graph_event_ref worker = function_graph_task::create_and_dispatch_when_ready([] {}, "worker");
      graph_event_array both{inner, worker};
      graph.wait_until_tasks_complete(both, named_threads::game_thread);
    }, "outer", nullptr, named_threads::game_thread);
    CHECK(graph.process_thread_until_idle(named_threads::game_thread) >= 1);
    CHECK(processing_seen);
    CHECK(inner_ran.load());
    CHECK(recorder.count() == 0);
  }
}

TEST_CASE("taskgraph: with no workers at all, waits run the launched work and never deadlock") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  task_graph_interface graph(pool);
  CHECK(graph.get_num_worker_threads() == 0);
  std::atomic<int> runs{0};
  graph_event_array chain;
  pool.launch("make", [&] {
        graph_event_ref previous;
        for (int i = 0; i < 50; ++i) {
          graph_event_array before;
          if (previous) before.add(previous);
          previous = function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "link", &before);
          chain.add(previous);
        }
      })
      .wait();
  graph.wait_until_tasks_complete(chain);
  CHECK(runs.load() == 50);
  // The same from an attached game thread, with work for the game thread in the chain.
  attached_as game(pool, named_thread::game);
  graph_event_ref game_part = function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "game part", nullptr,
                                                                                   named_threads::game_thread);
  graph_event_array after{game_part};
  graph_event_ref worker_part = function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "worker part", &after);
  graph.wait_until_task_completes(worker_part, named_threads::game_thread);
  CHECK(runs.load() == 52);
}

TEST_CASE("taskgraph: naming a thread the caller is not in a wait is reported, and the wait still completes") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  task_graph_interface graph(pool);
  graph_event_ref done = pool.launch("make", [] {
                               return function_graph_task::create_and_dispatch_when_ready([] {}, "done");
                             }).get_result();
  graph.wait_until_task_completes(done, named_threads::game_thread);
  CHECK(done->is_complete());
  graph_event_ref other = pool.launch("make", [] {
                                return function_graph_task::create_and_dispatch_when_ready([] {}, "other");
                              }).get_result();
  other->wait(named_threads::actual_rendering_thread);
  CHECK(other->is_complete());
  CHECK(recorder.count() == 2);
  CHECK(reported(recorder, "not that named thread"));
}

TEST_CASE("taskgraph: a named thread's wait runs its own commands in the order given among any-thread tasks it holds") {
  for (unsigned workers : {0u, 1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    attached_as game(pool, named_thread::game);
    std::atomic<int> any_ran{0};
    std::vector<int> commands;
    graph_event_array all;
    for (int i = 0; i < 4000; ++i) {
      if (i % 100 == 50) {
        all.add(function_graph_task::create_and_dispatch_when_ready(
            [&commands, i] { commands.push_back(i / 100); }, "command", nullptr, named_threads::game_thread));
      } else {
        all.add(function_graph_task::create_and_dispatch_when_ready([&any_ran] { any_ran.fetch_add(1); }, "work"));
      }
    }
    graph.wait_until_tasks_complete(all, named_threads::game_thread);
    for (const auto& each : all) CHECK(each->is_complete());
    CHECK(any_ran.load() == 4000 - 40);
    REQUIRE(commands.size() == 40);
    for (int i = 0; i < 40; ++i) CHECK(commands[static_cast<std::size_t>(i)] == i);
  }
}

// holds_until_gate is a game-thread graph task that holds its completion back until `gate`.
struct holds_until_gate {
  graph_event_ref gate;
  std::atomic<int>* runs;
  named_threads::type get_desired_thread() const { return named_threads::game_thread; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  void do_task(named_threads::type, const graph_event_ref& self) {
    self->dont_complete_until(gate);
    runs->fetch_add(1);
  }
};

TEST_CASE("taskgraph: after a game-thread wait, process_thread_until_idle counts only what ran") {
  // The gate opens at once (the wait's brief look sees it) or later (the wait processes
  // the game thread's queue until its return task).
  for (unsigned workers : test::worker_counts) {
    for (int delay_us : {0, 5000}) {
      CAPTURE(workers);
      CAPTURE(delay_us);
      no_leaks leaks;
      diagnostic_recorder recorder;
      scheduler pool(test::options_with(workers));
      task_graph_interface graph(pool);
      attached_as game(pool, named_thread::game);
      SUBCASE("a game-thread task held back by dont_complete_until") {
        std::atomic<int> runs{0};
        graph_event_ref gate = graph_event::create_graph_event();
        graph_event_ref held = graph_task<holds_until_gate>::create_task().construct_and_dispatch_when_ready(gate, &runs);
        std::thread opener([&] {
          while (runs.load() == 0) std::this_thread::yield();
          if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
          gate->dispatch_subsequents();
        });
        graph.wait_until_task_completes(held, named_threads::game_thread);
        opener.join();
        CHECK(held->is_complete());
        CHECK(runs.load() == 1);
      }
      SUBCASE("events done and pending") {
        graph_event_array mixed;
        std::vector<graph_event_ref> pending;
        for (int i = 0; i < 6; ++i) {
          graph_event_ref event = graph_event::create_graph_event();
          if (i % 2 == 0) {
            event->dispatch_subsequents();
          } else {
            pending.push_back(event);
          }
          mixed.add(event);
        }
        std::thread dispatcher([&] {
          if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
          for (graph_event_ref& each : pending) each->dispatch_subsequents();
        });
        graph.wait_until_tasks_complete(mixed, named_threads::game_thread);
        dispatcher.join();
        for (const graph_event_ref& each : mixed) CHECK(each->is_complete());
      }
      CHECK(graph.process_thread_until_idle(named_threads::game_thread) == 0);
      std::atomic<int> later_runs{0};
      function_graph_task::create_and_dispatch_when_ready([&] { ++later_runs; }, "later", nullptr,
                                                          named_threads::game_thread);
      CHECK(graph.process_thread_until_idle(named_threads::game_thread) == 1);
      CHECK(later_runs.load() == 1);
      CHECK(recorder.count() == 0);
    }
  }
}

// Unreal's render thread (or a thread of no name) waiting for a game-thread task while
// nobody has attached as the game thread: the render thread's wait processes its own queue,
// the other blocks, and either could go on for ever. It is reported as it blocks, naming
// the task and the threads; it still completes once a thread attaches as the game thread
// and runs its queue.
TEST_CASE("taskgraph: a wait for work bound to a named thread nobody attached is reported at once") {
  for (unsigned workers : test::worker_counts) {
    for (auto [batch_wait, named] : {std::pair{false, true}, {true, true}, {false, false}, {true, false}}) {
      // Named copies: the waiter captures them, and clang before 16 cannot capture a binding.
      const bool batch = batch_wait;
      const bool named_waiter = named;
      CAPTURE(workers);
      CAPTURE(batch);
      CAPTURE(named_waiter);
      no_leaks leaks;
      diagnostic_recorder recorder;
      scheduler pool(test::options_with(workers));
      task_graph_interface graph(pool);
      std::atomic<int> runs{0};
      graph_event_ref on_game = pool.execute([&] {
        return function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "needs the game thread", nullptr,
                                                                   named_threads::game_thread);
      });
      std::atomic<bool> waited{false};
      std::thread waiter([&] {
        if (!named_waiter) {
          if (batch) {
            graph_event_array both{pool.execute([] { return function_graph_task::create_and_dispatch_when_ready([] {}, "any"); }),
                                   on_game};
            graph.wait_until_tasks_complete(both);
          } else {
            on_game->wait();
          }
          waited = true;
          return;
        }
        attached_as as_render(pool, named_thread::render);
        if (batch) {
          graph_event_array both{function_graph_task::create_and_dispatch_when_ready([] {}, "any thread"), on_game};
          graph.wait_until_tasks_complete(both, named_threads::actual_rendering_thread);
        } else {
          graph.wait_until_task_completes(on_game, named_threads::actual_rendering_thread);
        }
        waited = true;
      });
      // At once: long before a watchdog or a stall report would speak.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (recorder.count_naming("needs the game thread") == 0 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::yield();
      }
      // Checked, not required: the waiter must be released below whatever was seen.
      const std::vector<diagnostic_recorder::entry> seen = recorder.reports();
      CHECK(seen.size() == 1);
      for (const diagnostic_recorder::entry& each : seen) {
        CHECK(each.kind == diagnostic_kind::misuse);
        CHECK(each.message.find("needs the game thread") != std::string::npos);  // the task
        CHECK(each.message.find("game") != std::string::npos);                   // the thread it needs
        if (named_waiter) CHECK(each.message.find("render") != std::string::npos);  // the thread waiting
      }
      CHECK_FALSE(waited.load());
      {
        attached_as game(pool, named_thread::game);  // the wait ends once the game thread runs its queue
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!waited.load() && std::chrono::steady_clock::now() < deadline) {
          graph.process_thread_until_idle(named_threads::game_thread);
          std::this_thread::yield();
        }
      }
      CHECK(waited.load());
      waiter.join();
      CHECK(runs.load() == 1);
      CHECK(recorder.count() == 1);
    }
  }
}

// A batch waited for from the game thread, with one task held running: the wait takes back
// the newest part a chunk at a time, so the held one may lie in the newest chunk, on a
// chunk's edge, among the oldest (on a worker), or be the only one. The wait returns only
// once it completed, whichever chunk it was in.
TEST_CASE("taskgraph: a game-thread wait for a batch returns only once its held task completed, wherever it lies") {
  constexpr std::size_t batch = 1000;  // not a multiple of the wait's chunks
  for (unsigned workers : {1u, 2u, 8u}) {
    for (std::size_t held_at : {std::size_t{0}, std::size_t{63}, std::size_t{500}, batch - 65, batch - 64, batch - 1}) {
      CAPTURE(workers);
      CAPTURE(held_at);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_graph_interface graph(pool);
      attached_as game(pool, named_thread::game);
      std::atomic<bool> held_started{false};
      std::atomic<bool> release{false};
      std::atomic<bool> held_done{false};
      std::atomic<std::size_t> ran{0};
      graph_event_array all;
      all.reserve(batch);
      for (std::size_t i = 0; i < batch; ++i) {
        if (i == held_at) {
          all.add(function_graph_task::create_and_dispatch_when_ready([&] {
            held_started = true;
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!release.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
            held_done = true;
            ran.fetch_add(1);
          }, "held"));
        } else {
          all.add(function_graph_task::create_and_dispatch_when_ready([&ran] { ran.fetch_add(1); }, "quick"));
        }
      }
      // Released a while after it starts: on a worker, or on this thread once taken back.
      std::thread releaser([&] {
        while (!held_started.load()) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        release = true;
      });
      graph.wait_until_tasks_complete(all, named_threads::game_thread);
      const bool held_done_at_return = held_done.load();
      const std::size_t ran_at_return = ran.load();
      releaser.join();
      CHECK(held_done_at_return);
      CHECK(ran_at_return == batch);
      for (const graph_event_ref& each : all) CHECK(each->is_complete());
    }
  }
}

// The game thread waits for its own task, whose body ran and holds it open until a gate; the
// gate opens in an any-thread task that another thread launched inside execute(), behind a
// game-thread task. Without workers only the waiting game thread can run that any-thread
// task, from wherever it was queued (the other thread's lent deque when its prerequisite had
// already completed): its wait helps with queued work even for a task bound to itself.
TEST_CASE("taskgraph: the game thread waiting for its own held-open task runs the any-thread work that opens it") {
  for (unsigned workers : test::worker_counts) {
    const int rounds = workers == 0 ? 40 : 4;
    for (int round = 0; round < rounds; ++round) {
      CAPTURE(workers);
      CAPTURE(round);
      no_leaks leaks;
      diagnostic_recorder recorder;  // a hang's stall report and rescue, not an abort
      scheduler pool(test::options_with(workers));
      attached_as game(pool, named_thread::game);
      std::atomic<int> runs{0};
      std::atomic<int> sent_runs{0};
      graph_event_ref gate = graph_event::create_graph_event();
      graph_event_ref held = graph_task<holds_until_gate>::create_task().construct_and_dispatch_when_ready(gate, &runs);
      std::thread opener([&] {
        while (runs.load() == 0) std::this_thread::yield();
        graph_event_ref sent = pool.execute([&] {
          return function_graph_task::create_and_dispatch_when_ready([&] { sent_runs.fetch_add(1); }, "sent", nullptr,
                                                                     named_threads::game_thread);
        });
        graph_event_array after{sent};
        pool.execute([&] {
          function_graph_task::create_and_dispatch_when_ready([&] { gate->dispatch_subsequents(); }, "opens", &after);
        });
      });
      // A wait that hangs is ended after 10 s by opening the gate here, and fails.
      std::atomic<bool> returned{false};
      std::atomic<bool> rescued{false};
      std::thread rescuer([&] {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!returned.load() && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!returned.load()) {
          rescued.store(true);
          gate->dispatch_subsequents();
        }
      });
      held->wait(named_threads::game_thread);
      returned.store(true);
      rescuer.join();
      opener.join();
      CHECK_FALSE(rescued.load());
      for (const auto& each : recorder.reports()) MESSAGE(each.message);
      CHECK(held->is_complete());
      CHECK(sent_runs.load() == 1);
    }
  }
}


// A game-thread wait that processes its queue for a return task (there are workers) on an
// any-thread task that cannot run: the loop reports, as a blocking wait does, a stall past
// stall_report_after naming the task and the thread, and a need of a named thread nobody
// attached. Each hang is ended after 10 s by a rescuer, and fails.
TEST_CASE("taskgraph: a named thread's return-task wait reports a stall and an unattached thread it needs") {
  for (unsigned workers : test::worker_counts) {
    for (bool needs_render : {false, true}) {
      CAPTURE(workers);
      CAPTURE(needs_render);
      no_leaks leaks;
      diagnostic_recorder recorder;
      scheduler_options options = test::options_with(workers);
      options.stall_report_after = std::chrono::milliseconds(100);
      scheduler pool(options);
      task_graph_interface graph(pool);
      attached_as game(pool, named_thread::game);
      graph_event_ref gate = graph_event::create_graph_event();  // never dispatched but by the rescuer
      graph_event_ref render_work = function_graph_task::create_and_dispatch_when_ready(
          [] {}, "render work", nullptr, named_threads::actual_rendering_thread);
      graph_event_array before{needs_render ? render_work : gate};
      graph_event_ref after = function_graph_task::create_and_dispatch_when_ready([] {}, "use loaded", &before);
      const std::string expected = needs_render ? "render" : "has not completed";
      std::atomic<bool> returned{false};
      std::atomic<bool> rescued{false};
      std::thread rescuer([&] {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (recorder.count_naming(expected) == 0 && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        rescued.store(recorder.count_naming(expected) == 0);
        gate->dispatch_subsequents();
        if (needs_render) {
          attached_as render(pool, named_thread::render);
          while (!returned.load()) {
            graph.process_thread_until_idle(named_threads::actual_rendering_thread);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      });
      graph.wait_until_task_completes(after, named_threads::game_thread);
      returned.store(true);
      rescuer.join();
      CHECK_FALSE(rescued.load());
      CHECK(after->is_complete());
      bool named_both = false;
      for (const auto& each : recorder.reports()) {
        if (each.message.find(expected) == std::string::npos) continue;
        if (!needs_render) CHECK(each.kind == diagnostic_kind::stalled);
        named_both = named_both || (each.message.find(needs_render ? "render" : "use loaded") != std::string::npos &&
                                    each.message.find("game") != std::string::npos);
      }
      CHECK(named_both);
    }
  }
}

}  // TEST_SUITE
