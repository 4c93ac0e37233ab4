// The benchmarks' shared harness: flags, warm-up, timed runs, medians, JSON lines.
//
// Each bench/<workload>/<system>.cpp is one executable that measures one system; it
// appends one JSON object per (workload, param, threads) to --json, and
// tools/bench_table.py prints the table with ratios against the peers of the same run.
//   schema: {workload, param, system, threads, median_s, min_s, max_s, runs, tasks,
//            peak_rss_kb, host, compiler, git, unit}   (unit "s", "ratio" or "bytes": see record)
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// padded_atomic is a std::atomic alone on its pair of cache lines (the adjacent-line
// prefetcher moves lines in pairs). A count that every worker bumps, declared as a plain
// local, shares a line with the launching thread's temporaries wherever the stack's random
// start puts them together; each bump then stalls the launcher, and a row reads differently
// from one process to the next. Every system's rows count with it.
template <class T>
struct alignas(128) padded_atomic : std::atomic<T> {
  using std::atomic<T>::atomic;
  using std::atomic<T>::operator=;
};

struct options {
  std::vector<unsigned> threads;  // "N threads" = N − 1 workers + the calling thread
  int runs = 5;
  bool quick = false;
  bool sweep = false;         // three sizes per fork_join workload, not one
  double sweep_cap_s = 4.0;   // in a sweep, skip a size whose predicted run takes longer
  std::string json_path;
  std::string git = "unknown";
  std::string trace_path;  // magpie's benches: record a trace of the run (bench/common/magpie_threads.h)
};

// pin_allocator makes glibc's malloc keep the memory a run frees (no trimming of the heap
// top, no mmap for big blocks) for every system alike: otherwise each run's teardown hands
// pages back and the next run pays page faults for them, so a first measurement would read
// slower than the same one repeated.
// reset_peak_rss() trims once, outside the timed window, so peak memory stays attributable.
inline void pin_allocator() {
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's ceiling on 64-bit
}

// parse reads the common flags and pins the allocator; exits on --help or bad input.
inline options parse(int argc, char** argv, const std::string& description) {
  pin_allocator();
  options chosen;
  CLI::App app(description);
  app.add_option("--threads", chosen.threads, "thread counts (default: 1 and all hardware threads)");
  app.add_option("--runs", chosen.runs, "timed runs after >= 50 ms of warm-up (median reported)")->check(CLI::PositiveNumber);
  app.add_flag("--quick", chosen.quick, "smaller sizes, for a quick look");
  app.add_flag("--sweep", chosen.sweep, "three sizes per fork_join workload (other workloads ignore it)");
  app.add_option("--sweep-cap", chosen.sweep_cap_s,
                 "in a sweep, skip a size whose run is predicted (from the size before) to take longer, seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", chosen.json_path, "append one JSON line per measurement to this file");
  app.add_option("--git", chosen.git, "commit being measured, recorded in the JSON");
  app.add_option("--trace", chosen.trace_path,
                 "magpie only: write a trace of the run's last events per thread here (docs/tracing.md)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error));
  }
  if (chosen.threads.empty()) {
    unsigned all = std::max(1u, std::thread::hardware_concurrency());
    chosen.threads = all > 1 ? std::vector<unsigned>{1, all} : std::vector<unsigned>{1};
  }
  return chosen;
}

