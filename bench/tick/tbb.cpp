// tick_frame on oneTBB: the population as a flow graph of continue_nodes built once, with a
// barrier node per group, re-run every frame from a start node (see graph_shape.h).
// "N threads" = a task_arena of N.
#include "graph_shape.h"

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>

#include <deque>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "tick manager peer: a oneTBB flow graph built once");
  using namespace oneapi::tbb;
  tick_bench::population ticks = tick_bench::make_population(chosen.quick ? 20'000 : 100'000);
  for (unsigned threads : chosen.threads) {
    task_arena arena(static_cast<int>(threads));
    arena.execute([&] {
      tick_bench::frame_bodies bodies(ticks);
      flow::graph graph;
      flow::continue_node<flow::continue_msg> start(graph, [](const flow::continue_msg&) {});
      std::deque<flow::continue_node<flow::continue_msg>> barriers;
      for (int group = 0; group < tick_bench::group_count; ++group) {
        barriers.emplace_back(graph, [](const flow::continue_msg&) {});
      }
      std::deque<flow::continue_node<flow::continue_msg>> nodes;
      for (std::uint32_t i = 0; i < ticks.size(); ++i) {
        nodes.emplace_back(graph, [&bodies, i](const flow::continue_msg&) { bodies.run_tick(i); });
        int group = ticks.group[i];
        flow::make_edge(group == 0 ? start : barriers[static_cast<std::size_t>(group - 1)], nodes.back());
        flow::make_edge(nodes.back(), barriers[static_cast<std::size_t>(group)]);
        if (ticks.prerequisite[i] != tick_bench::population::none) flow::make_edge(nodes[ticks.prerequisite[i]], nodes.back());
      }
      for (int group = 0; group + 1 < tick_bench::group_count; ++group) {  // an empty group still passes the frame on
        flow::make_edge(barriers[static_cast<std::size_t>(group)], barriers[static_cast<std::size_t>(group + 1)]);
      }
      tick_bench::measure(chosen, "tbb", "", ticks, threads, [&](int frames) {
        for (int frame = 0; frame < frames; ++frame) {
          bodies.gate.advance();
          start.try_put(flow::continue_msg());
          graph.wait_for_all();
        }
        return bodies.take_runs();
      });
    });
  }
}
