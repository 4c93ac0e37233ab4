// Tests for the tick manager's schedule (lib/clients/tick_schedule.cpp): newly spawned
// ticks, batching, when the cached schedule is reused and rebuilt, that it gives the same
// frames as rebuilding every frame over random changes, and that ticks destroyed while
// workers run their group are never touched again.
#include <magpie/tick_manager.h>

#include "support.h"
#include "task_support.h"
#include "tick_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

using magpie::level_tick;
using magpie::scheduler;
using magpie::tick_function;
using magpie::tick_manager;
using magpie::ticking_group;
using namespace magpie::test;

namespace {

// splitmix64: the same sequence on every standard library, so a printed seed replays anywhere.
struct random_source {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }
};

// What one tick did in one frame.
struct run_record {
  bool ran = false;
  ticking_group group = ticking_group::pre_physics;
  std::uint64_t started = 0;
  std::uint64_t finished = 0;
};

struct frame_records {
  std::vector<run_record> runs;
  std::atomic<std::uint64_t> clock{0};
};

// probe records when it ran and in which group.
class probe : public tick_function {
 public:
  probe(int index, frame_records& records) : tick_function(numbered("probe ", index), {}), index_(index), records_(&records) {}

 protected:
  void execute_tick(float, level_tick) override {
    run_record& mine = records_->runs[static_cast<std::size_t>(index_)];
    mine.started = records_->clock.fetch_add(1) + 1;
    mine.group = actual_start_tick_group();
    volatile int work = 0;  // a little work, so ticks overlap on workers
    for (int i = 0; i < 50; ++i) work = work + i;
    mine.ran = true;
    mine.finished = records_->clock.fetch_add(1) + 1;
  }

 private:
  int index_;
  frame_records* records_;
};

constexpr int pool_size = 24;

// One manager and its mirror of the random tick population.
struct side {
  explicit side(scheduler& pool, bool cached) : manager(pool, {.cache_schedule = cached}) {
    records.runs.resize(pool_size);
    for (int i = 0; i < pool_size; ++i) ticks.push_back(std::make_unique<probe>(i, records));
  }
  tick_manager manager;
  frame_records records;
  std::vector<std::unique_ptr<probe>> ticks;
};

constexpr ticking_group groups[] = {ticking_group::pre_physics,  ticking_group::start_physics,
                                    ticking_group::during_physics, ticking_group::end_physics,
                                    ticking_group::post_physics, ticking_group::post_update_work,
                                    ticking_group::last_demotable};

// waits_for says whether `from` reaches `to` following prerequisite edges.
bool waits_for(const tick_function& from, const tick_function& to, std::vector<const tick_function*>& seen) {
  if (&from == &to) return true;
  for (const tick_function* seen_one : seen) {
    if (seen_one == &from) return false;
  }
  seen.push_back(&from);
  for (const tick_function* before : from.prerequisites()) {
    if (waits_for(*before, to, seen)) return true;
  }
  return false;
}

// change applies the same random change to tick `i` (and `j`) of each side given.
void change(std::span<side> sides, random_source& random, bool mid_frame, std::vector<int>& touched) {
  int i = random.below(pool_size);
  int j = random.below(pool_size);
  int kind = random.below(mid_frame ? 4 : 12);
  int group = random.below(7);
  int end = random.below(7);
  float interval = static_cast<float>(random.below(4)) * 0.03125f;
  touched.push_back(i);
  for (side& each : sides) {
    probe& tick = *each.ticks[static_cast<std::size_t>(i)];
    probe& other = *each.ticks[static_cast<std::size_t>(j)];
    // Mid-frame changes touch only ticks whose outcome does not race the running group.
    bool late = tick.tick_group() >= ticking_group::start_physics;
    switch (kind) {
      case 0: tick.register_tick_function(each.manager); break;
      case 1: tick.set_tick_function_enable(true); break;
      case 2: if (!mid_frame || late) tick.set_tick_function_enable(false); break;
      case 3: if (!mid_frame || late) tick.unregister_tick_function(); break;
      case 4: tick.set_tick_group(groups[group]); break;
      case 5: tick.set_end_tick_group(groups[end]); break;
      case 6: if (i != j) tick.add_prerequisite(other); break;
      case 7: tick.remove_prerequisite(other); break;
      case 8: tick.set_tick_interval(interval); break;
      case 9: tick.update_tick_interval_and_cool_down(interval); break;
      case 10: tick.set_run_on_any_thread(!tick.runs_on_any_thread()); break;
      case 11:
        if (group % 3 == 0) {
          tick.set_high_priority(!tick.is_high_priority());
        } else if (group % 3 == 1) {
          tick.set_allow_tick_batching(!tick.allows_tick_batching());
        } else {  // destroy and make afresh
          each.ticks[static_cast<std::size_t>(i)] = std::make_unique<probe>(i, each.records);
        }
        break;
    }
  }
}

