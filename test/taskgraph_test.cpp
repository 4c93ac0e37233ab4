// Suite "taskgraph": Unreal's legacy TaskGraph API on magpie (include/magpie/taskgraph.h):
// ENamedThreads arithmetic, graph events and arrays, the interface's named-thread
// processing, misuse reports; stress cases from Epic's own list. Graph tasks themselves are
// in test/taskgraph_tasks_test.cpp, a named thread's waits in test/taskgraph_wait_test.cpp.
#include "support.h"
#include "task_support.h"
#include "taskgraph_support.h"

#include <magpie/taskgraph.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using namespace magpie::taskgraph;
using test::diagnostic_recorder;
using test::no_leaks;
using test::attached_as;
using test::recording_task;
using test::reported;

TEST_SUITE("taskgraph") {

TEST_CASE("taskgraph: named_threads index, queue and priority bits round-trip as Unreal's") {
  using nt = named_threads;
  CHECK(nt::get_thread_index(nt::game_thread_local) == nt::game_thread);
  CHECK(nt::get_queue_index(nt::game_thread_local) == 1);
  CHECK(nt::get_queue_index(nt::game_thread) == 0);
  CHECK(nt::get_thread_index(nt::any_hi_pri_thread_hi_pri_task) == nt::any_thread);
  CHECK(nt::get_task_priority(nt::any_hi_pri_thread_hi_pri_task) == 1);
  CHECK(nt::get_task_priority(nt::any_hi_pri_thread_normal_task) == 0);
  CHECK(nt::get_thread_priority_index(nt::any_background_hi_pri_task) == 2);
  CHECK(nt::get_thread_priority_index(nt::any_hi_pri_thread_normal_task) == 1);
  for (std::uint32_t index : {0u, 1u, 2u, 3u, 9u, 15u, 0xffu}) {
    for (int queue : {0, 1}) {
      for (int task_priority : {0, 1}) {
        for (int thread_priority : {0, 1, 2}) {
          auto t = static_cast<nt::type>(index | (static_cast<std::uint32_t>(queue) << nt::queue_index_shift));
          t = nt::set_priorities(t, thread_priority, task_priority);
          CHECK(nt::get_thread_index(t) == static_cast<nt::type>(index));
          CHECK(nt::get_queue_index(t) == queue);
          CHECK(nt::get_task_priority(t) == task_priority);
          CHECK(nt::get_thread_priority_index(t) == thread_priority);
          CHECK(nt::set_task_priority(t, 0) == (t & ~std::uint32_t{nt::high_task_priority}));
        }
      }
    }
  }
  // Unreal's bit values, for code that stores them.
  CHECK(nt::local_queue == 0x100);
  CHECK(nt::high_task_priority == 0x200);
  CHECK(nt::high_thread_priority == 0x400);
  CHECK(nt::background_thread_priority == 0x800);
  CHECK(nt::any_background_hi_pri_task == (0xff | 0x800 | 0x200));
}

TEST_CASE("taskgraph: named threads map onto magpie's, and priorities as Unreal translates them") {
  using nt = named_threads;
  CHECK(nt::to_named_thread(nt::game_thread) == named_thread::game);
  CHECK(nt::to_named_thread(nt::actual_rendering_thread_local) == named_thread::render);
  CHECK(nt::to_named_thread(nt::rhi_thread) == named_thread::rhi);
  CHECK(nt::to_named_thread(nt::audio_thread) == named_thread::audio);
  CHECK(nt::to_named_thread(nt::user_thread(3)) == named_thread::user(3));
  for (std::uint32_t index = 0; index < named_thread::max_count; ++index) {
    CHECK(nt::from_named_thread(nt::to_named_thread(static_cast<nt::type>(index))) == static_cast<nt::type>(index));
  }
  CHECK(nt::translate_priority(nt::any_hi_pri_thread_normal_task) == priority::high);
  CHECK(nt::translate_priority(nt::any_hi_pri_thread_hi_pri_task) == priority::high);
  CHECK(nt::translate_priority(nt::any_normal_thread_normal_task) == priority::normal);
  CHECK(nt::translate_priority(nt::any_normal_thread_hi_pri_task) == priority::normal);
  CHECK(nt::translate_priority(nt::any_background_thread_normal_task) == priority::background_normal);
  CHECK(nt::translate_priority(nt::any_background_hi_pri_task) == priority::background_high);
  CHECK(nt::translate_priority(nt::any_thread) == priority::normal);

  placement high_local = placement_for(nt::set_task_priority(nt::game_thread_local, 1));
  placement expected = on_thread(named_thread::game, thread_queue::local, true);
  CHECK(high_local.target() == expected.target());
  CHECK(high_local.task_priority() == priority::high);
  CHECK(placement_for(nt::any_background_hi_pri_task).task_priority() == priority::background_high);
  CHECK(placement_for(nt::any_background_hi_pri_task).target() == placement().target());
}

TEST_CASE("taskgraph: the render thread is the game thread until one is set") {
  CHECK(named_threads::get_render_thread() == named_threads::game_thread);
  CHECK(named_threads::get_render_thread_local() == named_threads::game_thread_local);
  named_threads::set_render_thread(named_threads::actual_rendering_thread);
  CHECK(named_threads::get_render_thread() == named_threads::actual_rendering_thread);
  CHECK(named_threads::get_render_thread_local() == named_threads::actual_rendering_thread_local);
  named_threads::set_render_thread(named_threads::game_thread);
}

TEST_CASE("taskgraph: dispatch_subsequents is idempotent; a reference keeps its event, valid after completion") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(2));
  graph_event_ref kept;
  {
    graph_event_ref made = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
    kept = made;
    CHECK(kept == made);
    CHECK(kept.get_reference() == kept.operator->());
  }
  std::atomic<int> runs{0};
  graph_event_array after{kept};
  graph_event_ref follower = pool.launch("make", [&] {
                                   return function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "f", &after);
                                 }).get_result();
  std::vector<std::thread> dispatchers;
  for (int i = 0; i < 4; ++i) dispatchers.emplace_back([&] { kept->dispatch_subsequents(); });
  for (auto& each : dispatchers) each.join();
  follower->wait();
  kept->dispatch_subsequents();
  CHECK(runs.load() == 1);
  CHECK(kept->is_complete());
  CHECK(std::string(kept->name()) == "graph_event");
  // Still usable as a prerequisite once complete: counts as done.
  graph_event_ref second = pool.launch("make", [&] {
                                 return function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "g", &after);
                               }).get_result();
  second->wait();
  CHECK(runs.load() == 2);
  CHECK(recorder.count() == 0);
  kept.safe_release();
  CHECK_FALSE(kept.is_valid());
}

