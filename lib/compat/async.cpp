// The compiled part of futures and promises: their misuse reports.
#include <magpie/async.h>
#include <magpie/diagnostics.h>

#include <stdexcept>
#include <string>

namespace magpie::async_internal {

void report_misuse(std::string_view message) { report(diagnostic_kind::misuse, std::string(message)); }

void check_valid(bool valid, const char* operation) {
  if (valid) return;
  std::string message = std::string("future::") + operation + " on an invalid future (default-made, consumed, shared or continued)";
  report(diagnostic_kind::misuse, message);
  throw std::logic_error("magpie::" + message);
}

}  // namespace magpie::async_internal