void run_one_seed(std::uint64_t seed, int frames) {
  diagnostic_recorder cycles_reported;  // random edges make cycles: reported, not printed
  random_source random{seed};
  scheduler pool(tick_pool(2));
  side both[2] = {side(pool, true), side(pool, false)};
  std::vector<int> touched;
  // Each side's mutator makes the same mid-frame change to its own side, on the game thread
  // in pre_physics; it touches only ticks whose outcome does not race the running group.
  std::uint64_t mutate_seed = 0;
  int mutations = 0;
  auto mutator_for = [&](int which) {
    return [&, which](float, level_tick) {
      random_source local{mutate_seed};
      std::vector<int> ignored;
      for (int m = 0; m < mutations; ++m) change(std::span(both + which, 1), local, true, which == 0 ? touched : ignored);
    };
  };
  tick_function mutators[2] = {tick_function("mutator", mutator_for(0)), tick_function("mutator", mutator_for(1))};
  for (int which = 0; which < 2; ++which) mutators[which].register_tick_function(both[which].manager);
  // A random starting population: everything registered, some of it changed.
  for (side& each : both) {
    for (auto& tick : each.ticks) tick->register_tick_function(each.manager);
  }
  std::vector<int> ignored;
  for (int c = 0; c < pool_size * 2; ++c) change(both, random, false, ignored);
  bool mutated_last_frame = false;
  for (int frame = 0; frame < frames; ++frame) {
    CAPTURE(frame);
    touched.clear();
    int changes = random.chance(60) ? 0 : 1 + random.below(2);  // quiet spells let a stale schedule show
    for (int c = 0; c < changes; ++c) change(both, random, false, touched);
    touched.clear();  // changes between frames need no care
    mutate_seed = random.next();
    mutations = random.chance(70) ? 0 : 1;
    float delta = static_cast<float>(1 + random.below(4)) / 64.f;
    for (side& each : both) {
      for (auto& record : each.records.runs) record = {};
      each.records.clock.store(0);
    }
    run_frame(both[0].manager, delta);
    run_frame(both[1].manager, delta);
    if (changes == 0 && !mutated_last_frame && frame > 0) CHECK_FALSE(both[0].manager.last_frame_stats().schedule_rebuilt);
    mutated_last_frame = mutations > 0;
    CHECK(both[1].manager.last_frame_stats().schedule_rebuilt);
    for (int t = 0; t < pool_size; ++t) {
      CAPTURE(t);
      const run_record& cached = both[0].records.runs[static_cast<std::size_t>(t)];
      const run_record& rebuilt = both[1].records.runs[static_cast<std::size_t>(t)];
      CHECK(cached.ran == rebuilt.ran);
      if (cached.ran && rebuilt.ran) CHECK(cached.group == rebuilt.group);
    }
    for (side& each : both) {
      for (int t = 0; t < pool_size; ++t) {
        const probe& tick = *each.ticks[static_cast<std::size_t>(t)];
        const run_record& after = each.records.runs[static_cast<std::size_t>(t)];
        if (!after.ran) continue;
        for (const tick_function* before_tick : tick.prerequisites()) {
          auto* before = static_cast<const probe*>(before_tick);
          int b = 0;
          while (b < pool_size && each.ticks[static_cast<std::size_t>(b)].get() != before) ++b;
          if (b == pool_size) continue;
          const run_record& first = each.records.runs[static_cast<std::size_t>(b)];
          std::vector<const tick_function*> seen;
          if (!first.ran || waits_for(*before, tick, seen)) continue;  // on a cycle: one edge is dropped
          // A tick changed mid-frame was not in the schedule its neighbours were placed by.
          if (std::find(touched.begin(), touched.end(), t) != touched.end() ||
              std::find(touched.begin(), touched.end(), b) != touched.end()) {
            continue;
          }
          CHECK_MESSAGE(first.finished < after.started, "edge ", before->name(), " -> ", tick.name());
        }
      }
    }
  }
  // Two frames without changes: the cached side reuses its schedule.
  run_frame(both[0].manager);
  run_frame(both[0].manager);
  CHECK_FALSE(both[0].manager.last_frame_stats().schedule_rebuilt);
}

