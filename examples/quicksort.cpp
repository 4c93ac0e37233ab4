// Parallel quicksort: partition, then sort both halves at once; checked against std::sort.
//
//   examples/quicksort 2000000 --threads 2
#include "example_options.h"

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
  std::size_t count = 2'000'000;
  unsigned threads = example::default_threads();
  CLI::App app{"parallel quicksort, checked against std::sort"};
  app.add_option("count", count, "how many integers (default 2,000,000)");
  example::add_threads_option(app, threads);
  CLI11_PARSE(app, argc, argv);
  auto pool = example::make_scheduler(threads);

  std::vector<int> values(count);
  std::mt19937 random(42);
  for (int& value : values) value = static_cast<int>(random() % 1'000'000);
  std::vector<int> expected = values;
  auto [serial_done, serial_seconds] = example::timed([&] {
    std::sort(expected.begin(), expected.end());
    return true;
  });
  auto [parallel_done, parallel_seconds] = example::timed([&] {
    return example::run_on(*pool, [&values] {
      parallel_sort(values.data(), values.data() + values.size());
      return true;
    });
  });
  bool sorted = serial_done && parallel_done && values == expected;
  std::printf("sorted %zu integer%s (%s): %.3f ms on %u thread%s; std::sort %.3f ms\n", count,
              example::plural_suffix(static_cast<long long>(count)), sorted ? "matches std::sort" : "WRONG",
              parallel_seconds * 1e3, threads, example::plural_suffix(threads), serial_seconds * 1e3);
  return sorted ? EXIT_SUCCESS : EXIT_FAILURE;
}
