// Suite "task_group_threads": task groups across threads and schedulers — groups that
// outlive or predate their thread's attachment, groups inside `scheduler::execute`, and
// waits for one group from several threads.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

using namespace magpie;
using test::group_fib;
using test::lone_int;
using test::no_leaks;

TEST_CASE("task_group: a group outlives its thread's detach; the deque's next owner is left alone") {
  // The group remembers its thread's deque; after a detach it must stop using it, or two
  // threads would push and pop one deque (the debug build reports a non-owner).
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::atomic<int> step{0};
  auto wait_for_step = [&](int wanted) {
    while (step.load() != wanted) std::this_thread::yield();
  };
  int ran = 0;
  int ran_on_new_owner = 0;
  std::thread first([&] {
    pool.attach(named_thread::game);
    task_group group(pool);
    pool.detach();
    step = 1;
    wait_for_step(2);  // the other thread now owns the game thread's deque
    group.run([&] { ++ran; });
    group.wait();
    step = 3;
  });
  std::thread second([&] {
    wait_for_step(1);
    pool.attach(named_thread::game);
    step = 2;
    wait_for_step(3);
    task_group mine(pool);
    mine.run([&] { ++ran_on_new_owner; });
    mine.wait();
    pool.detach();
  });
  first.join();
  second.join();
  CHECK(ran == 1);
  CHECK(ran_on_new_owner == 1);
  CHECK(recorder.count() == 0);
}

TEST_CASE("task_group: a group made before its thread attaches joins its children after") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::thread attached([&] {
    task_group group(pool);
    pool.attach(named_thread::game);  // spawns now go to the thread's deque: the join must find them
    int ran = 0;
    for (int round = 0; round < 3; ++round) {
      group.run([&] {
        ++ran;
        group.run([&] { ++ran; });
      });
      group.wait();
    }
    CHECK(ran == 6);
    pool.detach();
  });
  attached.join();
}

TEST_CASE("task_group: a thread attached to one scheduler runs another's children without taking its deque") {
  // The game thread of `ours` joins a group of `theirs` and runs the children itself; a
  // group made inside one must not take `theirs`' game-thread deque, which another thread owns.
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler ours(test::options_with(0));
  scheduler theirs(test::options_with(0));
  std::atomic<bool> theirs_attached{false};
  std::atomic<bool> done{false};
  std::thread their_game([&] {
    theirs.attach(named_thread::game);
    theirs_attached = true;
    while (!done.load()) std::this_thread::yield();
    theirs.detach();
  });
  while (!theirs_attached.load()) std::this_thread::yield();
  ours.attach(named_thread::game);
  int ran = 0;
  task_group outer(theirs);
  outer.run([&] {
    task_group inner;  // theirs, from the running child
    inner.run([&] { ++ran; });
    inner.wait();
    ++ran;
  });
  outer.wait();
  ours.detach();
  done = true;
  their_game.join();
  CHECK(ran == 2);
  CHECK(recorder.count() == 0);
}

namespace {

// fib_counting is fib of task_groups made with the default constructor, counting the calls
// that see `expected` as the current scheduler (and all calls), whichever thread runs them.
long fib_counting(int n, scheduler* expected, std::atomic<int>& right, std::atomic<int>& calls) {
  calls.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the join
  if (scheduler::current() == expected) right.fetch_add(1, std::memory_order_relaxed);  // relaxed: as above
  if (n < 2) return n;
  long a = 0;
  task_group group;
  group.run([&] { a = fib_counting(n - 1, expected, right, calls); });
  long b = fib_counting(n - 2, expected, right, calls);
  group.wait();
  return a + b;
}

// fib_calls is how many calls fib_counting(n) makes.
int fib_calls(int n) { return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2); }

// fib_in checks that fib_counting(n), run through pool.execute on the calling thread, sees
// `pool` in every call, and that the thread's scheduler is `before` again afterwards.
void check_fib_in(scheduler& pool, scheduler* before) {
  std::atomic<int> right{0};
  std::atomic<int> calls{0};
  long answer = pool.execute([&] { return fib_counting(16, &pool, right, calls); });
  CHECK(answer == 987);
  CHECK(calls.load() == fib_calls(16));
  CHECK(right.load() == calls.load());
  CHECK(scheduler::current() == before);
}

}  // namespace

TEST_CASE("task_group: inside execute, groups at every depth use its scheduler, from a plain thread") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    check_fib_in(pool, nullptr);
  }
}

TEST_CASE("task_group: inside execute, groups use its scheduler from a thread attached to another") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler other(test::options_with(1));
    scheduler pool(test::options_with(workers));
    std::thread named([&] {
      other.attach(named_thread::game);
      check_fib_in(pool, &other);
      other.detach();
    });
    named.join();
  }
}

TEST_CASE("task_group: inside execute, groups use its scheduler from a worker of another") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler other(test::options_with(1));
    scheduler pool(test::options_with(workers));
    const std::thread::id caller = std::this_thread::get_id();
    // Waited for with a flag, not the task's wait, which could run it on this thread.
    std::atomic<bool> on_worker{false};
    std::atomic<bool> done{false};
    other.launch("execute elsewhere", [&] {
      on_worker.store(std::this_thread::get_id() != caller);
      check_fib_in(pool, &other);
      done.store(true);
    });
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    REQUIRE(done.load());
    CHECK(on_worker.load());
  }
}

