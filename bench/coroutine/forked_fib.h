// The coroutine fork-join fib that bench/coroutine/magpie.cpp's coro_fork_fib row times
// and tools/instructions.sh counts (bench/per_task/magpie.cpp): one definition, so both
// measure the same code.
#pragma once

#include <magpie/coroutine.h>
#include <magpie/coroutine_fork.h>

namespace bench {

// forked_fib is coroutine fib in fork-join form (magpie::fork / call / join): every call a
// coroutine frame, the first forked onto the deque, the second called, no task per call.
inline magpie::coro<long> forked_fib(int n) {
  if (n < 2) co_return n;
  long a = 0;
  long b = 0;
  co_await magpie::fork(a, forked_fib(n - 1));
  co_await magpie::call(b, forked_fib(n - 2));
  co_await magpie::join();
  co_return a + b;
}

}  // namespace bench