std::uint64_t first_seed() {
  if (const char* text = std::getenv("MAGPIE_TICK_SEED")) return std::strtoull(text, nullptr, 10);
  return std::random_device{}();
}

}  // namespace

TEST_SUITE("tick_schedule") {

TEST_CASE("tick_schedule: a tick registered during a frame runs later in it, demoted to the next group") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  logged_tick spawned("spawned", log), spawned_late("spawned late", log);
  tick_function spawner("spawner", [&](float, level_tick) {
    if (!spawned.is_tick_function_registered()) spawned.register_tick_function(manager);
  });
  tick_function late_spawner("late spawner", [&](float, level_tick) {
    if (!spawned_late.is_tick_function_registered()) spawned_late.register_tick_function(manager);
  });
  late_spawner.set_tick_group(ticking_group::last_demotable);
  spawner.register_tick_function(manager);
  late_spawner.register_tick_function(manager);
  run_frame(manager);
  CHECK(spawned.runs.load() == 1);
  CHECK(spawned.seen_start == ticking_group::during_physics);  // pre_physics + 1, start_physics skipped
  CHECK(spawned_late.runs.load() == 1);
  CHECK(spawned_late.seen_start == ticking_group::newly_spawned);
  CHECK(manager.last_frame_stats().newly_spawned_passes == 1);
  run_frame(manager);  // both are in the schedule now
  CHECK(spawned.runs.load() == 2);
  CHECK(spawned.actual_start_tick_group() == ticking_group::pre_physics);
  CHECK(manager.last_frame_stats().newly_spawned_passes == 0);
}

TEST_CASE("tick_schedule: a tick disabled and enabled again before its unit ran runs later that frame, once") {
  for (unsigned workers : worker_counts) {
    for (bool any_thread : {false, true}) {
      CAPTURE(workers);
      CAPTURE(any_thread);
      scheduler pool(tick_pool(workers));
      tick_manager manager(pool);
      event_log log;
      logged_tick late("late", log), early("early", log);
      late.set_tick_group(ticking_group::post_physics);
      late.set_run_on_any_thread(any_thread);
      early.set_run_on_any_thread(any_thread);
      bool act = false;
      tick_function toggler("toggler", [&](float, level_tick) {
        if (!act) return;
        for (logged_tick* tick : {&late, &early}) {  // early already ran this frame
          tick->set_tick_function_enable(false);
          tick->set_tick_function_enable(true);
        }
      });
      toggler.set_tick_group(ticking_group::during_physics);
      for (tick_function* tick : {static_cast<tick_function*>(&early), &toggler, static_cast<tick_function*>(&late)}) {
        tick->register_tick_function(manager);
      }
      run_frame(manager);
      act = true;
      run_frame(manager);
      CHECK(late.runs.load() == 2);
      CHECK(early.runs.load() == 2);
      CHECK(late.seen_start == ticking_group::post_physics);
      act = false;
      run_frame(manager);
      CHECK(late.runs.load() == 3);
      CHECK(early.runs.load() == 3);
    }
  }
}

