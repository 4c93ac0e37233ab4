// Graph workloads run serially in topological order (the nodes' own numbering): the
// floor the schedulers' per-node overhead is measured against. Recorded at 1 thread.
#include "graphs.h"

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "serial graph baselines");
  graphs::run_all(chosen, "serial", 1, [](const graphs::dag& graph, const graphs::node_body& body) {
    for (std::uint32_t node = 0; node < graph.size(); ++node) body(node);
  });
}
