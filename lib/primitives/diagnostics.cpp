#include <magpie/config.h>
#include <magpie/chaos.h>
#include <magpie/diagnostics.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace magpie {

namespace {
std::atomic<diagnostic_handler> installed_handler{&default_diagnostic_handler};
}  // namespace

diagnostic_handler set_diagnostic_handler(diagnostic_handler handler) noexcept {
  if (handler == nullptr) handler = &default_diagnostic_handler;
  // acq_rel: the release publishes the handler to `report`'s acquire load; the acquire
  // side lets a caller restore the previous handler it got back.
  return installed_handler.exchange(handler, std::memory_order_acq_rel);
}

void default_diagnostic_handler(const diagnostic& report) {
  std::fprintf(stderr, "magpie: %s %.*s: %.*s\n",
               report.severity == severity::error ? "error" : "warning",
               static_cast<int>(to_string(report.kind).size()), to_string(report.kind).data(),
               static_cast<int>(report.message.size()), report.message.data());
  if (report.severity == severity::error && chaos::current()) {
    std::fprintf(stderr, "magpie: chaos mode was on; replay with %s\n", chaos::describe().c_str());
  }
  std::fflush(stderr);
  if (MAGPIE_DEBUG_CHECKS && report.severity == severity::error) std::abort();
}

void report(diagnostic_kind kind, std::string_view message, enum severity level) {
  // acquire: pairs with the release in set_diagnostic_handler.
  installed_handler.load(std::memory_order_acquire)(diagnostic{kind, level, message});
}

std::string_view to_string(diagnostic_kind kind) noexcept {
  switch (kind) {
    case diagnostic_kind::misuse: return "misuse";
    case diagnostic_kind::limit_reached: return "limit reached";
    case diagnostic_kind::never_ran: return "never ran";
    case diagnostic_kind::unhandled_exception: return "unhandled exception";
    case diagnostic_kind::stalled: return "stalled";
  }
  return "unknown";
}

}  // namespace magpie
