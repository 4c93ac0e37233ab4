// The fork-join workloads, written once over a "fork-join system" S that provides
//   S::spawn_join(a, b)                   run a and b, possibly in parallel, return after both
//   S::fan_out(n, body)                   body(i) for i in [0, n), each a task (a small n:
//                                         skynet's 10 children, nqueens' columns)
//   S::parallel_for(n, body)              body(i) for i in [0, n), a loop the system cuts
//   S::parallel_reduce(n, map)            the sum of map(i) for i in [0, n), cut likewise
//   S::group                              a task group: run(f) forks f (moved into its task,
//                                         with whatever f captured by value), wait() joins
//                                         every task run so far (nqueens_board, uts,
//                                         matmul_quadrants)
// so that magpie, oneTBB, Taskflow, OpenMP and the serial baseline run identical code. Every workload checks
// its answer and throws on a wrong one.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace workloads {

inline void check(bool right, const std::string& what) {
  if (!right) throw std::runtime_error("wrong answer: " + what);
}

// serial_fib is the leaf every system calls, and the whole of the serial baseline. GCC's
// `noipa` keeps it an opaque call even under link-time optimisation: seen as a pure
// function, the serial baseline's repeated calls were hoisted out of the timed runs. The
// 64-byte alignment gives it the same placement in every executable: fib with a cut-off
// runs mostly this function, and its placement within a cache line changes the serial
// time.
#if defined(__clang__)
#define WORKLOADS_OPAQUE __attribute__((noinline, aligned(64)))
#else
#define WORKLOADS_OPAQUE __attribute__((noinline, noipa, aligned(64)))
#endif
WORKLOADS_OPAQUE inline long serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

// fib_calls is the number of calls fib(n) makes (each a task when cut_off is 2).
inline double fib_calls(int n, int cut_off) {
  if (n < cut_off) return 1;
  return 1 + fib_calls(n - 1, cut_off) + fib_calls(n - 2, cut_off);
}

template <class S>
long fib(int n, int cut_off) {
  if (n < cut_off) return serial_fib(n);
  long a = 0;
  long b = 0;
  S::spawn_join([&] { a = fib<S>(n - 1, cut_off); }, [&] { b = fib<S>(n - 2, cut_off); });
  return a + b;
}

// skynet: a tree of fan-out 10 down to `leaves` leaves, each returning its number.
template <class S>
std::uint64_t skynet(std::uint64_t number, std::uint64_t size) {
  if (size == 1) return number;
  std::uint64_t sums[10] = {};
  std::uint64_t child = size / 10;
  S::fan_out(10, [&](std::size_t i) { sums[i] = skynet<S>(number + i * child, child); });
  std::uint64_t total = 0;
  for (std::uint64_t each : sums) total += each;
  return total;
}

// nqueens: placements counted with a task per choice in every row.
template <class S>
long nqueens(std::vector<int> columns, int n) {
  int row = static_cast<int>(columns.size());
  if (row == n) return 1;
  std::vector<long> found(static_cast<std::size_t>(n), 0);
  S::fan_out(static_cast<std::size_t>(n), [&](std::size_t column) {
    for (int earlier = 0; earlier < row; ++earlier) {
      int other = columns[static_cast<std::size_t>(earlier)];
      int c = static_cast<int>(column);
      if (other == c || other - c == earlier - row || other - c == row - earlier) return;
    }
    std::vector<int> next = columns;
    next.push_back(static_cast<int>(column));
    found[column] = nqueens<S>(std::move(next), n);
  });
  long total = 0;
  for (long each : found) total += each;
  return total;
}

inline long nqueens_answer(int n) {
  constexpr long known[] = {0, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596};
  return known[n];
}

// matmul_row computes row i of C = A × B (n × n, row-major). It is opaque, like
// serial_fib, so that every system runs the same machine code: inlined into each system's
// loop body, GCC vectorises it differently per executable, and the kernel's code, not the
// scheduler, would set the ratio.
WORKLOADS_OPAQUE inline void matmul_row(const double* __restrict a, const double* __restrict b,
                                        double* __restrict c, std::size_t n, std::size_t i) {
  double* row = c + i * n;
  for (std::size_t j = 0; j < n; ++j) row[j] = 0.0;
  for (std::size_t k = 0; k < n; ++k) {
    double aik = a[i * n + k];
    const double* b_row = b + k * n;
    for (std::size_t j = 0; j < n; ++j) row[j] += aik * b_row[j];
  }
}

