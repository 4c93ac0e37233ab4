// Graph workloads on Taskflow v4 (from the taskflow_dir option; never vendored): a
// tf::Taskflow with one task per node and an edge per predecessor, run from the calling
// thread with executor.run(...).wait(), as Taskflow's own benchmarks do. Peer of
// bench/graph/magpie.cpp. "N threads" = an executor of N workers.
#include "graphs.h"

#include <taskflow/taskflow.hpp>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "Taskflow graph benchmarks");
  for (unsigned threads : chosen.threads) {
    tf::Executor executor(threads);
    auto run = [&](const graphs::dag& graph, const graphs::node_body& body) {
      tf::Taskflow flow;
      std::vector<tf::Task> tasks;
      tasks.reserve(graph.size());
      for (std::uint32_t node = 0; node < graph.size(); ++node) {
        tasks.push_back(flow.emplace([body, node] { body(node); }));
        const std::uint32_t* before = graph.preds_of(node);
        for (std::uint32_t k = 0; k < graph.pred_count(node); ++k) tasks[before[k]].precede(tasks.back());
      }
      executor.run(flow).wait();
    };
    graphs::run_all(chosen, "taskflow", threads, run);
    graphs::run_wavefront_last_waited(chosen, "taskflow", threads, run);
  }
}
