// Fork-join Fibonacci: the "hello world" of task parallelism, with a serial cut-off.
//   examples/fib [n]      prints fib(n) and checks it against the serial answer
#include <magpie/magpie.h>

#include <cstdio>
#include <cstdlib>

namespace {

long serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

long parallel_fib(int n) {
  if (n < 20) return serial_fib(n);  // below the cut-off a task costs more than it saves
  long left = 0;
  magpie::task_group group;
  group.run([&] { left = parallel_fib(n - 1); });  // may be stolen by an idle worker
  long right = parallel_fib(n - 2);                 // meanwhile this thread works too
  group.wait();                                     // join: left is ready after this
  return left + right;
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 32;
  long answer = parallel_fib(n);  // runs on magpie::default_scheduler()
  long expected = serial_fib(n);
  std::printf("fib(%d) = %ld\n", n, answer);
  return answer == expected ? EXIT_SUCCESS : EXIT_FAILURE;
}
