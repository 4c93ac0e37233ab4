// Contention in counts (the counting build, magpie/detail/counted_atomic.h; run through
// tools/contention.sh): for each thread count, the read-modify-writes on shared atomics,
// the fences and the cache-line moves between threads that each workload makes,
// per call site, normalised per unit of work:
//   batch          2^20 empty tasks launched, then wait_all            per task
//   batch_unattached  the same from a main thread not attached          per task
//   one_at_a_time  an empty task launched and waited for, repeatedly   per task
//   tick_frame     frames of the tick benchmark's population          per tick run
//   parallel_for   loops of a body of a few nanoseconds               per loop (2^20 iterations)
//   coro_fork_fib  coroutine fib in fork-join form (bench/coroutine)  per call (a coroutine frame)
//   limiter_n2, _n4  2^17 pieces pushed into a concurrency limiter of N by an unattached
//                  main, then wait (bench/coroutine's limiter rows)     per piece
//   limiter_n4_from_all  the same, N = 4, pushed from every thread      per piece
// Counts, not times: the figures are the same on 2 cores as on 16, save what idle threads
// do while they search (their loads and the moves those cause vary with timing).
#include <magpie/concurrency_limiter.h>
#include <magpie/magpie.h>
#include <magpie/detail/counted_atomic.h>

#include "../common/magpie_threads.h"
#include "../coroutine/forked_fib.h"
#include "../tick/workload.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace counting = magpie::detail::counting;
using counting::operation;

static_assert(MAGPIE_COUNTING, "bench_contention_magpie needs the counting build (-Dcounting=enabled)");

// workload is one shape measured: `run` does one round and returns the units it did.
struct workload {
  std::string name;
  std::string unit;
  std::function<std::uint64_t()> run;
};

// per_unit is one site's counts in one measurement, divided by the units of work.
struct per_unit {
  double rmw = 0, failed_cas = 0, store = 0, load = 0, fence = 0, light = 0, heavy = 0, moves = 0;
  double shared_cost() const { return rmw + failed_cas + fence + heavy + moves; }
};

per_unit normalise(const counting::site_counts& site, std::uint64_t units) {
  auto over = [units](std::uint64_t count) { return static_cast<double>(count) / static_cast<double>(units); };
  return {over(site.count(operation::rmw)),   over(site.count(operation::failed_cas)),
          over(site.count(operation::store)), over(site.count(operation::load)),
          over(site.count(operation::fence)), over(site.count(operation::light_barrier)),
          over(site.count(operation::heavy_barrier)),
          over(site.moves)};
}

// site_name is "file:line function" with the folders, the return type, the namespaces and
// the template arguments of the function dropped.
std::string site_name(const counting::site_counts& site) {
  std::string file = site.file;
  file = file.substr(file.find_last_of('/') + 1);
  std::string function = site.function;
  function = function.substr(0, function.find('('));
  std::string plain;
  int depth = 0;
  for (char c : function) {
    if (c == '<') ++depth;
    if (depth == 0) plain += c;
    if (c == '>') --depth;
  }
  plain = plain.substr(plain.find_last_of(' ') + 1);
  std::size_t colons = plain.rfind("::");
  if (colons != std::string::npos) {
    std::size_t before = plain.rfind("::", colons - 1);
    plain = plain.substr(before == std::string::npos ? 0 : before + 2);
  }
  return file + ":" + std::to_string(site.line) + " " + plain;
}

struct measurement {
  std::uint64_t units = 0;
  std::map<std::string, per_unit> sites;
  per_unit total;
};

measurement measure(const workload& shape, int rounds) {
  (void)shape.run();  // warm-up: pools, deques and schedules reach their size
  counting::totals before = counting::snapshot();
  measurement result;
  for (int round = 0; round < rounds; ++round) result.units += shape.run();
  for (const counting::site_counts& site : counting::since(before)) {
    per_unit counts = normalise(site, result.units);
    per_unit& slot = result.sites[site_name(site)];
    slot = counts;
    result.total.rmw += counts.rmw;
    result.total.failed_cas += counts.failed_cas;
    result.total.store += counts.store;
    result.total.load += counts.load;
    result.total.fence += counts.fence;
    result.total.light += counts.light;
    result.total.heavy += counts.heavy;
    result.total.moves += counts.moves;
  }
  return result;
}

