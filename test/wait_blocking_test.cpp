// Suite "wait_blocking": the no-deadlock guarantee when every worker waits — blocking waits
// in recursive and deep chains, named threads woken to run what they are waited for,
// standby workers taking blocked workers' places up to their cap and past it, a scheduler
// destroyed under its waiters, and random graphs whose bodies wait for one another.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

namespace {

// fib_blocking waits for its children with get_result(): every worker blocks in waits.
long fib_blocking(int n) {
  if (n < 2) return n;
  task<long> left = magpie::launch("fib", [n] { return fib_blocking(n - 1); });
  task<long> right = magpie::launch("fib", [n] { return fib_blocking(n - 2); });
  return left.get_result() + right.get_result();
}

// one_worker_without_standby: one worker and a standby cap of 0, so that only the 64
// standby threads started past the cap take blocked threads' places.
scheduler_options one_worker_without_standby() {
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;
  options.max_standby_workers = 0;
  return options;
}

}  // namespace

TEST_CASE("wait: recursive fib with blocking waits on 1 and 2 workers does not deadlock") {
  for (unsigned workers : {1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    CHECK(pool.launch("fib", [] { return fib_blocking(16); }).get_result() == 987);
  }
}

TEST_CASE("wait: deep retraction with every worker blocked") {
  no_leaks leaks;
  scheduler_options options = test::options_with(2);
  options.background_workers = 0;
  options.max_standby_workers = 0;  // no rescue: retraction alone must do it
  test::diagnostic_recorder recorder;  // reaching the standby cap of 0 is reported
  scheduler pool(options);
  task_event release("release workers", pool);
  std::atomic<int> blocked{0};
  std::vector<task<>> blockers;
  for (unsigned i = 0; i < 2; ++i) {
    blockers.push_back(pool.launch("blocker", [&] {
      blocked.fetch_add(1);
      release.wait();
    }));
  }
  while (blocked.load() < 2) std::this_thread::yield();
  // Two levels of prerequisites and a nested task, none started: only this thread can run them.
  std::atomic<int> ran{0};
  task<> p1 = pool.launch("p1", [&] { ran.fetch_add(1); });
  task<> p2 = pool.launch("p2", [&] { ran.fetch_add(1); }, p1);
  task<> top = pool.launch("top", [&] {
    ran.fetch_add(1);
    add_nested(magpie::launch("nested", [&] { ran.fetch_add(1); }));
  }, p2);
  top.wait();
  CHECK(ran.load() == 4);
  release.trigger();
  wait_all(blockers);
}

TEST_CASE("wait: a named thread waiting on a task bound to it runs it itself") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  pool.attach(named_thread::game);
  std::thread::id game = std::this_thread::get_id();
  task<std::thread::id> bound = pool.launch("bound", [] { return std::this_thread::get_id(); },
                                            on_thread(named_thread::game));
  CHECK(bound.get_result() == game);
  // Bound behind a worker task: the wait retracts nothing here, blocks, then runs it when scheduled.
  task<> first = pool.launch("first", [] {});
  task<std::thread::id> later = pool.launch("later", [] { return std::this_thread::get_id(); }, first,
                                            on_thread(named_thread::game));
  CHECK(later.get_result() == game);
  pool.detach();
}

