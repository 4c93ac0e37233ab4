// Coroutine tasks, cancellation and the concurrency limiter on magpie: co_await of a
// completed task, a suspension resumed across a completion beside a task chain's hop, a
// chain of coroutine tasks, fib with every call a coroutine task, fib of forked coroutines
// (fork/call/join, no task per call) beside task_group fib,
// limiter throughput, a cancellation check and a skipped task beside an empty one.
// Peers: bench/coroutine/tbb.cpp (the limiter as a semaphore-guarded task_group) and
// bench/coroutine/libfork.cpp (coro_fib and coro_fork_fib, when -Dlibfork_dir names a checkout).
// "N threads" = N − 1 workers + this thread.
#include "../common/harness.h"
#include "../common/magpie_threads.h"
#include "forked_fib.h"
#include "fib.h"

#include <magpie/cancellation.h>
#include <magpie/concurrency_limiter.h>
#include <magpie/coroutine.h>
#include <magpie/magpie.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

// await_completed co_awaits one completed task `count` times inside one coroutine task.
void await_completed(magpie::scheduler& pool, std::size_t count) {
  magpie::task<std::size_t> ready = magpie::make_completed_task<std::size_t>(1);
  auto sum = pool.launch("awaits", [ready, count]() -> magpie::coro<std::size_t> {
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) total += co_await ready;
    co_return total;
  });
  check(sum.get_result() == count, "await completed");
}

// await_pending: one coroutine launches an empty task and awaits it, `count` times: a
// launch, a suspension and a resumption across the task's completion per step.
void await_pending(magpie::scheduler& pool, std::size_t count) {
  auto steps = pool.launch("awaits", [&pool, count]() -> magpie::coro<std::size_t> {
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) total += co_await pool.launch("step", [] { return std::size_t{1}; });
    co_return total;
  });
  check(steps.get_result() == count, "await pending");
}

// chain_hops is the task model's own hop, beside await_pending: a linear chain of tasks,
// each a prerequisite of the next, released at once.
void chain_hops(magpie::scheduler& pool, std::size_t count) {
  std::size_t hops = 0;
  magpie::task_event gate("gate", pool);
  magpie::task<> last = gate;
  for (std::size_t i = 0; i < count; ++i) last = pool.launch("hop", [&hops] { ++hops; }, last);
  gate.trigger();
  last.wait();
  check(hops == count, "chain hops");
}

magpie::task<std::size_t> coroutine_chain(magpie::scheduler& pool, std::size_t depth) {
  return pool.launch("link", [&pool, depth]() -> magpie::coro<std::size_t> {
    if (depth == 0) co_return 0;
    co_return co_await coroutine_chain(pool, depth - 1) + 1;
  });
}

magpie::task<long> coroutine_fib(magpie::scheduler& pool, int n) {
  return pool.launch("fib", [&pool, n]() -> magpie::coro<long> {
    if (n < 2) co_return n;
    magpie::task<long> left = coroutine_fib(pool, n - 1);
    magpie::task<long> right = coroutine_fib(pool, n - 2);
    long a = co_await left;
    long b = co_await right;
    co_return a + b;
  });
}