TEST_CASE("taskgraph: a graph_event_array of done, undone and empty events works as prerequisites and in waits") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    graph_event_array mixed;
    std::vector<graph_event_ref> pending;
    for (int i = 0; i < 10; ++i) {
      graph_event_ref event = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
      if (i % 2 == 0) {
        event->dispatch_subsequents();
      } else {
        pending.push_back(event);
      }
      mixed.add(event);
      mixed.add(graph_event_ref());
    }
    CHECK(mixed.size() == 20);
    std::atomic<int> runs{0};
    graph_event_ref gather = pool.launch("make", [&] {
                                   return graph_task<null_graph_task>::create_task(&mixed).construct_and_dispatch_when_ready();
                                 }).get_result();
    graph_event_array after_gather{gather};
    graph_event_ref follower = pool.launch("make", [&] {
                                     return function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "f", &after_gather);
                                   }).get_result();
    for (graph_event_ref& each : pending) {
      CHECK_FALSE(follower->is_complete());
      each->dispatch_subsequents();
    }
    graph.wait_until_tasks_complete(mixed);
    graph.wait_until_task_completes(follower);
    CHECK(runs.load() == 1);
    CHECK(std::string(gather->name()) == "null_graph_task");
    // The array copies and moves as a value.
    graph_event_array copy = mixed;
    graph_event_array moved = std::move(copy);
    CHECK(moved.size() == 20);
    CHECK(moved[0] == mixed[0]);
    mixed.reset();
    CHECK(mixed.empty());
  }
}

