// The soak: every kind of work the core runs, round after round in one process, on the
// worker matrix, under chaos when MAGPIE_CHAOS is set (tools/soak.sh sets it). Each round
// checks its outcomes; after each round the task memory of the threads that launched goes
// back (trim_task_memory) and the resident set is sampled. It fails when an outcome is
// wrong, when the resident set grows past the first rounds' level, or when a round hangs
// (a watchdog names it and aborts).
//
//   soak --seconds 600 [--seed N] [--workers 0,1,2,4]
#include <magpie/chaos.h>
#include <magpie/pipe.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/task_group.h>
#include <magpie/task_memory.h>
#include <magpie/wait.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using clock_type = std::chrono::steady_clock;

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  std::size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "soak: FAILED: %s (chaos: %s)\n", what.c_str(), magpie::chaos::describe().c_str());
  std::fflush(stderr);
  std::abort();
}

void expect(bool holds, const std::string& what) {
  if (!holds) fail(what);
}

// round_watchdog aborts the process when one round runs past its limit: a hang names the
// round and the seed rather than eating the soak's time.
class round_watchdog {
 public:
  explicit round_watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
  ~round_watchdog() {
    done_.store(true);
    thread_.join();
  }
  round_watchdog(const round_watchdog&) = delete;
  round_watchdog& operator=(const round_watchdog&) = delete;

  void begin(std::string name) {
    std::lock_guard lock(mutex_);
    name_ = std::move(name);
    started_ = clock_type::now();
  }

 private:
  void watch() {
    while (!done_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard lock(mutex_);
      if (!name_.empty() && clock_type::now() - started_ > limit_) fail("round '" + name_ + "' hung");
    }
  }

  std::chrono::seconds limit_;
  std::mutex mutex_;
  std::string name_;
  clock_type::time_point started_{};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

int fib(int n) {
  if (n < 2) return n;
  int a = 0;
  magpie::task_group group;
  group.run([&] { a = fib(n - 1); });
  int b = fib(n - 2);
  group.wait();
  return a + b;
}

// random_graph: tasks with random earlier prerequisites, some of them events triggered
// late from another thread, waited for in a random order; every body runs once, after
// its prerequisites.
void random_graph(magpie::scheduler& pool, std::mt19937_64& random) {
  constexpr int count = 3000;
  std::vector<std::atomic<int>> finished_at(count);
  std::atomic<int> clock{0};
  std::vector<magpie::task<>> tasks;
  std::vector<std::vector<int>> before(count);
  std::vector<magpie::task_event> gates;
  gates.reserve(8);
  for (int i = 0; i < 8; ++i) gates.emplace_back("soak gate", pool);
  tasks.reserve(count);
  for (int i = 0; i < count; ++i) {
    std::vector<magpie::task<>> prerequisites;
    int edges = i == 0 ? 0 : static_cast<int>(random() % 4);
    for (int e = 0; e < edges; ++e) {
      int j = static_cast<int>(random() % static_cast<std::uint64_t>(i));
      before[static_cast<std::size_t>(i)].push_back(j);
      prerequisites.push_back(tasks[static_cast<std::size_t>(j)]);
    }
    if (random() % 64 == 0) prerequisites.push_back(gates[random() % gates.size()]);
    tasks.push_back(pool.launch("soak node", [&, i] {
      for (int j : before[static_cast<std::size_t>(i)]) {
        expect(finished_at[static_cast<std::size_t>(j)].load() > 0, "a body ran before its prerequisite");
      }
      finished_at[static_cast<std::size_t>(i)].store(clock.fetch_add(1) + 1);
    }, prerequisites));
  }
  std::thread trigger([&] {
    for (auto& gate : gates) gate.trigger();
  });
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), random);
  for (std::size_t i : order) tasks[i].wait();
  trigger.join();
  for (auto& slot : finished_at) expect(slot.load() > 0, "a body never ran");
  expect(clock.load() == count, "a body ran twice");
}

void fork_join(magpie::scheduler& pool) {
  int result = 0;
  pool.launch("soak fib root", [&] { result = fib(20); }).wait();
  expect(result == 6765, "fib(20) came out wrong");
}

