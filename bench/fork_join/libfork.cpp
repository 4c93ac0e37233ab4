// The fork-join workloads' libfork peer: fib (and its cut-off), skynet, nqueens,
// nqueens_board, integrate, UTS and matmul_quadrants, each recursion a libfork coroutine
// (fork the children, call the last where the other peers run it inline, join), beside the
// peers that run workloads.h's code over a fork-join system. libfork's coroutines cannot
// take that system's shape (a fork is a co_await inside a coroutine, not a call), so the
// recursions are written here; the leaves, the sizes' work estimates and the checks are
// workloads.h's and uts.h's, the same as every peer's. libfork v3 from a checkout named by
// -Dlibfork_dir (never vendored). The pool is libfork's lazy_pool, whose idle workers sleep
// as magpie's do. "N threads" = a pool of N workers; the calling thread only blocks in
// sync_wait, as a magpie caller waiting on the root would.
#include "run.h"

#include <libfork.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace workloads;

// fib forks n - 1 and calls n - 2; below cut_off it runs the serial leaf.
constexpr auto fib = [](auto self, int n, int cut_off) LF_STATIC_CALL -> lf::task<long> {
  if (n < cut_off) co_return serial_fib(n);
  long a = 0;
  long b = 0;
  co_await lf::fork(&a, self)(n - 1, cut_off);
  co_await lf::call(&b, self)(n - 2, cut_off);
  co_await lf::join;
  co_return a + b;
};

// skynet forks its ten subtrees, each returning the sum of its leaves' numbers.
constexpr auto skynet = [](auto self, std::uint64_t number, std::uint64_t size) LF_STATIC_CALL
    -> lf::task<std::uint64_t> {
  if (size == 1) co_return number;
  std::array<std::uint64_t, 10> sums{};
  const std::uint64_t child = size / 10;
  for (std::size_t i = 0; i < sums.size(); ++i) co_await lf::fork(&sums[i], self)(number + i * child, child);
  co_await lf::join;
  std::uint64_t total = 0;
  for (std::uint64_t each : sums) total += each;
  co_return total;
};

// nqueens forks a task per admissible column, each given its own copy of the placed columns.
constexpr auto nqueens = [](auto self, std::vector<int> columns, int n) LF_STATIC_CALL -> lf::task<long> {
  const int row = static_cast<int>(columns.size());
  if (row == n) co_return 1;
  std::vector<long> found(static_cast<std::size_t>(n), 0);
  for (int column = 0; column < n; ++column) {
    bool fits = true;
    for (int earlier = 0; earlier < row && fits; ++earlier) {
      const int other = columns[static_cast<std::size_t>(earlier)];
      fits = other != column && other - column != earlier - row && other - column != row - earlier;
    }
    if (!fits) continue;
    std::vector<int> next = columns;
    next.push_back(column);
    co_await lf::fork(&found[static_cast<std::size_t>(column)], self)(std::move(next), n);
  }
  co_await lf::join;
  long total = 0;
  for (long each : found) total += each;
  co_return total;
};

// nqueens_board forks a task per admissible column, each with its own board by value.
constexpr auto nqueens_board = [](auto self, queens_board placed, int row, int n) LF_STATIC_CALL
    -> lf::task<long> {
  if (row == n) co_return 1;
  std::array<long, 16> found{};
  for (int column = 0; column < n; ++column) {
    if (!queen_fits(placed, row, column)) continue;
    queens_board next = placed;
    next[static_cast<std::size_t>(row)] = static_cast<char>(column);
    co_await lf::fork(&found[static_cast<std::size_t>(column)], self)(next, row + 1, n);
  }
  co_await lf::join;
  long total = 0;
  for (long each : found) total += each;
  co_return total;
};

// integrate halves [x1, x2] until the halves' sum agrees with the whole's area, forking
// the left half and calling the right.
constexpr auto integrate = [](auto self, double x1, double y1, double x2, double y2, double area) LF_STATIC_CALL
    -> lf::task<double> {
  const double half = (x2 - x1) / 2.0;
  const double x0 = x1 + half;
  const double y0 = integrand(x0);
  const double left = (y1 + y0) / 2.0 * half;
  const double right = (y0 + y2) / 2.0 * half;
  const double both = left + right;
  if (both - area < integrate_epsilon && area - both < integrate_epsilon) co_return both;
  double a = 0.0;
  double b = 0.0;
  co_await lf::fork(&a, self)(x1, y1, x0, y0, left);
  co_await lf::call(&b, self)(x0, y0, x2, y2, right);
  co_await lf::join;
  co_return a + b;
};

