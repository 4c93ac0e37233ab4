// oneTBB peer of bench/taskgraph/magpie.cpp: task_group for the TaskGraph function-task
// rows (one at a time, a batch) and for the continuation chain (each link a task that runs
// the next, as a `next` continuation does), flow_graph for the dependent chain.
#include "../common/harness.h"

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

// link runs one step of the continuation chain and hands the next step to the group.
void link(oneapi::tbb::task_group& group, std::size_t& value, std::size_t left) {
  ++value;
  if (left > 1) group.run([&group, &value, left] { link(group, value, left - 1); });
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "oneTBB TaskGraph-compatibility peers");
  const std::size_t singles = chosen.quick ? (1u << 15) : (1u << 17);
  const std::size_t batch = chosen.quick ? (1u << 17) : (1u << 20);
  const std::size_t chain = chosen.quick ? (1u << 16) : (1u << 20);
  const std::size_t links = chosen.quick ? (1u << 12) : (1u << 15);  // std's peer pays a futex hand-off per link
  using namespace oneapi::tbb;

  for (unsigned threads : chosen.threads) {
    task_arena arena(static_cast<int>(threads));
    arena.execute([&] {
      auto singly = bench::time_runs(chosen.runs, [&] {
        std::size_t ran = 0;
        for (std::size_t i = 0; i < singles; ++i) {
          task_group group;
          group.run([&ran] { ++ran; });
          group.wait();
        }
        check(ran == singles, "one at a time");
      });
      bench::record(chosen, "tbb", "tg_function_task_one_at_a_time", std::to_string(singles), threads, singly, singles);

      auto batched = bench::time_runs(chosen.runs, [&] {
        bench::padded_atomic<std::size_t> ran{0};
        task_group group;
        for (std::size_t i = 0; i < batch; ++i) group.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait
        group.wait();
        check(ran.load() == batch, "batch");
      });
      bench::record(chosen, "tbb", "tg_function_task_batch", std::to_string(batch), threads, batched, batch);

      auto chained = bench::time_runs(chosen.runs, [&] {
        std::size_t hops = 0;
        flow::graph graph;
        std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
        nodes.reserve(chain);
        for (std::size_t i = 0; i < chain; ++i) {
          nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
              graph, [&hops](const flow::continue_msg&) { ++hops; }));
          if (i > 0) flow::make_edge(*nodes[i - 1], *nodes[i]);
        }
        nodes.front()->try_put(flow::continue_msg());
        graph.wait_for_all();
        check(hops == chain, "chain");
      });
      bench::record(chosen, "tbb", "tg_graph_task_chain", std::to_string(chain), threads, chained, chain);

      auto continued = bench::time_runs(chosen.runs, [&] {
        std::size_t value = 0;
        task_group group;
        group.run([&] { link(group, value, links); });
        group.wait();
        check(value == links, "continuation chain");
      });
      bench::record(chosen, "tbb", "future_next_chain", std::to_string(links), threads, continued, links);
    });
  }
}
