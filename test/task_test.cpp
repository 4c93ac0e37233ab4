// Suite "task": launching, results, placement, exceptions, lifetime (prerequisites: test/task_prerequisites_test.cpp).
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <ranges>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "counting_new.h"  // the allocation-counting tests

using namespace magpie;
using test::no_leaks;

TEST_CASE("task: a launched task runs once and hands back its result") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> runs{0};
    task<int> answer = pool.launch("answer", [&] {
      runs.fetch_add(1);
      return 42;
    });
    CHECK(answer.is_valid());
    CHECK(answer.get_result() == 42);
    CHECK(answer.is_completed());
    CHECK_FALSE(answer.has_exception());
    CHECK(runs.load() == 1);
    CHECK(std::string(answer.name()) == "answer");
  }
}

TEST_CASE("task: runs_on names the named thread a task was placed on, and nothing otherwise") {
  scheduler pool(test::options_with(1));
  pool.attach(named_thread::game);
  task<> anywhere = pool.launch("anywhere", [] {});
  task<> on_render = pool.launch("on render", [] {}, on_thread(named_thread::render, thread_queue::local, true));
  task<> on_game = pool.launch("on game", [] {}, on_thread(named_thread::game));
  CHECK_FALSE(anywhere.runs_on().has_value());
  REQUIRE(on_render.runs_on().has_value());
  CHECK(*on_render.runs_on() == named_thread::render);
  REQUIRE(on_game.runs_on().has_value());
  CHECK(*on_game.runs_on() == named_thread::game);
  CHECK_FALSE(task<>().runs_on().has_value());
  on_game.wait();
  anywhere.wait();
  pool.detach();
  pool.attach(named_thread::render);
  on_render.wait();
  pool.detach();
}

// The handle's task object, the slot it keeps it in, a handle made from a task object and
// the scheduler's work-item queueing are magpie's own (detail::task_access,
// detail::schedule_item), not part of what a user's code can call.
template <class Handle>
concept exposes_task_object = requires(const Handle& handle, magpie::detail::task_base* base) {
  handle.base();
  handle.base_slot();
  Handle::adopt(base);
};
template <class Pool>
concept exposes_work_items = requires(Pool& pool, magpie::detail::work_item* item) { pool.schedule(item); };
static_assert(!exposes_task_object<task<>> && !exposes_task_object<task<int>>);
static_assert(!exposes_work_items<scheduler>);

TEST_CASE("task: the placement's named thread, queue and priority read back as placed") {
  using namespace magpie::detail;
  for (bool high : {false, true}) {
    for (thread_queue queue : {thread_queue::main, thread_queue::local}) {
      for (named_thread thread : {named_thread::game, named_thread::render, named_thread::user(3)}) {
        const std::uint8_t packed = on_thread(thread, queue, high).target();
        CHECK(packed == target_of(thread, queue, high));
        CHECK(target_thread(packed) == thread);
        CHECK(target_queue(packed) == queue);
        CHECK(target_is_high(packed) == high);
      }
    }
  }
  CHECK(placement(priority::high).target() == target_none);
}

TEST_CASE("task: an invalid handle counts as completed; get_result on it is reported and throws") {
  test::diagnostic_recorder recorder;
  task<int> nothing;
  CHECK_FALSE(nothing.is_valid());
  CHECK(nothing.is_completed());
  nothing.wait();
  CHECK(nothing.wait(std::chrono::milliseconds(0)));
  CHECK_THROWS_AS(nothing.get_result(), std::logic_error);
  CHECK(recorder.count() == 1);
}

TEST_CASE("task: handles copy, move and convert to task<void>; the result lives as long as the task") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<std::string> text = pool.launch("text", [] { return std::string(100, 'x'); });
  task<> plain = text;  // the same task
  CHECK(plain == static_cast<const task<>&>(text));
  task<std::string> moved = std::move(text);
  CHECK_FALSE(text.is_valid());
  plain.wait();
  CHECK(moved.get_result().size() == 100);
  moved.get_result() += "y";  // get_result is a reference to the kept result
  CHECK(moved.get_result().size() == 101);
}

TEST_CASE("task: move-only results and move-only bodies") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  auto owned = std::make_unique<int>(7);
  task<std::unique_ptr<int>> made = pool.launch("move-only", [owned = std::move(owned)]() mutable {
    return std::move(owned);
  });
  REQUIRE(made.get_result() != nullptr);
  CHECK(*made.get_result() == 7);
}