TEST_CASE("taskgraph: a desired thread magpie does not have is reported and runs on a worker") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  std::atomic<int> runs{0};
  graph_event_ref done = pool.launch("make", [&] {
                               return function_graph_task::create_and_dispatch_when_ready(
                                   [&] { ++runs; }, "stray", nullptr, static_cast<named_threads::type>(40));
                             }).get_result();
  done->wait();
  CHECK(runs.load() == 1);
  CHECK(recorder.count() == 1);
  CHECK(reported(recorder, "thread 40"));
  task_graph_interface graph(pool);
  CHECK(graph.process_thread_until_idle(named_threads::any_thread) == 0);
  CHECK(recorder.count() == 2);
}

TEST_CASE("taskgraph: trigger_event_when_tasks_complete triggers at once when done, else after the last") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    task_event at_once("at once", pool);
    graph_event_array none;
    graph.trigger_event_when_tasks_complete(at_once, none);
    CHECK(at_once.is_completed());

    task_event later("later", pool);
    graph_event_ref gate = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
    graph_event_array tasks{gate};
    graph.trigger_event_when_tasks_complete(later, tasks);
    CHECK_FALSE(later.is_completed());
    gate->dispatch_subsequents();  // completes it on this thread: no worker needed
    CHECK(later.is_completed());
  }
}

TEST_CASE("taskgraph: trigger_event_when_tasks_complete never deadlocks when every worker waits") {
  no_leaks leaks;
  diagnostic_recorder recorder;  // the standby cap (0) is reached, as this case means it to be
  scheduler_options options = test::options_with(2);
  options.max_standby_workers = 0;
  scheduler pool(options);
  task_graph_interface graph(pool);
  task_event released("released", pool);
  std::atomic<int> waiting{0};
  std::vector<task<>> blocked;
  for (unsigned i = 0; i < pool.worker_count(); ++i) {
    blocked.push_back(pool.launch("blocked", [&] {
      ++waiting;
      released.wait();
    }));
  }
  while (waiting.load() < static_cast<int>(blocked.size())) std::this_thread::yield();
  graph_event_ref gate = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
  graph_event_array tasks{gate};
  graph.trigger_event_when_tasks_complete(released, tasks);
  std::thread dispatcher([&] { gate->dispatch_subsequents(); });
  dispatcher.join();
  wait_all(blocked);
  CHECK(released.is_completed());
}

