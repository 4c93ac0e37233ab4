// Suite "scheduler_options": making schedulers (include/magpie/scheduler.h) — worker and
// background counts from scheduler_options and from any integer type, MAGPIE_NUM_THREADS,
// the default scheduler and its size, several schedulers side by side, and the limit of 256
// alive at once.
#include <magpie/scheduler.h>
#include <magpie/task.h>

#include "job.h"
#include "scheduler_support.h"
#include "support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

using magpie::priority;
using magpie::scheduler;
using magpie::scheduler_options;
using namespace magpie::test;

TEST_SUITE("scheduler_options") {

TEST_CASE("scheduler: at most 256 are alive at once; the 257th is refused, and a freed slot is used again") {
  // A task names its scheduler by a one-byte slot: creation past the limit must fail loudly.
  std::vector<std::unique_ptr<scheduler>> alive;
  bool refused = false;
  for (int i = 0; i < 257 && !refused; ++i) {
    try {
      alive.push_back(std::make_unique<scheduler>(pool_of(0)));
    } catch (const std::length_error&) {
      refused = true;
    }
  }
  CHECK(refused);
  CHECK(alive.size() <= 256);
  alive.pop_back();
  CHECK_NOTHROW(alive.push_back(std::make_unique<scheduler>(pool_of(0))));
}

TEST_CASE("scheduler: several schedulers live side by side and current() names the right one") {
  scheduler first(pool_of(2));
  scheduler second(pool_of(1));
  std::atomic<int> right{0};
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) {
    launch(first, [&] { right.fetch_add(scheduler::current() == &first ? 1 : 0); done.fetch_add(1); });
    launch(second, [&] { right.fetch_add(scheduler::current() == &second ? 1 : 0); done.fetch_add(1); });
  }
  wait_until([&] { return done.load() == 100; });
  CHECK(right.load() == 100);
  CHECK(scheduler::current() == nullptr);
}

TEST_CASE("scheduler: the default scheduler is created on first use and runs work") {
  scheduler& shared = magpie::default_scheduler();
  CHECK(&shared == &magpie::default_scheduler());
  CHECK(shared.worker_count() == magpie::default_worker_count());
  std::atomic<bool> ran{false};
  launch(shared, [&] { ran.store(true); });
  help_until(shared, [&] { return ran.load(); });
}

