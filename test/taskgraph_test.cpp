// Suite "taskgraph": Unreal's legacy TaskGraph API on magpie (include/magpie/taskgraph.h):
// ENamedThreads arithmetic, graph events, graph tasks, function tasks, the interface's
// named-thread processing and waits, misuse reports; stress cases from Epic's own list.
#include "support.h"
#include "task_support.h"

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

namespace {

// attached_as attaches the calling thread for the lifetime of the object.
struct attached_as {
  attached_as(scheduler& pool, named_thread thread) : pool_(pool) { pool_.attach(thread); }
  ~attached_as() { pool_.detach(); }
  attached_as(const attached_as&) = delete;
  attached_as& operator=(const attached_as&) = delete;
  scheduler& pool_;
};

// help_until runs queued work on this thread until `done()` holds.
template <class Done>
void help_until(scheduler& pool, Done done) {
  while (!done()) {
    if (!pool.try_run_one()) std::this_thread::yield();
  }
}

bool reported(const diagnostic_recorder& recorder, const std::string& part) {
  for (const auto& each : recorder.reports()) {
    if (each.message.find(part) != std::string::npos) return true;
  }
  return false;
}

// recording_task is a graph task that records where and as what thread it ran.
struct recording_task {
  named_threads::type desired;
  std::atomic<int>* runs;
  named_threads::type* told = nullptr;
  std::thread::id* ran_on = nullptr;

  named_threads::type get_desired_thread() const { return desired; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  void do_task(named_threads::type current, const graph_event_ref& self) {
    CHECK(self.is_valid());
    CHECK_FALSE(self->is_complete());
    if (told != nullptr) *told = current;
    if (ran_on != nullptr) *ran_on = std::this_thread::get_id();
    runs->fetch_add(1);
  }
};

struct forgotten_task {
  std::atomic<int>* runs;
  named_threads::type get_desired_thread() const { return named_threads::any_thread; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::fire_and_forget; }
  void do_task(named_threads::type, const graph_event_ref& self) {
    CHECK_FALSE(self.is_valid());
    runs->fetch_add(1);
  }
};

// not_movable checks that T is built in place, as Unreal builds it.
struct not_movable {
  explicit not_movable(int* out) : out_(out) {}
  not_movable(const not_movable&) = delete;
  not_movable& operator=(const not_movable&) = delete;
  named_threads::type get_desired_thread() const { return named_threads::any_thread; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  void do_task(named_threads::type, const graph_event_ref&) { *out_ = 7; }
  int* out_;
};

// waits_for_nested adds `nested` to its own completion event from inside do_task.
struct waits_for_nested {
  graph_event_ref nested;
  std::atomic<bool>* body_done;
  named_threads::type get_desired_thread() const { return named_threads::any_thread; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  void do_task(named_threads::type, const graph_event_ref& self) {
    self->dont_complete_until(nested);
    body_done->store(true);
  }
};

struct throwing_task {
  named_threads::type get_desired_thread() const { return named_threads::any_thread; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  void do_task(named_threads::type, const graph_event_ref&) { throw std::runtime_error("do_task threw"); }
};

}  // namespace

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

TEST_CASE("taskgraph: a graph task runs once after its prerequisites, told it runs on any thread") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_graph_interface graph(pool);
    std::atomic<int> runs{0};
    named_threads::type told = named_threads::game_thread;
    graph_event_ref first = graph_event::create_graph_event();
    graph_event_ref second = graph_event::create_graph_event();
    graph_event_array before{first, second};
    graph_event_ref done;
    {
      // The free functions use the calling task's scheduler: make them inside one of pool's.
      pool.launch("make", [&] {
            done = graph_task<recording_task>::create_task(&before).construct_and_dispatch_when_ready(
                named_threads::any_thread, &runs, &told);
          })
          .wait();
    }
    first->dispatch_subsequents();
    CHECK_FALSE(done->is_complete());
    CHECK(runs.load() == 0);
    second->dispatch_subsequents();
    graph.wait_until_task_completes(done);
    CHECK(done->is_complete());
    CHECK(runs.load() == 1);
    CHECK(told == named_threads::any_thread);
  }
}

TEST_CASE("taskgraph: graph tasks for a named thread run there, FIFO, high first, told their thread and queue") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_graph_interface graph(pool);
  attached_as game(pool, named_thread::game);
  std::vector<int> order;
  std::vector<named_threads::type> told;
  std::thread::id game_id = std::this_thread::get_id();
  bool all_on_game = true;
  auto record = [&](int id) {
    return [&, id](named_threads::type current, const graph_event_ref&) {
      order.push_back(id);
      told.push_back(current);
      all_on_game = all_on_game && std::this_thread::get_id() == game_id;
    };
  };
  graph_event_array sent;
  for (int i = 0; i < 3; ++i) {
    sent.add(function_graph_task::create_and_dispatch_when_ready(record(i), "main", nullptr, named_threads::game_thread));
  }
  sent.add(function_graph_task::create_and_dispatch_when_ready(
      record(9), "high", nullptr, named_threads::set_task_priority(named_threads::game_thread, 1)));
  sent.add(function_graph_task::create_and_dispatch_when_ready(record(5), "local", nullptr,
                                                               named_threads::game_thread_local));
  CHECK(graph.process_thread_until_idle(named_threads::game_thread) == 4);
  CHECK(order == std::vector<int>{9, 0, 1, 2});
  CHECK(graph.process_thread_until_idle(named_threads::game_thread_local) == 1);
  CHECK(order.back() == 5);
  CHECK(all_on_game);
  REQUIRE(told.size() == 5);
  CHECK(told[0] == named_threads::game_thread);
  CHECK(told[4] == named_threads::game_thread_local);
  for (const graph_event_ref& each : sent) CHECK(each->is_complete());
}

TEST_CASE("taskgraph: static functions use the calling task's scheduler, else the attached one, else the default") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  auto where = [] {
    std::atomic<scheduler*> seen{nullptr};
    graph_event_ref done = function_graph_task::create_and_dispatch_when_ready([&seen] { seen = scheduler::current(); });
    done->wait();
    return seen.load();
  };
  CHECK(pool.launch("inside", where).get_result() == &pool);
  {
    attached_as render(pool, named_thread::render);
    CHECK(where() == &pool);
    std::atomic<scheduler*> seen{nullptr};
    std::atomic<bool> ran{false};
    async_task(named_threads::actual_rendering_thread, [&] {
      seen = scheduler::current();
      ran = true;
    });
    task_graph_interface(pool).process_thread_until_idle(named_threads::actual_rendering_thread);
    CHECK(ran.load());
    CHECK(seen.load() == &pool);
  }
  CHECK(where() == &default_scheduler());
}

