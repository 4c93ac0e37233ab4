// The coroutine fib's libfork peer: fib with every call a libfork coroutine task, written in
// libfork's own idiom (fork the first call, call the second, join), beside magpie's coro_fib
// and coro_fork_fib rows (bench/coroutine/magpie.cpp, same n and count of calls through fib.h). libfork v3 from
// a checkout named by -Dlibfork_dir (never vendored). The pool is libfork's lazy_pool, whose
// idle workers sleep as magpie's do (its busy_pool spins). "N threads" = a pool of N workers;
// the calling thread only blocks in sync_wait, as a magpie caller waiting on the root would.
#include "../common/harness.h"
#include "fib.h"

#include <libfork.hpp>

#include <stdexcept>
#include <string>

namespace {

// fib is libfork's recursive coroutine: `self` is the lambda itself, so every call is a task.
constexpr auto fib = [](auto self, int n) LF_STATIC_CALL -> lf::task<long> {
  if (n < 2) co_return n;
  long a = 0;
  long b = 0;
  co_await lf::fork(&a, self)(n - 1);
  co_await lf::call(&b, self)(n - 2);
  co_await lf::join;
  co_return a + b;
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "libfork coroutine fib (the coro_fib row's peer)");
  const int fib_n = bench::coro_fib::size(chosen.quick);
  const long expected = bench::coro_fib::serial(fib_n);
  const std::uint64_t calls = bench::coro_fib::calls(fib_n);
  for (unsigned threads : chosen.threads) {
    lf::lazy_pool pool(threads);
    auto seconds = bench::time_runs(chosen.runs, [&] {
      if (lf::sync_wait(pool, fib, fib_n) != expected) throw std::runtime_error("wrong answer: libfork fib");
    });
    bench::record(chosen, "libfork", "coro_fib", std::to_string(fib_n), threads, seconds, calls);
    // The same runs are the peer of magpie's fork-join row too: libfork's fib is fork-join.
    bench::record(chosen, "libfork", "coro_fork_fib", std::to_string(fib_n), threads, seconds, calls);
  }
}