TEST_CASE("task: the body's captures are destroyed before completion is published") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  for (int round = 0; round < 200; ++round) {
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    task<> holder = pool.launch("holder", [keep = std::move(alive)] { (void)keep; });
    task<> observer = pool.launch("observer", [watch] { CHECK(watch.expired()); }, holder);
    observer.wait();
    CHECK(watch.expired());
  }
}

TEST_CASE("task: run_inline runs on the thread that removes the last lock") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::thread::id here = std::this_thread::get_id();
  task<std::thread::id> immediate = pool.launch("inline", [] { return std::this_thread::get_id(); }, run_inline);
  CHECK(immediate.is_completed());  // ran inside launch
  CHECK(immediate.get_result() == here);

  task_event gate("gate", pool);
  task<std::thread::id> later = pool.launch("inline after", [] { return std::this_thread::get_id(); }, gate, run_inline);
  CHECK_FALSE(later.is_completed());
  std::thread other([&] { gate.trigger(); });
  std::thread::id other_id = other.get_id();
  other.join();
  CHECK(later.is_completed());
  CHECK(later.get_result() == other_id);
}

TEST_CASE("task: on_thread runs on the named thread, in the order sent") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  pool.attach(named_thread::game);
  std::vector<int> order;
  std::thread::id game = std::this_thread::get_id();
  std::vector<task<>> sent;
  for (int i = 0; i < 20; ++i) {
    sent.push_back(pool.launch("game work", [&, i] {
      CHECK(std::this_thread::get_id() == game);
      order.push_back(i);
    }, on_thread(named_thread::game)));
  }
  CHECK(pool.process_until_idle(named_thread::game) == 20);
  for (int i = 0; i < 20; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  // A worker's task bound to the game thread waits there; the game thread's wait runs it.
  task<> from_worker = pool.launch("launcher", [&] {
    return pool.launch("bound", [&] { CHECK(std::this_thread::get_id() == game); }, on_thread(named_thread::game));
  }).get_result();
  from_worker.wait();
  pool.detach();
}

namespace {
thread_local int worker_kind_here = -1;  // set by on_worker_start: 0 foreground, 1 background
}

TEST_CASE("task: priorities — background work runs on background workers, high before queued normal work") {
  no_leaks leaks;
  scheduler_options options;
  options.workers = 2;  // one foreground worker and one background worker
  options.background_workers = 1;
  options.on_worker_start = [](const worker_info& info) {
    worker_kind_here = info.kind == worker_kind::background ? 1 : 0;
  };
  scheduler pool(options);
  // Polled, not waited for: a waiting thread would retract and run them itself.
  std::vector<int> kinds(60, -1);
  std::atomic<int> ran{0};
  std::vector<task<>> background;
  int index = 0;
  for (priority p : {priority::background_high, priority::background_normal, priority::background_low}) {
    for (int i = 0; i < 20; ++i, ++index) {
      background.push_back(pool.launch("background", [&kinds, &ran, index] {
        kinds[static_cast<std::size_t>(index)] = worker_kind_here;
        ran.fetch_add(1);
      }, p));
    }
  }
  while (ran.load() < 60) std::this_thread::yield();
  for (int kind : kinds) CHECK(kind == 1);

  // Occupy the only worker, queue normal work, then high work: high runs first. (A second
  // scheduler without a background worker, which would take the normal work at once.)
  scheduler_options single_worker;
  single_worker.workers = 1;
  single_worker.background_workers = 0;
  scheduler ordered(single_worker);
  std::atomic<bool> release{false};
  std::atomic<bool> occupied{false};
  std::vector<int> order;
  std::atomic<int> next{0};
  task<> blocker = ordered.launch("blocker", [&] {
    occupied.store(true);
    while (!release.load()) std::this_thread::yield();
  });
  while (!occupied.load()) std::this_thread::yield();
  std::vector<int> slots(6, -1);
  std::vector<task<>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(ordered.launch("normal", [&, i] { slots[static_cast<std::size_t>(next++)] = i; }));
  for (int i = 3; i < 6; ++i) queued.push_back(ordered.launch("high", [&, i] { slots[static_cast<std::size_t>(next++)] = i; }, priority::high));
  release.store(true);
  blocker.wait();
  while (next.load() < 6) std::this_thread::yield();  // only the worker runs them: no retraction here
  for (int position = 0; position < 3; ++position) CHECK(slots[static_cast<std::size_t>(position)] >= 3);
  wait_all(queued);
}