long group_fib(int n) {
  if (n < 2) return n;
  long a = 0;
  magpie::task_group group;
  group.run([&a, n] { a = group_fib(n - 1); });
  long b = group_fib(n - 2);
  group.wait();
  return a + b;
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie coroutine, cancellation and limiter benchmarks");
  const std::size_t awaits = chosen.quick ? (1u << 18) : (1u << 20);
  const std::size_t steps = chosen.quick ? (1u << 15) : (1u << 17);
  const std::size_t chain = chosen.quick ? (1u << 15) : (1u << 17);
  const int fib_n = bench::coro_fib::size(chosen.quick);
  const std::size_t limited = chosen.quick ? (1u << 15) : (1u << 17);
  const std::size_t checks = 1u << 24;
  const std::size_t skipped = chosen.quick ? (1u << 16) : (1u << 18);

  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));

    auto completed = bench::time_runs(chosen.runs, [&] { await_completed(pool, awaits); });
    bench::record(chosen, "magpie", "coro_await_completed", std::to_string(awaits), threads, completed, awaits);

    auto pending = bench::time_runs(chosen.runs, [&] { await_pending(pool, steps); });
    bench::record(chosen, "magpie", "coro_await_pending", std::to_string(steps), threads, pending, steps);
    auto hops = bench::time_runs(chosen.runs, [&] { chain_hops(pool, steps); });
    bench::record(chosen, "magpie", "task_chain_hop", std::to_string(steps), threads, hops, steps);

    auto coroutines = bench::time_runs(chosen.runs, [&] { check(coroutine_chain(pool, chain).get_result() == chain, "coroutine chain"); });
    bench::record(chosen, "magpie", "coro_chain", std::to_string(chain), threads, coroutines, chain);

    const long expected = bench::coro_fib::serial(fib_n);
    const std::uint64_t calls = bench::coro_fib::calls(fib_n);
    auto coro_fib = bench::time_runs(chosen.runs, [&] { check(coroutine_fib(pool, fib_n).get_result() == expected, "coroutine fib"); });
    bench::record(chosen, "magpie", "coro_fib", std::to_string(fib_n), threads, coro_fib, calls);
    // coro_fork_fib as the docs' first fork-join program runs it: `main` launches the root
    // and waits for it, so its wait takes the root back and runs it, and the root's joins
    // run other work while children finish on the workers (N − 1 of them).
    magpie::scheduler fork_pool(bench::magpie_options(threads));
    auto fork_fib = bench::time_runs(chosen.runs, [&] {
      check(fork_pool.launch("fork fib", [fib_n] { return bench::forked_fib(fib_n); }).get_result() == expected,
            "coroutine fork fib");
    });
    bench::record(chosen, "magpie", "coro_fork_fib", std::to_string(fib_n), threads, fork_fib, calls);
    // task_group_fib runs on `main` attached as the game thread, beside N − 1 workers, as
    // bench/fork_join's fib: the joiner works, and its children go onto its own deque.
    pool.attach(magpie::named_thread::game);
    auto task_group_fib = bench::time_runs(chosen.runs, [&] { check(group_fib(fib_n) == expected, "task_group fib"); });
    pool.detach();
    bench::record(chosen, "magpie", "task_group_fib", std::to_string(fib_n), threads, task_group_fib, calls);

    for (std::uint32_t limit : {1u, 2u, 4u}) {
      auto throughput = bench::time_runs(chosen.runs, [&] {
        bench::padded_atomic<std::size_t> ran{0};
        magpie::task_concurrency_limiter limiter(limit, magpie::priority::normal, pool);
        for (std::size_t i = 0; i < limited; ++i) {
          limiter.push("limited", [&ran](std::uint32_t) { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait
        }
        check(limiter.wait() && ran.load() == limited, "limiter");
      });
      bench::record(chosen, "magpie", "limiter_n" + std::to_string(limit), std::to_string(limited), threads, throughput, limited);
    }

    std::vector<magpie::task<>> handles;
    handles.reserve(skipped);
    auto empty = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      for (std::size_t i = 0; i < skipped; ++i) {
        handles.push_back(pool.launch("empty", [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // relaxed: read after wait_all
      }
      magpie::wait_all(handles);
      handles.clear();
      check(ran.load() == skipped, "empty");
    });
    bench::record(chosen, "magpie", "task_empty_batch", std::to_string(skipped), threads, empty, skipped);
    auto skips = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      magpie::cancellation_token token;
      token.cancel();
      for (std::size_t i = 0; i < skipped; ++i) {
        handles.push_back(pool.launch("skipped", [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }, token));  // relaxed: read after wait_all
      }
      magpie::wait_all(handles);
      check(ran.load() == 0 && handles.back().has_exception(), "skipped");
      handles.clear();
    });
    bench::record(chosen, "magpie", "task_canceled_batch", std::to_string(skipped), threads, skips, skipped);
  }

  magpie::cancellation_token token;
  auto checked = bench::time_runs(chosen.runs, [&] {
    magpie::cancellation_token_scope scope(token);
    std::size_t seen = 0;
    for (std::size_t i = 0; i < checks; ++i) {
      seen += magpie::is_current_work_canceled() ? 0 : 1;
      asm volatile("" : "+r"(seen));  // one check per iteration, not folded
    }
    check(seen == checks, "cancellation check");
  });
  bench::record(chosen, "magpie", "cancellation_check", std::to_string(checks), 1, checked, checks);
}
