// The fork-join driver shared by every system's main(): sizes, timing, recording.
#pragma once

#include "../common/harness.h"
#ifdef FORK_JOIN_UTS
#include "uts.h"
#endif
#include "workloads.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace workloads {

// sizes picks a workload's sizes: one for --quick, one by default, several for --sweep.
template <class T>
std::vector<T> sizes(const bench::options& chosen, T quick, T usual, std::vector<T> sweep) {
  if (chosen.quick) return {quick};
  if (chosen.sweep) return sweep;
  return {usual};
}

// row_wanted says whether to measure `workload`: every one, unless the environment
// variable FORK_JOIN_ONLY names the workloads to measure, separated by commas (a profile of
// one row, a quick look at one shape on a busy host, the rows of tools/scaling.sh).
inline bool row_wanted(const char* workload) {
  const char* only = std::getenv("FORK_JOIN_ONLY");
  if (only == nullptr || *only == '\0') return true;
  const std::string names = std::string(",") + only + ",";
  return names.find(std::string(",") + workload + ",") != std::string::npos;
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

// run_shapes measures the fork-join shapes of other projects' suites: nqueens with a
// board copy per task, adaptive quadrature, unbalanced tree search, divide-and-conquer
// matmul. Each checks its own answer.
template <class S>
void run_shapes(const bench::options& chosen, const std::string& system, unsigned threads,
                const std::vector<int>& board_counts, const std::vector<int>& integrate_uppers,
                const std::vector<std::size_t>& quadrant_sizes, double task_cap) {
  growth_guard board_guard(chosen, system, threads);
  for (int queens : board_counts) {
    auto work = static_cast<double>(nqueens_answer(queens));
    if (!row_wanted("nqueens_board") || !board_guard.worth_running("nqueens_board", std::to_string(queens), work)) continue;
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(nqueens_board<S>(queens_board{}, 0, queens) == nqueens_answer(queens), "nqueens_board");
    });
    bench::record(chosen, system, "nqueens_board", std::to_string(queens), threads, runs, 0);
    board_guard.ran(runs, work);
  }

  growth_guard integrate_guard(chosen, system, threads);
  for (int upper : integrate_uppers) {
    const double x = upper;
    if (!row_wanted("integrate")) break;
    const double calls = integrate_calls(0.0, integrand(0.0), x, integrand(x), (integrand(0.0) + integrand(x)) / 2.0 * x);
    if (calls > task_cap || !integrate_guard.worth_running("integrate", std::to_string(upper), calls)) continue;
    const double exact = integrand_integral(x);
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(std::fabs(integrate_over<S>(x) - exact) <= 1e-9 * exact, "integrate");
    });
    bench::record(chosen, system, "integrate", std::to_string(upper), threads, runs, static_cast<std::uint64_t>(calls));
    integrate_guard.ran(runs, calls);
  }

#ifdef FORK_JOIN_UTS
  for (const uts_tree& tree : {uts_t1, uts_t3}) {
    if (!row_wanted("uts") || static_cast<double>(tree.published_nodes) > task_cap) continue;
    const uts_node root = uts_root(tree);
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(uts<S>(tree, root) == tree.published_nodes, std::string("uts ") + tree.name);
    });
    bench::record(chosen, system, "uts", tree.name, threads, runs, tree.published_nodes);
  }
