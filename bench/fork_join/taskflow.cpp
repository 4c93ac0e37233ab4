// Fork-join workloads on Taskflow v4 (header-only, from the taskflow_dir option; never
// vendored): tf::TaskGroup for fib, skynet, nqueens and the task-per-child shapes
// (Taskflow's own v4 fork-join path, not Subflow), tf::Taskflow::for_each_index for the loops (matmul, mandelbrot) and
// reduce_by_index for reduce.
// Peer of bench/fork_join/magpie.cpp and tbb.cpp.
//
// "N threads" = a tf::Executor of N workers. A TaskGroup can only be made by a worker and
// Taskflow's calling thread cannot take part, so every workload runs inside one driver
// task on a worker (executor.async(...).get()), which forks and joins with corun() — the
// analogue of magpie's attached calling thread and of oneTBB's arena.execute.
#include "run.h"

// GCC 12 at -O3 reports a false -Warray-bounds inside Taskflow's IndexRanges (a
// std::array of one dimension) once reduce_by_index is instantiated here; the headers are
// Taskflow's, so the warning is not an error of ours.
#pragma GCC diagnostic ignored "-Warray-bounds"

#include <taskflow/algorithm/for_each.hpp>
#include <taskflow/algorithm/reduce.hpp>
#include <taskflow/taskflow.hpp>

#include <pthread.h>

#include <cstddef>
#include <optional>

namespace {

tf::Executor* executor = nullptr;  // the executor of the thread count being measured

struct taskflow_system {
  struct group {
    tf::TaskGroup tasks = executor->task_group();
    template <class F>
    void run(F&& body) {
      tasks.silent_async(std::forward<F>(body));
    }
    void wait() { tasks.corun(); }
  };
  template <class A, class B>
  static void spawn_join(A&& a, B&& b) {
    tf::TaskGroup group = executor->task_group();
    group.silent_async(std::forward<A>(a));
    b();
    group.corun();
  }
  template <class Body>
  static void fan_out(std::size_t n, Body&& body) {
    tf::TaskGroup group = executor->task_group();
    for (std::size_t i = 1; i < n; ++i) group.silent_async([&body, i] { body(i); });
    body(0);  // the parent works too, as magpie's and oneTBB's joins do
    group.corun();
  }
  template <class Body>
  static void parallel_for(std::size_t n, Body&& body) {
    tf::Taskflow loop;
    loop.for_each_index(std::size_t{0}, n, std::size_t{1}, [&body](std::size_t i) { body(i); });
    executor->corun(loop);  // from the driver task: it joins by running the loop's tasks
  }
  template <class Map>
  static double parallel_reduce(std::size_t n, Map&& map) {
    double sum = 0.0;
    tf::Taskflow loop;
    loop.reduce_by_index(
        tf::IndexRange<std::size_t>(0, n, 1), sum,
        [&map](tf::IndexRange<std::size_t> range, std::optional<double> running) {
          double partial = running ? *running : 0.0;
          for (std::size_t i = range.begin(); i < range.end(); i += range.step_size()) partial += map(i);
          return partial;
        },
        std::plus<>());
    executor->corun(loop);
    return sum;
  }
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "Taskflow fork-join benchmarks");
  // A worker in corun() runs any task it finds, each inside the last one's frames, so the
  // nesting follows the work, not the tree: UTS overflows the default 8 MiB thread stack.
  // The workers (std::thread, made by the executor) get 1 GiB of address space each,
  // committed only as far as it is used.
  pthread_attr_t deep_stack;
  pthread_attr_init(&deep_stack);
  pthread_attr_setstacksize(&deep_stack, std::size_t{1} << 30);
  pthread_setattr_default_np(&deep_stack);
  pthread_attr_destroy(&deep_stack);
  for (unsigned threads : chosen.threads) {
    tf::Executor pool(threads);
    executor = &pool;
    workloads::run_all<taskflow_system>(chosen, "taskflow", threads,
                                        [&pool](auto&& work) { pool.async([&work] { work(); }).get(); });
    executor = nullptr;
  }
}