// tick_world registers the tick benchmark's population with one tick manager.
class tick_world {
 public:
  tick_world(magpie::scheduler& pool, std::size_t count)
      : ticks_(tick_bench::make_population(count)), manager_(pool), state_(count, 1) {
    constexpr magpie::ticking_group groups[] = {magpie::ticking_group::pre_physics, magpie::ticking_group::during_physics,
                                                magpie::ticking_group::post_physics,
                                                magpie::ticking_group::post_update_work};
    functions_.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      auto& tick = *functions_.emplace_back(std::make_unique<counted_tick>(state_.data(), i));
      tick.set_tick_group(groups[ticks_.own_group[i]]);
      tick.set_run_on_any_thread(ticks_.any_thread[i]);
      if (ticks_.interval[i] > 0) tick.set_tick_interval(ticks_.interval[i]);
      if (ticks_.prerequisite[i] != tick_bench::population::none) tick.add_prerequisite(*functions_[ticks_.prerequisite[i]]);
    }
    for (auto& tick : functions_) tick->register_tick_function(manager_);
  }

  // frame runs one frame and returns the ticks it ran.
  std::uint64_t frame() {
    using magpie::ticking_group;
    manager_.start_frame(tick_bench::frame_seconds);
    for (ticking_group group : {ticking_group::pre_physics, ticking_group::start_physics, ticking_group::during_physics,
                                ticking_group::end_physics, ticking_group::post_physics,
                                ticking_group::post_update_work, ticking_group::last_demotable}) {
      manager_.run_tick_group(group);
    }
    manager_.end_frame();
    return manager_.last_frame_stats().ticks_run;
  }

 private:
  class counted_tick final : public magpie::tick_function {
   public:
    counted_tick(std::uint64_t* state, std::uint32_t index) : state_(state), index_(index) {}

   protected:
    void execute_tick(float, magpie::level_tick) override { tick_bench::work(state_, index_); }

   private:
    std::uint64_t* state_;
    std::uint32_t index_;
  };

  tick_bench::population ticks_;
  magpie::tick_manager manager_;
  std::vector<std::uint64_t> state_;
  std::vector<std::unique_ptr<counted_tick>> functions_;
};

