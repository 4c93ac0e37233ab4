// Shared helpers for magpie's doctest suites.
#pragma once

#include <magpie/diagnostics.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace magpie::test {

// worker_counts is the worker-count matrix scheduler tests run over (0 = waiting threads
// run everything; 8 oversubscribes a 2-core machine).
inline constexpr unsigned worker_counts[] = {0, 1, 2, 8};

// wide_worker_counts adds 4 and 64 (far past the cores: most workers parked at any time)
// for the scheduler's own tests, whose cases are cheap enough to run that wide.
inline constexpr unsigned wide_worker_counts[] = {0, 1, 2, 4, 8, 64};

// lone_int is an int alone in its cache line, for a value handed between threads by the
// edge under test only: TSan remembers the last four accesses to each 8 bytes, and a
// neighbour's accesses could push the racing write out of its memory.
struct alignas(64) lone_int {
  int value = 0;
};

// stress_repeat is how many times stress cases repeat (env MAGPIE_STRESS_REPEAT, default 1).
inline int stress_repeat() {
  const char* text = std::getenv("MAGPIE_STRESS_REPEAT");
  int repeat = text != nullptr ? std::atoi(text) : 1;
  return repeat > 0 ? repeat : 1;
}

// diagnostic_recorder installs a handler that records every report instead of aborting,
// and restores the previous handler when it goes out of scope. One at a time.
class diagnostic_recorder {
 public:
  diagnostic_recorder() {
    std::lock_guard lock(state().mutex);
    state().seen.clear();
    previous_ = set_diagnostic_handler(&record);
  }
  ~diagnostic_recorder() { set_diagnostic_handler(previous_); }
  diagnostic_recorder(const diagnostic_recorder&) = delete;
  diagnostic_recorder& operator=(const diagnostic_recorder&) = delete;

  struct entry {
    diagnostic_kind kind;
    enum severity severity;
    std::string message;
  };

  // reports returns a copy of everything recorded so far.
  std::vector<entry> reports() const {
    std::lock_guard lock(state().mutex);
    return state().seen;
  }

  // count is the number of reports so far.
  std::size_t count() const {
    std::lock_guard lock(state().mutex);
    return state().seen.size();
  }

  // count_naming is the number of reports so far whose message contains `text`.
  std::size_t count_naming(const std::string& text) const {
    std::lock_guard lock(state().mutex);
    std::size_t found = 0;
    for (const entry& each : state().seen) found += each.message.find(text) != std::string::npos ? 1 : 0;
    return found;
  }

 private:
  struct shared {
    std::mutex mutex;
    std::vector<entry> seen;
  };
  static shared& state() {
    static shared instance;
    return instance;
  }
  static void record(const diagnostic& report) {
    std::lock_guard lock(state().mutex);
    state().seen.push_back({report.kind, report.severity, std::string(report.message)});
  }

  diagnostic_handler previous_;
};

// reported says whether `recorder` saw a report whose message contains `part`.
inline bool reported(const diagnostic_recorder& recorder, const std::string& part) {
  return recorder.count_naming(part) != 0;
}

// mentions says whether any of `reports` contains `text` in its message.
inline bool mentions(const std::vector<diagnostic_recorder::entry>& reports, const std::string& text) {
  for (const auto& each : reports) {
    if (each.message.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace magpie::test
