// Fork-join workloads on magpie: task_group for fib, parallel_for for the rest,
// parallel_reduce for reduce.
// "N threads" = N − 1 workers + this thread, attached as the game thread.
#include "run.h"
#include "../common/magpie_threads.h"

#include <magpie/magpie.h>

#include <functional>

namespace {

struct magpie_system {
  template <class A, class B>
  static void spawn_join(A&& a, B&& b) {
    magpie::task_group group;
    group.run(std::forward<A>(a));
    b();
    group.wait();
  }
  template <class Body>
  static void parallel_for(std::size_t n, Body&& body) {
    magpie::parallel_for(n, std::forward<Body>(body));
  }
  template <class Body>
  static void fan_out(std::size_t n, Body&& body) {
    parallel_for(n, std::forward<Body>(body));
  }
  template <class Map>
  static double parallel_reduce(std::size_t n, Map&& map) {
    return magpie::parallel_reduce(n, 0.0, std::forward<Map>(map), std::plus<>());
  }
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie fork-join benchmarks");
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    pool.attach(magpie::named_thread::game);
    workloads::run_all<magpie_system>(chosen, "magpie", threads, [](auto&& work) { work(); });
    pool.detach();
  }
}
