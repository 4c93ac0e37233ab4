// Graph workloads on magpie: one task per node, launched in topological order with its
// predecessors' handles as prerequisites (UE's launch-with-prerequisites idiom; a node may
// start while later nodes are still being launched), then every handle waited for and
// dropped. Peers: tbb.cpp (flow graph), taskflow.cpp, omp.cpp (depend clauses).
// "N threads" = N − 1 workers + this thread, attached as the game thread; the rows named
// `_unattached` build from a plain `main` instead, as a newcomer writes it. The
// `wavefront_last_waited` rows wait for the grid's last block alone, as a newcomer waits for
// a wavefront's result (every block is before it).
#include "graphs.h"
#include "../common/magpie_threads.h"

#include <magpie/magpie.h>

#include <algorithm>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>

namespace {

// build_and_wait launches one task per node into `handles`, then waits for all of them.
void build_and_wait(magpie::scheduler& pool, std::vector<magpie::task<>>& handles, const graphs::dag& graph,
                    const graphs::node_body& body) {
  handles.reserve(graph.size());
  for (std::uint32_t node = 0; node < graph.size(); ++node) {
    auto before = std::span(graph.preds_of(node), graph.pred_count(node)) |
                  std::views::transform([&](std::uint32_t p) -> const magpie::task<>& { return handles[p]; });
    handles.push_back(pool.launch("node", [body, node] { body(node); }, before));
  }
  magpie::wait_all(handles);
  handles.clear();
}

// build_and_wait_last launches one task per node as build_and_wait does, then waits for the
// last node alone (the graph's only sink: a wavefront's last block).
void build_and_wait_last(magpie::scheduler& pool, std::vector<magpie::task<>>& handles, const graphs::dag& graph,
                         const graphs::node_body& body) {
  handles.reserve(graph.size());
  for (std::uint32_t node = 0; node < graph.size(); ++node) {
    auto before = std::span(graph.preds_of(node), graph.pred_count(node)) |
                  std::views::transform([&](std::uint32_t p) -> const magpie::task<>& { return handles[p]; });
    handles.push_back(pool.launch("block", [body, node] { body(node); }, before));
  }
  handles.back().wait();
  handles.clear();
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie graph benchmarks");
  bench::trace_if_asked(chosen);
  for (unsigned threads : chosen.threads) {
    std::vector<magpie::task<>> handles;
    auto run = [&](magpie::scheduler& pool) {
      return [&](const graphs::dag& graph, const graphs::node_body& body) { build_and_wait(pool, handles, graph, body); };
    };
    auto last = [&](magpie::scheduler& pool) {
      return [&](const graphs::dag& graph, const graphs::node_body& body) {
        build_and_wait_last(pool, handles, graph, body);
      };
    };
    {
      magpie::scheduler pool(bench::magpie_options(threads));
      pool.attach(magpie::named_thread::game);
      graphs::run_all(chosen, "magpie", threads, run(pool));
      graphs::run_wavefront_last_waited(chosen, "magpie", threads, last(pool));
      pool.detach();
    }
    magpie::scheduler pool(bench::magpie_options(threads));
    graphs::run_all(chosen, "magpie", threads, run(pool), "_unattached");
    graphs::run_wavefront_last_waited(chosen, "magpie", threads, last(pool), "_unattached");
  }
}
