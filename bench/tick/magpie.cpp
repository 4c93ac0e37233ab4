// tick_frame on magpie's tick manager: the cached schedule (row "tick_frame"), Unreal's
// rebuild-every-frame algorithm ("tick_frame_rebuild"), every tick allowing batching
// ("tick_frame_batched"); the same frames timed tick by tick (measure_tick_times), for their
// lower bound per frame ("tick_frame_bound") and efficiency ("tick_frame_efficiency": the
// bound over the frame's wall time; timing adds a clock read to each few-nanosecond tick, in
// the bound as in the wall time); bytes per registered tick function ("tick_bytes") and, at
// full size, a frame of a million tick functions ("tick_frame_1m": per frame, peak memory in
// the JSON). Then the engine-sized workload (engine_workload.h): per frame its wall time
// ("tick_engine"), lower bound ("tick_engine_bound") and efficiency
// ("tick_engine_efficiency"). "N threads" = a scheduler of N − 1 workers plus the game
// thread driving the frames.
#include <magpie/tick_manager.h>

#include "../common/magpie_threads.h"
#include "engine_workload.h"
#include "workload.h"

#include <cstdlib>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

namespace {

using magpie::level_tick;
using magpie::ticking_group;

constexpr ticking_group groups[] = {ticking_group::pre_physics, ticking_group::during_physics,
                                    ticking_group::post_physics, ticking_group::post_update_work};

class bench_tick final : public magpie::tick_function {
 public:
  bench_tick(std::uint64_t* state, std::uint32_t index) : state_(state), index_(index) {}

 protected:
  void execute_tick(float, level_tick) override { tick_bench::work(state_, index_); }

 private:
  std::uint64_t* state_;
  std::uint32_t index_;
};

// run_world_frame runs one frame of `manager`, every group in order (during_physics not blocking).
void run_world_frame(magpie::tick_manager& manager) {
  manager.start_frame(tick_bench::frame_seconds);
  manager.run_tick_group(ticking_group::pre_physics);
  manager.run_tick_group(ticking_group::start_physics);
  manager.run_tick_group(ticking_group::during_physics, false);
  manager.run_tick_group(ticking_group::end_physics);
  manager.run_tick_group(ticking_group::post_physics);
  manager.run_tick_group(ticking_group::post_update_work);
  manager.run_tick_group(ticking_group::last_demotable);
  manager.end_frame();
}

// world_of_ticks registers the population's tick functions with one manager.
struct world_of_ticks {
  world_of_ticks(magpie::scheduler& pool, const tick_bench::population& ticks, magpie::tick_manager_options options,
                 bool batchable)
      : manager(pool, options), state(ticks.size(), 1) {
    functions.reserve(ticks.size());
    for (std::uint32_t i = 0; i < ticks.size(); ++i) {
      auto& tick = *functions.emplace_back(std::make_unique<bench_tick>(state.data(), i));
      tick.set_tick_group(groups[ticks.own_group[i]]);
      tick.set_run_on_any_thread(ticks.any_thread[i]);
      tick.set_allow_tick_batching(batchable);
      if (ticks.interval[i] > 0) tick.set_tick_interval(ticks.interval[i]);
      if (ticks.prerequisite[i] != tick_bench::population::none) tick.add_prerequisite(*functions[ticks.prerequisite[i]]);
    }
    for (auto& tick : functions) tick->register_tick_function(manager);
  }

  std::size_t frames(int count) {
    std::size_t ran = 0;
    for (int frame = 0; frame < count; ++frame) {
      run_world_frame(manager);
      ran += manager.last_frame_stats().ticks_run;
    }
    return ran;
  }

  magpie::tick_manager manager;
  std::vector<std::uint64_t> state;
  std::vector<std::unique_ptr<bench_tick>> functions;
};

// frame_figures are one frame's wall time, lower bound and efficiency, frame by frame.
struct frame_figures {
  std::vector<double> wall, bound, efficiency;
  void add(const magpie::tick_frame_stats& stats) {
    wall.push_back(stats.frame_seconds);
    bound.push_back(stats.lower_bound_seconds);
    efficiency.push_back(stats.efficiency);
  }
};

// measured_frames runs `frames` frames (after a few to warm up) and collects their figures;
// each frame must run `every_frame` ticks at least (all its every-frame ticks).
frame_figures measured_frames(magpie::tick_manager& manager, int frames, std::size_t every_frame) {
  for (int warm = 0; warm < 3; ++warm) run_world_frame(manager);
  frame_figures figures;
  for (int frame = 0; frame < frames; ++frame) {
    run_world_frame(manager);
    magpie::tick_frame_stats stats = manager.last_frame_stats();
    if (stats.ticks_run < every_frame) throw std::runtime_error("magpie: a measured frame left ticks out");
    figures.add(stats);
  }
  return figures;
}

// engine_tick computes for its body's length each time it ticks.
class engine_tick final : public magpie::tick_function {
 public:
  engine_tick(std::uint64_t rounds, std::uint64_t* result) : rounds_(rounds), result_(result) {}

 protected:
  void execute_tick(float, level_tick) override { *result_ = engine_bench::spin(*result_, rounds_); }

