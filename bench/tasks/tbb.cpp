// Task-model workloads on oneTBB (Debian libtbb-dev, plain allocator): task_group for
// empty tasks and latency, flow_graph for the event-gated batch and the linear chain.
// Peer of bench/tasks/magpie.cpp.
#include "../common/harness.h"

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "oneTBB task-model benchmarks");
  const std::size_t singles = chosen.quick ? (1u << 16) : (1u << 18);
  const std::size_t batch = chosen.quick ? (1u << 17) : (1u << 20);
  const std::size_t chain = chosen.quick ? (1u << 16) : (1u << 20);
  const std::size_t spawned = 10'000;
  const std::size_t held = chosen.quick ? (1u << 16) : (1u << 18);
  using namespace oneapi::tbb;

  task_arena alone(1);
  alone.execute([&] {
    double bytes = bench::bytes_per_task(held, [&](auto measure) {
      bench::padded_atomic<std::size_t> ran{0};
      std::size_t step = 1;
      task_group group;
      for (std::size_t i = 0; i < held; ++i) group.run([&ran, step] { ran.fetch_add(step, std::memory_order_relaxed); });  // relaxed: read after wait
      measure();
      group.wait();
      check(ran.load() == held, "bytes per task");
    });
    bench::record(chosen, "tbb", "task_bytes", "16B", 1, {bytes}, 0, "bytes");
  });

  for (unsigned threads : chosen.threads) {
    task_arena arena(static_cast<int>(threads));
    arena.execute([&] {
      auto singly = [&] {
        std::size_t sum = 0;
        for (std::size_t i = 0; i < singles; ++i) {
          task_group group;
          std::size_t value = 0;
          group.run([&value, i] { value = i; });
          group.wait();
          sum += value;
        }
        check(sum == singles * (singles - 1) / 2, "one at a time");
      };
      auto batch_of_empty = [&] {
        bench::padded_atomic<std::size_t> ran{0};
        task_group group;
        for (std::size_t i = 0; i < batch; ++i) group.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait
        group.wait();
        check(ran.load() == batch, "batch");
      };
      auto one_at_a_time = bench::time_runs(chosen.runs, singly);
      bench::record(chosen, "tbb", "task_empty_one_at_a_time", std::to_string(singles), threads, one_at_a_time, singles);

      auto batched = bench::time_runs(chosen.runs, batch_of_empty);
      bench::record(chosen, "tbb", "task_empty_batch", std::to_string(batch), threads, batched, batch);

      // oneTBB has one way to write these: task_group from the calling thread, which joins
      // the arena. Measured again for the rows magpie runs unattached.
      auto batched_again = bench::time_runs(chosen.runs, batch_of_empty);
      bench::record(chosen, "tbb", "task_empty_batch_unattached", std::to_string(batch), threads, batched_again, batch);
      auto one_at_a_time_again = bench::time_runs(chosen.runs, singly);
      bench::record(chosen, "tbb", "task_empty_one_at_a_time_unattached", std::to_string(singles), threads,
                    one_at_a_time_again, singles);

      std::vector<double> latencies;
      for (int sample = 0; sample < 1000; ++sample) {
        auto start = std::chrono::steady_clock::now();
        task_group group;
        group.run([] {});
        group.wait();
        latencies.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      bench::record(chosen, "tbb", "task_latency_p50", "1000", threads, {bench::percentile(latencies, 50)}, 0);
      bench::record(chosen, "tbb", "task_latency_p99", "1000", threads, {bench::percentile(latencies, 99)}, 0);

      auto batch_spawn = bench::time_runs(chosen.runs, [&] {
        bench::padded_atomic<std::size_t> ran{0};
        flow::graph graph;
        flow::broadcast_node<flow::continue_msg> gate(graph);
        std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
        nodes.reserve(spawned);
        for (std::size_t i = 0; i < spawned; ++i) {
          nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
              graph, [&ran](const flow::continue_msg&) { ran.fetch_add(1, std::memory_order_relaxed); }));  // relaxed: read after wait
          flow::make_edge(gate, *nodes.back());
        }
        gate.try_put(flow::continue_msg());
        graph.wait_for_all();
        check(ran.load() == spawned, "batch spawn");
      });
      bench::record(chosen, "tbb", "batch_spawn", std::to_string(spawned), threads, batch_spawn, spawned);

      std::vector<double> run_only;
      auto build_and_run = bench::time_runs(chosen.runs, [&] {
        std::size_t hops = 0;
        flow::graph graph;
        flow::broadcast_node<flow::continue_msg> gate(graph);
        std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
        nodes.reserve(chain);
        for (std::size_t i = 0; i < chain; ++i) {
          nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
              graph, [&hops](const flow::continue_msg&) { ++hops; }));
          if (i == 0) {
            flow::make_edge(gate, *nodes.back());
          } else {
            flow::make_edge(*nodes[i - 1], *nodes.back());
          }
        }
        auto start = std::chrono::steady_clock::now();
        gate.try_put(flow::continue_msg());
        graph.wait_for_all();
        run_only.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        check(hops == chain, "chain");
      });
      run_only.erase(run_only.begin(), run_only.end() - chosen.runs);  // the warm-up runs
      bench::record(chosen, "tbb", "linear_chain_run", std::to_string(chain), threads, run_only, chain);
      bench::record(chosen, "tbb", "linear_chain_build_run", std::to_string(chain), threads, build_and_run, chain);
    });
  }
}