TEST_CASE("tick_schedule: a tick unregistered and registered again in the same frame runs at most once in it") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    event_log log;
    logged_tick ran_already("ran already", log), not_yet("not yet", log), fresh("fresh", log);
    not_yet.set_tick_group(ticking_group::post_physics);
    ran_already.set_run_on_any_thread(true);
    bool act = false;
    tick_function cycler("cycler", [&](float, level_tick) {
      if (!act) return;
      for (logged_tick* tick : {&ran_already, &not_yet}) {
        tick->unregister_tick_function();
        tick->register_tick_function(manager);
      }
      fresh.register_tick_function(manager);  // never registered before: it runs this frame
    });
    cycler.set_tick_group(ticking_group::during_physics);
    ran_already.register_tick_function(manager);
    not_yet.register_tick_function(manager);
    cycler.register_tick_function(manager);
    run_frame(manager);
    CHECK(ran_already.runs.load() == 1);
    CHECK(not_yet.runs.load() == 1);
    act = true;
    run_frame(manager);
    CHECK(ran_already.runs.load() == 2);
    CHECK(not_yet.runs.load() <= 2);
    CHECK(fresh.runs.load() == 1);
    act = false;
    int not_yet_before = not_yet.runs.load();
    run_frame(manager);
    CHECK(ran_already.runs.load() == 3);
    CHECK(not_yet.runs.load() == not_yet_before + 1);
    CHECK(fresh.runs.load() == 2);
    CHECK(manager.registered_count() == 4);
  }
}

TEST_CASE("tick_schedule: runaway spawning stops after the pass limit, reported by name; the rest tick next frame") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool, {.newly_spawned_pass_limit = 3});
  std::vector<std::unique_ptr<tick_function>> chain;
  int ran = 0;
  std::function<void(float, level_tick)> spawn_next = [&](float, level_tick) {
    ++ran;
    if (chain.size() < 6) {
      chain.push_back(std::make_unique<tick_function>(numbered("spawn ", chain.size()), spawn_next));
      chain.back()->register_tick_function(manager);
    }
  };
  tick_function first("first", spawn_next);
  first.set_tick_group(ticking_group::last_demotable);
  first.register_tick_function(manager);
  diagnostic_recorder recorder;
  run_frame(manager);
  CHECK(ran == 4);  // first, then three passes
  CHECK(manager.last_frame_stats().newly_spawned_passes == 3);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == magpie::diagnostic_kind::limit_reached);
  CHECK(reports[0].message.find("'spawn 3'") != std::string::npos);
  run_frame(manager);  // spawn 3 ticks now, with everyone else
  CHECK(ran == 4 + 5 + 2);
}

TEST_CASE("tick_schedule: batching runs compatible ticks in one task, with the same results") {
  for (bool batching : {false, true}) {
    CAPTURE(batching);
    scheduler pool(tick_pool(1));
    tick_manager manager(pool, {.allow_batching = batching});
    event_log log;
    std::vector<std::unique_ptr<logged_tick>> ticks;
    for (int i = 0; i < 12; ++i) {
      auto& tick = *ticks.emplace_back(std::make_unique<logged_tick>(numbered("t", i), log));
      tick.set_allow_tick_batching(true);
      tick.set_tick_group(ticking_group::post_physics);
      tick.set_end_tick_group(ticking_group::post_physics);
      if (i % 3 == 0) tick.set_run_on_any_thread(true);  // on the worker: the game-thread ticks wait for it
      if (i % 3 != 0) tick.add_prerequisite(*ticks[static_cast<std::size_t>(i - 1)]);
    }
    for (auto& tick : ticks) tick->register_tick_function(manager);
    run_frame(manager);
    auto events = log.take();
    REQUIRE(events.size() == 12);
    for (int i = 0; i < 12; ++i) {
      if (i % 3 != 0) {
        CHECK(event_log::index_of(events, numbered("t", i - 1)) < event_log::index_of(events, numbered("t", i)));
      }
    }
    auto stats = manager.last_frame_stats();
    if (batching) {
      CHECK(stats.batches == 1);
      CHECK(stats.tasks_launched == 2);  // the any-thread chunk, and one batch waiting for it
    } else {
      CHECK(stats.batches == 0);
      CHECK(stats.tasks_launched == 2);  // the any-thread chunk, and a chunk of the rest waiting for it
    }
  }
}