TEST_CASE("task_group: the children a plain thread joins of a group of a named scheduler run in its context") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> right{0};
    std::atomic<int> calls{0};
    long answer = 0;
    task_group root(pool);  // made and joined on this thread, which works for no scheduler
    root.run([&] { answer = fib_counting(14, &pool, right, calls); });
    root.wait();
    CHECK(answer == 377);
    CHECK(calls.load() == fib_calls(14));
    CHECK(right.load() == calls.load());
    CHECK(scheduler::current() == nullptr);
  }
}

namespace {
int execute_calls = 0;
void count_execute_call() { ++execute_calls; }
int answer_of_execute() { return 42; }
}  // namespace

TEST_CASE("task_group: execute takes a function by its name, void or not") {
  scheduler pool(test::options_with(1));
  execute_calls = 0;
  pool.execute(count_execute_call);
  pool.execute(&count_execute_call);
  CHECK(execute_calls == 2);
  CHECK(pool.execute(answer_of_execute) == 42);
}

TEST_CASE("task_group: execute returns values and references, propagates exceptions and nests") {
  no_leaks leaks;
  scheduler first(test::options_with(1));
  scheduler second(test::options_with(0));
  CHECK(first.execute([] { return 42; }) == 42);
  int kept = 7;
  int& same = first.execute([&]() -> int& { return kept; });
  CHECK(&same == &kept);
  bool ran = false;
  first.execute([&] { ran = scheduler::current() != nullptr; });
  CHECK(ran);
  CHECK_THROWS_AS(first.execute([]() -> int { throw std::runtime_error("thrown inside"); }), std::runtime_error);
  CHECK(scheduler::current() == nullptr);  // the context came back despite the exception
  std::vector<scheduler*> seen;
  first.execute([&] {
    seen.push_back(scheduler::current());
    second.execute([&] {
      seen.push_back(scheduler::current());
      first.execute([&] { seen.push_back(scheduler::current()); });
      seen.push_back(scheduler::current());
    });
    seen.push_back(scheduler::current());
  });
  CHECK(seen == std::vector<scheduler*>{&first, &second, &first, &second, &first});
}

TEST_CASE("task_group: a group waited after its scheduler's destruction ran its children never touches the scheduler") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    auto pool = std::make_unique<scheduler>(test::options_with(workers));
    std::atomic<int> ran{0};
    task_group group(*pool);
    for (int i = 0; i < 100; ++i) group.run([&] { ran.fetch_add(1); });
    pool.reset();  // the drain runs the queued children
    CHECK(ran.load() == 100);
    group.wait();  // nothing outstanding: the freed scheduler is not read (AddressSanitizer)
  }
}

TEST_CASE("task_group: free launches inside execute go to its scheduler") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    scheduler* seen = nullptr;
    pool.execute([&] { magpie::launch("inside execute", [&] { seen = scheduler::current(); }).wait(); });
    CHECK(seen == &pool);
  }
}

TEST_CASE("task_group stress: threads execute fork-join on two schedulers at once, crosswise" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler first(test::options_with(workers));
      scheduler second(test::options_with(1));
      std::atomic<int> wrong{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          scheduler& outer = t % 2 == 0 ? first : second;
          scheduler& inner = t % 2 == 0 ? second : first;
          for (int round = 0; round < 5; ++round) {
            std::atomic<int> right{0};
            std::atomic<int> calls{0};
            long answer = outer.execute([&] {
              task_group group;
              long from_inner = 0;
              group.run([&] { from_inner = inner.execute([&] { return fib_counting(10, &inner, right, calls); }); });
              group.wait();
              // group_fib is an inline function from a header: the shape in which GCC 12's
              // ASan+UBSan build misreports a null thread_context if task_group reads its
              // thread's context through a reference (see thread_context.h).
              return from_inner + group_fib(10);
            });
            if (answer != 110 || right.load() != calls.load() || scheduler::current() != nullptr) wrong.fetch_add(1);
          }
        });
      }
      for (std::thread& each : threads) each.join();
      CHECK(wrong.load() == 0);
    }
  }
}

TEST_CASE("task_group: a group made in work a plain thread joined may be waited for by another plain thread") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::optional<task_group> inner;
    std::atomic<int> ran{0};
    // Fresh threads: neither has ever owned a deque before. Both live at once, so neither
    // can inherit the other's thread-local storage or id.
    std::atomic<bool> made{false};
    std::atomic<bool> waited{false};
    std::thread maker([&] {
      task_group root(pool);
      root.run([&] {  // run in pool's context by this thread's join, on a deque lent to it
        inner.emplace();
        inner->run([&] { ran.fetch_add(1); });
      });
      root.wait();
      made.store(true);
      while (!waited.load()) std::this_thread::yield();
    });
    std::thread waiter([&] {
      while (!made.load()) std::this_thread::yield();
      inner->wait();  // not the group's home: must not touch the maker's deque as its owner
      waited.store(true);
    });
    waiter.join();
    maker.join();
    CHECK(ran.load() == 1);
    inner.reset();
    CHECK(recorder.count() == 0);
  }
}

