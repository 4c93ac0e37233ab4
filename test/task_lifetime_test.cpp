// Suite "task_lifetime": tasks and their scheduler's end — launches after shutdown, tasks
// made ready after their scheduler was destroyed, orphan chains, a scheduler slot taken
// again — and a task's memory: no allocation once warm, its size and layout in its block;
// with stress cases of shutdowns, schedulers made and destroyed on several threads, random
// graphs and the task census.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "counting_new.h"  // the allocation-counting tests

using namespace magpie;
using test::no_leaks;

TEST_CASE("task: a launch after shutdown is reported and the task completes as never run") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  pool.shutdown();
  task<int> late = pool.launch("late", [] { return 1; });
  CHECK(late.is_completed());
  CHECK(late.has_exception());
  CHECK_THROWS_AS(late.get_result(), task_never_ran);
  CHECK(recorder.count() >= 1);
}

TEST_CASE("task: a task that becomes ready after its scheduler was destroyed is reported and never runs") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler keeper(test::options_with(1));
  task_event gate("gate", keeper);
  std::atomic<int> runs{0};
  task<int> orphan;
  task<int> inline_orphan;
  {
    scheduler doomed(test::options_with(1));
    orphan = doomed.launch("orphan", [&] { return ++runs; }, prerequisites(gate));
    inline_orphan = doomed.launch("inline orphan", [&] { return ++runs; }, prerequisites(gate), run_inline);
  }
  // A scheduler made since must not inherit them (nor does waiting on them touch the dead one).
  scheduler stranger(test::options_with(1));
  CHECK_FALSE(orphan.wait(std::chrono::milliseconds(1)));
  std::atomic<bool> after_ran{false};
  task<> after = keeper.launch("after the orphan", [&] { after_ran = true; }, prerequisites(orphan));
  gate.trigger();
  CHECK(orphan.wait(std::chrono::seconds(10)));
  CHECK(inline_orphan.is_completed());
  after.wait();
  CHECK(after_ran);  // its subsequents go on, as after any task that never ran
  CHECK(runs == 0);
  CHECK_THROWS_AS(orphan.get_result(), task_never_ran);
  CHECK_THROWS_AS(inline_orphan.get_result(), task_never_ran);
  std::size_t orphans_reported = 0;
  for (const auto& each : recorder.reports()) {
    if (each.kind == diagnostic_kind::never_ran && each.message.find("after its scheduler was destroyed") != std::string::npos) {
      ++orphans_reported;
    }
  }
  CHECK(orphans_reported == 2);
}

TEST_CASE("task: a chain of 100,000 orphans completes without overflowing the stack") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  task_event gate("gate");
  constexpr int length = 100'000;
  std::atomic<int> runs{0};
  task<> last;
  {
    scheduler doomed(test::options_with(1));
    task<> previous = doomed.launch("first orphan", [&] { ++runs; }, prerequisites(gate));
    for (int i = 1; i < length; ++i) {
      // Queued and inline orphans alternate: each kind completes on the loop that readied it.
      previous = i % 2 == 0 ? doomed.launch("orphan", [&] { ++runs; }, prerequisites(previous))
                            : doomed.launch("orphan", [&] { ++runs; }, prerequisites(previous), run_inline);
    }
    last = previous;
  }
  gate.trigger();
  CHECK(last.is_completed());  // on this thread, inside trigger(): nobody else could run them
  CHECK_THROWS_AS(last.get_result(), task_never_ran);
  CHECK(runs == 0);
  CHECK(recorder.count() == static_cast<std::size_t>(length));
}

