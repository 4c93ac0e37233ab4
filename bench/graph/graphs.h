// The graph workloads (prerequisites at scale), written once over a DAG given
// as predecessor lists, so that every system builds and runs the same graph:
//   binary_tree   a complete binary tree, each node after its parent (Taskflow's
//                 binary_tree: fan-out, one prerequisite per task)
//   chain         a linear chain, each node after the one before (Taskflow's linear_chain:
//                 no parallelism at all, so extra threads can only cost)
//   wavefront     an n × n grid, each block after the one above and the one to its left
//                 (Taskflow's wavefront with an empty block body: pure DAG overhead)
//   random_dag    fixed-seed random DAG, each node after 1–4 nodes among the 1024 before
//                 it (Taskflow's graph_traversal, a random level graph, in spirit)
// Nodes are numbered in a topological order. Each task computes its node's depth, one more
// than the deepest of its predecessors, from the values they wrote, so a task that ran
// before a predecessor finished leaves a wrong value behind: the sum of depths, compared
// with the serial answer, checks every run. As in Taskflow's benchmarks, building the
// graph (creating tasks, adding edges) and tearing it down are inside the timer.
#pragma once

#include "../common/harness.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace graphs {

// dag: node i's predecessors are preds[first[i] .. first[i + 1]) (at most max_preds).
struct dag {
  std::string name;
  std::string param;
  std::vector<std::uint32_t> first;
  std::vector<std::uint32_t> preds;

  dag(std::string kind, std::string size) : name(std::move(kind)), param(std::move(size)), first{0} {}

  std::uint32_t size() const { return static_cast<std::uint32_t>(first.size() - 1); }
  std::uint32_t pred_count(std::uint32_t node) const { return first[node + 1] - first[node]; }
  const std::uint32_t* preds_of(std::uint32_t node) const { return preds.data() + first[node]; }
  void add(std::initializer_list<std::uint32_t> before) {
    preds.insert(preds.end(), before);
    first.push_back(static_cast<std::uint32_t>(preds.size()));
  }
};

inline constexpr std::uint32_t max_preds = 4;

inline dag binary_tree(unsigned levels) {
  dag made{"binary_tree", std::to_string((1u << levels) - 1)};
  made.add({});
  for (std::uint32_t node = 1; node < (1u << levels) - 1; ++node) made.add({(node - 1) / 2});
  return made;
}

inline dag chain(std::uint32_t nodes) {
  dag made{"chain", std::to_string(nodes)};
  made.add({});
  for (std::uint32_t node = 1; node < nodes; ++node) made.add({node - 1});
  return made;
}

inline dag wavefront(std::uint32_t n) {
  dag made{"wavefront", std::to_string(n) + "x" + std::to_string(n)};
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t j = 0; j < n; ++j) {
      if (i > 0 && j > 0) {
        made.add({(i - 1) * n + j, i * n + j - 1});
      } else if (i > 0) {
        made.add({(i - 1) * n + j});
      } else if (j > 0) {
        made.add({j - 1});
      } else {
        made.add({});
      }
    }
  }
  return made;
}

inline dag random_dag(std::uint32_t nodes) {
  dag made{"random_dag", std::to_string(nodes)};
  std::mt19937 random(20240531);  // fixed: every system and every run sees the same graph
  made.add({});
  for (std::uint32_t node = 1; node < nodes; ++node) {
    std::uint32_t window = std::min<std::uint32_t>(node, 1024);
    std::uint32_t count = std::min<std::uint32_t>(1 + random() % max_preds, window);
    std::uint32_t picked[max_preds];
    for (std::uint32_t k = 0; k < count; ++k) picked[k] = node - 1 - random() % window;
    made.preds.insert(made.preds.end(), picked, picked + count);
    made.first.push_back(static_cast<std::uint32_t>(made.preds.size()));
  }
  return made;
}

// node_body is what every node's task runs.
struct node_body {
  const dag* graph;
  std::uint64_t* depth;
  void operator()(std::uint32_t node) const {
    std::uint64_t deepest = 0;
    const std::uint32_t* before = graph->preds_of(node);
    for (std::uint32_t k = 0; k < graph->pred_count(node); ++k) deepest = std::max(deepest, depth[before[k]]);
    depth[node] = deepest + 1;
  }
};

inline std::vector<dag> all(bool quick) {
  return {binary_tree(quick ? 16 : 20), chain(quick ? 1u << 16 : 1u << 20), wavefront(quick ? 256 : 1024),
          random_dag(quick ? 1u << 16 : 1u << 20)};
}

// run_all measures every graph on a system whose `run(graph, body)` builds the graph's
// tasks, runs them to completion and tears them down; `suffix` names a variant of the rows
// (the workload is the graph's name followed by it).
template <class Run>
void run_all(const bench::options& chosen, const std::string& system, unsigned threads, Run&& run,
             const std::string& suffix = "") {
  for (const dag& graph : all(chosen.quick)) {
    std::vector<std::uint64_t> depth(graph.size());
    node_body body{&graph, depth.data()};
    std::uint64_t expected = 0;
    for (std::uint32_t node = 0; node < graph.size(); ++node) body(node);
    for (std::uint64_t each : depth) expected += each;
    auto runs = bench::time_runs(chosen.runs, [&] {
      std::fill(depth.begin(), depth.end(), 0);
      run(graph, body);
      std::uint64_t sum = 0;
      for (std::uint64_t each : depth) sum += each;
      if (sum != expected) throw std::runtime_error("wrong answer: " + graph.name);
    });
    bench::record(chosen, system, graph.name + suffix, graph.param, threads, runs, graph.size());
  }
}

// run_wavefront_last_waited measures `run(graph, body)` on a 512 × 512 wavefront, building
// included, as the row `wavefront_last_waited` + `suffix`: a newcomer waiting for a
// wavefront's result. magpie's run waits for the last block alone; a system whose graph has
// one completion (Taskflow, oneTBB's flow graph) runs it whole, which is the same wait.
template <class Run>
void run_wavefront_last_waited(const bench::options& chosen, const std::string& system, unsigned threads, Run&& run,
                               const std::string& suffix = "") {
  const dag graph = wavefront(512);
  std::vector<std::uint64_t> depth(graph.size());
  node_body body{&graph, depth.data()};
  auto runs = bench::time_runs(chosen.runs, [&] {
    std::fill(depth.begin(), depth.end(), 0);
    run(graph, body);
    if (depth.back() != 2 * 512 - 1) throw std::runtime_error("wrong answer: wavefront_last_waited");
  });
  bench::record(chosen, system, "wavefront_last_waited" + suffix, graph.param, threads, runs, graph.size());
}

}  // namespace graphs
