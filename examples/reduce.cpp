// A parallel reduction: the sum of the squares of 0..n−1, exact in 128 bits, checked against
// the serial sum and the closed form n(n−1)(2n−1)/6; and the largest of n pseudo-random
// values, to show that any associative combine works.
//
//   examples/reduce 10000000 --threads 2
#include "example_options.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// wide holds sums of squares: n(n−1)(2n−1)/6 passes 2^64 from n ≈ 3.8 million.
__extension__ typedef unsigned __int128 wide;

std::string to_decimal(wide value) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(value % 10)));
    value /= 10;
  } while (value != 0);
  return digits;
}

wide square(std::size_t i) { return static_cast<wide>(i) * i; }

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 10'000'000;
  unsigned threads = example::default_threads();
  CLI::App app{"parallel_reduce: a sum of squares and a maximum, checked against serial loops"};
  app.add_option("count", count, "how many values (default 10,000,000)")->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
  example::add_threads_option(app, threads);
  CLI11_PARSE(app, argc, argv);
  auto pool = example::make_scheduler(threads);

  auto [sum, parallel_seconds] = example::timed([&] {
    return example::run_on(*pool, [count] {
      return magpie::parallel_reduce(count, wide{0}, square, [](wide a, wide b) { return a + b; });
    });
  });
  auto [serial_sum, serial_seconds] = example::timed([&] {
    wide total = 0;
    for (std::size_t i = 0; i < count; ++i) total += square(i);
    return total;
  });
  wide n = count;
  wide closed_form = n * (n - 1) * (2 * n - 1) / 6;

  // The maximum: combine need only be associative; batches are folded in order anyway.
  std::vector<int> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<int>((i * 2654435761u) % 1000);
  auto [largest, largest_seconds] = example::timed([&] {
    return example::run_on(*pool, [&values] {
      return magpie::parallel_reduce(values.size(), 0, [&values](std::size_t i) { return values[i]; },
                                     [](int a, int b) { return a > b ? a : b; });
    });
  });
  int serial_largest = 0;
  for (int value : values) serial_largest = value > serial_largest ? value : serial_largest;

  bool right = sum == serial_sum && sum == closed_form && largest == serial_largest;
  std::printf("sum of the squares of 0..%zu = %s (%s): %.3f ms on %u thread%s; serial %.3f ms\n", count - 1,
              to_decimal(sum).c_str(), sum == serial_sum && sum == closed_form ? "matches the serial sum and n(n-1)(2n-1)/6" : "WRONG",
              parallel_seconds * 1e3, threads, example::plural_suffix(threads), serial_seconds * 1e3);
  std::printf("largest of %zu value%s = %d (%s): %.3f ms\n", count, example::plural_suffix(static_cast<long long>(count)), largest,
              largest == serial_largest ? "matches the serial maximum" : "WRONG", largest_seconds * 1e3);
  return right ? EXIT_SUCCESS : EXIT_FAILURE;
}