TEST_CASE("task: a destroyed scheduler's slot is taken again only once its last task is gone") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  task_event gate("gate");
  task<> orphan;
  {
    scheduler doomed(test::options_with(0));
    orphan = doomed.launch("orphan", [] {}, prerequisites(gate));
  }
  // Fill every slot the table has left: the doomed scheduler's is not among them.
  std::vector<std::unique_ptr<scheduler>> filling;
  bool full = false;
  while (!full && filling.size() < 300) {
    try {
      filling.push_back(std::make_unique<scheduler>(test::options_with(0)));
    } catch (const std::length_error&) {
      full = true;
    }
  }
  REQUIRE(full);
  CHECK(filling.size() < 256);
  gate.trigger();
  orphan.wait();
  // The orphan, completed but still held, names the retired slot.
  CHECK_THROWS_AS((void)std::make_unique<scheduler>(test::options_with(0)), std::length_error);
  orphan = task<>();
  CHECK_NOTHROW(filling.push_back(std::make_unique<scheduler>(test::options_with(0))));
}

TEST_CASE("task: launching, running and releasing allocates nothing from operator new once warm") {
  no_leaks leaks;
  scheduler_options options = test::options_with(1);
  options.background_workers = 0;  // the one worker is all that consumes queue entries
  scheduler pool(options);
  long counted = -1;
  magpie::pipe line("probe pipe", pool);
  // While warming, the worker is kept busy, so that no queue entry is consumed behind this
  // thread: the injection queue grows to the most blocks a round can need. (How many a
  // round needs otherwise depends on how quickly the worker drops the stale entries that
  // retraction leaves behind; a counted round that outgrew the warm one allocated.)
  std::atomic<bool> warming{true};
  std::atomic<bool> worker_held{false};
  task<> hold = pool.launch("hold the worker", [&] {
    worker_held.store(true);
    while (warming.load()) std::this_thread::yield();
  });
  while (!worker_held.load()) std::this_thread::yield();
  pool.launch("allocation probe", [&] {
    // Each kind of part a task can have: a prerequisite edge (in the task's block), extras
    // (a piped task's; an event's, with its groups), a group on its own.
    auto round = [&line] {
      for (int i = 0; i < 2000; ++i) {
        int captured = i;
        task<int> one = magpie::launch("probe", [captured] { return captured + 1; });
        task<int> behind = magpie::launch("behind", [captured] { return captured; }, one);
        task<> piped = line.launch("piped", [] {});
        task_event gate("gate");
        gate.add_prerequisites(behind, piped);
        gate.trigger();
        // Newest first: each wait takes its task back off the top of the deque. Out of
        // order, the one waited for runs in place and its entry stays behind until the body
        // ends; how many pile up depends on what other threads steal, and so does whether
        // the deque grows in the counted round.
        piped.wait();
        if (one.get_result() != i + 1 || behind.get_result() != i) std::abort();
      }
    };
    round();  // warm: pool slabs, injection blocks
    warming.store(false);
    hold.wait();
    round();  // warm: the worker's deque ring
    test::allocations.store(0);
    test::counting.store(true);
    round();
    test::counting.store(false);
    counted = test::allocations.load();
  }).wait();
  CHECK(counted == 0);
}

TEST_CASE("task: a task with 16 bytes of captures fits in one cache line") {
  long first = 1;
  long second = 2;
  long total = 0;
  auto body = [first, second, &total] { total = first + second; };
  static_assert(sizeof(body) == 24);
  auto narrow = [first, &total] { total = first; };
  static_assert(sizeof(narrow) == 16);
  CHECK(sizeof(detail::task_base) <= 48);
  CHECK(sizeof(detail::task_impl<decltype(narrow), void>) <= 64);
  CHECK(sizeof(detail::task_impl<decltype(body), void>) > 64);  // the line is full at 16
}

TEST_CASE("task: a task returning a long with 8 bytes of captures fits in one cache line") {
  long value = 3;
  auto body = [value] { return value; };
  CHECK(sizeof(detail::task_impl<decltype(body), long>) <= 64);
}