TEST_CASE("taskgraph: a return_graph_task ends process_thread_until_request_return once its prerequisites ran") {
  for (unsigned workers : {0u, 1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    std::thread::id render_id;
    std::atomic<bool> attached{false};
    std::atomic<int> rendered{0};
    std::thread render([&] {
      graph.attach_to_thread(named_threads::actual_rendering_thread);
      render_id = std::this_thread::get_id();
      attached = true;
      graph.process_thread_until_request_return(named_threads::actual_rendering_thread);
      CHECK(graph.is_current_thread_known());
      pool.detach();
    });
    while (!attached.load()) std::this_thread::yield();
    // One producer sends the commands (FIFO per producer), then the return task behind them.
    pool.launch("make", [&] {
          graph_event_array commands;
          for (int i = 0; i < 20; ++i) {
            commands.add(function_graph_task::create_and_dispatch_when_ready(
                [&, i] {
                  if (rendered.load() == i && std::this_thread::get_id() == render_id) ++rendered;
                },
                "command", nullptr, named_threads::actual_rendering_thread));
          }
          graph_task<return_graph_task>::create_task(&commands).construct_and_dispatch_when_ready(
              named_threads::actual_rendering_thread);
        })
        .wait();
    render.join();
    CHECK(rendered.load() == 20);
    CHECK_FALSE(graph.is_current_thread_known());
    CHECK(recorder.count() == 0);
  }
}

TEST_CASE("taskgraph: the interface answers who the caller is and how many workers there are") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_graph_interface graph(pool);
  CHECK(graph.get_num_worker_threads() == 2);  // one foreground, one background
  CHECK_FALSE(graph.is_current_thread_known());
  CHECK(graph.get_current_thread_if_known() == named_threads::any_thread);
  CHECK(&graph.scheduler_of() == &pool);
  CHECK(&task_graph_interface::get().scheduler_of() == &default_scheduler());
  graph.attach_to_thread(named_threads::user_thread(2));
  CHECK(graph.is_current_thread_known());
  CHECK(graph.get_current_thread_if_known() == named_threads::user_thread(2));
  CHECK(graph.get_current_thread_if_known(true) == (named_threads::user_thread(2) | named_threads::local_queue));
  // Another scheduler's interface does not know this thread.
  scheduler other(test::options_with(1));
  CHECK_FALSE(task_graph_interface(other).is_current_thread_known());
  std::atomic<named_threads::type> told{named_threads::rhi_thread};
  function_graph_task::create_and_dispatch_when_ready(
      [&](named_threads::type current, const graph_event_ref& self) {
        CHECK(self.is_valid());
        told = current;
      },
      "told", nullptr, named_threads::user_thread(2));
  CHECK(graph.process_thread_until_idle(named_threads::user_thread(2)) == 1);
  CHECK(told.load() == named_threads::user_thread(2));
  pool.detach();
}

TEST_CASE("taskgraph stress: many producers build graphs of graph tasks and events (Epic's BasicStressTest)" *
          doctest::test_suite("stress")) {
  for (int round = 0; round < test::stress_repeat(); ++round) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_graph_interface graph(pool);
      constexpr int producers = 4;
      constexpr int per_producer = 100;
      constexpr int fan = 10;
      std::atomic<int> runs{0};
      std::vector<graph_event_ref> roots(producers);
      std::vector<std::thread> threads;
      for (int p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
          pool.launch("producer", [&, p] {
                graph_event_ref start = graph_event::create_graph_event();
                graph_event_array all;
                for (int i = 0; i < per_producer; ++i) {
                  graph_event_array before{start};
                  graph_event_array layer;
                  for (int j = 0; j < fan; ++j) {
                    layer.add(function_graph_task::create_and_dispatch_when_ready([&] { ++runs; }, "leaf", &before));
                  }
                  all.add(graph_task<null_graph_task>::create_task(&layer).construct_and_dispatch_when_ready());
                }
                start->dispatch_subsequents();
                roots[static_cast<std::size_t>(p)] =
                    graph_task<null_graph_task>::create_task(&all).construct_and_dispatch_when_ready();
              })
              .wait();
        });
      }
      for (auto& each : threads) each.join();
      graph_event_array everything;
      for (auto& root : roots) everything.add(root);
      graph.wait_until_tasks_complete(everything);
      CHECK(runs.load() == producers * per_producer * fan);
    }
  }
}

TEST_CASE("taskgraph stress: a chain of 100,000 graph events completes without deep recursion" *
          doctest::test_suite("stress")) {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  graph_event_ref head = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
  graph_event_ref previous = head;
  for (int i = 0; i < 100000; ++i) {
    graph_event_ref next = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
    next->dont_complete_until(previous);
    next->dispatch_subsequents();
    previous = next;
  }
  CHECK_FALSE(previous->is_complete());
  head->dispatch_subsequents();
  CHECK(previous->is_complete());
}

