// Layer 1 — diagnostics: how magpie reports misuse instead of corrupting itself.
//
// Every layer reports bad input (a stale handle, a prerequisite added after launch, an
// owner-only deque operation from a foreign thread, a launch after shutdown, …) through
// one installable handler. The default prints the message to stderr and, for errors in
// builds with debug checks, aborts. Tests install their own handler to observe misuse:
//
//   static std::vector<std::string> seen;
//   auto previous = magpie::set_diagnostic_handler(
//       [](const magpie::diagnostic& d) { seen.emplace_back(d.message); });
//   ...  // misuse something
//   magpie::set_diagnostic_handler(previous);
#pragma once

#include <magpie/detail/language.h>

#include <string_view>

namespace magpie {

// diagnostic_kind says what went wrong.
enum class diagnostic_kind {
  misuse,               // the caller broke a documented rule
  limit_reached,        // a configured cap was hit (e.g. standby workers)
  never_ran,            // work that can never run was released at shutdown
  unhandled_exception,  // a task threw and nobody asked for its result
  stalled,              // a blocking wait or a shutdown made no progress for a while
};

// severity says whether the program can carry on as documented.
enum class severity { warning, error };

// diagnostic is one report; `message` is valid only during the handler call.
struct diagnostic {
  // kind says what went wrong.
  diagnostic_kind kind;
  // severity is how serious the report is: a warning or an error.
  enum severity severity;
  // message is the report's text; valid only during the handler call.
  std::string_view message;
};

// diagnostic_handler receives every report, on the thread that detected the problem.
using diagnostic_handler = void (*)(const diagnostic&);

// set_diagnostic_handler installs `handler` (nullptr restores the default) and returns
// the handler it replaced. Safe to call from any thread.
diagnostic_handler set_diagnostic_handler(diagnostic_handler handler) noexcept;

// default_diagnostic_handler prints to stderr and aborts on errors when debug checks
// are compiled in (see magpie/config.h).
void default_diagnostic_handler(const diagnostic& report);

// report hands one diagnostic to the installed handler.
void report(diagnostic_kind kind, std::string_view message, severity level = severity::error);

// to_string names a diagnostic kind, e.g. "misuse".
std::string_view to_string(diagnostic_kind kind) noexcept;

}  // namespace magpie
