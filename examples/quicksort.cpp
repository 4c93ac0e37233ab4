// Parallel quicksort: partition, then sort both halves at once.
//   examples/quicksort [count]
#include <magpie/magpie.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

void parallel_sort(int* first, int* last) {
  if (last - first < 4096) {  // small ranges: the serial sort is faster than a task
    std::sort(first, last);
    return;
  }
  int pivot = first[(last - first) / 2];
  int* middle = std::partition(first, last, [pivot](int value) { return value < pivot; });
  int* upper = std::partition(middle, last, [pivot](int value) { return value == pivot; });
  magpie::parallel_invoke([=] { parallel_sort(first, middle); }, [=] { parallel_sort(upper, last); });
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2'000'000;
  std::vector<int> values(count);
  std::mt19937 random(42);
  for (int& value : values) value = static_cast<int>(random() % 1'000'000);
  std::vector<int> expected = values;
  std::sort(expected.begin(), expected.end());
  parallel_sort(values.data(), values.data() + values.size());
  bool sorted = values == expected;
  std::printf("sorted %zu integers: %s\n", count, sorted ? "ok" : "WRONG");
  return sorted ? EXIT_SUCCESS : EXIT_FAILURE;
}
