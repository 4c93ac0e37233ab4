// Tests for named threads (include/magpie/scheduler.h): attach, FIFO per producer, the
// two queues, processing loops, re-entry and shutdown.
#include <magpie/coroutine.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>

#include "job.h"
#include "support.h"
#include "task_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using magpie::named_thread;
using magpie::scheduler;
using magpie::thread_queue;
using namespace magpie::test;

TEST_SUITE("named_thread") {

TEST_CASE("named_thread: jobs from several producers run in each producer's order") {
  scheduler pool(small_pool());
  attached_as game(pool, named_thread::game);
  CHECK(scheduler::current_named_thread() == named_thread::game);
  constexpr int producers = 4;
  constexpr int per_producer = 5000;
  std::vector<int> last_seen(producers, -1);
  int out_of_order = 0;
  int ran = 0;
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        launch_on(pool, named_thread::game, [&, p, i] {
          // Runs on the game thread only, so plain variables are safe here.
          if (last_seen[static_cast<std::size_t>(p)] != i - 1) ++out_of_order;
          last_seen[static_cast<std::size_t>(p)] = i;
          ++ran;
        });
      }
    });
  }
  while (ran < producers * per_producer) {
    if (pool.process_until_idle(named_thread::game) == 0) std::this_thread::yield();
  }
  for (auto& thread : threads) thread.join();
  CHECK(out_of_order == 0);
  CHECK(ran == producers * per_producer);
}

TEST_CASE("named_thread: high-priority jobs run before normal jobs queued earlier") {
  scheduler pool(small_pool());
  attached_as render(pool, named_thread::render);
  std::string order;
  for (char c : std::string("abc")) launch_on(pool, named_thread::render, [&, c] { order += c; });
  launch_on(pool, named_thread::render, [&] { order += 'H'; }, thread_queue::main, true);
  CHECK(pool.process_until_idle(named_thread::render) == 4);
  CHECK(order == "Habc");
}

TEST_CASE("named_thread: the local queue is drained only when asked for") {
  scheduler pool(small_pool());
  attached_as game(pool, named_thread::game);
  int local_ran = 0;
  launch_on(pool, named_thread::game, [&] { ++local_ran; }, thread_queue::local);
  CHECK(pool.process_until_idle(named_thread::game, thread_queue::main) == 0);
  CHECK(local_ran == 0);
  CHECK(pool.process_until_idle(named_thread::game, thread_queue::local) == 1);
  CHECK(local_ran == 1);
}

TEST_CASE("named_thread: workers send jobs to the game thread, which runs them until asked to return") {
  for (unsigned workers : {0u, 1u, 4u}) {
    CAPTURE(workers);
    scheduler pool(small_pool(workers));
    attached_as game(pool, named_thread::game);
    std::thread::id game_thread = std::this_thread::get_id();
    std::atomic<int> on_game{0};
    constexpr int jobs = 100;
    for (int i = 0; i < jobs; ++i) {
      launch(pool, [&pool, &on_game, game_thread] {
        launch_on(pool, named_thread::game, [&on_game, game_thread] {
          if (std::this_thread::get_id() == game_thread) on_game.fetch_add(1);
        });
      });
    }
    // A worker-side job asks the game thread to return once all game jobs ran.
    std::thread watcher([&] {
      help_until(pool, [&] { return on_game.load() == jobs; });
      pool.request_return(named_thread::game);
    });
    pool.process_until_request_return(named_thread::game);
    watcher.join();
    CHECK(on_game.load() == jobs);
  }
}

TEST_CASE("named_thread: re-entering the queue being processed is reported; the other queue is fine") {
  diagnostic_recorder recorder;
  scheduler pool(small_pool());
  attached_as game(pool, named_thread::game);
  std::size_t nested_main = 99;
  std::size_t nested_local = 99;
  launch_on(pool, named_thread::game, [&] {}, thread_queue::local);
  launch_on(pool, named_thread::game, [&] {
    CHECK(pool.is_processing(named_thread::game, thread_queue::main));
    nested_main = pool.process_until_idle(named_thread::game, thread_queue::main);
    nested_local = pool.process_until_idle(named_thread::game, thread_queue::local);
  });
  CHECK(pool.process_until_idle(named_thread::game) == 1);
  CHECK(nested_main == 0);
  CHECK(nested_local == 1);
  CHECK_FALSE(pool.is_processing(named_thread::game));
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].message.find("re-entered") != std::string::npos);
}

