// Fork-join workloads run serially (noinline baselines): the floor the overheads are
// measured against. Recorded at 1 thread only.
#include "run.h"

namespace {

struct serial_system {
  // group runs each task where it is forked.
  struct group {
    template <class F>
    void run(F&& body) {
      body();
    }
    void wait() {}
  };
  template <class A, class B>
  static void spawn_join(A&& a, B&& b) {
    a();
    b();
  }
  template <class Body>
  static void parallel_for(std::size_t n, Body&& body) {
    for (std::size_t i = 0; i < n; ++i) body(i);
  }
  template <class Body>
  static void fan_out(std::size_t n, Body&& body) {
    parallel_for(n, std::forward<Body>(body));
  }
  template <class Map>
  static double parallel_reduce(std::size_t n, Map&& map) {
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += map(i);
    return sum;
  }
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "serial fork-join baselines");
  workloads::run_all<serial_system>(chosen, "serial", 1, [](auto&& work) { work(); });
}
