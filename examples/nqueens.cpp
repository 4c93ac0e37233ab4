// N-queens: count the placements of n queens on an n×n board, one task per choice near
// the root of the search; checked against the serial search and the known counts.
//
//   examples/nqueens 11 --threads 2
#include "example_options.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int max_n = 16;

bool safe(const std::array<int, max_n>& columns, int row, int column) {
  for (int earlier = 0; earlier < row; ++earlier) {
    int other = columns[static_cast<std::size_t>(earlier)];
    if (other == column || other - column == earlier - row || other - column == row - earlier) return false;
  }
  return true;
}

long serial_count(std::array<int, max_n> columns, int row, int n) {
  if (row == n) return 1;
  long total = 0;
  for (int column = 0; column < n; ++column) {
    if (!safe(columns, row, column)) continue;
    columns[static_cast<std::size_t>(row)] = column;
    total += serial_count(columns, row + 1, n);
  }
  return total;
}

long parallel_count(std::array<int, max_n> columns, int row, int n) {
  // Tasks for the first three rows only; a board of fewer rows is complete before that.
  if (row >= 3 || row == n) return serial_count(columns, row, n);
  std::atomic<long> total{0};
  magpie::task_group group;
  for (int column = 0; column < n; ++column) {
    if (!safe(columns, row, column)) continue;
    columns[static_cast<std::size_t>(row)] = column;
    group.run([columns, row, n, &total] { total.fetch_add(parallel_count(columns, row + 1, n)); });
  }
  group.wait();
  return total.load();
}

}  // namespace

int main(int argc, char** argv) {
  int n = 11;
  unsigned threads = example::default_threads();
  CLI::App app{"count the n-queens placements, checked against the serial search"};
  app.add_option("n", n, "board size (default 11)")->check(CLI::Range(1, max_n));
  example::add_threads_option(app, threads);
  CLI11_PARSE(app, argc, argv);
  auto pool = example::make_scheduler(threads);

  constexpr long known[] = {0, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512};
  auto [solutions, parallel_seconds] =
      example::timed([&] { return example::run_on(*pool, [n] { return parallel_count({}, 0, n); }); });
  auto [expected, serial_seconds] = example::timed([&] { return serial_count({}, 0, n); });
  bool right = solutions == expected && solutions == known[n];
  std::printf("%d queen%s: %ld solution%s (%s): %.3f ms on %u thread%s; serial %.3f ms\n", n, example::plural_suffix(n),
              solutions, example::plural_suffix(solutions), right ? "matches the serial search" : "WRONG",
              parallel_seconds * 1e3, threads, example::plural_suffix(threads), serial_seconds * 1e3);
  return right ? EXIT_SUCCESS : EXIT_FAILURE;
}