TEST_CASE("scheduler: {.workers = n} starts n workers, the background ones among them, and all take foreground work") {
  std::atomic<int> started{0};
  {
    // Designated initialisers naming only some fields: every other field has a default
    // member initialiser, so this compiles under -Wextra -Werror as users write it.
    scheduler_options options{.workers = 2,
                              .on_worker_start = [&](const magpie::worker_info&) { started.fetch_add(1); }};
    scheduler pool(options);
    CHECK(pool.worker_count() == 2);
    CHECK(pool.background_worker_count() == 1);  // the default: one of the two
    // Two normal jobs that each wait (bounded) for the other to start: both workers must
    // take foreground work, the background one included, while this thread only watches.
    std::atomic<int> running{0};
    std::atomic<int> met{0};
    std::atomic<int> done{0};
    wait_until_all_parked(pool);  // each must be woken for the work, not find it while starting
    for (int i = 0; i < 2; ++i) {
      launch(pool, [&] {
        running.fetch_add(1);
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (running.load() < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        if (running.load() == 2) met.fetch_add(1);
        done.fetch_add(1);
      });
    }
    wait_until([&] { return done.load() == 2; });
    CHECK(met.load() == 2);
  }
  CHECK(started.load() == 2);
}

TEST_CASE("scheduler: background_workers beyond workers means all of them; zero workers have none") {
  scheduler_options options = pool_of(2, 5);
  scheduler wide(options);
  CHECK(wide.worker_count() == 2);
  CHECK(wide.background_worker_count() == 2);
  scheduler none({.workers = 0});
  CHECK(none.worker_count() == 0);
  CHECK(none.background_worker_count() == 0);
  std::atomic<bool> ran{false};
  launch(none, [&] { ran.store(true); }, priority::background_low);
  help_until(none, [&] { return ran.load(); });
}

TEST_CASE("scheduler: thread counts come from any integer type, range-checked") {
  static_assert(std::is_convertible_v<std::int64_t, magpie::thread_count>);
  static_assert(std::is_convertible_v<std::size_t, magpie::thread_count>);
  static_assert(std::is_convertible_v<short, magpie::thread_count>);
  static_assert(!std::is_constructible_v<magpie::thread_count, bool>);
  static_assert(!std::is_constructible_v<magpie::thread_count, double>);
  std::int64_t from_benchmark = 3;  // e.g. benchmark::State::range(0)
  scheduler_options options{.workers = from_benchmark - 1, .background_workers = std::size_t{0},
                            .max_standby_workers = from_benchmark};
  CHECK(options.workers == 2u);
  CHECK(options.background_workers == 0u);
  CHECK(*options.max_standby_workers == 3u);
  scheduler pool(options);
  CHECK(pool.worker_count() == 2);
  CHECK(pool.background_worker_count() == 0);
  CHECK_THROWS_AS(magpie::thread_count(from_benchmark - 4), std::out_of_range);
  CHECK_THROWS_AS(magpie::thread_count(std::int64_t{1} << 40), std::out_of_range);
  constexpr magpie::thread_count at_compile_time = 7;
  static_assert(at_compile_time == 7u);
}

namespace {

// with_environment sets an environment variable for its lifetime, then restores it.
class with_environment {
 public:
  with_environment(const char* name, const char* value) : name_(name) {
    if (const char* before = std::getenv(name)) before_ = before;
    had_ = std::getenv(name) != nullptr;
    setenv(name, value, 1);
  }
  ~with_environment() {
    if (had_) {
      setenv(name_, before_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  with_environment(const with_environment&) = delete;
  with_environment& operator=(const with_environment&) = delete;

 private:
  const char* name_;
  std::string before_;
  bool had_ = false;
};

// default_scheduler_child names the child-process mode of the case below.
constexpr const char* default_scheduler_child = "MAGPIE_TEST_DEFAULT_SCHEDULER_CHILD";

// child_passed is the exit status of a child that passed every check.
constexpr int child_passed = 42;

// run_child runs this test binary again on the case below, in `mode`, with
// MAGPIE_NUM_THREADS=`threads`, and returns its exit status.
int run_child(const char* mode, const char* threads) {
  with_environment child(default_scheduler_child, mode);
  with_environment count("MAGPIE_NUM_THREADS", threads);
  std::string filter = "--test-case=scheduler: child: the default scheduler's size";
  char program[] = "/proc/self/exe";
  char no_intro[] = "--no-intro=true";
  char* argv[] = {program, filter.data(), no_intro, nullptr};
  pid_t child_id = 0;
  if (posix_spawn(&child_id, program, nullptr, nullptr, argv, environ) != 0) return -1;
  int status = 0;
  if (waitpid(child_id, &status, 0) != child_id || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("scheduler: MAGPIE_NUM_THREADS=N means N threads of foreground work, the caller included") {
  diagnostic_recorder recorder;
  {
    with_environment count("MAGPIE_NUM_THREADS", "3");
    CHECK(magpie::default_worker_count() == 2);
    CHECK(scheduler_options{}.workers == 2u);
    scheduler pool;
    CHECK(pool.worker_count() == 2);
  }
  {
    with_environment count("MAGPIE_NUM_THREADS", "1");
    CHECK(magpie::default_worker_count() == 0);
  }
  CHECK(recorder.count() == 0);
  unsigned hardware = std::thread::hardware_concurrency() > 1 ? std::thread::hardware_concurrency() - 1 : 1;
  for (const char* wrong : {"0", "-2", "three", "4x", ""}) {
    CAPTURE(wrong);
    with_environment count("MAGPIE_NUM_THREADS", wrong);
    CHECK(magpie::default_worker_count() == hardware);
  }
  // Reported once per process, with the value it ignored.
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(recorder.reports()[0].message.find("'0'") != std::string::npos);
}

TEST_CASE("scheduler: the default scheduler's size is set by MAGPIE_NUM_THREADS or by options, before first use") {
  // A fresh process each: in this one the default scheduler may exist already.
  CHECK(run_child("environment", "3") == child_passed);
  CHECK(run_child("options", "5") == child_passed);
  diagnostic_recorder recorder;
  (void)magpie::default_scheduler();
  CHECK_FALSE(magpie::set_default_scheduler_options({.workers = 1}));
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == magpie::diagnostic_kind::misuse);
}

TEST_CASE("scheduler: child: the default scheduler's size") {
  // Runs its checks only as the child process the case above starts.
  const char* mode = std::getenv(default_scheduler_child);
  if (mode == nullptr) return;
  bool passed = false;
  if (std::string(mode) == "environment") {  // MAGPIE_NUM_THREADS=3, read when it is made
    scheduler& shared = magpie::default_scheduler();
    passed = shared.worker_count() == 2 && shared.background_worker_count() == 1;
  } else if (std::string(mode) == "options") {  // options given win over MAGPIE_NUM_THREADS=5
    diagnostic_recorder recorder;
    bool taken = magpie::set_default_scheduler_options({.workers = 1, .background_workers = 0});
    scheduler& shared = magpie::default_scheduler();
    bool refused = !magpie::set_default_scheduler_options({.workers = 3});
    passed = taken && refused && shared.worker_count() == 1 && shared.background_worker_count() == 0 &&
             recorder.count() == 1 && recorder.reports()[0].kind == magpie::diagnostic_kind::misuse;
  }
  std::fflush(nullptr);
  std::_Exit(passed ? child_passed : 1);
}

}  // TEST_SUITE("scheduler_options")
