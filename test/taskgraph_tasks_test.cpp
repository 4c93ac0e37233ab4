// Suite "taskgraph_tasks": Unreal's graph tasks on magpie (include/magpie/taskgraph.h):
// graph_task<T> and function tasks run after their prerequisites on the thread they ask
// for, construct_and_hold and unlock, fire_and_forget, dont_complete_until, exceptions.
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
using test::attached_as;
using test::diagnostic_recorder;
using test::no_leaks;
using test::recording_task;
using test::reported;

namespace {

// help_until runs queued work on this thread until `done()` holds.
template <class Done>
void help_until(scheduler& pool, Done done) {
  while (!done()) {
    if (!pool.try_run_one()) std::this_thread::yield();
  }
}

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

TEST_SUITE("taskgraph_tasks") {

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

TEST_CASE("taskgraph: the completion event do_task is handed can be kept past the task") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    graph_event_ref kept;
    graph_event_ref returned = pool.launch("make", [&] {
                                     return function_graph_task::create_and_dispatch_when_ready(
                                         [&](named_threads::type, const graph_event_ref& self) { kept = self; }, "keeps");
                                   }).get_result();
    returned->wait();
    CHECK(kept == returned);
    CHECK(kept->is_complete());
    CHECK(std::string(kept->name()) == "keeps");
    returned.safe_release();
    CHECK(kept->is_complete());  // the kept copy holds the task on its own
    // Dropped at once by its maker, the task still hands out a usable self.
    std::atomic<bool> ran{false};
    pool.launch("make", [&] {
          (void)function_graph_task::create_and_dispatch_when_ready([&](named_threads::type, const graph_event_ref& self) {
            kept = self;
            ran = true;
          });
        })
        .wait();
    while (!ran.load()) pool.try_run_one();
    kept->wait();
    CHECK(kept->is_complete());
    kept.safe_release();
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

TEST_CASE("taskgraph: do_task's dont_complete_until on its own event holds its subsequents back") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<bool> body_done{false};
    std::atomic<bool> follower_saw_nested{false};
    std::atomic<bool> nested_ran{false};
    graph_event_ref nested_gate = graph_event::create_graph_event();
    graph_event_ref parent;
    graph_event_ref follower;
    pool.launch("make", [&] {
          graph_event_array gate_only{nested_gate};
          graph_event_ref nested = function_graph_task::create_and_dispatch_when_ready(
              [&] { nested_ran = true; }, "nested", &gate_only);
          parent = graph_task<waits_for_nested>::create_task().construct_and_dispatch_when_ready(nested, &body_done);
          graph_event_array after_parent{parent};
          follower = function_graph_task::create_and_dispatch_when_ready(
              [&] { follower_saw_nested = nested_ran.load(); }, "follower", &after_parent);
        })
        .wait();
    // The body returns, but the parent completes only once its nested task has.
    while (!body_done.load()) pool.try_run_one();
    CHECK_FALSE(parent->is_complete());
    CHECK_FALSE(follower->is_complete());
    nested_gate->dispatch_subsequents();
    follower->wait();
    CHECK(parent->is_complete());
    CHECK(follower_saw_nested.load());
  }
}

TEST_CASE("taskgraph: dont_complete_until on an event not yet dispatched adds a prerequisite; elsewhere it is reported") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  graph_event_ref event = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
  graph_event_ref later = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
  event->dont_complete_until(later);
  event->dispatch_subsequents();
  CHECK_FALSE(event->as_task().wait(std::chrono::milliseconds(2)));
  later->dispatch_subsequents();
  event->wait();
  CHECK(event->is_complete());
  CHECK(recorder.count() == 0);

  // After dispatch: reported by the event, and ignored.
  graph_event_ref third = pool.launch("make", [] { return graph_event::create_graph_event(); }).get_result();
  event->dont_complete_until(third);
  CHECK(recorder.count() == 1);
  // A graph task's event from outside its do_task: reported.
  graph_event_ref task_event_ref = pool.launch("make", [] {
                                         return function_graph_task::create_and_dispatch_when_ready([] {}, "done");
                                       }).get_result();
  task_event_ref->wait();
  task_event_ref->dont_complete_until(third);
  CHECK(recorder.count() == 2);
  CHECK(reported(recorder, "from outside its do_task"));
  // dispatch_subsequents on a task's completion event, and on an empty reference: reported.
  task_event_ref->dispatch_subsequents();
  graph_event_ref empty;
  empty->dispatch_subsequents();
  CHECK(recorder.count() == 4);
  CHECK(reported(recorder, "completes when its do_task returns"));
  CHECK(empty->is_complete());
  third->dispatch_subsequents();
}

TEST_CASE("taskgraph: an exception from do_task is kept in its event; unasked, it is reported as unhandled") {
  no_leaks leaks;
  diagnostic_recorder recorder;
  scheduler pool(test::options_with(1));
  graph_event_ref failed = pool.launch("make", [] {
                                 return graph_task<throwing_task>::create_task().construct_and_dispatch_when_ready();
                               }).get_result();
  failed->wait();
  CHECK(failed->is_complete());
  CHECK(failed->as_task().has_exception());
  CHECK_THROWS_WITH_AS(failed->as_task().get_result(), "do_task threw", std::runtime_error);
  failed.safe_release();
  CHECK(recorder.count() == 0);
  std::atomic<bool> thrown{false};
  pool.launch("make", [&] {
        async_task(named_threads::any_thread, [&] {
          thrown = true;
          throw std::runtime_error("async_task threw");
        });
      })
      .wait();
  while (recorder.count() == 0) std::this_thread::yield();
  CHECK(thrown.load());
  CHECK(recorder.reports()[0].kind == diagnostic_kind::unhandled_exception);
}

}  // TEST_SUITE
