// What every fuzz target shares: failing loudly on an oracle mismatch, and capturing the
// library's diagnostics so that misuse the input provokes on purpose is checked rather
// than fatal.
#pragma once

#include <magpie/diagnostics.h>
#include <magpie/scheduler.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace magpie::fuzz {

// mismatch prints what the implementation did against what the model expected and aborts,
// which libFuzzer records as a crash (with the input) and a replay test as a failure.
[[noreturn]] inline void mismatch(const std::string& what) {
  std::fprintf(stderr, "fuzz oracle mismatch: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// expect fails the run unless `holds`.
// scheduler_with is the scheduler for each worker count (0–3), made once and kept: a
// scheduler per input would spend most of each run starting and joining threads.
inline scheduler& scheduler_with(unsigned workers) {
  static std::array<std::unique_ptr<scheduler>, 4> pools;
  auto& pool = pools[workers];
  if (!pool) {
    scheduler_options options;
    options.workers = workers;
    options.background_workers = 0;
    pool = std::make_unique<scheduler>(options);
  }
  return *pool;
}

inline void expect(bool holds, const std::string& what) {
  if (!holds) mismatch(what);
}

// diagnostic_capture records every diagnostic while it lives (from any thread), instead of
// the default handler's abort; one at a time, as the handler is process-wide.
class diagnostic_capture {
 public:
  struct entry {
    diagnostic_kind kind;
    std::string message;
  };

  diagnostic_capture() {
    std::lock_guard lock(shared().mutex);
    shared().seen.clear();
    previous_ = set_diagnostic_handler(&record);
  }
  ~diagnostic_capture() { set_diagnostic_handler(previous_); }
  diagnostic_capture(const diagnostic_capture&) = delete;
  diagnostic_capture& operator=(const diagnostic_capture&) = delete;

  // take returns what was recorded since the last take and forgets it.
  std::vector<entry> take() {
    std::lock_guard lock(shared().mutex);
    std::vector<entry> taken;
    taken.swap(shared().seen);
    return taken;
  }

 private:
  struct state {
    std::mutex mutex;
    std::vector<entry> seen;
  };
  static state& shared() {
    static state instance;
    return instance;
  }
  static void record(const diagnostic& report) {
    std::lock_guard lock(shared().mutex);
    shared().seen.push_back({report.kind, std::string(report.message)});
  }

  diagnostic_handler previous_;
};

}  // namespace magpie::fuzz