// peak_rss_kb is the peak resident memory of this process since the last
// reset_peak_rss() (Linux VmHWM), else since the process started (ru_maxrss).
inline long peak_rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// reset_peak_rss starts a new peak-memory window: writing 5 to /proc/self/clear_refs sets
// VmHWM back to the current resident size (Linux >= 4.0), so each measurement's
// peak_rss_kb is the most this process held while that measurement ran — memory the
// workload's data and the scheduler hold, not a peak left over from an earlier workload.
// Returns false where the kernel does not allow it (the figure is then process-wide).
inline bool reset_peak_rss() {
  malloc_trim(0);  // what earlier measurements freed is not this one's
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

// time_runs warms up by running `once` until at least 50 ms have passed (at least once:
// one run was not enough to get one-thread figures off their slow mode), then runs it
// `runs` times and returns the seconds each timed run took. `once` must check its own
// answer and throw on a wrong one. The peak-memory window starts before the warm-up.
template <class Once>
std::vector<double> time_runs(int runs, Once&& once) {
  reset_peak_rss();
  auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  do {
    once();
  } while (std::chrono::steady_clock::now() < warm_until);
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    once();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

// time_pairs times `baseline` and `measured` alternately, `pairs` times each after a
// warm-up of both (which goes first alternates too), and returns measured's seconds over
// baseline's, pair by pair: a ratio between two runs a few milliseconds apart, which a
// host's speed spells (minutes long on shared VMs) slow down together. Each must check its
// own answer, as for time_runs. `measured_seconds` receives measured's own times.
template <class Baseline, class Measured>
std::vector<double> time_pairs(int pairs, Baseline&& baseline, Measured&& measured,
                               std::vector<double>& measured_seconds) {
  reset_peak_rss();
  auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  do {
    baseline();
    measured();
  } while (std::chrono::steady_clock::now() < warm_until);
  auto seconds_of = [](auto& once) {
    auto start = std::chrono::steady_clock::now();
    once();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> ratios;
  for (int i = 0; i < pairs; ++i) {
    double base = 0.0, mine = 0.0;
    if (i % 2 == 0) {
      base = seconds_of(baseline);
      mine = seconds_of(measured);
    } else {
      mine = seconds_of(measured);
      base = seconds_of(baseline);
    }
    measured_seconds.push_back(mine);
    ratios.push_back(mine / base);
  }
  return ratios;
}

// resident_bytes is what this process holds in memory now (/proc/self/statm), 0 where
// that cannot be read.
inline long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

// bytes_per_task measures the memory a system takes per task waiting to run: the growth of
// the resident set while `hold` holds `count` tasks, launched but not yet run (hold
// launches them, calls `measure`, then lets them run and checks its answer). Taken first
// thing in the process, so no earlier workload left memory for the tasks to reuse.
template <class Hold>
double bytes_per_task(std::size_t count, Hold&& hold) {
  malloc_trim(0);
  long before = resident_bytes();
  long during = before;
  hold([&] { during = resident_bytes(); });
  return static_cast<double>(during - before) / static_cast<double>(count);
}

inline std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// record prints one line and appends the JSON object for one measurement.
// A ratio (time_pairs) is recorded with unit "ratio", a size (bytes_per_task) with unit
// "bytes": either rides in median_s, so rounds merge and tables compare it as any
// measurement, and the table prints it as a factor or in bytes.
inline void record(const options& chosen, const std::string& system, const std::string& workload,
                   const std::string& param, unsigned threads, std::vector<double> seconds,
                   std::uint64_t tasks, const char* unit = "s") {
  std::sort(seconds.begin(), seconds.end());
  double median = seconds[seconds.size() / 2];
  const std::string kind = unit;
  std::printf("%-10s %-22s %-12s threads=%-3u median=%.6f%s", system.c_str(), workload.c_str(), param.c_str(),
              threads, median, kind == "s" ? "s" : kind == "bytes" ? " bytes" : "x");
  if (tasks > 0) {  // loops and latencies have no task count of their own
    std::printf("  %.1f ns/task/core", median * 1e9 * threads / static_cast<double>(tasks));
  }
  std::printf("\n");
  long peak = peak_rss_kb();
  reset_peak_rss();  // the next measurement's window, for those that do not use time_runs
  if (chosen.json_path.empty()) return;
  nlohmann::json line = {
      {"workload", workload}, {"param", param}, {"system", system}, {"threads", threads},
      {"median_s", median}, {"min_s", seconds.front()}, {"max_s", seconds.back()},
      {"runs", seconds.size()}, {"tasks", tasks}, {"peak_rss_kb", peak},
      {"host", host_name()}, {"compiler", __VERSION__}, {"git", chosen.git}, {"unit", unit},
  };
  std::ofstream(chosen.json_path, std::ios::app) << line.dump() << '\n';
}

// percentile returns the p-th percentile (0..100) of `values`.
inline double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  auto index = static_cast<std::size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// process_cpu_seconds is the CPU time all threads of this process used so far.
inline double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace bench
