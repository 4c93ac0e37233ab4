// What "N threads" means for magpie in every benchmark: N − 1 workers plus the calling
// thread, which launches the work and takes part by waiting or joining — as many threads
// as oneTBB's and Taskflow's runs get.
#pragma once

#include "harness.h"

#include <magpie/scheduler.h>
#include <magpie/trace.h>

#include <cstdlib>
#include <string>

namespace bench {

// magpie_options configures a scheduler of `threads` threads counting the caller (at
// least 1), from any integer type (a Google Benchmark range, say).
inline magpie::scheduler_options magpie_options(magpie::thread_count threads) {
  magpie::scheduler_options options;
  options.workers = threads > 0 ? threads - 1 : 0;  // the calling thread is the N-th
  options.background_workers = 0;  // no background work is measured: every worker takes the same work
  return options;
}

// trace_if_asked starts recording when the run was given --trace FILE, and writes the file
// when the program exits (each thread's ring keeps its newest events).
inline void trace_if_asked(const options& chosen) {
  static std::string path;
  if (chosen.trace_path.empty()) return;
  path = chosen.trace_path;
  magpie::trace::name_this_thread("bench main");
  magpie::trace::start();
  std::atexit([] { magpie::trace::write_chrome_json(path); });
}

}  // namespace bench
