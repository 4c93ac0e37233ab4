// A program that launches tasks and never names magpie/trace.h: MAGPIE_TRACE=FILE in its
// environment must still record it from start to exit and write FILE
// (test/trace_environment/check.py runs it and reads the file).
#include <magpie/magpie.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main() {
  magpie::scheduler_options options;
  options.workers = 2;
  magpie::scheduler pool(options);
  std::vector<magpie::task<int>> leaves;
  for (int i = 0; i < 8; ++i) leaves.push_back(pool.launch("environment leaf", [i] { return i; }));
  auto total = pool.launch(
      "environment root",
      [leaves] {
        int sum = 0;
        for (const auto& leaf : leaves) sum += leaf.get_result();
        return sum;
      },
      magpie::when_all(leaves));
  int sum = total.get_result();
  std::printf("sum %d\n", sum);
  return sum == 28 ? EXIT_SUCCESS : EXIT_FAILURE;
}