TEST_CASE("named_thread: processing from a thread not attached as that thread is reported") {
  diagnostic_recorder recorder;
  scheduler pool(small_pool());
  int ran = 0;
  launch_on(pool, named_thread::audio, [&] { ++ran; });
  CHECK(pool.process_until_idle(named_thread::audio) == 0);
  CHECK(ran == 0);
  REQUIRE(recorder.count() == 1);
  {
    attached_as audio(pool, named_thread::audio);
    CHECK(pool.process_until_idle(named_thread::audio) == 1);
  }
  CHECK(ran == 1);
}

TEST_CASE("named_thread: detaching while processing its queue is reported and ignored") {
  diagnostic_recorder recorder;
  scheduler pool(small_pool());
  attached_as game(pool, named_thread::game);
  launch_on(pool, named_thread::game, [&] {
    pool.detach();
    CHECK(pool.is_processing(named_thread::game, thread_queue::main));
    launch_on(pool, named_thread::game, [&] { pool.request_return(named_thread::game); });
  });
  pool.process_until_request_return(named_thread::game);  // still attached: the second job runs
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].message.find("detach() called while processing") != std::string::npos);
  launch_on(pool, named_thread::game, [&] {}, thread_queue::local);
  CHECK(pool.process_until_idle(named_thread::game, thread_queue::local) == 1);  // and still attached after
}

TEST_CASE("named_thread: attach and detach inside a work item the thread runs are reported and ignored") {
  // The item's runner restores the thread's context when the item returns: a detach inside
  // would be undone while the named thread stayed free for another thread to attach.
  diagnostic_recorder recorder;
  scheduler pool(small_pool(0));
  {
    attached_as game(pool, named_thread::game);
    bool attached_inside = false;
    magpie::task<> detaching = pool.launch("detaching", [&] {
      pool.detach();
      attached_inside = scheduler::current_named_thread() == named_thread::game;
    });
    detaching.wait();  // run here, by the attached thread
    CHECK(attached_inside);
    CHECK(scheduler::current_named_thread() == named_thread::game);
    REQUIRE(recorder.count() == 1);
    CHECK(recorder.reports()[0].message.find("detach() called inside a work item") != std::string::npos);
    bool other_attached = true;  // game is still ours: another thread cannot take it
    std::thread other([&] {
      pool.attach(named_thread::game);
      other_attached = scheduler::current_named_thread().has_value();
    });
    other.join();
    CHECK_FALSE(other_attached);
    CHECK(recorder.count() == 2);
  }
  CHECK_FALSE(scheduler::current_named_thread().has_value());  // the real detach went through

  // An unattached helper runs an item that tries to attach.
  magpie::task<> attaching = pool.launch("attaching", [&] { pool.attach(named_thread::render); });
  while (!attaching.is_completed()) pool.try_run_one();
  REQUIRE(recorder.count() == 3);
  CHECK(recorder.reports()[2].message.find("attach() called inside a work item") != std::string::npos);
  CHECK_FALSE(scheduler::current_named_thread().has_value());
  bool render_attached = false;  // render was never taken
  std::thread render([&] {
    attached_as thread(pool, named_thread::render);
    render_attached = scheduler::current_named_thread() == named_thread::render;
  });
  render.join();
  CHECK(render_attached);
  CHECK(recorder.count() == 3);
}

TEST_CASE("named_thread: attaching a named thread that is already attached is reported") {
  diagnostic_recorder recorder;
  scheduler pool(small_pool());
  attached_as rhi(pool, named_thread::rhi);
  std::thread other([&] { pool.attach(named_thread::rhi); });
  other.join();
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].message.find("already attached") != std::string::npos);
}

