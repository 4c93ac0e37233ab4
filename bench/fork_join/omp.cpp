// Fork-join workloads on OpenMP tasks: `task` + `taskwait` for fib, skynet, nqueens and the
// task-per-child shapes, `taskloop` for the loops (matmul, mandelbrot; with a reduction for
// reduce). Peer of bench/fork_join/magpie.cpp.
//
// Built with clang++ and LLVM's libomp (system "omp-libomp") where bench/meson.build finds
// them, else with the project compiler's -fopenmp (GCC: libgomp, system "omp-libgomp"),
// whose tasks go through one locked queue — there the workloads of more than 2 M tasks are
// skipped (skynet 10^8 takes about a minute on it).
//
// "N threads" = a parallel region of N threads; one of them (`single`) runs the workload
// and the others take its tasks, which is where OpenMP's calling thread stands.
#include "run.h"

#include <omp.h>

#include <type_traits>

#ifndef BENCH_OMP_SYSTEM
#define BENCH_OMP_SYSTEM "omp-libgomp"
#endif

namespace {

struct omp_system {
  // group: a task per run() holding its own copy of the body; taskwait joins the
  // enclosing task's children, which are exactly the group's (one group per call).
  struct group {
    template <class F>
    void run(F&& body) {
      std::decay_t<F> task_body(std::forward<F>(body));
#pragma omp task firstprivate(task_body)
      task_body();
    }
    void wait() {
#pragma omp taskwait
    }
  };
  template <class A, class B>
  static void spawn_join(A&& a, B&& b) {
#pragma omp task default(shared)
    a();
    b();
#pragma omp taskwait
  }
  template <class Body>
  static void fan_out(std::size_t n, Body&& body) {
    for (std::size_t i = 1; i < n; ++i) {
#pragma omp task default(shared) firstprivate(i)
      body(i);
    }
    body(0);  // the parent works too, as the other systems' joins do
#pragma omp taskwait
  }
  template <class Body>
  static void parallel_for(std::size_t n, Body&& body) {
#pragma omp taskloop default(shared)
    for (std::size_t i = 0; i < n; ++i) body(i);
  }
  template <class Map>
  static double parallel_reduce(std::size_t n, Map&& map) {
    double sum = 0.0;
#pragma omp taskloop default(shared) reduction(+ : sum)
    for (std::size_t i = 0; i < n; ++i) sum += map(i);
    return sum;
  }
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "OpenMP fork-join benchmarks");
  const std::string system = BENCH_OMP_SYSTEM;
  const double task_cap = system == "omp-libgomp" ? 2e6 : 1e18;
  for (unsigned threads : chosen.threads) {
    workloads::run_all<omp_system>(chosen, system, threads, [threads](auto&& work) {
#pragma omp parallel num_threads(static_cast<int>(threads))
#pragma omp single
      work();
    }, task_cap);
  }
}