TEST_CASE("tick_schedule: a tick whose prerequisites run in the free chunk of its kind joins that chunk") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  std::vector<std::unique_ptr<logged_tick>> ticks;
  for (int i = 0; i < 12; ++i) {
    auto& tick = *ticks.emplace_back(std::make_unique<logged_tick>(numbered("t", i), log));
    if (i % 3 != 0) tick.add_prerequisite(*ticks[static_cast<std::size_t>(i - 1)]);
  }
  logged_tick apart("apart", log);  // waits for a tick of another kind: a task of its own
  apart.set_run_on_any_thread(true);
  apart.add_prerequisite(*ticks[5]);
  for (auto& tick : ticks) tick->register_tick_function(manager);
  apart.register_tick_function(manager);
  for (int frame = 0; frame < 3; ++frame) {
    CAPTURE(frame);
    run_frame(manager);
    auto events = log.take();
    REQUIRE(events.size() == 13);
    for (int i = 1; i < 12; ++i) {
      if (i % 3 != 0) {
        CHECK(event_log::index_of(events, numbered("t", i - 1)) < event_log::index_of(events, numbered("t", i)));
      }
    }
    CHECK(event_log::index_of(events, "t5") < event_log::index_of(events, "apart"));
    CHECK(manager.last_frame_stats().tasks_launched == 2);  // the game thread's chunk, and "apart"
  }
}

TEST_CASE("tick_schedule: the schedule is reused until something changes, and rebuilt once per change") {
  scheduler pool(tick_pool(1));
  tick_manager manager(pool);
  event_log log;
  logged_tick a("a", log), b("b", log), c("c", log);
  a.register_tick_function(manager);
  b.register_tick_function(manager);
  auto rebuilt_after = [&](auto change) {
    run_frame(manager);
    change();
    run_frame(manager);
    bool rebuilt = manager.last_frame_stats().schedule_rebuilt;
    run_frame(manager);
    CHECK_FALSE(manager.last_frame_stats().schedule_rebuilt);
    return rebuilt;
  };
  run_frame(manager);
  CHECK(manager.last_frame_stats().schedule_rebuilt);
  CHECK_FALSE(rebuilt_after([] {}));
  CHECK(rebuilt_after([&] { c.register_tick_function(manager); }));
  CHECK(rebuilt_after([&] { c.unregister_tick_function(); }));
  CHECK(rebuilt_after([&] { a.set_tick_function_enable(false); }));
  CHECK(rebuilt_after([&] { a.set_tick_function_enable(true); }));
  CHECK(rebuilt_after([&] { a.set_tick_group(ticking_group::post_physics); }));
  CHECK(rebuilt_after([&] { a.set_end_tick_group(ticking_group::last_demotable); }));
  CHECK(rebuilt_after([&] { a.set_high_priority(true); }));
  CHECK(rebuilt_after([&] { a.set_run_on_any_thread(true); }));
  CHECK(rebuilt_after([&] { a.add_prerequisite(b); }));
  CHECK(rebuilt_after([&] { a.remove_prerequisite(b); }));
  CHECK(rebuilt_after([&] { a.set_tick_interval(0.5f); }));
  CHECK_FALSE(rebuilt_after([&] { a.set_tick_interval(0.25f); }));
  CHECK_FALSE(rebuilt_after([&] { a.update_tick_interval_and_cool_down(0.125f); }));
  CHECK_FALSE(rebuilt_after([&] { a.set_tick_even_when_paused(true); }));
  CHECK(rebuilt_after([&] { a.set_tick_interval(0.f); }));
  tick_manager uncached(pool, {.cache_schedule = false});
  c.register_tick_function(uncached);
  run_frame(uncached);
  run_frame(uncached);
  CHECK(uncached.last_frame_stats().schedule_rebuilt);
}

TEST_CASE("tick_schedule: the cached schedule runs the same frames as rebuilding every frame (random changes)") {
  std::uint64_t seed = first_seed();
  MESSAGE("tick_schedule seed " << seed << " (replay: MAGPIE_TICK_SEED=" << seed << ")");
  for (int round = 0; round < 8; ++round) run_one_seed(seed + static_cast<std::uint64_t>(round), 40);
}