TEST_CASE("taskgraph: a reference tells whether its task may run on a named thread, copies and arrays alike") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    attached_as game(pool, named_thread::game);
    std::atomic<int> runs{0};
    graph_event_ref gate = graph_event::create_graph_event();
    graph_event_array behind{gate};
    graph_event_ref any = function_graph_task::create_and_dispatch_when_ready([&runs] { ++runs; }, "any");
    graph_event_ref any_behind =
        function_graph_task::create_and_dispatch_when_ready([&runs] { ++runs; }, "any", &behind);
    graph_event_ref on_game = function_graph_task::create_and_dispatch_when_ready(
        [&runs] { ++runs; }, "game", nullptr, named_threads::game_thread);
    graph_event_ref on_game_local = function_graph_task::create_and_dispatch_when_ready(
        [&runs] { ++runs; }, "game local", &behind, named_threads::game_thread_local);
    graph_event_ref bad_thread = function_graph_task::create_and_dispatch_when_ready(
        [&runs] { ++runs; }, "bad", nullptr, static_cast<named_threads::type>(named_threads::any_thread - 1));
    CHECK(reported(recorder, "neither any_thread nor one of magpie's 16 named threads"));
    graph_event_ref task_any = graph_task<recording_task>::create_task().construct_and_dispatch_when_ready(
        named_threads::any_thread, &runs);
    graph_event_ref task_game = graph_task<recording_task>::create_task().construct_and_dispatch_when_ready(
        named_threads::game_thread, &runs);
    graph_event_ref wrapped_any(pool.launch("plain", [&runs] { ++runs; }));
    graph_event_ref wrapped_game(pool.launch("plain on game", [&runs] { ++runs; }, on_thread(named_thread::game)));
    graph_event_ref self_on_game;
    graph_event_ref self_on_game_task = function_graph_task::create_and_dispatch_when_ready(
        [&](named_threads::type, const graph_event_ref& self) {
          self_on_game = self;
          ++runs;
        },
        "keeps itself", nullptr, named_threads::game_thread);

    CHECK_FALSE(graph_event_ref()->may_run_on_named_thread());
    CHECK_FALSE(gate->may_run_on_named_thread());
    CHECK_FALSE(any->may_run_on_named_thread());
    CHECK_FALSE(any_behind->may_run_on_named_thread());
    CHECK(on_game->may_run_on_named_thread());
    CHECK(on_game_local->may_run_on_named_thread());
    CHECK_FALSE(bad_thread->may_run_on_named_thread());
    CHECK_FALSE(task_any->may_run_on_named_thread());
    CHECK(task_game->may_run_on_named_thread());
    CHECK_FALSE(wrapped_any->may_run_on_named_thread());
    CHECK(wrapped_game->may_run_on_named_thread());
    CHECK(self_on_game_task->may_run_on_named_thread());

    // Copies, moves and arrays keep what the reference knows.
    graph_event_array all{any, on_game, gate};
    for (const graph_event_ref& each : {any_behind, on_game_local, bad_thread, task_any, task_game, wrapped_any,
                                        wrapped_game, self_on_game_task}) {
      all.add(each);
    }
    graph_event_ref moved = std::move(all[1]);
    CHECK(moved->may_run_on_named_thread());
    all[1] = moved;
    const graph_event_array copy = all;
    REQUIRE(copy.size() == 11);
    const bool expected[] = {false, true, false, false, true, false, false, true, false, true, true};
    for (std::size_t i = 0; i < copy.size(); ++i) {
      CAPTURE(i);
      CHECK(copy[i]->may_run_on_named_thread() == expected[i]);
    }

    // An array knows when none may run on a named thread, until written through.
    CHECK(copy.may_hold_named_thread_tasks());
    graph_event_array known{any, any_behind, gate, bad_thread, task_any, graph_event_ref()};
    CHECK_FALSE(known.may_hold_named_thread_tasks());
    graph_event_array moved_known = std::move(known);
    CHECK_FALSE(moved_known.may_hold_named_thread_tasks());
    CHECK_FALSE(graph_event_array(moved_known).may_hold_named_thread_tasks());
    moved_known.add(wrapped_any);  // made from a task: not known without reading it
    CHECK(moved_known.may_hold_named_thread_tasks());
    moved_known.reset();
    CHECK_FALSE(moved_known.may_hold_named_thread_tasks());
    moved_known.add(any);
    moved_known[0] = on_game;  // written through: no longer known
    CHECK(moved_known.may_hold_named_thread_tasks());
    moved_known.reset();
    moved_known.add(any);
    (void)moved_known.begin();
    CHECK(moved_known.may_hold_named_thread_tasks());

    gate->dispatch_subsequents();
    graph.wait_until_tasks_complete(copy, named_threads::game_thread);
    for (const graph_event_ref& each : copy) CHECK(each->is_complete());
    CHECK(runs.load() == 10);
    // The reference do_task was handed does not know where its task is placed: it asks.
    REQUIRE(self_on_game.is_valid());
    CHECK(self_on_game->may_run_on_named_thread());
  }
}

