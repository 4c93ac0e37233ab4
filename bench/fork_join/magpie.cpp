// Fork-join workloads on magpie: task_group for fib and the task-per-child shapes
// (nqueens_board, uts, matmul_quadrants), parallel_for for the loops, parallel_reduce for
// reduce.
// "N threads" = N − 1 workers + this thread, attached as the game thread.
#include "magpie_system.h"
#include "run.h"
#include "../common/magpie_threads.h"

#include <magpie/magpie.h>

#include <stdexcept>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie fork-join benchmarks");
  bench::trace_if_asked(chosen);
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    pool.attach(magpie::named_thread::game);
    workloads::run_all<bench::magpie_system>(chosen, "magpie", threads, [](auto&& work) { work(); });
    pool.detach();
  }

  // A root task launched and waited for from an unattached `main`, as a newcomer writes it:
  // `main` retracts the root and runs its fork-join children (compare with "fib").
  const int fib_n = chosen.quick ? 27 : 30;
  const long expected = workloads::serial_fib(fib_n);
  for (unsigned threads : chosen.threads) {
    if (!workloads::row_wanted("fib_unattached")) break;
    magpie::scheduler pool(bench::magpie_options(threads));
    auto root_runs = bench::time_runs(chosen.runs, [&] {
      long result = 0;
      pool.launch("fib root", [&result, fib_n] { result = workloads::fib<bench::magpie_system>(fib_n, 2); }).wait();
      if (result != expected) throw std::runtime_error("wrong answer: fib root");
    });
    bench::record(chosen, "magpie", "fib_unattached", std::to_string(fib_n), threads, root_runs,
                  static_cast<std::uint64_t>(workloads::fib_calls(fib_n, 2)));
  }
}
