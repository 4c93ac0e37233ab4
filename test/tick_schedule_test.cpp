// Tests for the tick manager's schedule (lib/clients/tick_schedule.cpp): the cached schedule
// gives the same frames as rebuilding every frame over random changes, and ticks destroyed
// while workers run their group are never touched again.
#include <magpie/tick_manager.h>

#include "support.h"
#include "tick_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
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
  probe(int index, frame_records& records) : tick_function("probe " + std::to_string(index), {}), index_(index), records_(&records) {}

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
        "victim " + std::to_string(index), [&, index, payload](float, level_tick) {
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

}  // TEST_SUITE("tick_schedule")
