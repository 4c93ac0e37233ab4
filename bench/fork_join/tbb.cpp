// Fork-join workloads on oneTBB: task_group for fib and the task-per-child shapes,
// parallel_for for the loops (and parallel_reduce for reduce), in an arena of N threads. Peer of bench/fork_join/magpie.cpp.
#include "run.h"

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

namespace {

struct tbb_system {
  using group = oneapi::tbb::task_group;
  template <class A, class B>
  static void spawn_join(A&& a, B&& b) {
    oneapi::tbb::task_group group;
    group.run(std::forward<A>(a));
    b();
    group.wait();
  }
  template <class Body>
  static void parallel_for(std::size_t n, Body&& body) {
    oneapi::tbb::parallel_for(std::size_t{0}, n, [&body](std::size_t i) { body(i); });
  }
  template <class Body>
  static void fan_out(std::size_t n, Body&& body) {
    parallel_for(n, std::forward<Body>(body));
  }
  template <class Map>
  static double parallel_reduce(std::size_t n, Map&& map) {
    return oneapi::tbb::parallel_reduce(
        oneapi::tbb::blocked_range<std::size_t>(0, n), 0.0,
        [&map](const oneapi::tbb::blocked_range<std::size_t>& range, double sum) {
          for (std::size_t i = range.begin(); i < range.end(); ++i) sum += map(i);
          return sum;
        },
        std::plus<>());
  }
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "oneTBB fork-join benchmarks");
  for (unsigned threads : chosen.threads) {
    oneapi::tbb::task_arena arena(static_cast<int>(threads));
    workloads::run_all<tbb_system>(chosen, "tbb", threads, [&arena](auto&& work) { arena.execute(work); });
  }
}
