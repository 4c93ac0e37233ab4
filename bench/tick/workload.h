// The tick_frame workload, the same for every system: bench/tick/<system>.cpp only says how
// it runs one frame of the population.
//
// A population of N tick functions (default 100,000; --quick 20,000) of a few nanoseconds
// of work each: 40 % pre_physics, 30 % during_physics, 20 % post_physics, 10 %
// post_update_work; half may run on any thread; 10 % wait for one earlier tick; 10 % tick
// every 0.05–0.5 s. A run is 60 frames of 1/60 s. Each system reports
//   tick_frame        its 60 frames; ns per tick per core = frame × threads / ticks
//   tick_sched        its frames minus the serial floor's, timed in alternating pairs: the
//                     scheduling cost per tick per core, (frame − serial) × threads / ticks
// The serial floor runs the same bodies in a valid order (group by group, prerequisites
// first) on one thread, with the same interval bookkeeping, and nothing else.
#pragma once

#include "../common/harness.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tick_bench {

inline constexpr int frames_per_run = 60;
inline constexpr float frame_seconds = 1.f / 60;
inline constexpr int group_count = 4;  // pre_physics, during_physics, post_physics, post_update_work

// random_source is splitmix64: the same population for every system.
struct random_source {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }
};

// population describes every tick: group (0..3 as above, after demotion by its
// prerequisite), whether it may run on any thread, its prerequisite (or none) and interval.
struct population {
  static constexpr std::uint32_t none = 0xffffffff;
  std::vector<std::uint8_t> own_group;
  std::vector<std::uint8_t> group;  // the group it runs in: max(own, prerequisite's)
  std::vector<bool> any_thread;
  std::vector<std::uint32_t> prerequisite;
  std::vector<float> interval;  // 0: every frame
  std::size_t size() const { return group.size(); }
  std::size_t every_frame() const {
    return static_cast<std::size_t>(std::count(interval.begin(), interval.end(), 0.f));
  }
};

inline population make_population(std::size_t count, std::uint64_t seed = 25) {
  random_source random{seed};
  population made;
  for (std::size_t i = 0; i < count; ++i) {
    double where = random.unit();
    auto own = static_cast<std::uint8_t>(where < 0.4 ? 0 : where < 0.7 ? 1 : where < 0.9 ? 2 : 3);
    std::uint32_t before = population::none;
    if (i > 0 && random.below(10) == 0) before = random.below(static_cast<std::uint32_t>(i));
    made.own_group.push_back(own);
    made.group.push_back(before == population::none ? own : std::max(own, made.group[before]));
    made.any_thread.push_back(random.below(2) == 0);
    made.prerequisite.push_back(before);
    made.interval.push_back(random.below(10) == 0 ? static_cast<float>(0.05 + 0.45 * random.unit()) : 0.f);
  }
  return made;
}

// work is the body of tick `index`: a few nanoseconds, kept out of line so that no system
// can fold it into its loop.
[[gnu::noinline]] inline void work(std::uint64_t* state, std::uint32_t index) {
  std::uint64_t x = state[index];
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  x ^= x >> 29;
  state[index] = x + 1;
}

// interval_gate keeps an interval tick's cooldown the way every system's frames see it:
// a tick runs in its first frame, then when its expiry is below the frame's end.
struct interval_gate {
  std::vector<double> expiry;
  double now = 0;
  explicit interval_gate(const population& ticks) : expiry(ticks.size(), -1.0) {}
  void advance() { now += frame_seconds; }
  bool due(const population& ticks, std::uint32_t index) {
    float every = ticks.interval[index];
    if (every <= 0) return true;
    if (expiry[index] >= now) return false;
    expiry[index] = expiry[index] < 0 ? now + every : expiry[index] + every;
    return true;
  }
};

// serial_order lists the ticks group by group, each after its prerequisite: a valid order.
inline std::vector<std::uint32_t> serial_order(const population& ticks) {
  std::vector<std::uint32_t> order;
  for (int group = 0; group < group_count; ++group) {
    for (std::uint32_t i = 0; i < ticks.size(); ++i) {  // prerequisites have lower indices
      if (ticks.group[i] == group) order.push_back(i);
    }
  }
  return order;
}

// serial_frames runs the floor: `frames` frames over `order`; returns how many bodies ran.
[[gnu::noinline]] inline std::size_t serial_frames(const population& ticks, const std::vector<std::uint32_t>& order,
                                                   interval_gate& gate, std::uint64_t* state, int frames) {
  std::size_t ran = 0;
  for (int frame = 0; frame < frames; ++frame) {
    gate.advance();
    for (std::uint32_t index : order) {
      if (!gate.due(ticks, index)) continue;
      work(state, index);
      ++ran;
    }
  }
  return ran;
}

// check_ran throws unless a run of `frames` frames ran every every-frame tick each frame
// and, over a run long enough for the shortest interval (0.05 s: 3 frames), interval ticks.
inline void check_ran(const population& ticks, std::size_t ran, int frames, const char* system) {
  std::size_t every = ticks.every_frame() * static_cast<std::size_t>(frames);
  bool intervals_due = frames > 3 && ticks.every_frame() != ticks.size();
  if (ran < every || (intervals_due && ran == every) ||
      ran > ticks.size() * static_cast<std::size_t>(frames)) {
    throw std::runtime_error(std::string(system) + ": wrong number of ticks ran: " + std::to_string(ran));
  }
}

// measure records tick_frame and tick_sched for one system at one thread count: `frames`
// runs `count` frames of the system and returns how many bodies ran.
template <class Frames>
void measure(const bench::options& chosen, const std::string& system, const std::string& suffix,
             const population& ticks, unsigned threads, Frames&& frames) {
  std::vector<std::uint64_t> floor_state(ticks.size(), 1);
  std::vector<std::uint32_t> order = serial_order(ticks);
  interval_gate gate(ticks);
  auto floor_run = [&] {
    check_ran(ticks, serial_frames(ticks, order, gate, floor_state.data(), frames_per_run), frames_per_run, "serial");
  };
  auto system_run = [&] { check_ran(ticks, frames(frames_per_run), frames_per_run, system.c_str()); };
  std::vector<double> own;
  std::vector<double> ratios = bench::time_pairs(chosen.runs, floor_run, system_run, own);
  std::vector<double> differences;
  for (std::size_t i = 0; i < own.size(); ++i) differences.push_back(own[i] - own[i] / ratios[i]);
  std::uint64_t tick_runs = ticks.size() * frames_per_run;
  std::string param = std::to_string(ticks.size());
  bench::record(chosen, system, "tick_frame" + suffix, param, threads, own, tick_runs);
  bench::record(chosen, system, "tick_sched" + suffix, param, threads, differences, tick_runs);
}

}  // namespace tick_bench