#ifdef FORK_JOIN_UTS
// uts counts the nodes under `node`, itself included, forking a task per child; the
// parent derives each child's state and hands it over by value. The counts live on
// libfork's cactus stack (co_new), freed when this frame returns.
constexpr auto uts = [](auto self, const uts_tree* tree, uts_node node) LF_STATIC_CALL -> lf::task<std::uint64_t> {
  const int children = uts_children(*tree, node);
  if (children == 0) co_return 1;
  auto [counts] = co_await lf::co_new<std::uint64_t>(static_cast<std::size_t>(children));
  for (int i = 0; i < children; ++i) {
    co_await lf::fork(&counts[static_cast<std::size_t>(i)], self)(tree, uts_child(node, i));
  }
  co_await lf::join;
  std::uint64_t total = 1;
  for (std::uint64_t each : counts) total += each;
  co_return total;
};
#endif

// matmul_quadrants adds A × B to C (n a power of two, row length `stride`): the four
// products of the first round forked (the last called), joined, then the second round.
constexpr auto matmul_quadrants = [](auto self, const double* a, const double* b, double* c, std::size_t n,
                                     std::size_t stride) LF_STATIC_CALL -> lf::task<void> {
  if (n <= matmul_leaf) {
    matmul_block(a, b, c, n, stride);
    co_return;
  }
  const std::size_t h = n / 2;
  auto quarter = [h, stride](auto* m, std::size_t row, std::size_t column) { return m + row * h * stride + column * h; };
  for (std::size_t k = 0; k < 2; ++k) {
    co_await lf::fork(self)(quarter(a, 0, k), quarter(b, k, 0), quarter(c, 0, 0), h, stride);
    co_await lf::fork(self)(quarter(a, 0, k), quarter(b, k, 1), quarter(c, 0, 1), h, stride);
    co_await lf::fork(self)(quarter(a, 1, k), quarter(b, k, 0), quarter(c, 1, 0), h, stride);
    co_await lf::call(self)(quarter(a, 1, k), quarter(b, k, 1), quarter(c, 1, 1), h, stride);
    co_await lf::join;
  }
};

// run_rows measures the rows above on `pool`, at run_all's sizes (bench/fork_join/run.h),
// skipping those FORK_JOIN_ONLY leaves out and, in a sweep, those predicted to run too long.
void run_rows(const bench::options& chosen, lf::lazy_pool& pool, unsigned threads) {
  const std::string system = "libfork";
  const auto fib_sizes = sizes(chosen, 27, 30, {30, 32, 35});
  const auto leaf_counts = sizes<std::uint64_t>(chosen, 1'000'000, 10'000'000, {1'000'000, 10'000'000, 100'000'000});
  const auto queen_counts = sizes(chosen, 10, 12, {12, 13, 14});
  const auto board_counts = sizes(chosen, 10, 12, {12, 13, 14});
  const auto integrate_uppers = sizes(chosen, 100, 1000, {1000, 2000, 4000});
  const std::vector<std::size_t> quadrant_sizes =
      chosen.quick ? std::vector<std::size_t>{128, 256}
                   : chosen.sweep ? std::vector<std::size_t>{128, 512, 1024} : std::vector<std::size_t>{128, 512};

  growth_guard fib_guard(chosen, system, threads);
  for (int n : fib_sizes) {
    const double calls = fib_calls(n, 2);
    if (!row_wanted("fib") || !fib_guard.worth_running("fib", std::to_string(n), calls)) continue;
    const long expected = serial_fib(n);
    auto runs = bench::time_runs(chosen.runs, [&] { check(lf::sync_wait(pool, fib, n, 2) == expected, "fib"); });
    bench::record(chosen, system, "fib", std::to_string(n), threads, runs, static_cast<std::uint64_t>(calls));
    fib_guard.ran(runs, calls);
  }
  // The cut-off row and its ratio to serial_fib, timed alternately in this process as the
  // other peers do.
  if (row_wanted("fib_cutoff_12")) {
    const int cut_n = fib_sizes.front() + 4;
    const long expected = serial_fib(cut_n);
    std::vector<double> cut_runs;
    auto over_serial = bench::time_pairs(
        3 * chosen.runs, [&] { check(serial_fib(cut_n) == expected, "serial fib"); },
        [&] { check(lf::sync_wait(pool, fib, cut_n, 12) == expected, "fib cut-off"); }, cut_runs);
    bench::record(chosen, system, "fib_cutoff_12", std::to_string(cut_n), threads, cut_runs, 0);
    bench::record(chosen, system, "fib_cutoff_over_serial", std::to_string(cut_n), threads, over_serial, 0, "ratio");
  }

  growth_guard skynet_guard(chosen, system, threads);
  for (std::uint64_t leaves : leaf_counts) {
    const double tasks = static_cast<double>(leaves + leaves / 9);
    if (!row_wanted("skynet") || !skynet_guard.worth_running("skynet", std::to_string(leaves), tasks)) continue;
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(lf::sync_wait(pool, skynet, std::uint64_t{0}, leaves) == leaves * (leaves - 1) / 2, "skynet");
    });
    bench::record(chosen, system, "skynet", std::to_string(leaves), threads, runs, leaves + leaves / 9);
    skynet_guard.ran(runs, tasks);
  }

  growth_guard queens_guard(chosen, system, threads);
  for (int queens : queen_counts) {
    const auto work = static_cast<double>(nqueens_answer(queens));
    if (!row_wanted("nqueens") || !queens_guard.worth_running("nqueens", std::to_string(queens), work)) continue;
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(lf::sync_wait(pool, nqueens, std::vector<int>{}, queens) == nqueens_answer(queens), "nqueens");
    });
    bench::record(chosen, system, "nqueens", std::to_string(queens), threads, runs, 0);
    queens_guard.ran(runs, work);
  }

  growth_guard board_guard(chosen, system, threads);
  for (int queens : board_counts) {
    const auto work = static_cast<double>(nqueens_answer(queens));
    if (!row_wanted("nqueens_board") || !board_guard.worth_running("nqueens_board", std::to_string(queens), work)) {
      continue;
    }
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(lf::sync_wait(pool, nqueens_board, queens_board{}, 0, queens) == nqueens_answer(queens), "nqueens_board");
    });
    bench::record(chosen, system, "nqueens_board", std::to_string(queens), threads, runs, 0);
    board_guard.ran(runs, work);
  }

  growth_guard integrate_guard(chosen, system, threads);
  for (int upper : integrate_uppers) {
    if (!row_wanted("integrate")) break;
    const double x = upper;
    const double bottom = integrand(0.0);
    const double top = integrand(x);
    const double calls = integrate_calls(0.0, bottom, x, top, (bottom + top) / 2.0 * x);
    if (!integrate_guard.worth_running("integrate", std::to_string(upper), calls)) continue;
    const double exact = integrand_integral(x);
    auto runs = bench::time_runs(chosen.runs, [&] {
      const double area = lf::sync_wait(pool, integrate, 0.0, bottom, x, top, (bottom + top) / 2.0 * x);
      check(std::fabs(area - exact) <= 1e-9 * exact, "integrate");
    });
    bench::record(chosen, system, "integrate", std::to_string(upper), threads, runs, static_cast<std::uint64_t>(calls));
    integrate_guard.ran(runs, calls);
  }

