// The tick_engine workload: an engine-sized frame, for the tick manager's efficiency rather
// than its per-tick cost. A population of N tick functions (default 2,000; --quick 500)
// whose bodies compute for 1–50 µs, skewed towards short ones (1 + 49·u³ µs for u uniform
// in [0, 1): a mean of about 13 µs, one tick in ten over 30 µs); 40 % pre_physics, 30 %
// during_physics, 20 % post_physics, 10 % post_update_work; half on the game thread, half
// on any thread; one tick in five waits for one of the 40 ticks registered before it, which
// makes prerequisite chains (within a group and across groups). No intervals: every tick
// runs every frame. Each frame reports its own lower bound (see tick_frame_stats), so
// the rows are the frame's wall time, that bound and their ratio, the efficiency.
#pragma once

#include "workload.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace engine_bench {

// engine_population is the workload: each tick's group (0..3 as in tick_bench), thread,
// prerequisite (or none) and body length in units of compute (see spin).
struct engine_population {
  static constexpr std::uint32_t none = 0xffffffff;
  std::vector<std::uint8_t> group;
  std::vector<bool> any_thread;
  std::vector<std::uint32_t> prerequisite;
  std::vector<double> body_microseconds;
  std::size_t size() const { return group.size(); }
};

inline engine_population make_engine_population(std::size_t count, std::uint64_t seed = 31) {
  tick_bench::random_source random{seed};
  engine_population made;
  for (std::size_t i = 0; i < count; ++i) {
    double where = random.unit();
    made.group.push_back(static_cast<std::uint8_t>(where < 0.4 ? 0 : where < 0.7 ? 1 : where < 0.9 ? 2 : 3));
    made.any_thread.push_back(random.below(2) == 0);
    std::uint32_t before = engine_population::none;
    if (i > 0 && random.below(5) == 0) {
      auto back = static_cast<std::uint32_t>(std::min<std::size_t>(i, 40));
      before = static_cast<std::uint32_t>(i) - 1 - random.below(back);
    }
    made.prerequisite.push_back(before);
    double u = random.unit();
    made.body_microseconds.push_back(1.0 + 49.0 * u * u * u);
  }
  return made;
}

// spin computes for `rounds` rounds and returns a value that depends on every one, so that
// no compiler can drop the loop. Compute, not a clock: a body descheduled by the operating
// system takes longer, as real work would.
[[gnu::noinline]] inline std::uint64_t spin(std::uint64_t seed, std::uint64_t rounds) {
  std::uint64_t x = seed | 1;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

// spin_sink keeps calibration runs observable.
inline volatile std::uint64_t spin_sink = 0;

// rounds_per_microsecond calibrates spin on this machine (the fastest of a few tries).
inline double rounds_per_microsecond() {
  constexpr std::uint64_t rounds = 2'000'000;
  double best = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto start = std::chrono::steady_clock::now();
    spin_sink = spin(static_cast<std::uint64_t>(attempt) + 1, rounds);
    double micro = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (micro > 0) best = std::max(best, static_cast<double>(rounds) / micro);
  }
  return best;
}

}  // namespace engine_bench