TEST_CASE("named_thread: detach without attach, or on another scheduler, is reported and changes nothing") {
  diagnostic_recorder recorder;
  scheduler pool(small_pool());
  scheduler other(small_pool());
  pool.detach();  // never attached
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(recorder.reports()[0].message.find("detach() called on thread ") != std::string::npos);  // the thread
  CHECK(recorder.reports()[0].message.find("not attached") != std::string::npos);
  {
    attached_as game(pool, named_thread::game);
    other.detach();  // attached, but to `pool`
    REQUIRE(recorder.count() == 2);
    CHECK(recorder.reports()[1].message.find("the game thread") != std::string::npos);
    CHECK(recorder.reports()[1].message.find("another scheduler") != std::string::npos);
    CHECK(pool.is_attached(named_thread::game));  // unchanged
    CHECK(magpie::scheduler::current_named_thread() == named_thread::game);
  }
  CHECK_FALSE(pool.is_attached(named_thread::game));
  CHECK(recorder.count() == 2);
}

TEST_CASE("named_thread: an attached thread's launches go to its own deque, which workers steal from") {
  for (unsigned workers : {0u, 1u, 4u}) {
    CAPTURE(workers);
    scheduler pool(small_pool(workers));
    attached_as game(pool, named_thread::game);
    std::atomic<int> ran{0};
    std::atomic<int> off_game_thread{0};
    std::thread::id game_thread = std::this_thread::get_id();
    constexpr int jobs = 500;
    for (int i = 0; i < jobs; ++i) {
      launch(pool, [&] {
        if (std::this_thread::get_id() != game_thread) off_game_thread.fetch_add(1);
        ran.fetch_add(1);
      });
    }
    if (workers == 0) {
      help_until(pool, [&] { return ran.load() == jobs; });  // pops its own deque
      CHECK(off_game_thread.load() == 0);
    } else {
      wait_until([&] { return ran.load() == jobs; });  // only workers' steals can finish them
      CHECK(off_game_thread.load() == jobs);
      CHECK(pool.counters().stolen > 0);
    }
  }
}

TEST_CASE("named_thread: user-defined named threads work like the engine ones") {
  scheduler pool(small_pool());
  named_thread streaming = named_thread::user(0);
  attached_as thread(pool, streaming);
  int ran = 0;
  launch_on(pool, streaming, [&] { ++ran; });
  CHECK(pool.process_until_idle(streaming) == 1);
  CHECK(ran == 1);
}

// The next three cases hand something between two threads that have no edge but the one
// under test (flags between them are relaxed on purpose): TSan reports the plain accesses
// racing if that edge is weakened.

