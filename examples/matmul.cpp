// Blocked matrix multiply: C = A × B with one parallel_for over tiles of C.
//   examples/matmul [size]
#include <magpie/magpie.h>

#include <algorithm>
#include <cmath>
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
  std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
  std::vector<double> a(n * n), b(n * n), c(n * n, 0.0);
  for (std::size_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<double>(i % 7) - 3.0;
    b[i] = static_cast<double>(i % 5) - 2.0;
  }
  std::size_t tiles_per_side = (n + tile - 1) / tile;
  magpie::parallel_for(tiles_per_side * tiles_per_side, [&](std::size_t index) {
    multiply_tile(a, b, c, n, index / tiles_per_side * tile, index % tiles_per_side * tile);
  });
  // Check a sample of entries against the plain dot product.
  bool right = true;
  for (std::size_t sample = 0; sample < 64; ++sample) {
    std::size_t i = sample * 7919 % n;
    std::size_t j = sample * 104729 % n;
    double expected = 0.0;
    for (std::size_t k = 0; k < n; ++k) expected += a[i * n + k] * b[k * n + j];
    right = right && std::fabs(c[i * n + j] - expected) < 1e-9;
  }
  std::printf("%zu×%zu matrix multiply: %s\n", n, n, right ? "ok" : "WRONG");
  return right ? EXIT_SUCCESS : EXIT_FAILURE;
}
