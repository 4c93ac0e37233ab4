// tick_frame's floor: the same bodies in a valid order on one thread, nothing else (see
// workload.h). Recorded as system "serial" at 1 thread.
#include "workload.h"

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "tick manager floor: a serial loop over the tick bodies");
  tick_bench::population ticks = tick_bench::make_population(chosen.quick ? 20'000 : 100'000);
  std::vector<std::uint64_t> state(ticks.size(), 1);
  std::vector<std::uint32_t> order = tick_bench::serial_order(ticks);
  tick_bench::interval_gate gate(ticks);
  std::vector<double> seconds = bench::time_runs(chosen.runs, [&] {
    std::size_t ran = tick_bench::serial_frames(ticks, order, gate, state.data(), tick_bench::frames_per_run);
    tick_bench::check_ran(ticks, ran, tick_bench::frames_per_run, "serial");
  });
  bench::record(chosen, "serial", "tick_frame", std::to_string(ticks.size()), 1, seconds,
                ticks.size() * tick_bench::frames_per_run);
}