// matmul: C = A × B, one parallel_for over rows.
template <class S>
void matmul(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c, std::size_t n) {
  S::parallel_for(n, [&](std::size_t i) { matmul_row(a.data(), b.data(), c.data(), n, i); });
}

// mandelbrot_row sums the escape iterations of row y of a width × width grid; opaque for
// the reason matmul_row is.
WORKLOADS_OPAQUE inline long mandelbrot_row(std::size_t width, std::size_t y) {
  long sum = 0;
  for (std::size_t x = 0; x < width; ++x) {
    double cr = -2.0 + 2.5 * static_cast<double>(x) / static_cast<double>(width);
    double ci = -1.25 + 2.5 * static_cast<double>(y) / static_cast<double>(width);
    double zr = 0.0, zi = 0.0;
    int i = 0;
    for (; i < 256 && zr * zr + zi * zi < 4.0; ++i) {
      double t = zr * zr - zi * zi + cr;
      zi = 2.0 * zr * zi + ci;
      zr = t;
    }
    sum += i;
  }
  return sum;
}

// mandelbrot: escape iterations summed over a width × width grid, rows in parallel.
template <class S>
long mandelbrot(std::size_t width) {
  std::vector<long> rows(width, 0);
  S::parallel_for(width, [&](std::size_t y) { rows[y] = mandelbrot_row(width, y); });
  long total = 0;
  for (long each : rows) total += each;
  return total;
}

// skewed_term is one costly iteration of the skewed loops: `steps` dependent multiply-adds.
// Opaque for the reason matmul_row is.
WORKLOADS_OPAQUE inline double skewed_term(std::size_t i, std::size_t steps) {
  double x = 1.0 + static_cast<double>(i % 7) * 1e-3;
  for (std::size_t step = 0; step < steps; ++step) x = x * 1.0000001 + 1e-9;
  return x;
}

// skewed_loop: `n` iterations whose whole cost lies in the hundredth of the range starting
// at `costly_from`, `steps` each; the rest do nothing. A loop cut into fixed batches leaves
// that hundredth to the one thread whose batch holds it.
template <class S>
double skewed_loop(std::size_t n, std::size_t costly_from, std::size_t steps) {
  std::vector<double> out(n, 0.0);
  const std::size_t costly = n / 100;
  S::parallel_for(n, [&](std::size_t i) {
    if (i - costly_from < costly) out[i] = skewed_term(i, steps);  // wraps below costly_from: skipped
  });
  double total = 0.0;
  for (double each : out) total += each;
  return total;
}

// reduce_term is the compute-bound map of the reduce workload (a square root and a
// sine), the kind of per-element work a parallel reduction is worth it for. Opaque
// for the reason matmul_row is: inlined, the serial baseline's loop and the parallel
// systems' one-thread loops would be compiled differently.
WORKLOADS_OPAQUE inline double reduce_term(std::size_t i) {
  double x = static_cast<double>(i);
  return std::sqrt(x) * std::sin(x * 1e-3);
}

// reduce: the sum of reduce_term over [0, n); the order of the additions is the system's.
template <class S>
double reduce(std::size_t n) {
  return S::parallel_reduce(n, [](std::size_t i) { return reduce_term(i); });
}

// nqueens_board: the same count, the other common shape: a task per admissible column,
// each with its own copy of the board (captured by value), all forked from one group.
using queens_board = std::array<char, 16>;

inline bool queen_fits(const queens_board& placed, int row, int column) {
  for (int earlier = 0; earlier < row; ++earlier) {
    int other = placed[static_cast<std::size_t>(earlier)];
    if (other == column || other - column == earlier - row || other - column == row - earlier) return false;
  }
  return true;
}

template <class S>
long nqueens_board(const queens_board& placed, int row, int n) {
  if (row == n) return 1;
  std::array<long, 16> found{};
  typename S::group group;
  for (int column = 0; column < n; ++column) {
    if (!queen_fits(placed, row, column)) continue;
    queens_board next = placed;
    next[static_cast<std::size_t>(row)] = static_cast<char>(column);
    group.run([next, row, n, slot = &found[static_cast<std::size_t>(column)]] { *slot = nqueens_board<S>(next, row + 1, n); });
  }
  group.wait();
  long total = 0;
  for (long each : found) total += each;
  return total;
}

