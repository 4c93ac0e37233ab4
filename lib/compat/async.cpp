// The compiled part of futures and promises: the scheduler promises' values live on, and
// misuse reports.
#include <magpie/async.h>
#include <magpie/diagnostics.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace magpie::async_internal {

scheduler& value_keeper() {
  // Never destroyed: a promise may be set, and its tasks freed, during static destruction.
  static scheduler* keeper = [] {
    scheduler_options options;
    options.workers = 1;  // never given work: see the header
    options.background_workers = 0;
    return new scheduler(std::move(options));
  }();
  return *keeper;
}

void report_misuse(std::string_view message) { report(diagnostic_kind::misuse, std::string(message)); }

void check_valid(bool valid, const char* operation) {
  if (valid) return;
  std::string message = std::string("future::") + operation + " on an invalid future (default-made, consumed, shared or continued)";
  report(diagnostic_kind::misuse, message);
  throw std::logic_error("magpie::" + message);
}

}  // namespace magpie::async_internal

namespace magpie {

broken_promise::~broken_promise() = default;

}  // namespace magpie
