// The fork-join driver shared by every system's main(): sizes, timing, recording.
#pragma once

#include "../common/harness.h"
#include "workloads.h"

namespace workloads {

// run_all measures every workload on system S under `threads`; `in_context(f)` runs f
// where S's threads are set up (an arena, an attached thread, a driver task, …). A
// workload of more than `task_cap` tasks is skipped (GCC's libgomp, one locked queue).
template <class S, class InContext>
void run_all(const bench::options& chosen, const std::string& system, unsigned threads, InContext in_context,
             double task_cap = 1e18) {
  const int fib_n = chosen.quick ? 27 : 30;
  const std::uint64_t leaves = chosen.quick ? 1'000'000 : 10'000'000;
  const int queens = chosen.quick ? 10 : 12;
  const std::size_t n = chosen.quick ? 256 : 512;
  const std::size_t width = chosen.quick ? 512 : 1024;
  const std::size_t terms = chosen.quick ? (1u << 21) : (1u << 23);
  in_context([&] {
    long expected_fib = serial_fib(fib_n);
    if (fib_calls(fib_n, 2) <= task_cap) {
      auto fib_runs = bench::time_runs(chosen.runs, [&] { check(fib<S>(fib_n, 2) == expected_fib, "fib"); });
      bench::record(chosen, system, "fib", std::to_string(fib_n), threads, fib_runs,
                    static_cast<std::uint64_t>(fib_calls(fib_n, 2)));
    }
    const int cut_n = fib_n + 4;
    long expected_cut = serial_fib(cut_n);
    auto cut_runs = bench::time_runs(chosen.runs, [&] { check(fib<S>(cut_n, 12) == expected_cut, "fib cut-off"); });
    bench::record(chosen, system, "fib_cutoff_12", std::to_string(cut_n), threads, cut_runs, 0);

    if (static_cast<double>(leaves + leaves / 9) <= task_cap) {
      auto skynet_runs = bench::time_runs(chosen.runs, [&] {
        check(skynet<S>(0, leaves) == leaves * (leaves - 1) / 2, "skynet");
      });
      bench::record(chosen, system, "skynet", std::to_string(leaves), threads, skynet_runs, leaves + leaves / 9);
    }

    auto queen_runs = bench::time_runs(chosen.runs, [&] { check(nqueens<S>({}, queens) == nqueens_answer(queens), "nqueens"); });
    bench::record(chosen, system, "nqueens", std::to_string(queens), threads, queen_runs, 0);

    std::vector<double> a(n * n), b(n * n), c(n * n);
    for (std::size_t i = 0; i < n * n; ++i) {
      a[i] = static_cast<double>(i % 7) - 3.0;
      b[i] = static_cast<double>(i % 5) - 2.0;
    }
    auto matmul_runs = bench::time_runs(chosen.runs, [&] {
      matmul<S>(a, b, c, n);
      double expected = 0.0;
      for (std::size_t k = 0; k < n; ++k) expected += a[(n / 2) * n + k] * b[k * n + n / 3];
      check(std::fabs(c[(n / 2) * n + n / 3] - expected) < 1e-9, "matmul");
    });
    bench::record(chosen, system, "matmul", std::to_string(n), threads, matmul_runs, 0);

    long expected_mandelbrot = 0;
    auto mandelbrot_runs = bench::time_runs(chosen.runs, [&] {
      long total = mandelbrot<S>(width);
      if (expected_mandelbrot == 0) expected_mandelbrot = total;  // the warm-up's answer; every run must agree
      check(total == expected_mandelbrot && total > 0, "mandelbrot");
    });
    bench::record(chosen, system, "mandelbrot", std::to_string(width), threads, mandelbrot_runs, 0);

    double expected_sum = 0.0;
    for (std::size_t i = 0; i < terms; ++i) expected_sum += reduce_term(i);
    auto reduce_runs = bench::time_runs(chosen.runs, [&] {
      double sum = reduce<S>(terms);  // summed in another order: equal to rounding
      check(std::fabs(sum - expected_sum) <= 1e-9 * std::fabs(expected_sum), "reduce");
    });
    bench::record(chosen, system, "reduce", std::to_string(terms), threads, reduce_runs, 0);
  });
}

}  // namespace workloads