TEST_CASE("task: a task's own prerequisite edges sit before it in the same block") {
  scheduler pool(test::options_with(1));
  task_event gate("gate", pool);
  task<> gate_task = gate;
  auto first = pool.launch("first", [] { return 1; }, gate);
  auto second = pool.launch("second", [] { return 2; }, prerequisites(gate, first), priority::high);
  const detail::task_base* base = magpie::detail::task_access::base(second);
  const detail::edge_group* group = detail::prerequisite_groups(base);
  REQUIRE(group != nullptr);
  CHECK(group->next == nullptr);
  CHECK(group->count == 2);
  CHECK(reinterpret_cast<const unsigned char*>(group) + sizeof(detail::edge_group) ==
        reinterpret_cast<const unsigned char*>(base));
  CHECK(group->edges()[0].prerequisite == magpie::detail::task_access::base(gate_task));
  CHECK(group->edges()[1].prerequisite == magpie::detail::task_access::base(first));
  // The mark that says so shares a byte with the kind and the priority, and spoils neither.
  CHECK(base->task_priority() == priority::high);
  CHECK(base->kind() == detail::task_kind::queued);
  CHECK(detail::prerequisite_groups(magpie::detail::task_access::base(gate_task)) == nullptr);
  gate.trigger();
  CHECK(second.get_result() == 2);
  CHECK(first.get_result() == 1);
}

TEST_CASE("task stress: shutdown with work in flight runs every launched task" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      std::atomic<int> ran{0};
      {
        // Each task launches two more until a depth: the tree keeps growing while the
        // scheduler shuts down; shutdown lets running tasks launch children and runs them.
        // `grow` is declared before the scheduler, whose end runs the last of them.
        std::function<void(int)> grow = [&](int depth) {
          ran.fetch_add(1);
          if (depth == 0) return;
          magpie::launch("grow", [&grow, depth] { grow(depth - 1); });
          magpie::launch("grow", [&grow, depth] { grow(depth - 1); });
        };
        scheduler pool(test::options_with(workers));
        for (int i = 0; i < 8; ++i) pool.launch("root", [&grow] { grow(9); });
      }  // shutdown
      CHECK(ran.load() == 8 * ((1 << 10) - 1));
    }
  }
}

TEST_CASE("task stress: schedulers made and destroyed on several threads never hand an orphan to a stranger" *
          doctest::test_suite("stress")) {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  std::atomic<int> orphans_run{0};
  std::atomic<int> orphans_completed{0};
  constexpr int threads = 4;
  const int rounds = 120 * test::stress_repeat();
  // Take all but 32 slots, so that the churn reuses its few slots at once (each thread
  // holds at most 5: one scheduler alive, four retired).
  std::vector<std::unique_ptr<scheduler>> filling;
  try {
    while (filling.size() < 300) filling.push_back(std::make_unique<scheduler>(test::options_with(0)));
  } catch (const std::length_error&) {
  }
  filling.resize(filling.size() > 32 ? filling.size() - 32 : 0);
  auto churn = [&](int seed) {
    std::minstd_rand random(static_cast<unsigned>(seed));
    struct held {
      task_event gate{"gate"};
      task<> orphan;
    };
    std::vector<std::unique_ptr<held>> holding;  // orphans kept a while: their slots stay retired
    for (int round = 0; round < rounds; ++round) {
      {
        scheduler doomed(test::options_with(1));  // a worker: a misrouted orphan would run
        auto kept = std::make_unique<held>();
        kept->orphan = doomed.launch("orphan", [&] { orphans_run.fetch_add(1); }, prerequisites(kept->gate));
        holding.push_back(std::move(kept));
      }
      while (!holding.empty() && (holding.size() > 3 || random() % 2 == 0)) {
        std::size_t pick = random() % holding.size();
        holding[pick]->gate.trigger();
        if (holding[pick]->orphan.is_completed() && holding[pick]->orphan.has_exception()) orphans_completed.fetch_add(1);
        holding.erase(holding.begin() + static_cast<std::ptrdiff_t>(pick));
      }
    }
    for (auto& kept : holding) {
      kept->gate.trigger();
      if (kept->orphan.is_completed() && kept->orphan.has_exception()) orphans_completed.fetch_add(1);
    }
  };
  std::vector<std::thread> churners;
  for (int i = 0; i < threads; ++i) churners.emplace_back(churn, i + 1);
  for (auto& each : churners) each.join();
  CHECK(orphans_run == 0);
  CHECK(orphans_completed == threads * rounds);  // each completed in trigger(), as never run
  CHECK(recorder.count() == static_cast<std::size_t>(threads * rounds));
}