#endif

  growth_guard quadrant_guard(chosen, system, threads);
  for (std::size_t n : quadrant_sizes) {
    double work = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    if (!row_wanted("matmul_quadrants") || !quadrant_guard.worth_running("matmul_quadrants", std::to_string(n), work)) continue;
    // Small integers: every product and sum is exact, so the check compares exactly.
    std::vector<double> a(n * n), b(n * n), c(n * n);
    for (std::size_t i = 0; i < n * n; ++i) {
      a[i] = static_cast<double>(i % 7) - 3.0;
      b[i] = static_cast<double>(i % 5) - 2.0;
    }
    auto runs = bench::time_runs(chosen.runs, [&] {
      std::fill(c.begin(), c.end(), 0.0);
      matmul_quadrants<S>(a.data(), b.data(), c.data(), n, n);
      for (std::size_t probe = 0; probe < 16; ++probe) {
        std::size_t i = (probe * 37) % n;
        std::size_t j = (probe * 101 + 3) % n;
        double expected = 0.0;
        for (std::size_t k = 0; k < n; ++k) expected += a[i * n + k] * b[k * n + j];
        check(c[i * n + j] == expected, "matmul_quadrants");
      }
    });
    bench::record(chosen, system, "matmul_quadrants", std::to_string(n), threads, runs, 0);
    quadrant_guard.ran(runs, work);
  }
}

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
  const auto board_counts = sizes(chosen, 10, 12, {12, 13, 14});
  const auto integrate_uppers = sizes(chosen, 100, 1000, {1000, 2000, 4000});  // ~8·10^5 to ~10^8 calls
  const std::vector<std::size_t> quadrant_sizes =
      chosen.quick ? std::vector<std::size_t>{128, 256}
                   : chosen.sweep ? std::vector<std::size_t>{128, 512, 1024} : std::vector<std::size_t>{128, 512};
  in_context([&] {
    growth_guard fib_guard(chosen, system, threads);
    for (int fib_n : fib_sizes) {
      double calls = fib_calls(fib_n, 2);
      if (!row_wanted("fib") || calls > task_cap || !fib_guard.worth_running("fib", std::to_string(fib_n), calls)) continue;
      long expected_fib = serial_fib(fib_n);
      auto fib_runs = bench::time_runs(chosen.runs, [&] { check(fib<S>(fib_n, 2) == expected_fib, "fib"); });
      bench::record(chosen, system, "fib", std::to_string(fib_n), threads, fib_runs, static_cast<std::uint64_t>(calls));
      fib_guard.ran(fib_runs, calls);
    }
    // The cut-off's target is a ratio to serial, so each system also times serial_fib
    // alternately with its own runs, in its own process: the serial system's runs, minutes
    // away, may fall in another of a shared host's speed spells.
    const int cut_n = fib_sizes.front() + 4;
    if (row_wanted("fib_cutoff_12")) {
      long expected_cut = serial_fib(cut_n);
      std::vector<double> cut_runs;
      auto over_serial = bench::time_pairs(
          3 * chosen.runs, [&] { check(serial_fib(cut_n) == expected_cut, "serial fib"); },
          [&] { check(fib<S>(cut_n, 12) == expected_cut, "fib cut-off"); }, cut_runs);
      bench::record(chosen, system, "fib_cutoff_12", std::to_string(cut_n), threads, cut_runs, 0);
      bench::record(chosen, system, "fib_cutoff_over_serial", std::to_string(cut_n), threads, over_serial, 0,
                    "ratio");
    }

    growth_guard skynet_guard(chosen, system, threads);
    for (std::uint64_t leaves : leaf_counts) {
      double tasks = static_cast<double>(leaves + leaves / 9);
      if (!row_wanted("skynet") || tasks > task_cap ||
          !skynet_guard.worth_running("skynet", std::to_string(leaves), tasks)) {
        continue;
      }
      auto skynet_runs = bench::time_runs(chosen.runs, [&] {
        check(skynet<S>(0, leaves) == leaves * (leaves - 1) / 2, "skynet");
      });
      bench::record(chosen, system, "skynet", std::to_string(leaves), threads, skynet_runs, leaves + leaves / 9);
      skynet_guard.ran(skynet_runs, tasks);
    }

    growth_guard queens_guard(chosen, system, threads);
    for (int queens : queen_counts) {
      auto work = static_cast<double>(nqueens_answer(queens));  // the search grows with the solutions
      if (!row_wanted("nqueens") || !queens_guard.worth_running("nqueens", std::to_string(queens), work)) continue;
      auto queen_runs = bench::time_runs(chosen.runs, [&] { check(nqueens<S>({}, queens) == nqueens_answer(queens), "nqueens"); });
      bench::record(chosen, system, "nqueens", std::to_string(queens), threads, queen_runs, 0);
      queens_guard.ran(queen_runs, work);
    }

    growth_guard matmul_guard(chosen, system, threads);
    for (std::size_t n : matrix_sizes) {
      double work = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      if (!row_wanted("matmul") || !matmul_guard.worth_running("matmul", std::to_string(n), work)) continue;
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

    if (row_wanted("mandelbrot")) {
      long expected_mandelbrot = 0;
      auto mandelbrot_runs = bench::time_runs(chosen.runs, [&] {
        long total = mandelbrot<S>(width);
        if (expected_mandelbrot == 0) expected_mandelbrot = total;  // the warm-up's answer; every run must agree
        check(total == expected_mandelbrot && total > 0, "mandelbrot");
      });
      bench::record(chosen, system, "mandelbrot", std::to_string(width), threads, mandelbrot_runs, 0);
    }

    if (row_wanted("reduce")) {
      double expected_sum = 0.0;
      for (std::size_t i = 0; i < terms; ++i) expected_sum += reduce_term(i);
      auto reduce_runs = bench::time_runs(chosen.runs, [&] {
        double sum = reduce<S>(terms);  // summed in another order: equal to rounding
        check(std::fabs(sum - expected_sum) <= 1e-9 * std::fabs(expected_sum), "reduce");
      });
      bench::record(chosen, system, "reduce", std::to_string(terms), threads, reduce_runs, 0);
    }

    // The cost of the skewed loops gathers at one end of the range: 1,000 of 100,000
    // iterations, about 16 µs each (a fifth of that in the quick sizes).
    const std::size_t skewed_count = 100'000;
    const std::size_t skewed_steps = chosen.quick ? 3'200 : 16'000;
    for (const auto& [row_name, costly_start] : {std::pair<const char*, std::size_t>{"skewed_head", 0},
                                                 std::pair<const char*, std::size_t>{"skewed_tail", skewed_count - skewed_count / 100}}) {
      const char* row = row_name;  // a copy: C++20 lambdas cannot capture structured bindings
      const std::size_t costly_from = costly_start;
      if (!row_wanted(row)) continue;
      double expected_skewed = 0.0;
      for (std::size_t i = costly_from; i < costly_from + skewed_count / 100; ++i) expected_skewed += skewed_term(i, skewed_steps);
      auto skewed_runs = bench::time_runs(chosen.runs, [&] {
        check(skewed_loop<S>(skewed_count, costly_from, skewed_steps) == expected_skewed, row);
      });
      bench::record(chosen, system, row, std::to_string(skewed_count), threads, skewed_runs, 0);
    }

    run_shapes<S>(chosen, system, threads, board_counts, integrate_uppers, quadrant_sizes, task_cap);
  });
}

}  // namespace workloads
