// Task-model workloads on OpenMP tasks: empty tasks one at a time (`task` + `taskwait`)
// and in a batch, launch-wait latency, 10k tasks behind one gate task (depend clauses)
// and a linear chain (depend(inout:) on one variable). Built with clang++ and libomp
// where available (see bench/meson.build). Peer of bench/tasks/magpie.cpp.
//
// "N threads" = a parallel region of N threads, one of which (`single`) launches. OpenMP
// starts a task as soon as its dependences are met, so the chain cannot be built first and
// run later: only linear_chain_build_run is reported.
#include "../common/harness.h"

#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#ifndef BENCH_OMP_SYSTEM
#define BENCH_OMP_SYSTEM "omp-libgomp"
#endif

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

// in_region runs `body` on one thread of a parallel region of `threads` threads.
template <class Body>
void in_region(unsigned threads, Body&& body) {
#pragma omp parallel num_threads(static_cast<int>(threads))
#pragma omp single
  body();
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "OpenMP task-model benchmarks");
  const std::string system = BENCH_OMP_SYSTEM;
  const std::size_t singles = chosen.quick ? (1u << 16) : (1u << 18);
  const std::size_t batch = chosen.quick ? (1u << 17) : (1u << 20);
  const std::size_t chain = chosen.quick ? (1u << 16) : (1u << 20);
  const std::size_t spawned = 10'000;
  for (unsigned threads : chosen.threads) {
    auto one_at_a_time = bench::time_runs(chosen.runs, [&] {
      std::size_t sum = 0;
      in_region(threads, [&] {
        for (std::size_t i = 0; i < singles; ++i) {
          std::size_t value = 0;
#pragma omp task shared(value) firstprivate(i)
          value = i;
#pragma omp taskwait
          sum += value;
        }
      });
      check(sum == singles * (singles - 1) / 2, "one at a time");
    });
    bench::record(chosen, system, "task_empty_one_at_a_time", std::to_string(singles), threads, one_at_a_time, singles);

    auto batched = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      in_region(threads, [&] {
        for (std::size_t i = 0; i < batch; ++i) {
#pragma omp task shared(ran)
          ran.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the taskwait
        }
#pragma omp taskwait
      });
      check(ran.load() == batch, "batch");
    });
    bench::record(chosen, system, "task_empty_batch", std::to_string(batch), threads, batched, batch);

    std::vector<double> latencies;
    latencies.reserve(1000);
    in_region(threads, [&] {
      for (int sample = 0; sample < 1000; ++sample) {
        auto start = std::chrono::steady_clock::now();
#pragma omp task
        {
        }
#pragma omp taskwait
        latencies.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    });
    bench::record(chosen, system, "task_latency_p50", "1000", threads, {bench::percentile(latencies, 50)}, 0);
    bench::record(chosen, system, "task_latency_p99", "1000", threads, {bench::percentile(latencies, 99)}, 0);

    auto batch_spawn = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      in_region(threads, [&] {
        int gate = 0;
#pragma omp task depend(out : gate) shared(gate)
        gate = 1;
        for (std::size_t i = 0; i < spawned; ++i) {
#pragma omp task depend(in : gate) shared(ran)
          ran.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the taskwait
        }
#pragma omp taskwait
      });
      check(ran.load() == spawned, "batch spawn");
    });
    bench::record(chosen, system, "batch_spawn", std::to_string(spawned), threads, batch_spawn, spawned);

    auto build_and_run = bench::time_runs(chosen.runs, [&] {
      std::size_t hops = 0;  // each hop runs after the one before it: no race
      in_region(threads, [&] {
        for (std::size_t i = 0; i < chain; ++i) {
#pragma omp task depend(inout : hops) shared(hops)
          ++hops;
        }
#pragma omp taskwait
      });
      check(hops == chain, "chain");
    });
    bench::record(chosen, system, "linear_chain_build_run", std::to_string(chain), threads, build_and_run, chain);
  }
}