TEST_CASE("task stress: a random graph of tasks and events, replayable by seed" * doctest::test_suite("stress")) {
  std::uint64_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("MAGPIE_SEED")) seed = std::strtoull(fixed, nullptr, 10);
  std::printf("task stress: MAGPIE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::mt19937_64 random(seed + repeat * 131 + workers);
      constexpr int count = 3000;
      std::vector<task<int>> tasks;
      std::vector<task_event> events;
      std::vector<std::atomic<int>> runs(count);
      tasks.reserve(count);
      for (int i = 0; i < count; ++i) {
        std::vector<task<>> before;
        int wanted = static_cast<int>(random() % 4);
        for (int k = 0; k < wanted && i > 0; ++k) before.push_back(tasks[random() % static_cast<unsigned>(i)]);
        if (random() % 8 == 0) {
          events.emplace_back("random event", pool);
          before.push_back(events.back());
        }
        placement where = random() % 6 == 0 ? run_inline : placement(random() % 5 == 0 ? priority::high : priority::normal);
        tasks.push_back(pool.launch("random", [&runs, before, i] {
          for (const task<>& each : before) {
            if (!each.is_completed()) std::abort();  // a prerequisite not complete: the core rule broke
          }
          runs[static_cast<std::size_t>(i)].fetch_add(1);
          return i;
        }, before, where));
        // Timed: the task may sit behind an event nobody has triggered yet.
        if (random() % 16 == 0) tasks[random() % tasks.size()].wait(std::chrono::microseconds(random() % 100));
        if (!events.empty() && random() % 4 == 0) events[random() % events.size()].trigger();
      }
      for (task_event& each : events) each.trigger();
      for (int i = 0; i < count; ++i) CHECK(tasks[static_cast<std::size_t>(i)].get_result() == i);
      for (auto& each : runs) CHECK(each.load() == 1);
    }
  }
}

TEST_CASE("task stress: a census record made while another thread counts live tasks is counted whole" *
          doctest::test_suite("stress")) {
  // More threads than there are free census records make their first task at once, so most
  // add a fresh record and publish it while another thread sums every record in
  // live_tasks(). The summing thread has no edge to those threads but the publication
  // itself (the counters below are relaxed): the record's link and zeroed counts must
  // reach it through that alone.
  constexpr int fresh_threads = 64;
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<int> launched{0};
      std::atomic<int> ran{0};
      std::atomic<bool> may_exit{false};
      std::thread summing([&] {
        // relaxed: the count only ends the loop; it must not order the records before it
        while (launched.load(std::memory_order_relaxed) < fresh_threads) (void)detail::live_tasks();
      });
      std::vector<std::thread> threads;
      for (int i = 0; i < fresh_threads; ++i) {
        threads.emplace_back([&] {
          pool.launch("first task of its thread", [&ran] { ran.fetch_add(1); }).wait();
          launched.fetch_add(1, std::memory_order_relaxed);  // relaxed: as the summing thread's load
          // Held until every thread has its record, so that no record is handed back and reused meanwhile
          while (!may_exit.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release below
        });
      }
      summing.join();
      may_exit.store(true, std::memory_order_release);  // release: pairs with the threads' acquire
      for (auto& thread : threads) thread.join();
      CHECK(ran.load() == fresh_threads);
    }
  }
}
