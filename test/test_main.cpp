// doctest's main for every suite, plus a watchdog: a test case that runs longer than
// MAGPIE_TEST_WATCHDOG_S seconds (default 240 × MAGPIE_STRESS_REPEAT) is named on stderr
// and the process aborts, so a hang reads as "which test" rather than as meson's bare
// time-out.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support.h"

#include <magpie/chaos.h>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <sys/prctl.h>
#include <unistd.h>

namespace {

class watchdog_clock {
 public:
  // instance is never destroyed: its thread waits on it until the process exits.
  static watchdog_clock& instance() {
    static watchdog_clock* clock = new watchdog_clock();
    return *clock;
  }

  void arm(std::string name) {
    std::lock_guard lock(mutex_);
    name_ = std::move(name);
    deadline_ = std::chrono::steady_clock::now() + limit_;
    armed_ = true;
    changed_.notify_one();
  }

  void disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }

 private:
  watchdog_clock() {
    // Repeated stress cases take that many times longer: the default limit grows with them.
    const long fallback = 240L * magpie::test::stress_repeat();
    const char* text = std::getenv("MAGPIE_TEST_WATCHDOG_S");
    long seconds = text != nullptr ? std::atol(text) : fallback;
    limit_ = std::chrono::seconds(seconds > 0 ? seconds : fallback);
    std::thread([this] { watch(); }).detach();
  }

  [[noreturn]] void watch() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!armed_) {
        changed_.wait(lock);
      } else if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
                 std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr, "\nwatchdog: test case \"%s\" still running after %lld s; aborting (chaos: %s)\n",
                     name_.c_str(), static_cast<long long>(limit_.count()), magpie::chaos::describe().c_str());
        std::fflush(stderr);
        dump_threads();
        // doctest's own SIGABRT handler can hang in a deadlocked process: die plainly.
        std::signal(SIGABRT, SIG_DFL);
        std::abort();
      }
    }
  }

  // dump_threads prints every thread's stack through gdb, when the machine has it: a hang
  // in CI then says where each thread waits, not only which test case hung.
  static void dump_threads() {
    if (std::system("command -v gdb >/dev/null 2>&1") != 0) return;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // Yama: let our child attach to us
    std::string command = "gdb -p " + std::to_string(getpid()) +
                          " -batch -nx -ex 'thread apply all bt 30' 2>/dev/null | grep -E '^(Thread|#)' >&2";
    if (std::system(command.c_str()) != 0) std::fprintf(stderr, "watchdog: gdb could not print the stacks\n");
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_{};
  std::chrono::seconds limit_{240};
  bool armed_ = false;
};

struct watchdog_listener : doctest::IReporter {
  explicit watchdog_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& test) override {
    watchdog_clock::instance().arm(test.m_name);
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    watchdog_clock::instance().disarm();
    if (!stats.testCaseSuccess && magpie::chaos::current()) {
      std::fprintf(stderr, "chaos mode was on: replay with %s\n", magpie::chaos::describe().c_str());
    }
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("watchdog", 1, watchdog_listener);

int main(int argc, char** argv) {
  // MAGPIE_CHAOS covers the suites that make no scheduler (deques, event counts) too.
  if (magpie::chaos::start_from_environment()) {
    std::fprintf(stderr, "chaos mode: %s\n", magpie::chaos::describe().c_str());
  }
  doctest::Context context(argc, argv);
  return context.run();
}
