// Scheduler workloads on oneTBB (Debian libtbb-dev, plain allocator): task_group run +
// wait from the calling thread and from inside a task, idle CPU, wake-to-run latency of
// a sleeping worker (task_arena::enqueue). Peer of bench/scheduler/magpie.cpp.
#include "../common/harness.h"

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "oneTBB scheduler benchmarks");
  const std::uint64_t jobs = chosen.quick ? (1u << 16) : (1u << 18);
  const std::string param = std::to_string(jobs);
  for (unsigned threads : chosen.threads) {
    tbb::task_arena arena(static_cast<int>(threads));

    auto from_caller = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::uint64_t> done{0};
      arena.execute([&] {
        tbb::task_group group;
        for (std::uint64_t i = 0; i < jobs; ++i) group.run([&] { done.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait()
        group.wait();
      });
      if (done.load() != jobs) throw std::runtime_error("tbb: lost jobs");
    });
    bench::record(chosen, "tbb", "empty_jobs_from_caller", param, threads, from_caller, jobs);

    auto from_worker = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::uint64_t> done{0};
      arena.execute([&] {
        tbb::task_group group;
        group.run([&] {
          for (std::uint64_t i = 0; i < jobs; ++i) group.run([&] { done.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait()
        });
        group.wait();
      });
      if (done.load() != jobs) throw std::runtime_error("tbb: lost jobs");
    });
    bench::record(chosen, "tbb", "empty_jobs_from_worker", param, threads, from_worker, jobs);

    // An arena made, given one task to run and wait for, and destroyed (magpie.cpp's peer).
    // oneTBB's worker threads live in a process-wide pool that outlives its arenas, so this
    // makes no thread: the peer of a scheduler's lifecycle that magpie and Taskflow pay.
    const int cycles = chosen.quick ? 50 : 200;
    auto lifecycle = bench::time_runs(chosen.runs, [&] {
      for (int cycle = 0; cycle < cycles; ++cycle) {
        tbb::task_arena own(static_cast<int>(threads));
        own.execute([] {
          tbb::task_group group;
          group.run([] {});
          group.wait();
        });
      }
    });
    bench::record(chosen, "tbb", "scheduler_lifecycle", std::to_string(cycles), threads, lifecycle,
                  static_cast<std::uint64_t>(cycles));

    if (threads == 1) continue;

    std::vector<double> idle_cpu;
    for (int run = 0; run < chosen.runs; ++run) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // TBB workers spin a while before sleeping
      double before = bench::process_cpu_seconds();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      idle_cpu.push_back(bench::process_cpu_seconds() - before);
    }
    bench::record(chosen, "tbb", "idle_cpu_100ms", "cpu_s", threads, idle_cpu, 0);

    std::vector<double> latencies;
    for (int sample = 0; sample < (chosen.quick ? 50 : 200); ++sample) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      bench::padded_atomic<std::int64_t> ran_at{0};
      auto launched = std::chrono::steady_clock::now().time_since_epoch().count();
      arena.enqueue([&ran_at] {
        ran_at.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);  // release: pairs with the acquire below
      });
      while (ran_at.load(std::memory_order_acquire) == 0) std::this_thread::yield();  // acquire: pairs with the task's release
      latencies.push_back(static_cast<double>(ran_at.load() - launched) * 1e-9);
    }
    bench::record(chosen, "tbb", "wake_latency_p50", "seconds", threads, {bench::percentile(latencies, 50)}, 0);
    bench::record(chosen, "tbb", "wake_latency_p99", "seconds", threads, {bench::percentile(latencies, 99)}, 0);
  }
  return 0;
}
