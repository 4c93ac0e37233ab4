// Timer workloads on magpie::timer_manager (the exact hierarchical timing wheel).
#include <magpie/timer_manager.h>

#include "workloads.h"

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "timer manager workloads: magpie's timing wheel");
  timers_bench::run_all<magpie::timer_manager, magpie::timer_handle>(chosen, "magpie");
}
