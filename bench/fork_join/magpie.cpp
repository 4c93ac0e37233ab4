// Fork-join workloads on magpie: task_group for fib, parallel_for for the rest,
// parallel_reduce for reduce.
// "N threads" = N − 1 workers + this thread, attached as the game thread.
#include "run.h"
#include "../common/magpie_threads.h"

#include <magpie/magpie.h>

#include <functional>
#include <stdexcept>

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

  // A root task launched and waited for from an unattached `main`, as a newcomer writes it:
  // `main` retracts the root and runs its fork-join children (compare with "fib").
  const int fib_n = chosen.quick ? 27 : 30;
  const long expected = workloads::serial_fib(fib_n);
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    auto root_runs = bench::time_runs(chosen.runs, [&] {
      long result = 0;
      pool.launch("fib root", [&result, fib_n] { result = workloads::fib<magpie_system>(fib_n, 2); }).wait();
      if (result != expected) throw std::runtime_error("wrong answer: fib root");
    });
    bench::record(chosen, "magpie", "fib_unattached", std::to_string(fib_n), threads, root_runs,
                  static_cast<std::uint64_t>(workloads::fib_calls(fib_n, 2)));
  }
}
