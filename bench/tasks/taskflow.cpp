// Task-model workloads on Taskflow (v4, header-only, found through the taskflow_dir
// option; never vendored). Peer of bench/tasks/magpie.cpp and bench/tasks/tbb.cpp.
//
// "N threads" = a tf::Executor of N workers (docs/benchmarks.md, "Systems"). Taskflow's calling thread cannot
// take part in the work, and a tf::TaskGroup can only be made by a worker, so the
// workloads that launch-and-wait (empty tasks, latency) run their loop inside one driver
// task on a worker and join with TaskGroup::corun — Taskflow v4's own fork-join path,
// the fair analogue of magpie's retracting wait and task_group::wait in oneTBB. The graph
// workloads (the event-gated batch, the linear chain) are tf::Taskflow graphs run from
// the calling thread with executor.run(...).wait(), as Taskflow's own benchmarks do.
#include "../common/harness.h"

#include <taskflow/taskflow.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

// on_worker runs `body` on one of the executor's workers and returns once it has.
template <class Body>
void on_worker(tf::Executor& executor, Body&& body) {
  executor.async(std::forward<Body>(body)).get();
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "Taskflow task-model benchmarks");
  const std::size_t singles = chosen.quick ? (1u << 16) : (1u << 18);
  const std::size_t batch = chosen.quick ? (1u << 17) : (1u << 20);
  const std::size_t chain = chosen.quick ? (1u << 16) : (1u << 20);
  const std::size_t spawned = 10'000;
  const std::size_t held = chosen.quick ? (1u << 16) : (1u << 18);

  {
    tf::Executor alone(1);
    double bytes = 0;
    on_worker(alone, [&] {
      bytes = bench::bytes_per_task(held, [&](auto measure) {
        bench::padded_atomic<std::size_t> ran{0};
        std::size_t step = 1;
        tf::TaskGroup group = alone.task_group();
        for (std::size_t i = 0; i < held; ++i) group.silent_async([&ran, step] { ran.fetch_add(step, std::memory_order_relaxed); });  // relaxed: read after corun
        measure();
        group.corun();
        check(ran.load() == held, "bytes per task");
      });
    });
    bench::record(chosen, "taskflow", "task_bytes", "16B", 1, {bytes}, 0, "bytes");
  }

  for (unsigned threads : chosen.threads) {
    tf::Executor executor(threads);

    auto one_at_a_time = bench::time_runs(chosen.runs, [&] {
      std::size_t sum = 0;
      on_worker(executor, [&] {
        for (std::size_t i = 0; i < singles; ++i) {
          tf::TaskGroup group = executor.task_group();
          std::size_t value = 0;
          group.silent_async([&value, i] { value = i; });
          group.corun();
          sum += value;
        }
      });
      check(sum == singles * (singles - 1) / 2, "one at a time");
    });
    bench::record(chosen, "taskflow", "task_empty_one_at_a_time", std::to_string(singles), threads, one_at_a_time, singles);

    auto batched = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      on_worker(executor, [&] {
        tf::TaskGroup group = executor.task_group();
        for (std::size_t i = 0; i < batch; ++i) group.silent_async([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after corun and the driver's get()
        group.corun();
      });
      check(ran.load() == batch, "batch");
    });
    bench::record(chosen, "taskflow", "task_empty_batch", std::to_string(batch), threads, batched, batch);

    std::vector<double> latencies;
    latencies.reserve(1000);
    on_worker(executor, [&] {
      for (int sample = 0; sample < 1000; ++sample) {
        auto start = std::chrono::steady_clock::now();
        tf::TaskGroup group = executor.task_group();
        group.silent_async([] {});
        group.corun();
        latencies.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    });
    bench::record(chosen, "taskflow", "task_latency_p50", "1000", threads, {bench::percentile(latencies, 50)}, 0);
    bench::record(chosen, "taskflow", "task_latency_p99", "1000", threads, {bench::percentile(latencies, 99)}, 0);

    auto batch_spawn = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      tf::Taskflow graph;
      tf::Task gate = graph.emplace([] {});
      for (std::size_t i = 0; i < spawned; ++i) {
        gate.precede(graph.emplace([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // relaxed: read after wait()
      }
      executor.run(graph).wait();
      check(ran.load() == spawned, "batch spawn");
    });
    bench::record(chosen, "taskflow", "batch_spawn", std::to_string(spawned), threads, batch_spawn, spawned);

    std::vector<double> run_only;
    auto build_and_run = bench::time_runs(chosen.runs, [&] {
      std::size_t hops = 0;  // each hop runs after the one before it: no race
      tf::Taskflow graph;
      tf::Task previous = graph.emplace([&hops] { ++hops; });
      for (std::size_t i = 1; i < chain; ++i) {
        tf::Task next = graph.emplace([&hops] { ++hops; });
        previous.precede(next);
        previous = next;
      }
      auto start = std::chrono::steady_clock::now();
      executor.run(graph).wait();
      run_only.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      check(hops == chain, "chain");
    });
    run_only.erase(run_only.begin(), run_only.end() - chosen.runs);  // the warm-up runs
    bench::record(chosen, "taskflow", "linear_chain_run", std::to_string(chain), threads, run_only, chain);
    bench::record(chosen, "taskflow", "linear_chain_build_run", std::to_string(chain), threads, build_and_run, chain);
  }
}
