// tick_frame on Taskflow v4 (from the taskflow_dir option; never vendored): the population
// as one tf::Taskflow built once, with a barrier task per group, re-run every frame with
// executor.run(flow).wait() (see graph_shape.h). "N threads" = an executor of N workers.
#include "graph_shape.h"

#include <taskflow/taskflow.hpp>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "tick manager peer: a Taskflow taskflow built once");
  tick_bench::population ticks = tick_bench::make_population(chosen.quick ? 20'000 : 100'000);
  for (unsigned threads : chosen.threads) {
    tf::Executor executor(threads);
    tick_bench::frame_bodies bodies(ticks);
    tf::Taskflow flow;
    std::vector<tf::Task> barriers;
    for (int group = 0; group < tick_bench::group_count; ++group) {
      barriers.push_back(flow.emplace([] {}));
      if (group > 0) barriers[static_cast<std::size_t>(group - 1)].precede(barriers.back());
    }
    std::vector<tf::Task> nodes;
    nodes.reserve(ticks.size());
    for (std::uint32_t i = 0; i < ticks.size(); ++i) {
      nodes.push_back(flow.emplace([&bodies, i] { bodies.run_tick(i); }));
      int group = ticks.group[i];
      if (group > 0) barriers[static_cast<std::size_t>(group - 1)].precede(nodes.back());
      nodes.back().precede(barriers[static_cast<std::size_t>(group)]);
      if (ticks.prerequisite[i] != tick_bench::population::none) nodes[ticks.prerequisite[i]].precede(nodes.back());
    }
    tick_bench::measure(chosen, "taskflow", "", ticks, threads, [&](int frames) {
      for (int frame = 0; frame < frames; ++frame) {
        bodies.gate.advance();
        executor.run(flow).wait();
      }
      return bodies.take_runs();
    });
  }
}