TEST_CASE("tick_schedule: cached and rebuilt frames agree over many seeds" * doctest::test_suite("stress")) {
  std::uint64_t seed = first_seed();
  MESSAGE("tick_schedule stress seed " << seed << " (replay: MAGPIE_TICK_SEED=" << seed << ")");
  for (int round = 0; round < 100 * stress_repeat(); ++round) run_one_seed(seed + static_cast<std::uint64_t>(round), 60);
}

TEST_CASE("tick_schedule: ticks destroyed while workers run their group never run afterwards" *
          doctest::test_suite("stress")) {
  scheduler pool(tick_pool(2));
  tick_manager manager(pool);
  constexpr int count = 400;
  std::vector<std::unique_ptr<tick_function>> victims(count);
  std::vector<std::atomic<bool>> gone(count);
  std::atomic<int> ran_after_destruction{0};
  std::atomic<long> runs{0};
  auto make = [&](int index) {
    gone[static_cast<std::size_t>(index)].store(false);
    auto payload = std::make_shared<std::vector<int>>(16, index);
    victims[static_cast<std::size_t>(index)] = std::make_unique<tick_function>(
        numbered("victim ", index), [&, index, payload](float, level_tick) {
          if (gone[static_cast<std::size_t>(index)].load()) ran_after_destruction.fetch_add(1);
          (*payload)[static_cast<std::size_t>(index % 16)] += 1;  // touches the tick's captures
          runs.fetch_add(1);
        });
    tick_function& made = *victims[static_cast<std::size_t>(index)];
    made.set_tick_group(ticking_group::during_physics);
    made.set_run_on_any_thread(true);
    made.register_tick_function(manager);
  };
  for (int i = 0; i < count; ++i) make(i);
  random_source random{first_seed()};
  tick_function killer("killer", [&](float, level_tick) {
    for (int k = 0; k < 40; ++k) {
      int index = random.below(count);
      if (!victims[static_cast<std::size_t>(index)]) continue;
      victims[static_cast<std::size_t>(index)].reset();  // returns once it is not running
      gone[static_cast<std::size_t>(index)].store(true);
    }
  });
  killer.set_tick_group(ticking_group::during_physics);
  killer.register_tick_function(manager);
  for (int frame = 0; frame < 200 * stress_repeat(); ++frame) {
    run_frame(manager);
    for (int i = 0; i < count; ++i) {
      if (!victims[static_cast<std::size_t>(i)]) make(i);
    }
  }
  CHECK(ran_after_destruction.load() == 0);
  CHECK(runs.load() > 0);
}

TEST_CASE("tick_schedule: free any-thread chunks follow the workers and each group's population") {
  for (unsigned workers : worker_counts) {
    CAPTURE(workers);
    scheduler pool(tick_pool(workers));
    tick_manager manager(pool);
    std::atomic<int> runs{0};
    std::vector<std::unique_ptr<tick_function>> ticks;
    auto add = [&](int count, ticking_group group) {
      for (int i = 0; i < count; ++i) {
        auto& tick = *ticks.emplace_back(
            std::make_unique<tick_function>(numbered("t", ticks.size()), [&](float, level_tick) { runs.fetch_add(1); }));
        tick.set_tick_group(group);
        tick.set_end_tick_group(group);
        tick.set_run_on_any_thread(true);
        tick.register_tick_function(manager);
      }
    };
    add(1200, ticking_group::pre_physics);  // about four chunks per worker
    add(40, ticking_group::post_physics);   // too few for that: chunks of at least 16
    for (int frame = 0; frame < 2; ++frame) {
      run_frame(manager);
      CHECK(runs.exchange(0) == 1240);
      // no worker: every tick runs in the game thread's chunk of its group
      std::size_t expected = workers == 0 ? 2 : 4 * workers + std::min<std::size_t>(4 * workers, 3);
      CHECK(manager.last_frame_stats().tasks_launched == expected);
    }
  }
}

}  // TEST_SUITE("tick_schedule")