TEST_CASE("taskgraph: commands written into an array through its accessors are still run in the order given") {
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
      all.add(function_graph_task::create_and_dispatch_when_ready([&any_ran] { any_ran.fetch_add(1); }, "work"));
    }
    std::vector<graph_event_ref> replaced;  // waited for at the end, not by the array
    for (int i = 50; i < 4000; i += 100) {
      replaced.push_back(all[static_cast<std::size_t>(i)]);
      all[static_cast<std::size_t>(i)] = function_graph_task::create_and_dispatch_when_ready(
          [&commands, i] { commands.push_back(i / 100); }, "command", nullptr, named_threads::game_thread);
    }
    graph.wait_until_tasks_complete(all, named_threads::game_thread);
    REQUIRE(commands.size() == 40);
    for (int i = 0; i < 40; ++i) CHECK(commands[static_cast<std::size_t>(i)] == i);
    for (const graph_event_ref& each : replaced) each->wait();
    CHECK(any_ran.load() == 4000);
  }
}

TEST_CASE("taskgraph stress: game-thread tasks sent from workers run there in the order each sent them" *
          doctest::test_suite("stress")) {
  for (int round = 0; round < test::stress_repeat(); ++round) {
    no_leaks leaks;
    scheduler pool(test::options_with(2));
    task_graph_interface graph(pool);
    attached_as game(pool, named_thread::game);
    constexpr int senders = 8;
    constexpr int per_sender = 500;
    std::vector<int> last(senders, -1);
    int out_of_order = 0;
    std::vector<graph_event_array> sent(senders);
    graph_event_array sending;
    for (int s = 0; s < senders; ++s) {
      sending.add(function_graph_task::create_and_dispatch_when_ready([&, s] {
        for (int i = 0; i < per_sender; ++i) {
          sent[static_cast<std::size_t>(s)].add(function_graph_task::create_and_dispatch_when_ready(
              [&, s, i] {
                if (last[static_cast<std::size_t>(s)] != i - 1) ++out_of_order;
                last[static_cast<std::size_t>(s)] = i;
              },
              "on game", nullptr, named_threads::game_thread));
        }
      }));
    }
    // The game thread pumps its queue while senders run (or runs a sender itself), then
    // waits for every command, each sender's in the order sent.
    graph.wait_until_tasks_complete(sending, named_threads::game_thread);
    graph_event_array all;
    for (auto& each : sent) {
      for (auto& command : each) all.add(command);
    }
    graph.wait_until_tasks_complete(all, named_threads::game_thread);
    CHECK(out_of_order == 0);
    for (int s = 0; s < senders; ++s) CHECK(last[static_cast<std::size_t>(s)] == per_sender - 1);
  }
}

}  // TEST_SUITE
