// magpie's side of the fork-join workloads (bench/fork_join/workloads.h): task_group for
// spawn-join and the task-per-child shapes, parallel_for for the loops, parallel_reduce for reduce. Shared by
// bench/fork_join/magpie.cpp and bench/per_task/magpie.cpp.
#pragma once

#include <magpie/magpie.h>

#include <functional>
#include <utility>

namespace bench {

struct magpie_system {
  using group = magpie::task_group;
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

}  // namespace bench