#ifdef FORK_JOIN_UTS
  for (const uts_tree& tree : {uts_t1, uts_t3}) {
    if (!row_wanted("uts")) continue;
    const uts_node root = uts_root(tree);
    auto runs = bench::time_runs(chosen.runs, [&] {
      check(lf::sync_wait(pool, uts, &tree, root) == tree.published_nodes, std::string("uts ") + tree.name);
    });
    bench::record(chosen, system, "uts", tree.name, threads, runs, tree.published_nodes);
  }
#endif

  growth_guard quadrant_guard(chosen, system, threads);
  for (std::size_t n : quadrant_sizes) {
    const double work = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    if (!row_wanted("matmul_quadrants") || !quadrant_guard.worth_running("matmul_quadrants", std::to_string(n), work)) {
      continue;
    }
    // Small integers, as in run.h: every product and sum is exact, so the check compares exactly.
    std::vector<double> a(n * n), b(n * n), c(n * n);
    for (std::size_t i = 0; i < n * n; ++i) {
      a[i] = static_cast<double>(i % 7) - 3.0;
      b[i] = static_cast<double>(i % 5) - 2.0;
    }
    auto runs = bench::time_runs(chosen.runs, [&] {
      std::fill(c.begin(), c.end(), 0.0);
      lf::sync_wait(pool, matmul_quadrants, static_cast<const double*>(a.data()), static_cast<const double*>(b.data()),
                    c.data(), n, n);
      for (std::size_t probe = 0; probe < 16; ++probe) {
        const std::size_t i = (probe * 37) % n;
        const std::size_t j = (probe * 101 + 3) % n;
        double expected = 0.0;
        for (std::size_t k = 0; k < n; ++k) expected += a[i * n + k] * b[k * n + j];
        check(c[i * n + j] == expected, "matmul_quadrants");
      }
    });
    bench::record(chosen, system, "matmul_quadrants", std::to_string(n), threads, runs, 0);
    quadrant_guard.ran(runs, work);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "libfork fork-join benchmarks");
  for (unsigned threads : chosen.threads) {
    lf::lazy_pool pool(threads);
    run_rows(chosen, pool, threads);
  }
}