namespace {

// on_fresh_groups calls `round(group, recorder)` 20 times per stress repeat for each worker
// count, each time with a new scheduler and a new group on it, reports recorded and leaks
// checked.
template <class Round>
void on_fresh_groups(Round&& round) {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    for (int repeat = 0; repeat < 20 * test::stress_repeat(); ++repeat) {
      test::diagnostic_recorder recorder;
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_group group(pool);
      round(group, recorder);
    }
  }
}

}  // namespace

TEST_CASE("task_group stress: a wait from another thread after the home thread's wait ended sees that join" *
          doctest::test_suite("stress")) {
  // The later waiter is made before the children run and learns that the home thread's
  // wait ended only through a relaxed flag: its one edge to that join (the children's
  // effects, the accounting the home thread's wait reset) is the group's own hand-over
  // from the ending wait to the next.
  constexpr int children = 8;
  on_fresh_groups([](task_group& group, const test::diagnostic_recorder& recorder) {
    std::array<lone_int, children> written{};
    std::atomic<bool> home_waited{false};
    std::array<int, children> seen{};
    std::thread later([&] {
      while (!home_waited.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: no edge but the group's
      group.wait();
      for (int i = 0; i < children; ++i) seen[static_cast<std::size_t>(i)] = written[static_cast<std::size_t>(i)].value;
    });
    for (int i = 0; i < children; ++i) group.run([&written, i] { written[static_cast<std::size_t>(i)].value = i + 1; });
    group.wait();
    home_waited.store(true, std::memory_order_relaxed);  // relaxed: as the later waiter's load
    later.join();
    for (int i = 0; i < children; ++i) CHECK(seen[static_cast<std::size_t>(i)] == i + 1);
    CHECK(recorder.count() == 0);
  });
}

TEST_CASE("task_group stress: a second thread's wait during the first returns seeing the children the first joined" *
          doctest::test_suite("stress")) {
  // Misuse: the second wait is reported and returns once the first ends. A child writes
  // after the second thread has entered its wait, so the second's one edge to that write
  // is the end of the first wait.
  on_fresh_groups([](task_group& group, const test::diagnostic_recorder& recorder) {
    lone_int written;
    int seen = 0;
    std::atomic<bool> second_made{false};
    std::thread second;
    group.run([&] {
      second = std::thread([&] {
        group.wait();
        seen = written.value;
      });
      second_made.store(true, std::memory_order_release);  // release: pairs with the main thread's acquire (before join)
      // The second thread is inside its wait once it has been reported
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (recorder.count() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      written.value = 42;
    });
    group.wait();
    while (!second_made.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the child's release
    second.join();
    CHECK(seen == 42);
    REQUIRE(recorder.count() == 1);
    CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
  });
}

TEST_CASE("task_group stress: children that a thread without a deque spawns reach the joiner whole" *
          doctest::test_suite("stress")) {
  // Without workers, and with every deque the scheduler lends taken, a thread that is not
  // the group's home keeps the children it spawns on the group's private stack, which only
  // a joiner takes. The home thread learns of the spawns through a relaxed flag only, so
  // the children (and the data they read, written by the spawner just before) reach it
  // through that stack alone. Only a scheduler without workers keeps children private, so
  // this case runs without workers.
  constexpr int holders = 16;  // the deques a scheduler lends
  constexpr int children = 8;
  for (int repeat = 0; repeat < 5 * test::stress_repeat(); ++repeat) {
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    task_group group(pool);
    std::atomic<int> holding{0};
    std::atomic<bool> may_exit{false};
    std::atomic<bool> spawned{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < holders; ++t) {
      threads.emplace_back([&] {
        pool.launch("borrows a deque", [] {}).wait();
        holding.fetch_add(1, std::memory_order_release);  // release: pairs with the spawner's acquire
        while (!may_exit.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release below
      });
    }
    std::array<lone_int, children> input{};
    std::array<lone_int, children> output{};
    std::thread spawner([&] {
      while (holding.load(std::memory_order_acquire) < holders) std::this_thread::yield();  // acquire: pairs with the holders' release
      for (int i = 0; i < children; ++i) {
        input[static_cast<std::size_t>(i)].value = 3 * i + 1;
        group.run([&input, &output, i] {
          output[static_cast<std::size_t>(i)].value = input[static_cast<std::size_t>(i)].value;
        });
      }
      spawned.store(true, std::memory_order_relaxed);  // relaxed: no edge to the home thread but the group's
    });
    while (!spawned.load(std::memory_order_relaxed)) std::this_thread::yield();  // relaxed: as the spawner's store
    group.wait();
    for (int i = 0; i < children; ++i) CHECK(output[static_cast<std::size_t>(i)].value == 3 * i + 1);
    spawner.join();
    may_exit.store(true, std::memory_order_release);  // release: pairs with the holders' acquire
    for (auto& each : threads) each.join();
    CHECK(recorder.count() == 0);
  }
}
