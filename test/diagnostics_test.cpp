// Tests for include/magpie/diagnostics.h — the installable diagnostic handler.
#include <magpie/diagnostics.h>

#include "support.h"

#include <doctest/doctest.h>

#include <thread>

TEST_SUITE("diagnostics") {

TEST_CASE("diagnostics: a report reaches the installed handler with its kind, severity and text") {
  magpie::test::diagnostic_recorder recorder;
  magpie::report(magpie::diagnostic_kind::misuse, "prerequisite added after launch");
  magpie::report(magpie::diagnostic_kind::limit_reached, "standby cap", magpie::severity::warning);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].severity == magpie::severity::error);
  CHECK(reports[0].message == "prerequisite added after launch");
  CHECK(reports[1].kind == magpie::diagnostic_kind::limit_reached);
  CHECK(reports[1].severity == magpie::severity::warning);
}

TEST_CASE("diagnostics: reports from other threads reach the same handler") {
  magpie::test::diagnostic_recorder recorder;
  std::thread other([] { magpie::report(magpie::diagnostic_kind::never_ran, "event load never triggered"); });
  other.join();
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == magpie::diagnostic_kind::never_ran);
}

TEST_CASE("diagnostics: set_diagnostic_handler returns the handler it replaced") {
  auto custom = [](const magpie::diagnostic&) {};
  magpie::diagnostic_handler original = magpie::set_diagnostic_handler(+custom);
  CHECK((original == &magpie::default_diagnostic_handler));
  CHECK((magpie::set_diagnostic_handler(nullptr) == +custom));
  CHECK((magpie::set_diagnostic_handler(original) == &magpie::default_diagnostic_handler));
}

TEST_CASE("diagnostics: the default handler prints warnings and carries on") {
  // A warning never aborts, even with debug checks on; errors do in debug builds.
  magpie::default_diagnostic_handler(
      {magpie::diagnostic_kind::limit_reached, magpie::severity::warning, "printed by a test"});
  CHECK(true);
}

TEST_CASE("diagnostics: every kind has a name") {
  CHECK(magpie::to_string(magpie::diagnostic_kind::misuse) == "misuse");
  CHECK(magpie::to_string(magpie::diagnostic_kind::limit_reached) == "limit reached");
  CHECK(magpie::to_string(magpie::diagnostic_kind::never_ran) == "never ran");
  CHECK(magpie::to_string(magpie::diagnostic_kind::unhandled_exception) == "unhandled exception");
  CHECK(magpie::to_string(magpie::diagnostic_kind::stalled) == "stalled");
}

}  // TEST_SUITE("diagnostics")