TEST_CASE("task: free functions use the running task's scheduler, else the attached one, else the default") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task<scheduler*> inner = pool.launch("outer", [] {
    return magpie::launch("inner", [] { return scheduler::current(); }).get_result();
  });
  CHECK(inner.get_result() == &pool);
  pool.attach(named_thread::render);
  task<scheduler*> attached = magpie::launch("attached", [] { return scheduler::current(); });
  CHECK(attached.get_result() == &pool);
  pool.detach();
  task<scheduler*> fallback = magpie::launch("fallback", [] { return scheduler::current(); });
  CHECK(fallback.get_result() == &default_scheduler());
}

TEST_CASE("task: a body's exception is kept; wait never throws, get_result rethrows, subsequents still run") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task<int> failing = pool.launch("failing", []() -> int { throw std::runtime_error("broken"); });
    task<bool> after = pool.launch("after", [failing] { return failing.has_exception(); }, failing);
    failing.wait();
    CHECK(failing.is_completed());
    CHECK(failing.has_exception());
    CHECK_THROWS_WITH_AS(failing.get_result(), "broken", std::runtime_error);
    CHECK(after.get_result());
  }
}

TEST_CASE("task: an exception nobody asked about is reported as unhandled, by task name") {
  test::diagnostic_recorder recorder;
  {
    no_leaks leaks;
    scheduler pool(test::options_with(1));
    pool.launch("fire and forget", [] { throw std::runtime_error("lost"); });
    task<> observed = pool.launch("observed", [] { throw std::runtime_error("seen"); });
    observed.wait();
    CHECK(observed.has_exception());
  }
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == diagnostic_kind::unhandled_exception);
  CHECK(reports[0].message.find("fire and forget") != std::string::npos);
  CHECK(reports[0].message.find("lost") != std::string::npos);
}

TEST_CASE("task: this_task hands a body its own handle, and nothing outside task bodies") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    CHECK_FALSE(this_task().is_valid());
    task<> seen_inside;
    task<> outer = pool.launch("outer", [&] { seen_inside = this_task(); });
    outer.wait();
    CHECK(seen_inside == outer);
    CHECK(std::string(seen_inside.name()) == "outer");
    // A handle made inside keeps the task alive after every other handle is gone, and the
    // task still completes: the completion looks at the handles when it happens.
    task<> kept;
    pool.launch("dropped at once", [&] { kept = this_task(); }).wait();
    CHECK(kept.is_completed());
    CHECK(std::string(kept.name()) == "dropped at once");
    seen_inside = {};
    kept = {};
    // A fire-and-forget task (its handle dropped at launch) makes a handle to itself and
    // chains a follower behind it: the follower runs after it.
    std::atomic<int> order{0};
    std::atomic<int> follower_saw{-1};
    task<> follower;
    std::atomic<bool> follower_set{false};
    pool.launch("forgotten", [&] {
      follower = pool.launch("follower", [&] { follower_saw = order.load(); }, this_task());
      follower_set = true;
      order = 1;
    });
    while (!follower_set.load()) pool.try_run_one();
    follower.wait();
    CHECK(follower_saw.load() == 1);
    follower = {};
  }
}

TEST_CASE("task: make_completed_task is completed at once") {
  no_leaks leaks;
  task<int> ready = make_completed_task(5);
  CHECK(ready.is_completed());
  CHECK(ready.get_result() == 5);
  task<std::string> text = make_completed_task<std::string>(3, 'a');
  CHECK(text.get_result() == "aaa");
}

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
        scheduler pool(test::options_with(workers));
        // Each task launches two more until a depth: the tree keeps growing while the
        // scheduler shuts down; shutdown lets running tasks launch children and runs them.
        std::function<void(int)> grow = [&](int depth) {
          ran.fetch_add(1);
          if (depth == 0) return;
          magpie::launch("grow", [&grow, depth] { grow(depth - 1); });
          magpie::launch("grow", [&grow, depth] { grow(depth - 1); });
        };
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
