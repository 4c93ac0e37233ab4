// What every example shares: the --threads option, the scheduler it asks for, and a timer.
//
//   CLI::App app{"..."};
//   unsigned threads = example::default_threads();
//   example::add_threads_option(app, threads);
//   CLI11_PARSE(app, argc, argv);
//   auto pool = example::make_scheduler(threads);
//   auto [answer, seconds] = example::timed([&] { return example::run_on(*pool, [&] { return work(); }); });
#pragma once

#include <magpie/magpie.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

namespace example {

// default_threads is every hardware thread (at least one).
inline unsigned default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// add_threads_option adds `--threads N` to `app`, stored in `threads`: N threads of work,
// counting the thread that runs main.
inline void add_threads_option(CLI::App& app, unsigned& threads) {
  app.add_option("--threads", threads, "threads of work, counting the caller (default: the hardware threads)")
      ->check(CLI::Range(1u, 256u));
}

// make_scheduler makes a scheduler whose work runs on `threads` threads: `threads` − 1
// workers, and the caller, which works as one of the pool's threads inside run_on. The one
// place the examples build a scheduler.
inline std::unique_ptr<magpie::scheduler> make_scheduler(unsigned threads) {
  return std::make_unique<magpie::scheduler>(magpie::scheduler_options{.workers = threads - 1});
}

// run_on runs `work` on the calling thread as one of `pool`'s threads and returns its
// result. Fork-join inside `work` (task_group, parallel_for) uses `pool`, at any depth, so
// the caller and `pool`'s workers share it.
template <class Work>
auto run_on(magpie::scheduler& pool, Work&& work) {
  return pool.execute(std::forward<Work>(work));
}

// plural_suffix is "s" unless `count` is 1, for counts printed with their noun: "1 worker",
// "2 workers".
inline const char* plural_suffix(long long count) { return count == 1 ? "" : "s"; }

// seconds_since is the time from `start` to now, in seconds.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// timed runs `work` and returns its result and the seconds it took.
template <class Work>
auto timed(Work&& work) {
  auto start = std::chrono::steady_clock::now();
  auto result = work();
  return std::pair{std::move(result), seconds_since(start)};
}

}  // namespace example