TEST_CASE("named_thread: a thread attaching after another detached sees what that one did with the named deque") {
  scheduler pool(small_pool(0));  // no workers: nothing else touches the deque
  std::atomic<bool> first_detached{false};
  std::atomic<bool> second_done{false};
  int first_sum = 0;
  int second_sum = 0;
  std::thread first([&] {
    pool.attach(named_thread::game);
    // More than the deque's first ring holds: the owner's plain state (the top it last saw,
    // the rings) changes, which the next owner reads.
    std::vector<magpie::task<int>> parts;
    for (int i = 0; i < 300; ++i) parts.push_back(pool.launch("first", [i] { return i; }));  // onto the deque
    for (auto& each : parts) first_sum += each.get_result();
    pool.detach();  // release: the next attach's exchange acquires what this thread did
    first_detached.store(true, std::memory_order_relaxed);  // relaxed: no edge on purpose
    // Alive until the other is done: its exit would hand records over (an edge of its own).
    while (!second_done.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as above
  });
  std::thread second([&] {
    while (!first_detached.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as above
    pool.attach(named_thread::game);
    CHECK(scheduler::current_named_thread() == named_thread::game);
    std::vector<magpie::task<int>> parts;
    for (int i = 0; i < 6; ++i) parts.push_back(pool.launch("second", [i] { return 10 * i; }));
    for (auto& each : parts) second_sum += each.get_result();
    pool.detach();
    second_done.store(true, std::memory_order_relaxed);  // relaxed: as above
  });
  first.join();
  second.join();
  CHECK(first_sum == 299 * 300 / 2);
  CHECK(second_sum == 150);
}

TEST_CASE("named_thread: process_until_request_return returns seeing what the requester did before asking") {
  scheduler pool(small_pool(0));
  attached_as game(pool, named_thread::game);
  std::atomic<bool> running{false};
  std::atomic<bool> asked{false};
  lone_int written;
  // The game thread is busy with an item when the request comes, so it finds the request
  // at its next look without sleeping (a wake-up would be an edge of its own).
  launch_on(pool, named_thread::game, [&] {
    running.store(true, std::memory_order_relaxed);  // relaxed: no edge on purpose
    while (!asked.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as above
  });
  std::thread requester([&] {
    while (!running.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as above
    written.value = 42;
    pool.request_return(named_thread::game);  // release: pairs with the return's acq_rel exchange
    asked.store(true, std::memory_order_relaxed);  // relaxed: as above
  });
  pool.process_until_request_return(named_thread::game);
  CHECK(written.value == 42);
  requester.join();
}

TEST_CASE("named_thread: is_processing turning false publishes what the processing ran") {
  scheduler pool(small_pool(0));
  attached_as game(pool, named_thread::game);
  for (int via_wait = 0; via_wait < 2; ++via_wait) {
    CAPTURE(via_wait);
    std::atomic<bool> running{false};
    std::atomic<bool> finish{false};
    lone_int written;
    auto body = [&] {
      running.store(true, std::memory_order_relaxed);  // relaxed: no edge on purpose
      while (!finish.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as above
      written.value = 7;
    };
    magpie::task_event gate("gate", pool);
    std::thread watcher([&] {
      while (!running.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as above
      CHECK(pool.is_processing(named_thread::game));
      finish.store(true, std::memory_order_relaxed);  // relaxed: as above
      while (pool.is_processing(named_thread::game)) std::this_thread::yield();  // acquire inside
      CHECK(written.value == 7);
      gate.trigger();
    });
    launch_on(pool, named_thread::game, body);
    if (via_wait == 0) {
      CHECK(pool.process_until_idle(named_thread::game) == 1);
    } else {
      // A wait for a task bound to the game thread that is not ready yet runs the game
      // thread's queue meanwhile (run_one_named_item), which counts as processing it.
      magpie::task<> bound = pool.launch("bound", [] {}, gate, magpie::on_thread(named_thread::game));
      bound.wait();
    }
    watcher.join();
    gate.wait();
  }
}
}  // TEST_SUITE("named_thread")

TEST_SUITE("named_thread") {

TEST_CASE("named_thread: the game thread waiting on a coroutine that resumes on it runs the resumption") {
  // The coroutine's resumption is queued on the game thread's queue: a wait there that did
  // not keep running that queue would wait for ever for work only it can run.
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    diagnostic_recorder recorder;
    scheduler pool(options_with(workers));
    pool.attach(named_thread::game);
    const std::thread::id game = std::this_thread::get_id();
    auto hop = [&pool] {
      return pool.launch("hop to game", []() -> magpie::coro<std::thread::id> {
        co_await magpie::resume_on(named_thread::game);
        co_return std::this_thread::get_id();
      });
    };
    magpie::task<std::thread::id> timed = hop();
    CHECK(timed.wait(std::chrono::seconds(10)));
    REQUIRE(timed.is_completed());
    CHECK(timed.get_result() == game);
    magpie::task<std::thread::id> untimed = hop();
    untimed.wait();
    CHECK(untimed.get_result() == game);
    CHECK(hop().get_result() == game);
    // From inside a task the game thread runs, too.
    magpie::task<bool> outer = pool.launch("outer", [&hop, game] { return hop().get_result() == game; },
                                           magpie::on_thread(named_thread::game));
    CHECK(outer.wait(std::chrono::seconds(10)));
    CHECK(outer.get_result());
    pool.detach();
    CHECK(recorder.count() == 0);
  }
}

}  // TEST_SUITE("named_thread")


// is_attached() is the watcher's only edge to the attaching thread: what that thread wrote
// before attaching is read once the watcher sees it attached.
TEST_CASE("named_thread: a thread that sees another attached sees what it did before attaching" *
          doctest::test_suite("stress")) {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    for (int round = 0; round < 20; ++round) {
      scheduler pool(small_pool(workers));
      lone_int written;
      std::atomic<bool> may_detach{false};
      std::thread render([&] {
        written.value = 7;
        pool.attach(named_thread::render);
        // Bounded: the main thread lets it go once it has looked (or given up).
        while (!may_detach.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: no edge on purpose
        pool.detach();
      });
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!pool.is_attached(named_thread::render) && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::yield();
      }
      const bool attached = pool.is_attached(named_thread::render);
      CHECK(attached);
      if (attached) CHECK(written.value == 7);
      may_detach.store(true, std::memory_order_relaxed);  // relaxed: as above
      render.join();
    }
  }
}
