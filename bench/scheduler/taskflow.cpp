// Scheduler workloads on Taskflow v4 (from the taskflow_dir option; never vendored):
// empty tasks launched with silent_async from the calling thread and from inside a task
// (joined with Executor::wait_for_all), idle CPU once the work drained, and wake-to-run
// latency of a sleeping worker. Peer of bench/scheduler/magpie.cpp and tbb.cpp.
// "N threads" = an executor of N workers (Taskflow's calling thread cannot take part).
#include "../common/harness.h"

#include <taskflow/taskflow.hpp>

#include <atomic>
#include <stdexcept>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "Taskflow scheduler benchmarks");
  const std::uint64_t jobs = chosen.quick ? (1u << 16) : (1u << 18);
  const std::string param = std::to_string(jobs);
  for (unsigned threads : chosen.threads) {
    tf::Executor executor(threads);

    auto from_caller = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::uint64_t> done{0};
      for (std::uint64_t i = 0; i < jobs; ++i) executor.silent_async([&done] { done.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait_for_all
      executor.wait_for_all();
      if (done.load() != jobs) throw std::runtime_error("taskflow: lost jobs");
    });
    bench::record(chosen, "taskflow", "empty_jobs_from_caller", param, threads, from_caller, jobs);

    auto from_worker = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::uint64_t> done{0};
      executor.silent_async([&] {
        for (std::uint64_t i = 0; i < jobs; ++i) executor.silent_async([&done] { done.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait_for_all
      });
      executor.wait_for_all();
      if (done.load() != jobs) throw std::runtime_error("taskflow: lost jobs");
    });
    bench::record(chosen, "taskflow", "empty_jobs_from_worker", param, threads, from_worker, jobs);

    // An executor made, given one task to run and wait for, and destroyed (magpie.cpp's peer).
    const int cycles = chosen.quick ? 50 : 200;
    auto lifecycle = bench::time_runs(chosen.runs, [&] {
      for (int cycle = 0; cycle < cycles; ++cycle) {
        tf::Executor own(threads);
        own.async([] {}).wait();
      }
    });
    bench::record(chosen, "taskflow", "scheduler_lifecycle", std::to_string(cycles), threads, lifecycle,
                  static_cast<std::uint64_t>(cycles));

    if (threads == 1) continue;  // as the peers: idle and wake-up figures with workers to park

    std::vector<double> idle_cpu;
    for (int run = 0; run < chosen.runs; ++run) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the workers go to sleep
      double before = bench::process_cpu_seconds();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      idle_cpu.push_back(bench::process_cpu_seconds() - before);
    }
    bench::record(chosen, "taskflow", "idle_cpu_100ms", "cpu_s", threads, idle_cpu, 0);

    std::vector<double> latencies;
    for (int sample = 0; sample < (chosen.quick ? 50 : 200); ++sample) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      bench::padded_atomic<std::int64_t> ran_at{0};
      auto launched = std::chrono::steady_clock::now().time_since_epoch().count();
      executor.silent_async([&ran_at] {
        ran_at.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);  // release: pairs with the acquire below
      });
      while (ran_at.load(std::memory_order_acquire) == 0) std::this_thread::yield();  // acquire: pairs with the task's release
      latencies.push_back(static_cast<double>(ran_at.load() - launched) * 1e-9);
    }
    executor.wait_for_all();
    bench::record(chosen, "taskflow", "wake_latency_p50", "seconds", threads, {bench::percentile(latencies, 50)}, 0);
    bench::record(chosen, "taskflow", "wake_latency_p99", "seconds", threads, {bench::percentile(latencies, 99)}, 0);
  }
  return 0;
}
