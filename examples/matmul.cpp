// Blocked matrix multiply: C = A × B with one parallel_for over tiles of C; checked against
// the same tiles multiplied serially (the same sums in the same order: equal to the bit).
//
//   examples/matmul 512 --threads 2
#include "example_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr std::size_t tile = 64;  // 3 tiles of doubles fit in L2

void multiply_tile(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c,
                   std::size_t n, std::size_t row0, std::size_t column0) {
  std::size_t row_end = std::min(n, row0 + tile);
  std::size_t column_end = std::min(n, column0 + tile);
  for (std::size_t k0 = 0; k0 < n; k0 += tile) {
    std::size_t k_end = std::min(n, k0 + tile);
    for (std::size_t i = row0; i < row_end; ++i) {
      for (std::size_t k = k0; k < k_end; ++k) {
        double aik = a[i * n + k];
        for (std::size_t j = column0; j < column_end; ++j) c[i * n + j] += aik * b[k * n + j];
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 512;
  unsigned threads = example::default_threads();
  CLI::App app{"blocked matrix multiply, checked against the serial product"};
  app.add_option("size", n, "rows and columns (default 512)")->check(CLI::Range(std::size_t{1}, std::size_t{8192}));
  example::add_threads_option(app, threads);
  CLI11_PARSE(app, argc, argv);
  auto pool = example::make_scheduler(threads);

  std::vector<double> a(n * n), b(n * n), c(n * n, 0.0), expected(n * n, 0.0);
  for (std::size_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<double>(i % 7) - 3.0;
    b[i] = static_cast<double>(i % 5) - 2.0;
  }
  std::size_t tiles_per_side = (n + tile - 1) / tile;
  auto [parallel_done, parallel_seconds] = example::timed([&] {
    return example::run_on(*pool, [&] {
      magpie::parallel_for(tiles_per_side * tiles_per_side, [&](std::size_t index) {
        multiply_tile(a, b, c, n, index / tiles_per_side * tile, index % tiles_per_side * tile);
      });
      return true;
    });
  });
  auto [serial_done, serial_seconds] = example::timed([&] {
    for (std::size_t index = 0; index < tiles_per_side * tiles_per_side; ++index) {
      multiply_tile(a, b, expected, n, index / tiles_per_side * tile, index % tiles_per_side * tile);
    }
    return true;
  });
  bool right = parallel_done && serial_done && c == expected;
  std::printf("%zu×%zu matrix multiply (%s): %.3f ms on %u thread%s; serial %.3f ms\n", n, n,
              right ? "matches the serial product" : "WRONG", parallel_seconds * 1e3, threads,
              example::plural_suffix(threads), serial_seconds * 1e3);
  return right ? EXIT_SUCCESS : EXIT_FAILURE;
}
