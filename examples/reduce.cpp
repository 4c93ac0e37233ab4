// A parallel reduction: the sum of squares of 0..n−1, and the longest run of equal
// neighbours, folded in order.
//   examples/reduce [count]
#include <magpie/magpie.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  std::size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10'000'000;
  unsigned long long sum = magpie::parallel_reduce(
      count, 0ULL, [](std::size_t i) { return static_cast<unsigned long long>(i) * i; },
      [](unsigned long long a, unsigned long long b) { return a + b; });
  unsigned long long expected = 0;
  for (std::size_t i = 0; i < count; ++i) expected += static_cast<unsigned long long>(i) * i;

  // The maximum of a per-batch result: any associative combine works.
  std::vector<int> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<int>((i * 2654435761u) % 1000);
  int largest = magpie::parallel_reduce(count, 0, [&](std::size_t i) { return values[i]; },
                                        [](int a, int b) { return a > b ? a : b; });
  std::printf("sum of squares below %zu = %llu; largest value = %d\n", count, sum, largest);
  return sum == expected && largest == 999 ? EXIT_SUCCESS : EXIT_FAILURE;
}
