// Graph workloads on OpenMP tasks with depend clauses: one task per node created in
// topological order, depend(in:) on its predecessors' depth slots and depend(out:) on its
// own (Taskflow's omp peers do the same). Built with clang++ and libomp where available
// (see bench/meson.build). Peer of bench/graph/magpie.cpp.
#include "graphs.h"

#include <omp.h>

#ifndef BENCH_OMP_SYSTEM
#define BENCH_OMP_SYSTEM "omp-libgomp"
#endif

namespace {

// spawn creates node's task; a node with fewer than four predecessors repeats its first
// one (a repeated `in` dependence is the same dependence).
void spawn(const graphs::dag& graph, const graphs::node_body& body, std::uint32_t node) {
  [[maybe_unused]] std::uint64_t* depth = body.depth;  // GCC does not count a use in depend()
  std::uint32_t count = graph.pred_count(node);
  if (count == 0) {
#pragma omp task firstprivate(node) depend(out : depth[node])
    body(node);
    return;
  }
  const std::uint32_t* before = graph.preds_of(node);
  std::uint32_t p[graphs::max_preds];
  for (std::uint32_t k = 0; k < graphs::max_preds; ++k) p[k] = before[k < count ? k : 0];
#pragma omp task firstprivate(node) depend(in : depth[p[0]], depth[p[1]], depth[p[2]], depth[p[3]]) \
    depend(out : depth[node])
  body(node);
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "OpenMP graph benchmarks");
  for (unsigned threads : chosen.threads) {
    graphs::run_all(chosen, BENCH_OMP_SYSTEM, threads, [threads](const graphs::dag& graph, const graphs::node_body& body) {
#pragma omp parallel num_threads(static_cast<int>(threads))
#pragma omp single
      {
        for (std::uint32_t node = 0; node < graph.size(); ++node) spawn(graph, body, node);
#pragma omp taskwait
      }
    });
  }
}