void print_table(const std::string& title, const std::vector<unsigned>& threads,
                 const std::vector<measurement>& by_threads, std::size_t top) {
  std::printf("\n=== %s\n", title.c_str());
  std::printf("%-4s %9s %9s %9s %9s %9s %9s %9s %9s\n", "thr", "rmw", "cas_fail", "fence", "membar", "moves", "light",
              "stores", "loads");
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const per_unit& t = by_threads[i].total;
    std::printf("%-4u %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", threads[i], t.rmw, t.failed_cas, t.fence,
                t.heavy, t.moves, t.light, t.store, t.load);
  }
  // The sites that cost most at the most threads, with their cost at every count:
  // rmw+cas_fail+fence+membar (the locked instructions and barriers) / moves.
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [name, counts] : by_threads.back().sites) ranked.emplace_back(counts.shared_cost(), name);
  std::sort(ranked.rbegin(), ranked.rend());
  if (ranked.size() > top) ranked.resize(top);
  std::printf("  per site, locked/moves per unit:");
  for (unsigned count : threads) std::printf(" %13u thr", count);
  std::printf("\n");
  for (const auto& [cost, name] : ranked) {
    if (cost < 0.001) break;
    std::printf("  %-44s", name.substr(0, 44).c_str());
    for (const measurement& each : by_threads) {
      auto found = each.sites.find(name);
      per_unit counts = found == each.sites.end() ? per_unit{} : found->second;
      std::printf("  %7.3f/%-9.3f", counts.rmw + counts.failed_cas + counts.fence + counts.heavy, counts.moves);
    }
    std::printf("\n");
  }
  // Sources that grow with the thread count: locked operations or moves per unit at the
  // most threads at least 1.5 times those at the fewest, and worth 0.05 per unit.
  if (threads.size() < 2) return;
  std::printf("  grows with threads:");
  bool any = false;
  for (const auto& [name, counts] : by_threads.back().sites) {
    auto first = by_threads.front().sites.find(name);
    double low = first == by_threads.front().sites.end() ? 0.0 : first->second.shared_cost();
    if (counts.shared_cost() >= 0.05 && counts.shared_cost() >= 1.5 * low) {
      std::printf("%s %s (%.3f -> %.3f)", any ? "," : "", name.c_str(), low, counts.shared_cost());
      any = true;
    }
  }
  std::printf("%s\n", any ? "" : " none");
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "contention counts per call site (the counting build)");
  const std::size_t batch = chosen.quick ? (1u << 14) : (1u << 20);
  const std::size_t singles = chosen.quick ? (1u << 12) : (1u << 16);
  const std::size_t ticks = chosen.quick ? 5'000 : 20'000;
  const std::size_t iterations = 1u << 20;
  const int loops = chosen.quick ? 4 : 40;
  const int fib_n = chosen.quick ? 20 : 25;
  const auto fib_calls = [](int n) {  // calls of forked_fib(n): 1 for n < 2, else 1 + both halves'
    std::uint64_t below = 1, at = 1;
    for (int i = 2; i <= n; ++i) at = std::exchange(below, at) + at + 1;
    return at;
  };
  const int rounds = std::max(1, chosen.runs / 5);

  std::map<std::string, std::vector<measurement>> results;
  std::vector<std::string> order;
  auto record = [&](const workload& shape, unsigned threads) {
    std::string title = shape.name + " (per " + shape.unit + ")";
    if (!results.contains(title)) order.push_back(title);
    results[title].push_back(measure(shape, rounds));
    std::fprintf(stderr, "threads=%u %s: %llu %ss\n", threads, shape.name.c_str(),
                 static_cast<unsigned long long>(results[title].back().units), shape.unit.c_str());
  };
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    pool.attach(magpie::named_thread::game);
    std::vector<magpie::task<>> handles;
    handles.reserve(batch);
    tick_world world(pool, ticks);
    std::vector<std::uint64_t> touched(iterations, 1);
    const std::vector<workload> shapes = {
        {"batch: 2^" + std::to_string(std::bit_width(batch) - 1) + " empty tasks launched, then wait_all", "task",
         [&] {
           for (std::size_t i = 0; i < batch; ++i) handles.push_back(pool.launch("empty", [] {}));
           magpie::wait_all(handles);
           handles.clear();
           return std::uint64_t{batch};
         }},
        {"one_at_a_time: an empty task launched and waited for", "task",
         [&] {
           for (std::size_t i = 0; i < singles; ++i) pool.launch("empty", [] {}).wait();
           return std::uint64_t{singles};
         }},
        {"tick_frame: " + std::to_string(ticks) + " tick functions", "tick", [&] { return std::uint64_t{world.frame()}; }},
        {"parallel_for: 2^20 iterations of a few nanoseconds", "loop",
         [&] {
           for (int loop = 0; loop < loops; ++loop) {
             magpie::parallel_for(iterations, [&](std::size_t i) { touched[i] = touched[i] * 6364136223846793005ull + i; });
           }
           return static_cast<std::uint64_t>(loops);
         }},
        {"coro_fork_fib: fib(" + std::to_string(fib_n) + ") as coroutines, fork / call / join", "call",
         [&] {
           if (pool.launch("fork fib", [fib_n] { return bench::forked_fib(fib_n); }).get_result() < 0) std::abort();
           return fib_calls(fib_n);
         }},
    };
    for (const workload& shape : shapes) record(shape, threads);
    pool.detach();
  }
  // The batch as a newcomer writes it: a plain scheduler used from main, not attached.
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    std::vector<magpie::task<>> handles;
    handles.reserve(batch);
    record({"batch_unattached: the batch launched and waited for from an unattached main", "task",
            [&] {
              for (std::size_t i = 0; i < batch; ++i) handles.push_back(pool.launch("empty", [] {}));
              magpie::wait_all(handles);
              handles.clear();
              return std::uint64_t{batch};
            }},
           threads);
  }
  // The limiter rows as bench/coroutine runs them: one unattached thread pushes every piece
  // (a counter's increment), then waits; the workers run the limiter's tasks.
  const std::size_t limited = chosen.quick ? (1u << 14) : (1u << 17);
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    for (std::uint32_t limit : {2u, 4u}) {
      record({"limiter_n" + std::to_string(limit) + ": 2^" + std::to_string(std::bit_width(limited) - 1) +
                  " pieces pushed from an unattached main, then wait",
              "piece",
              [&, limit] {
                bench::padded_atomic<std::size_t> ran{0};
                magpie::task_concurrency_limiter limiter(limit, magpie::priority::normal, pool);
                for (std::size_t i = 0; i < limited; ++i) {
                  limiter.push("limited", [&ran](std::uint32_t) { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait
                }
                if (!limiter.wait() || ran.load() != limited) std::abort();
                return std::uint64_t{limited};
              }},
             threads);
    }
    record({"limiter_n4_from_all: 2^" + std::to_string(std::bit_width(limited) - 1) +
                " pieces pushed from every thread (a parallel_for's bodies), then wait",
            "piece",
            [&] {
              bench::padded_atomic<std::size_t> ran{0};
              magpie::task_concurrency_limiter limiter(4, magpie::priority::normal, pool);
              magpie::parallel_for(limited, [&](std::size_t) {
                limiter.push("limited", [&ran](std::uint32_t) { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait
              });
              if (!limiter.wait() || ran.load() != limited) std::abort();
              return std::uint64_t{limited};
            }},
           threads);
  }
  std::printf("counts per unit of work (locked = rmw + cas_fail + fence + membar; moves = cache-line moves between threads)\n");
  for (const std::string& title : order) print_table(title, chosen.threads, results[title], 12);
}
