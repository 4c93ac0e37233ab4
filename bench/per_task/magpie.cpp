// Five per-task shapes in isolation, for instruction counts: one task at a time
// (launch, run, wait, release), a chain hop (the chain built first, then run), fib's
// task_group spawn-join per call, fib's coroutine fork/call/join per call
// (coro_fork_fib, the root run by a task of its own), and a future's `next` link (the links
// built behind an unset promise, then the promise set and the last one read), each on one thread (--threads N
// adds N − 1 workers), attached unless --unattached. Every shape runs in a function of its
// own, `measured_<shape>`, which tools/instructions.sh hands to callgrind's toggle-collect
// (coro_fork_fib's switches the count itself: see counted_coro_fork_fib):
// the count per task is then that function's instructions over its tasks, with nothing of
// the set-up. Run natively, it prints the time per task too (median of --runs). With
// --unattached the calling thread is left as `main` is, attached to nothing.
//   bench_per_task_magpie --shape chain --tasks 65536 --runs 5
#include "../common/magpie_threads.h"
#include "../fork_join/magpie_system.h"
#include "../fork_join/workloads.h"
#include "../coroutine/forked_fib.h"

#include <CLI/CLI.hpp>
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define COUNT_FROM_HERE_TO_THE_NEXT() CALLGRIND_TOGGLE_COLLECT
#else
#define COUNT_FROM_HERE_TO_THE_NEXT() ((void)0)
#endif
#include <magpie/async.h>
#include <magpie/coroutine.h>
#include <magpie/magpie.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace {

// index_body is one_at_a_time's body. It is a named type outside measured_one_at_a_time: a
// lambda inside would carry that function's name into its task handler's symbol, which the
// toggle-collect pattern matches too, and callgrind would stop counting inside the handler.
struct index_body {
  std::size_t index;
  std::size_t operator()() const noexcept { return index; }
};

[[gnu::noinline]] std::size_t measured_one_at_a_time(magpie::scheduler& pool, std::size_t tasks) {
  std::size_t sum = 0;
  for (std::size_t i = 0; i < tasks; ++i) sum += pool.launch("empty", index_body{i}).get_result();
  return sum;
}

[[gnu::noinline]] void measured_chain(magpie::task_event& gate, magpie::task<>& last) {
  gate.trigger();
  last.wait();
}

// add_one is next_chain's link. A named type, as index_body.
struct add_one {
  std::size_t operator()(std::size_t value) const noexcept { return value + 1; }
};

[[gnu::noinline]] std::size_t measured_next_chain(std::size_t links) {
  magpie::promise<std::size_t> head;
  magpie::future<std::size_t> chain = head.get_future();
  for (std::size_t i = 0; i < links; ++i) chain = std::move(chain).next(add_one{});
  head.set_value(0);
  return chain.get();
}

[[gnu::noinline]] long measured_fib(int n) { return workloads::fib<bench::magpie_system>(n, 2); }

// counted_coro_fork_fib is not a `measured_` function: callgrind's toggle-collect follows
// calls and returns, which symmetric transfer between coroutines leaves unmatched, so the
// count is switched on and off here, under valgrind only (tools/instructions.sh).
[[gnu::noinline]] long counted_coro_fork_fib(magpie::scheduler& pool, int n) {
  COUNT_FROM_HERE_TO_THE_NEXT();
  long result = pool.launch("fork fib", [n] { return bench::forked_fib(n); }).get_result();
  COUNT_FROM_HERE_TO_THE_NEXT();
  return result;
}

// run_once runs `shape` over about `tasks` tasks and returns the seconds the measured
// function took and the tasks it ran.
std::pair<double, std::size_t> run_once(magpie::scheduler& pool, const std::string& shape, std::size_t tasks) {
  using clock = std::chrono::steady_clock;
  if (shape == "one_at_a_time") {
    auto start = clock::now();
    std::size_t sum = measured_one_at_a_time(pool, tasks);
    double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (sum != tasks * (tasks - 1) / 2) throw std::runtime_error("one_at_a_time: wrong sum");
    return {seconds, tasks};
  }
  if (shape == "chain") {
    std::size_t hops = 0;
    magpie::task_event gate("gate", pool);
    magpie::task<> last = gate;
    for (std::size_t i = 0; i < tasks; ++i) last = pool.launch("hop", [&hops] { ++hops; }, last);
    auto start = clock::now();
    measured_chain(gate, last);
    double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (hops != tasks) throw std::runtime_error("chain: wrong hop count");
    return {seconds, tasks};
  }
  if (shape == "next_chain") {
    auto start = clock::now();
    std::size_t links = measured_next_chain(tasks);
    double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (links != tasks) throw std::runtime_error("next_chain: wrong link count");
    return {seconds, tasks};
  }
  if (shape == "fib") {
    int n = 2;
    while (workloads::fib_calls(n + 1, 2) <= static_cast<double>(tasks)) ++n;
    auto start = clock::now();
    long result = measured_fib(n);
    double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (result != workloads::serial_fib(n)) throw std::runtime_error("fib: wrong result");
    return {seconds, static_cast<std::size_t>(workloads::fib_calls(n, 2))};
  }
  if (shape == "coro_fork_fib") {
    int n = 2;
    while (workloads::fib_calls(n + 1, 2) <= static_cast<double>(tasks)) ++n;
    auto start = clock::now();
    long result = counted_coro_fork_fib(pool, n);
    double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (result != workloads::serial_fib(n)) throw std::runtime_error("coro_fork_fib: wrong result");
    return {seconds, static_cast<std::size_t>(workloads::fib_calls(n, 2))};
  }
  throw std::invalid_argument("unknown shape '" + shape + "' (one_at_a_time, chain, fib, coro_fork_fib, next_chain)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"magpie per-task costs of five shapes, one attached thread"};
  std::string shape = "one_at_a_time";
  std::size_t tasks = 1u << 16;
  int runs = 5;
  bool unattached = false;
  unsigned threads = 1;
  app.add_option("--shape", shape, "one_at_a_time, chain, fib, coro_fork_fib or next_chain");
  app.add_option("--tasks", tasks, "tasks per run (fib: the largest fib with at most this many calls)");
  app.add_option("--runs", runs, "runs after one warm-up; the median is printed")->check(CLI::PositiveNumber);
  app.add_flag("--unattached", unattached, "launch from this thread without attaching it, as a plain main does");
  app.add_option("--threads", threads, "threads counting this one (the rest are workers)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  magpie::scheduler pool(bench::magpie_options(threads));
  if (!unattached) pool.attach(magpie::named_thread::game);
  run_once(pool, shape, tasks);  // warm-up: the task pool's slabs, the deque's array
  std::vector<double> per_task;
  for (int run = 0; run < runs; ++run) {
    auto [seconds, ran] = run_once(pool, shape, tasks);
    per_task.push_back(seconds * 1e9 / static_cast<double>(ran));
  }
  std::sort(per_task.begin(), per_task.end());
  std::printf("%s: %zu tasks per run, median %.1f ns per task over %d runs\n", shape.c_str(),
              run_once(pool, shape, tasks).second, per_task[per_task.size() / 2], runs);
  if (!unattached) pool.detach();
}
