// N-queens: count the placements of n queens on an n×n board, one task per choice near
// the root of the search.
//   examples/nqueens [n]
#include <magpie/magpie.h>

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
  if (n - row <= n - 3) return serial_count(columns, row, n);  // tasks for the first three rows only
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
  int n = argc > 1 ? std::atoi(argv[1]) : 11;
  if (n < 1 || n > max_n) return EXIT_FAILURE;
  constexpr long known[] = {0, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512};
  long solutions = parallel_count({}, 0, n);
  std::printf("%d queens: %ld solutions\n", n, solutions);
  return solutions == known[n] ? EXIT_SUCCESS : EXIT_FAILURE;
}