void piped(magpie::scheduler& pool) {
  magpie::pipe serial("soak pipe", pool);
  std::vector<int> order;
  std::atomic<int> inside{0};
  std::vector<magpie::task<>> tasks;
  for (int i = 0; i < 2000; ++i) {
    tasks.push_back(serial.launch("soak piped", [&, i] {
      expect(inside.fetch_add(1) == 0, "two piped bodies overlapped");
      order.push_back(i);
      inside.fetch_sub(1);
    }));
  }
  magpie::wait_all(tasks);
  expect(order.size() == 2000, "a piped body never ran");
  expect(std::is_sorted(order.begin(), order.end()), "piped bodies ran out of launch order");
}

void nested_waits(magpie::scheduler& pool) {
  std::atomic<int> ran{0};
  auto root = pool.launch("soak nesting root", [&] {
    std::vector<magpie::task<>> children;
    for (int i = 0; i < 64; ++i) {
      children.push_back(pool.launch("soak child", [&] {
        auto grandchild = pool.launch("soak grandchild", [&] { ran.fetch_add(1); });
        grandchild.wait();
        ran.fetch_add(1);
      }));
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it) it->wait();
  });
  root.wait();
  expect(ran.load() == 128, "a nested wait lost work");
}

struct options {
  double seconds = 60;
  std::uint64_t seed = 1;
  std::vector<unsigned> workers{0, 1, 2, 4};
  double growth_limit_mb = 64;
};

}  // namespace

int main(int argc, char** argv) {
  options chosen;
  CLI::App app{"magpie soak: the core's work in rounds, outcomes and resident memory checked"};
  app.add_option("--seconds", chosen.seconds, "how long to go on");
  app.add_option("--seed", chosen.seed, "the graphs' seed (chaos comes from MAGPIE_CHAOS)");
  app.add_option("--workers", chosen.workers, "the worker matrix")->delimiter(',');
  app.add_option("--growth-limit-mb", chosen.growth_limit_mb, "resident growth allowed past the first rounds");
  CLI11_PARSE(app, argc, argv);

  magpie::chaos::start_from_environment();
  std::printf("soak: %.0f s, seed %llu, chaos %s\n", chosen.seconds, static_cast<unsigned long long>(chosen.seed),
              magpie::chaos::describe().c_str());
  std::mt19937_64 random(chosen.seed);
  round_watchdog watchdog(std::chrono::seconds(180));
  auto end = clock_type::now() + std::chrono::duration<double>(chosen.seconds);
  std::size_t baseline = 0;
  std::size_t peak = 0;
  int rounds = 0;
  constexpr int warm_up_rounds = 3;
  while (clock_type::now() < end || rounds < warm_up_rounds + 1) {
    for (unsigned workers : chosen.workers) {
      magpie::scheduler_options settings;
      settings.workers = workers;
      magpie::scheduler pool(settings);
      std::string round = "round " + std::to_string(rounds) + ", " + std::to_string(workers) + " workers";
      watchdog.begin(round + ": random graph");
      random_graph(pool, random);
      watchdog.begin(round + ": fork-join");
      fork_join(pool);
      watchdog.begin(round + ": pipe");
      piped(pool);
      watchdog.begin(round + ": nested waits");
      nested_waits(pool);
      watchdog.begin(round + ": shutdown");
    }
    watchdog.begin("between rounds");
    magpie::trim_task_memory();
    std::size_t resident = resident_bytes();
    ++rounds;
    if (rounds == warm_up_rounds) baseline = resident;
    peak = std::max(peak, resident);
    if (rounds > warm_up_rounds &&
        static_cast<double>(resident) > static_cast<double>(baseline) + chosen.growth_limit_mb * 1048576.0) {
      fail("resident memory grew from " + std::to_string(baseline >> 20) + " MiB to " +
           std::to_string(resident >> 20) + " MiB by round " + std::to_string(rounds));
    }
  }
  std::printf("soak: %d rounds passed; resident after warm-up %zu MiB, peak %zu MiB, last %zu MiB\n", rounds,
              baseline >> 20, peak >> 20, resident_bytes() >> 20);
  return 0;
}
