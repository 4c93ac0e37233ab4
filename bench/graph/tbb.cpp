// Graph workloads on oneTBB (Debian libtbb-dev, plain allocator): a flow graph of
// continue_nodes, one per node, an edge per predecessor, the roots started with try_put
// (Taskflow's tbb peers do the same). Peer of bench/graph/magpie.cpp.
#include "graphs.h"

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>

#include <deque>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "oneTBB graph benchmarks");
  using namespace oneapi::tbb;
  for (unsigned threads : chosen.threads) {
    task_arena arena(static_cast<int>(threads));
    arena.execute([&] {
      auto run = [](const graphs::dag& graph, const graphs::node_body& body) {
        flow::graph flow_graph;
        std::deque<flow::continue_node<flow::continue_msg>> nodes;
        for (std::uint32_t node = 0; node < graph.size(); ++node) {
          nodes.emplace_back(flow_graph, [body, node](const flow::continue_msg&) { body(node); });
          const std::uint32_t* before = graph.preds_of(node);
          for (std::uint32_t k = 0; k < graph.pred_count(node); ++k) flow::make_edge(nodes[before[k]], nodes.back());
        }
        for (std::uint32_t node = 0; node < graph.size(); ++node) {
          if (graph.pred_count(node) == 0) nodes[node].try_put(flow::continue_msg());
        }
        flow_graph.wait_for_all();
      };
      graphs::run_all(chosen, "tbb", threads, run);
      graphs::run_wavefront_last_waited(chosen, "tbb", threads, run);
    });
  }
}