 private:
  std::uint64_t rounds_;
  std::uint64_t* result_;
};

// engine_world registers the engine-sized population with one manager that times its ticks.
struct engine_world {
  engine_world(magpie::scheduler& pool, const engine_bench::engine_population& ticks, double rounds_per_us)
      : manager(pool, {.measure_tick_times = true}), results(ticks.size() * 8, 1) {
    functions.reserve(ticks.size());
    for (std::uint32_t i = 0; i < ticks.size(); ++i) {
      auto rounds = static_cast<std::uint64_t>(ticks.body_microseconds[i] * rounds_per_us);
      // a line of its own for each tick's result: no false sharing between threads
      auto& tick = *functions.emplace_back(std::make_unique<engine_tick>(rounds, &results[i * 8]));
      tick.set_tick_group(groups[ticks.group[i]]);
      tick.set_run_on_any_thread(ticks.any_thread[i]);
      if (ticks.prerequisite[i] != engine_bench::engine_population::none) {
        tick.add_prerequisite(*functions[ticks.prerequisite[i]]);
      }
    }
    for (auto& tick : functions) tick->register_tick_function(manager);
  }

  magpie::tick_manager manager;
  std::vector<std::uint64_t> results;
  std::vector<std::unique_ptr<engine_tick>> functions;
};

// record_figures records a frame_figures as three rows: <name>, <name>_bound, <name>_efficiency.
void record_figures(const bench::options& chosen, const std::string& name, std::size_t count, unsigned threads,
                    const frame_figures& figures) {
  std::string param = std::to_string(count);
  bench::record(chosen, "magpie", name, param, threads, figures.wall, count);
  bench::record(chosen, "magpie", name + "_bound", param, threads, figures.bound, count);
  bench::record(chosen, "magpie", name + "_efficiency", param, threads, figures.efficiency, 0, "ratio");
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "tick manager: a frame of tick functions");
  bench::trace_if_asked(chosen);
  std::size_t count = chosen.quick ? 20'000 : 100'000;
  tick_bench::population ticks = tick_bench::make_population(count);

  {  // first thing in the process: nothing earlier left memory for the ticks to reuse
    magpie::scheduler pool(bench::magpie_options(1));
    double bytes = bench::bytes_per_task(count, [&](auto measure) {
      world_of_ticks world(pool, ticks, {}, false);
      world.frames(1);  // the schedule is built
      measure();
    });
    bench::record(chosen, "magpie", "tick_bytes", std::to_string(count), 1, {bytes}, 0, "bytes");
  }

  struct variant {
    const char* suffix;
    magpie::tick_manager_options options;
    bool batchable;
  };
  const variant variants[] = {
      {"", {}, false},
      {"_rebuild", {.cache_schedule = false}, false},
      {"_batched", {}, true},
  };
  // MAGPIE_TICK_VARIANT=_rebuild (or "", _batched, _measured) measures one variant of the 100k
  // frame alone, for profiling; MAGPIE_TICK_VARIANT=_engine the engine-sized frame alone.
  const char* only = std::getenv("MAGPIE_TICK_VARIANT");
  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    for (const variant& each : variants) {
      if (only != nullptr && std::string(only) != each.suffix) continue;
      world_of_ticks world(pool, ticks, each.options, each.batchable);
      tick_bench::measure(chosen, "magpie", each.suffix, ticks, threads, [&](int frames) { return world.frames(frames); });
    }
    if (only == nullptr || std::string(only) == "_measured") {
      world_of_ticks world(pool, ticks, {.measure_tick_times = true}, false);
      frame_figures figures = measured_frames(world.manager, chosen.runs * 4, ticks.every_frame());
      std::string param = std::to_string(count);
      bench::record(chosen, "magpie", "tick_frame_bound", param, threads, figures.bound, count);
      bench::record(chosen, "magpie", "tick_frame_efficiency", param, threads, figures.efficiency, 0, "ratio");
    }
  }

  if (only == nullptr || std::string(only) == "_engine") {  // the engine-sized frame
    std::size_t engine_count = chosen.quick ? 500 : 2'000;
    engine_bench::engine_population engine = engine_bench::make_engine_population(engine_count);
    double rounds_per_us = engine_bench::rounds_per_microsecond();
    for (unsigned threads : chosen.threads) {
      magpie::scheduler pool(bench::magpie_options(threads));
      engine_world world(pool, engine, rounds_per_us);
      record_figures(chosen, "tick_engine", engine_count, threads, measured_frames(world.manager, chosen.runs * 4, engine_count));
    }
  }

  if (!chosen.quick) {  // a million tick functions: it must run; time per frame and memory
    std::size_t million = 1'000'000;
    tick_bench::population many = tick_bench::make_population(million, 26);
    unsigned threads = chosen.threads.back();
    magpie::scheduler pool(bench::magpie_options(threads));
    bench::reset_peak_rss();
    world_of_ticks world(pool, many, {}, false);
    std::vector<double> seconds = bench::time_runs(chosen.runs, [&] {
      tick_bench::check_ran(many, world.frames(1), 1, "magpie (1M)");
    });
    bench::record(chosen, "magpie", "tick_frame_1m", std::to_string(million), threads, seconds, million);
  }
}