// integrate: adaptive trapezoid quadrature of integrand over [x1, x2], halving an interval
// (both halves forked) until its two halves' sum agrees with its own area within epsilon.
// A call is a few flops: the tree of ~10^6–10^8 calls is the work.
// integrand is opaque for the reason serial_fib is: seen whole, the serial baseline's
// quadrature was a pure function of constants, hoisted out of the timed runs.
WORKLOADS_OPAQUE inline double integrand(double x) { return (x * x + 1.0) * x; }
inline double integrand_integral(double x) { return x * x * x * x / 4.0 + x * x / 2.0; }
inline constexpr double integrate_epsilon = 1e-9;

template <class S>
double integrate(double x1, double y1, double x2, double y2, double area) {
  double half = (x2 - x1) / 2.0;
  double x0 = x1 + half;
  double y0 = integrand(x0);
  double left = (y1 + y0) / 2.0 * half;
  double right = (y0 + y2) / 2.0 * half;
  double both = left + right;
  if (both - area < integrate_epsilon && area - both < integrate_epsilon) return both;
  double a = 0.0;
  double b = 0.0;
  S::spawn_join([&] { a = integrate<S>(x1, y1, x0, y0, left); }, [&] { b = integrate<S>(x0, y0, x2, y2, right); });
  return a + b;
}

// integrate_over is the whole integral over [0, upper].
template <class S>
double integrate_over(double upper) {
  double top = integrand(upper);
  return integrate<S>(0.0, integrand(0.0), upper, top, (integrand(0.0) + top) / 2.0 * upper);
}

// integrate_calls is the number of calls (each a task) integrate_over(upper) makes.
inline double integrate_calls(double x1, double y1, double x2, double y2, double area) {
  double half = (x2 - x1) / 2.0;
  double x0 = x1 + half;
  double y0 = integrand(x0);
  double left = (y1 + y0) / 2.0 * half;
  double right = (y0 + y2) / 2.0 * half;
  double both = left + right;
  if (both - area < integrate_epsilon && area - both < integrate_epsilon) return 1;
  return 1 + integrate_calls(x1, y1, x0, y0, left) + integrate_calls(x0, y0, x2, y2, right);
}

// matmul_block adds A × B to C for n × n blocks inside matrices of row length `stride`:
// the leaf of matmul_quadrants, opaque for the reason matmul_row is.
WORKLOADS_OPAQUE inline void matmul_block(const double* __restrict a, const double* __restrict b,
                                          double* __restrict c, std::size_t n, std::size_t stride) {
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < n; ++k) {
      double aik = a[i * stride + k];
      const double* b_row = b + k * stride;
      double* c_row = c + i * stride;
      for (std::size_t j = 0; j < n; ++j) c_row[j] += aik * b_row[j];
    }
  }
}

inline constexpr std::size_t matmul_leaf = 32;

// matmul_quadrants adds A × B to C (n × n, n a power of two, row length `stride`) divide
// and conquer: C's four quadrants each get two products of quadrants, the first four
// forked together, then, once joined, the other four.
template <class S>
void matmul_quadrants(const double* a, const double* b, double* c, std::size_t n, std::size_t stride) {
  if (n <= matmul_leaf) {
    matmul_block(a, b, c, n, stride);
    return;
  }
  std::size_t h = n / 2;
  auto quarter = [h, stride](auto* m, std::size_t row, std::size_t column) { return m + row * h * stride + column * h; };
  for (std::size_t k = 0; k < 2; ++k) {
    typename S::group group;
    for (std::size_t i = 0; i < 2; ++i) {
      for (std::size_t j = 0; j < 2; ++j) {
        const double* left = quarter(a, i, k);
        const double* right = quarter(b, k, j);
        double* out = quarter(c, i, j);
        if (i == 1 && j == 1) {
          matmul_quadrants<S>(left, right, out, h, stride);  // the parent takes the last one
        } else {
          group.run([left, right, out, h, stride] { matmul_quadrants<S>(left, right, out, h, stride); });
        }
      }
    }
    group.wait();
  }
}

}  // namespace workloads
