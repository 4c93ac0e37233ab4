// Fork-join Fibonacci: the "hello world" of task parallelism, with a serial cut-off.
//
//   examples/fib 32 --threads 2 --cutoff 16     fib(32), checked against the serial answer, timed
//   examples/fib 32 --cutoff 0,8,12,16,20 --compare-threads 1,2 --repeats 7
//       the cut-off table of docs/fork-join-tutorial.md: each run's time over the serial
//       function's, timed right after it in the same process, medians of the repeats
//
// A cut-off of 0 means none: a task per call.
#include "example_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

long serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

long parallel_fib(int n, int cutoff) {
  if (n < 2) return n;
  if (n < cutoff) return serial_fib(n);  // below the cut-off a task costs more than it saves
  long left = 0;
  magpie::task_group group;
  group.run([&] { left = parallel_fib(n - 1, cutoff); });  // may be stolen by an idle worker
  long right = parallel_fib(n - 2, cutoff);                 // meanwhile this thread works too
  group.wait();                                             // join: left is ready after this
  return left + right;
}

// forks counts the children parallel_fib(n, cutoff) makes: one per call at or above the cut-off.
long forks(int n, int cutoff) { return n < 2 || n < cutoff ? 0 : 1 + forks(n - 1, cutoff) + forks(n - 2, cutoff); }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

std::string cutoff_label(int cutoff) { return cutoff < 2 ? "none (a task per call)" : "n < " + std::to_string(cutoff); }

// one_run is a parallel run and the serial run timed just before it.
struct one_run {
  long answer;
  long expected;
  double parallel_seconds;
  double serial_seconds;
};

one_run run_once(magpie::scheduler& pool, int n, int cutoff) {
  auto [expected, serial_seconds] = example::timed([&] { return serial_fib(n); });
  auto [answer, parallel_seconds] =
      example::timed([&] { return example::run_on(pool, [n, cutoff] { return parallel_fib(n, cutoff); }); });
  return {answer, expected, parallel_seconds, serial_seconds};
}

}  // namespace

int main(int argc, char** argv) {
  int n = 32;
  unsigned threads = example::default_threads();
  std::vector<int> cutoffs{16};
  std::vector<unsigned> compared;
  int repeats = 1;
  CLI::App app{"fork-join Fibonacci with a serial cut-off"};
  app.add_option("n", n, "which Fibonacci number (default 32)")->check(CLI::Range(0, 45));
  example::add_threads_option(app, threads);
  app.add_option("--cutoff", cutoffs, "below this n, call the serial function; 0: a task per call; "
                                      "several (0,8,16) print a table")
      ->delimiter(',');
  app.add_option("--compare-threads", compared, "run every cut-off on each of these thread counts (1,2) "
                                                "and print the speed-ups; overrides --threads")
      ->delimiter(',')
      ->check(CLI::Range(1u, 256u));
  app.add_option("--repeats", repeats, "timed pairs (serial, then parallel) per entry; the median is shown")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (compared.empty()) compared.push_back(threads);

  bool right = true;
  if (cutoffs.size() == 1 && compared.size() == 1 && repeats == 1) {
    auto pool = example::make_scheduler(compared[0]);
    one_run run = run_once(*pool, n, cutoffs[0]);
    right = run.answer == run.expected;
    long children = forks(n, cutoffs[0]);
    std::printf("fib(%d) = %ld (%s), cut-off %s, %u thread%s: %.3f ms; serial %.3f ms\n", n, run.answer,
                right ? "matches the serial answer" : "WRONG", cutoff_label(cutoffs[0]).c_str(), compared[0],
                example::plural_suffix(compared[0]), run.parallel_seconds * 1e3, run.serial_seconds * 1e3);
    if (children > 0 && compared[0] == 1) {  // on one thread, the difference is what the forks cost
      std::printf("%ld forks: %.1f ns per fork over the serial run\n", children,
                  (run.parallel_seconds - run.serial_seconds) * 1e9 / static_cast<double>(children));
    }
    return right ? EXIT_SUCCESS : EXIT_FAILURE;
  }

  // The table: rows are cut-offs, columns thread counts, entries parallel time / serial time.
  std::vector<std::vector<double>> ratio(cutoffs.size(), std::vector<double>(compared.size()));
  std::vector<std::vector<double>> millis(cutoffs.size(), std::vector<double>(compared.size()));
  for (std::size_t column = 0; column < compared.size(); ++column) {
    auto pool = example::make_scheduler(compared[column]);
    for (std::size_t row = 0; row < cutoffs.size(); ++row) {
      std::vector<double> ratios, times;
      for (int repeat = 0; repeat < repeats; ++repeat) {
        one_run run = run_once(*pool, n, cutoffs[row]);
        right = right && run.answer == run.expected;
        ratios.push_back(run.parallel_seconds / run.serial_seconds);
        times.push_back(run.parallel_seconds * 1e3);
      }
      ratio[row][column] = median(ratios);
      millis[row][column] = median(times);
    }
  }
  std::printf("fib(%d): time over the serial function's, median of %d pair%s (ms in brackets)\n\n| cut-off |", n,
              repeats, example::plural_suffix(repeats));
  for (unsigned count : compared) std::printf(" %u thread%s |", count, example::plural_suffix(count));
  std::printf("\n|---|");
  for (std::size_t column = 0; column < compared.size(); ++column) std::printf("---|");
  std::printf("\n");
  for (std::size_t row = 0; row < cutoffs.size(); ++row) {
    std::printf("| %s |", cutoff_label(cutoffs[row]).c_str());
    for (std::size_t column = 0; column < compared.size(); ++column) {
      std::printf(" %.2f× (%.1f) |", ratio[row][column], millis[row][column]);
    }
    std::printf("\n");
  }
  if (compared.size() > 1) {
    std::printf("\nspeed-up of %u threads over %u:", compared.back(), compared.front());
    for (std::size_t row = 0; row < cutoffs.size(); ++row) {
      std::printf(" %s %.2f×%s", cutoff_label(cutoffs[row]).c_str(), millis[row].front() / millis[row].back(),
                  row + 1 < cutoffs.size() ? ";" : "\n");
    }
  }
  std::printf("%s\n", right ? "every answer matches the serial one" : "WRONG: an answer differs from the serial one");
  return right ? EXIT_SUCCESS : EXIT_FAILURE;
}