TEST_CASE("taskgraph: construct_and_hold runs only after unlock; unlocking twice is reported") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    diagnostic_recorder recorder;
    scheduler pool(test::options_with(workers));
    std::atomic<int> runs{0};
    graph_task<recording_task>* held = nullptr;
    graph_event_ref done;
    pool.launch("make", [&] {
          held = graph_task<recording_task>::create_task().construct_and_hold(named_threads::any_thread, &runs);
          done = held->get_completion_event();
        })
        .wait();
    // Held: a wait (which would run it here if it could) times out and nothing ran.
    CHECK_FALSE(done->as_task().wait(std::chrono::milliseconds(5)));
    CHECK(runs.load() == 0);
    held->unlock();
    done->wait();
    CHECK(runs.load() == 1);
    CHECK(recorder.count() == 0);

    // Behind a prerequisite not yet dispatched, the held task is still there for a second
    // unlock to find: reported, and the task still runs once.
    graph_event_ref gate = graph_event::create_graph_event();
    graph_event_array before{gate};
    pool.launch("make", [&] {
          held = graph_task<recording_task>::create_task(&before).construct_and_hold(named_threads::any_thread, &runs);
          done = held->get_completion_event();
        })
        .wait();
    held->unlock();
    held->unlock();
    CHECK(recorder.count() == 1);
    CHECK(reported(recorder, "unlock called twice"));
    gate->dispatch_subsequents();
    done->wait();
    CHECK(runs.load() == 2);
  }
}

TEST_CASE("taskgraph: T is built in place and need not be movable") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  int out = 0;
  graph_event_ref done =
      pool.launch("make", [&] { return graph_task<not_movable>::create_task().construct_and_dispatch_when_ready(&out); })
          .get_result();
  done->wait();
  CHECK(out == 7);
}

TEST_CASE("taskgraph: fire_and_forget tasks have no completion event; asking for one is reported") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  std::atomic<int> runs{0};
  graph_event_ref none = pool.launch("make", [&] {
                               return graph_task<forgotten_task>::create_task().construct_and_dispatch_when_ready(&runs);
                             }).get_result();
  CHECK_FALSE(none.is_valid());
  CHECK(none.get_reference() == nullptr);
  CHECK(none == nullptr);
  graph_task<forgotten_task>* held =
      pool.launch("make", [&] { return graph_task<forgotten_task>::create_task().construct_and_hold(&runs); })
          .get_result();
  CHECK_FALSE(held->get_completion_event().is_valid());
  CHECK(recorder.count() == 1);
  CHECK(reported(recorder, "fire_and_forget"));
  held->unlock();
  help_until(pool, [&] { return runs.load() == 2; });
}

}  // TEST_SUITE
