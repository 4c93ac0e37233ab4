// The tick_frame population as one static DAG, for the peers that run a graph built once
// and re-run every frame (oneTBB's flow graph, a Taskflow taskflow): a node per tick, an
// edge from its prerequisite, and a barrier node after each group that every tick of the
// group precedes and every tick of the next group follows. The peers run every tick on any
// thread (they have no game thread); each body checks its own interval, as the serial floor.
#pragma once

#include "workload.h"

#include <cstdint>
#include <numeric>
#include <vector>

namespace tick_bench {

// frame_bodies holds what the nodes touch: the bodies' state, the interval gate and a count
// of runs per tick (each node writes only its own), summed once per run.
struct frame_bodies {
  explicit frame_bodies(const population& ticks) : ticks(&ticks), state(ticks.size(), 1), gate(ticks), runs(ticks.size(), 0) {}

  void run_tick(std::uint32_t index) {
    if (!gate.due(*ticks, index)) return;
    work(state.data(), index);
    ++runs[index];
  }

  // take_runs returns how many bodies ran since the last call.
  std::size_t take_runs() {
    std::size_t total = std::accumulate(runs.begin(), runs.end(), std::size_t{0});
    std::fill(runs.begin(), runs.end(), 0u);
    return total;
  }

  const population* ticks;
  std::vector<std::uint64_t> state;
  interval_gate gate;
  std::vector<std::uint32_t> runs;
};

}  // namespace tick_bench
