// The fork-join driver shared by every system's main(): sizes, timing, recording.
#pragma once

#include "../common/harness.h"
#include "workloads.h"

#include <cstdio>
#include <string>
#include <vector>

namespace workloads {

// sizes picks a workload's sizes: one for --quick, one by default, several for --sweep.
template <class T>
std::vector<T> sizes(const bench::options& chosen, T quick, T usual, std::vector<T> sweep) {
  if (chosen.quick) return {quick};
  if (chosen.sweep) return sweep;
  return {usual};
}

// growth_guard skips the sizes of a sweep that would take too long on this system: it
// predicts a run's time from the previous size's median, scaled by the work.
class growth_guard {
 public:
  growth_guard(const bench::options& chosen, const std::string& system, unsigned threads)
      : cap_s_(chosen.sweep_cap_s), system_(system), threads_(threads) {}

  bool worth_running(const char* workload, const std::string& param, double work) const {
    if (seconds_per_work_ * work <= cap_s_) return true;
    std::printf("%-10s %-22s %-12s threads=%-3u skipped: predicted %.2g s a run (--sweep-cap %g)\n",
                system_.c_str(), workload, param.c_str(), threads_, seconds_per_work_ * work, cap_s_);
    return false;
  }
  void ran(const std::vector<double>& seconds, double work) { seconds_per_work_ = bench::percentile(seconds, 50) / work; }

 private:
  double cap_s_;
  std::string system_;
  unsigned threads_;
  double seconds_per_work_ = 0.0;
};

// run_all measures every workload on system S under `threads`; `in_context(f)` runs f
// where S's threads are set up (an arena, an attached thread, a driver task, …). A
// workload of more than `task_cap` tasks is skipped (GCC's libgomp, one locked queue).
template <class S, class InContext>
void run_all(const bench::options& chosen, const std::string& system, unsigned threads, InContext in_context,
             double task_cap = 1e18) {
  const auto fib_sizes = sizes(chosen, 27, 30, {30, 32, 35});
  const auto leaf_counts = sizes<std::uint64_t>(chosen, 1'000'000, 10'000'000, {1'000'000, 10'000'000, 100'000'000});
  const auto queen_counts = sizes(chosen, 10, 12, {12, 13, 14});
  const auto matrix_sizes = sizes<std::size_t>(chosen, 256, 512, {512, 1024, 2048});
  const std::size_t width = chosen.quick ? 512 : 1024;
  const std::size_t terms = chosen.quick ? (1u << 21) : (1u << 23);
  in_context([&] {
    growth_guard fib_guard(chosen, system, threads);
    for (int fib_n : fib_sizes) {
      double calls = fib_calls(fib_n, 2);
      if (calls > task_cap || !fib_guard.worth_running("fib", std::to_string(fib_n), calls)) continue;
      long expected_fib = serial_fib(fib_n);
      auto fib_runs = bench::time_runs(chosen.runs, [&] { check(fib<S>(fib_n, 2) == expected_fib, "fib"); });
      bench::record(chosen, system, "fib", std::to_string(fib_n), threads, fib_runs, static_cast<std::uint64_t>(calls));
      fib_guard.ran(fib_runs, calls);
    }
    // The cut-off's target is a ratio to serial, so each system also times serial_fib
    // alternately with its own runs, in its own process: the serial system's runs, minutes
    // away, may fall in another of a shared host's speed spells.
    const int cut_n = fib_sizes.front() + 4;
    long expected_cut = serial_fib(cut_n);
    std::vector<double> cut_runs;
    auto over_serial = bench::time_pairs(
        3 * chosen.runs, [&] { check(serial_fib(cut_n) == expected_cut, "serial fib"); },
        [&] { check(fib<S>(cut_n, 12) == expected_cut, "fib cut-off"); }, cut_runs);
    bench::record(chosen, system, "fib_cutoff_12", std::to_string(cut_n), threads, cut_runs, 0);
    bench::record(chosen, system, "fib_cutoff_over_serial", std::to_string(cut_n), threads, over_serial, 0,
                  "ratio");

    growth_guard skynet_guard(chosen, system, threads);
    for (std::uint64_t leaves : leaf_counts) {
      double tasks = static_cast<double>(leaves + leaves / 9);
      if (tasks > task_cap || !skynet_guard.worth_running("skynet", std::to_string(leaves), tasks)) continue;
      auto skynet_runs = bench::time_runs(chosen.runs, [&] {
        check(skynet<S>(0, leaves) == leaves * (leaves - 1) / 2, "skynet");
      });
      bench::record(chosen, system, "skynet", std::to_string(leaves), threads, skynet_runs, leaves + leaves / 9);
      skynet_guard.ran(skynet_runs, tasks);
    }

    growth_guard queens_guard(chosen, system, threads);
    for (int queens : queen_counts) {
      auto work = static_cast<double>(nqueens_answer(queens));  // the search grows with the solutions
      if (!queens_guard.worth_running("nqueens", std::to_string(queens), work)) continue;
      auto queen_runs = bench::time_runs(chosen.runs, [&] { check(nqueens<S>({}, queens) == nqueens_answer(queens), "nqueens"); });
      bench::record(chosen, system, "nqueens", std::to_string(queens), threads, queen_runs, 0);
      queens_guard.ran(queen_runs, work);
    }

    growth_guard matmul_guard(chosen, system, threads);
    for (std::size_t n : matrix_sizes) {
      double work = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      if (!matmul_guard.worth_running("matmul", std::to_string(n), work)) continue;
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
      matmul_guard.ran(matmul_runs, work);
    }

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