TEST_CASE("wait: a named thread's wait leaves the tasks it launched to the workers") {
  // A frame's shape: the game thread launches `work`, then a task that waits inside for an
  // event the game thread triggers once `work` is done. Run under the game thread's wait
  // for `work`, that task would block on the trigger the game thread can no longer reach:
  // a hang. So that wait runs neither: a worker runs both, or the game thread takes the
  // second back in its own wait for it, after the trigger.
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  pool.attach(named_thread::game);
  const std::thread::id game = std::this_thread::get_id();
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    task_event frame_end("frame end", pool);
    std::atomic<bool> started{false};
    task<> work = pool.launch("work", [&started] {
      started.store(true, std::memory_order_release);  // release: pairs with the acquire below
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
    while (!started.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release above
    // Queued on the game thread's deque while the one worker runs `work`.
    std::atomic<bool> waiting_for_work{true};
    task<bool> waits_for_frame = pool.launch("waits for the frame's end", [&frame_end, &waiting_for_work, game] {
      // relaxed: the game thread's own store, when this runs on the game thread
      const bool under_the_wait = std::this_thread::get_id() == game && waiting_for_work.load(std::memory_order_relaxed);
      CHECK(frame_end.wait(std::chrono::seconds(5)));  // a hang shows as this failing after 5 s
      return under_the_wait;
    });
    work.wait();
    waiting_for_work.store(false, std::memory_order_relaxed);  // relaxed: its value counts only on this thread (above)
    frame_end.trigger();
    CHECK_FALSE(waits_for_frame.get_result());
  }
  pool.detach();
}

TEST_CASE("wait: a task's named thread is woken to run it while another thread waits for it too") {
  // Both wait on one event count with different conditions: "ready, and mine to run" for
  // the game thread, "completed" for the other. Once a wake-up meant for the game thread
  // must not be taken by the other waiter, which would leave the game thread asleep beside a
  // task only it may run. A hang trips the watchdog.
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  for (int round = 0; round < 30; ++round) {
    CAPTURE(round);
    task_event gate("gate", pool);
    task<> bound = pool.launch("bound", [] {}, gate, on_thread(named_thread::game));
    std::atomic<bool> attached{false};
    std::atomic<bool> stop{false};
    std::thread game([&] {
      pool.attach(named_thread::game);
      attached.store(true, std::memory_order_release);  // release: pairs with the acquire below
      bound.wait();  // blocks: the task is locked until the gate opens
      pool.detach();
    });
    while (!attached.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release above
    std::thread other([&] {
      while (!stop.load(std::memory_order_relaxed) && !bound.is_completed()) {  // relaxed: only ends the loop
        bound.wait(std::chrono::microseconds(30));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gate.trigger();
    game.join();
    stop.store(true, std::memory_order_relaxed);  // relaxed: as above
    other.join();
    CHECK(bound.is_completed());
  }
}

TEST_CASE("wait: with no workers, a waiter is not stranded when another waiter makes its prerequisite ready and leaves") {
  // x waits for p, p for q. The helper thread runs q; while it does, the main thread
  // claims x's and p's prerequisites (it can run neither) and blocks on x. Finishing q
  // queues p, and the helper goes: nobody is left to run p, and nothing that happens to p
  // wakes a thread blocked on x. The wait stress test hung this way once in a few hundred
  // runs; here it hung every time. A hang trips the watchdog.
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  std::atomic<bool> q_running{false};
  task<> x;
  task<> q = pool.launch("q", [&] {
    q_running.store(true, std::memory_order_release);  // release: pairs with the acquire below
    // Finish only once the main thread has announced it blocks on x (it then re-checks x,
    // which is not ready either way, and sleeps).
    while (!x.is_valid() || !magpie::detail::task_access::base(x)->has_flag(detail::has_waiter)) std::this_thread::yield();
  });
  task<> p = pool.launch("p", [] {}, q);
  x = pool.launch("x", [] {}, p);
  std::thread helper([&] { q.wait(); });
  while (!q_running.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release above
  x.wait();
  helper.join();
  CHECK(x.is_completed());
  CHECK(p.is_completed());
}

TEST_CASE("wait stress: many threads wait on random tasks of a random graph" * doctest::test_suite("stress")) {
  std::uint64_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("MAGPIE_SEED")) seed = std::strtoull(fixed, nullptr, 10);
  std::printf("wait stress: MAGPIE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::mt19937_64 random(seed + static_cast<std::uint64_t>(repeat) * 977 + workers);
      constexpr int count = 2000;
      std::vector<task<int>> tasks;
      tasks.reserve(count);
      for (int i = 0; i < count; ++i) {
        std::vector<task<>> before;
        for (int k = 0; k < static_cast<int>(random() % 3) && i > 0; ++k) before.push_back(tasks[random() % static_cast<unsigned>(i)]);
        tasks.push_back(pool.launch("node", [i] { return i; }, before));
      }
      std::vector<std::thread> waiters;
      std::atomic<int> wrong{0};
      for (int t = 0; t < 4; ++t) {
        waiters.emplace_back([&, t] {
          std::mt19937_64 mine(seed + static_cast<std::uint64_t>(t));
          for (int k = 0; k < 300; ++k) {
            std::size_t index = mine() % tasks.size();
            if (tasks[index].get_result() != static_cast<int>(index)) wrong.fetch_add(1);
          }
        });
      }
      for (auto& each : waiters) each.join();
      CHECK(wait_all(tasks));
      CHECK(wrong.load() == 0);
    }
  }
}

TEST_CASE("wait: deep chains of waits inside bodies do not overflow a worker's stack") {
  // Each level launches the next and waits for it; on a worker, retraction would run all
  // 10,000 levels on its stack. Past a bound the worker blocks instead and another thread
  // (a standby, past the cap if every worker is blocked) takes the next stretch.
  no_leaks leaks;
  test::diagnostic_recorder recorder;  // the standby cap is reached and reported
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;
  scheduler pool(options);
  std::function<int(int)> level = [&level](int depth) -> int {
    if (depth == 0) return 0;
    task<int> next = magpie::launch("level", [&level, depth] { return level(depth - 1); });
    return next.get_result() + 1;
  };
  std::atomic<bool> done{false};
  task<int> root = pool.launch("root", [&] {
    int result = level(10'000);
    done.store(true);
    return result;
  });
  // Not root.wait(): that would retract the root onto this thread's (unbounded) stack.
  while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(root.get_result() == 10'000);
  CHECK(pool.counters().standby_workers > 1);  // the stretches ran on several threads
}

namespace {

// chain_on_small_stack is a chain of `links` tasks, each waiting in its body for the one
// launched before it, launched and waited for from a thread of its own with a stack of
// `stack_bytes` (std::thread cannot set one). `started` counts the bodies begun.
struct chain_on_small_stack {
  scheduler* pool;
  int links;
  std::atomic<int>* started;
  long result = -1;

  static void* run(void* raw) {
    auto& chain = *static_cast<chain_on_small_stack*>(raw);
    std::atomic<int>& started = *chain.started;
    std::vector<task<long>> tasks;
    tasks.reserve(static_cast<std::size_t>(chain.links));
    tasks.push_back(chain.pool->launch("link", [&started] {
      started.fetch_add(1);
      return 0L;
    }));
    for (int i = 1; i < chain.links; ++i) {
      tasks.push_back(chain.pool->launch("link", [&started, before = tasks.back()] {
        started.fetch_add(1);
        return before.get_result() + 1;
      }));
    }
    chain.result = tasks.back().get_result();
    return nullptr;
  }

  void run_on_thread(std::size_t stack_bytes) {
    pthread_attr_t attributes;
    REQUIRE(pthread_attr_init(&attributes) == 0);
    REQUIRE(pthread_attr_setstacksize(&attributes, stack_bytes) == 0);
    pthread_t thread;
    REQUIRE(pthread_create(&thread, &attributes, &chain_on_small_stack::run, this) == 0);
    pthread_attr_destroy(&attributes);
    pthread_join(thread, nullptr);
  }
};

}  // namespace

TEST_CASE("wait: a chain of waits from a thread outside the pool goes as deep as its stack allows, then leaves the rest") {
  // Retraction runs the 20,000 links on the waiting thread's stack, one body inside the
  // next: about 20 MiB (more under a sanitizer), on a stack of 768 KiB, which 256 bodies
  // would overflow under ThreadSanitizer. The one worker spins meanwhile (no blocking wait,
  // so no standby starts), until the bodies stop starting: the thread must stop short of its
  // stack's end and block, and the worker then runs what it left.
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  constexpr int links = 20'000;
  std::atomic<int> started{0};
  std::atomic<bool> spinning{false};
  task<> spinner = pool.launch("spinner", [&] {
    spinning.store(true);
    int seen = -1;
    auto since = std::chrono::steady_clock::now();
    while (started.load() < links) {
      auto now = std::chrono::steady_clock::now();
      if (int now_started = started.load(); now_started != seen) {
        seen = now_started;
        since = now;
      } else if (now - since > std::chrono::milliseconds(50)) {
        break;
      }
      std::this_thread::yield();
    }
  });
  while (!spinning.load()) std::this_thread::yield();
  chain_on_small_stack chain{&pool, links, &started};
  chain.run_on_thread(std::size_t{768} << 10);
  CHECK(chain.result == links - 1);
  spinner.wait();
}

TEST_CASE("wait: with every thread blocked and no standby left to start, the last one runs queued work") {
  // One worker and a standby cap of 0: each blocker blocks its thread on an event that only
  // the opener, launched last, triggers, and a standby past the cap takes each blocked
  // thread's place, up to the scheduler's 64 more. The blockers outnumber the threads: the
  // last thread standing must run the queued work (the remaining blockers, then the opener)
  // on its own stack rather than block, or the opener stays queued behind blocked threads
  // for ever. The event may be of another scheduler (made without naming one): what is
  // stranded is this pool's work all the same.
  for (bool event_of_pool : {true, false}) {
    CAPTURE(event_of_pool);
    no_leaks leaks;
    test::diagnostic_recorder recorder;  // reaching the cap is reported
    scheduler pool(one_worker_without_standby());
    task_event gate = event_of_pool ? task_event("gate", pool) : task_event("gate");
    constexpr int blockers = 72;  // past 1 worker + 64 standby threads
    std::atomic<int> released{0};
    std::vector<task<>> tasks;
    for (int i = 0; i < blockers; ++i) {
      tasks.push_back(pool.launch("blocker", [&] {
        gate.wait();
        released.fetch_add(1);
      }));
    }
    tasks.push_back(pool.launch("opener", [&] { gate.trigger(); }));
    // Not wait_all, at first: this thread would take the tasks back and run the opener
    // itself. The pool alone must get through.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (released.load() < blockers && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(released.load() == blockers);
    magpie::wait_all(tasks);
    CHECK(gate.is_completed());
    // 65 threads, 72 blockers: only a thread that ran queued work instead of blocking got the
    // opener run.
    CHECK(pool.counters().standby_workers == 64);
    CHECK(recorder.count() >= 1);
    for (auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::limit_reached);
  }
}

TEST_CASE("wait: a body the last thread standing helped, waiting for the body beneath it, is reported as the pool's doing") {
  // As above, with as many blockers as threads: the last of them to block has nothing but
  // `checker` to help with, which looks (without blocking) at every blocker, the one beneath
  // it on the same stack included. That one cannot complete until `checker` returns: the
  // report must say the pool put it there, not that the program waits inside its own body.
  no_leaks leaks;
  test::diagnostic_recorder recorder;
  scheduler pool(one_worker_without_standby());
  task_event gate("gate", pool);
  constexpr int blockers = 65;  // 1 worker + 64 standby threads past the cap of 0
  std::vector<task<>> tasks;
  for (int i = 0; i < blockers; ++i) tasks.push_back(pool.launch("blocker", [&] { gate.wait(); }));
  std::atomic<int> beneath{0};
  task<> checker = pool.launch("checker", [&] {
    for (int i = 0; i < blockers; ++i) {
      if (!tasks[static_cast<std::size_t>(i)].wait(std::chrono::nanoseconds(0)) && recorder.count_naming("'checker'") > 0) {
        beneath.fetch_add(1);
        break;
      }
    }
  });
  // Not a wait on `checker`: this thread would take it back and run it itself.
  while (!checker.is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  gate.trigger();
  magpie::wait_all(tasks);
  CHECK(beneath.load() == 1);
  CHECK(recorder.count_naming("ran task 'checker' on its own stack above task 'blocker'") == 1);
  for (auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::limit_reached);
}

TEST_CASE("wait: a thread waiting for tasks while their scheduler is destroyed" * doctest::test_suite("stress")) {
  // The waiter retracts tasks (whose bodies may launch a child) while ~scheduler runs: the
  // scheduler must not free what the waiter can still reach. ASan read freed memory in the
  // injection queue before. Tasks either ran or completed as never run; none is left.
  for (int repeat = 0; repeat < 20 * test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u}) {
      for (bool launches_child : {false, true}) {
        CAPTURE(workers);
        CAPTURE(launches_child);
        no_leaks leaks;
        test::diagnostic_recorder recorder;  // late launches and never-run tasks are reported
        std::atomic<int> ran{0};
        auto pool = std::make_unique<scheduler>(test::options_with(workers));
        std::vector<task<>> handles;
        for (int i = 0; i < 200; ++i) {
          handles.push_back(pool->launch("part", [&ran, launches_child] {
            if (launches_child) magpie::launch("child", [&ran] { ran.fetch_add(1); });
            ran.fetch_add(1);
          }));
        }
        std::vector<task<>> copies = handles;
        std::thread waiter([&copies] {
          for (auto& each : copies) each.wait();
        });
        pool.reset();
        waiter.join();
        for (auto& each : handles) CHECK(each.is_completed());
        handles.clear();
        copies.clear();
      }
    }
  }
}

namespace {

// waiting_dag is a random graph whose bodies wait for earlier nodes (get_result inside
// them), mixing prerequisites, inline tasks, task events, pipes, nested tasks and
// high-priority launches. Every wait and every edge points from a lower index to a higher
// one, so the graph can always complete: any hang is the scheduler's.
class waiting_dag {
 public:
  waiting_dag(scheduler& pool, std::uint64_t seed, int count)
      : pool_(pool), random_(seed), expected_(static_cast<std::size_t>(count)),
        side_(static_cast<std::size_t>(count)), side_expected_(static_cast<std::size_t>(count)) {
    nodes_.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) add(i);
    for (auto& each : events_) each.trigger();
  }

  // check waits for every node in random order from this thread; returns wrong results.
  int check() {
    std::vector<std::size_t> order(nodes_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), random_);
    int wrong = 0;
    for (std::size_t i : order) {
      if (nodes_[i].get_result() != expected_[i]) ++wrong;
    }
    for (std::size_t i = 0; i < side_.size(); ++i) {
      if (side_[i].load(std::memory_order_relaxed) != side_expected_[i]) ++wrong;  // relaxed: the parent's completion ordered it
    }
    return wrong;
  }

 private:
  enum class kind { queued, high, inlined, piped, nesting, evented, count };

  std::vector<std::size_t> pick_earlier(int i) {
    std::vector<std::size_t> picked;
    int how_many = i == 0 ? 0 : static_cast<int>(random_() % 3);
    for (int k = 0; k < how_many; ++k) picked.push_back(random_() % static_cast<std::size_t>(i));
    return picked;
  }

  std::uint64_t sum_of(const std::vector<std::size_t>& indices) const {
    std::uint64_t sum = 0;
    for (std::size_t j : indices) sum += expected_[j];
    return sum;
  }

  void add(int i) {
    auto index = static_cast<std::size_t>(i);
    auto which = static_cast<kind>(random_() % static_cast<unsigned>(kind::count));
    std::vector<std::size_t> before = pick_earlier(i);  // prerequisites
    std::vector<std::size_t> waited = pick_earlier(i);  // waited for inside the body
    std::vector<task<>> prerequisites;
    for (std::size_t j : before) prerequisites.push_back(nodes_[j]);
    const std::vector<task<std::uint64_t>>* nodes = &nodes_;
    auto read = [nodes](const std::vector<std::size_t>& indices) {
      std::uint64_t sum = 0;
      for (std::size_t j : indices) sum += (*nodes)[j].get_result();
      return sum;
    };
    const std::uint64_t own = static_cast<std::uint64_t>(i) * 7 + 1;
    switch (which) {
      case kind::queued:
      case kind::high:
        expected_[index] = own + sum_of(before) + sum_of(waited);
        nodes_.push_back(pool_.launch("node", [=] { return own + read(before) + read(waited); }, prerequisites,
                                      which == kind::high ? priority::high : priority::normal));
        break;
      case kind::inlined:  // runs on whichever thread completes its last prerequisite: no waits
        expected_[index] = own + sum_of(before);
        nodes_.push_back(pool_.launch("inline node", [=] { return own + read(before); }, prerequisites, run_inline));
        break;
      case kind::piped:  // no prerequisites, so the pipe runs them in launch order: no cycle
        expected_[index] = own + sum_of(waited);
        nodes_.push_back(pipes_[random_() % pipes_.size()]->launch("piped node", [=] { return own + read(waited); }));
        break;
      case kind::nesting: {
        expected_[index] = own + sum_of(before);
        side_expected_[index] = sum_of(waited);
        std::atomic<std::uint64_t>* side = &side_[index];
        nodes_.push_back(pool_.launch("nesting node", [=] {
          add_nested(magpie::launch("nested", [=] { side->store(read(waited), std::memory_order_relaxed); }));  // relaxed: the parent's completion publishes it
          return own + read(before);
        }, prerequisites));
        break;
      }
      case kind::evented: {
        task_event& gate = events_.emplace_back("gate", pool_);
        gate.add_prerequisites(prerequisites);  // triggered once every node is launched
        expected_[index] = own + sum_of(before) + sum_of(waited);
        nodes_.push_back(pool_.launch("evented node", [=] { return own + read(before) + read(waited); }, gate));
        break;
      }
      case kind::count:
        break;
    }
  }

  scheduler& pool_;
  std::mt19937_64 random_;
  std::vector<std::uint64_t> expected_;
  std::vector<std::atomic<std::uint64_t>> side_;
  std::vector<std::uint64_t> side_expected_;
  std::deque<task_event> events_;
  std::array<std::unique_ptr<magpie::pipe>, 2> pipes_{std::make_unique<magpie::pipe>("pipe a", pool_),
                                                      std::make_unique<magpie::pipe>("pipe b", pool_)};
  std::vector<task<std::uint64_t>> nodes_;  // last: dropped before the pipes and events
};

}  // namespace

TEST_CASE("wait stress: random graphs whose bodies wait for earlier tasks, every worker count and standby cap" *
          doctest::test_suite("stress")) {
  std::uint64_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("MAGPIE_SEED")) seed = std::strtoull(fixed, nullptr, 10);
  std::printf("wait stress (waiting graphs): MAGPIE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  int rounds = 0;
  for (int repeat = 0; repeat < 3 * test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 2u, 4u, 64u}) {
      for (bool no_standby : {false, true}) {
        CAPTURE(workers);
        CAPTURE(no_standby);
        CAPTURE(repeat);
        no_leaks leaks;
        test::diagnostic_recorder recorder;  // the standby cap, when reached, is reported
        scheduler_options options = test::options_with(workers);
        if (no_standby) options.max_standby_workers = 0;
        scheduler pool(options);
        std::uint64_t round_seed = seed + static_cast<std::uint64_t>(repeat) * 1'000'003 + workers * 2 + (no_standby ? 1 : 0);
        waiting_dag graph(pool, round_seed, 300);
        CHECK(graph.check() == 0);
        for (const auto& each : recorder.reports()) CHECK(each.kind == diagnostic_kind::limit_reached);
        ++rounds;
      }
    }
  }
  std::printf("wait stress (waiting graphs): %d rounds clean\n", rounds);
}

TEST_CASE("wait: past the standby cap, standby workers start only while every thread is blocked, and at most 64") {
  // 200 tasks that each block on one event: every block past the cap leaves the pool with
  // nobody running, so another standby starts, until the ceiling, which is reported.
  test::diagnostic_recorder recorder;
  scheduler_options options;
  options.workers = 2;
  options.background_workers = 0;
  scheduler pool(options);
  task_event gate("gate", pool);
  std::vector<task<>> blocked;
  for (int i = 0; i < 200; ++i) blocked.push_back(pool.launch("blocks", [gate] { gate.wait(); }));
  while (pool.counters().blocked_workers != 2 + 2 + 64) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the pool, its cap, the ceiling
  CHECK(pool.counters().standby_workers == 2 + 64);
  gate.trigger();
  CHECK(wait_all(blocked, std::chrono::seconds(60)));
  std::size_t ceilings = 0;
  for (const auto& each : recorder.reports()) {
    CHECK(each.kind == diagnostic_kind::limit_reached);
    if (each.message.find("no more standby workers") != std::string::npos) ++ceilings;
  }
  CHECK(ceilings == 1);
}
