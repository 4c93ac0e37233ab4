// Helpers of the scheduler's suites (scheduler, scheduler_options, scheduler_shutdown):
// options by worker count, and a tree of jobs that launch jobs.
#pragma once

#include <magpie/scheduler.h>

#include "job.h"

#include <atomic>

namespace magpie::test {

// pool_of builds scheduler options with `workers` workers, `background` of them also taking
// background work.
inline scheduler_options pool_of(unsigned workers, unsigned background = 0) {
  scheduler_options options;
  options.workers = workers;
  options.background_workers = background;
  return options;
}

// spawn_tree launches a job that launches `fanout` children, down to `depth`; each job
// counts itself. Total: (fanout^(depth+1) − 1) / (fanout − 1).
inline void spawn_tree(scheduler& pool, std::atomic<int>& ran, int depth, int fanout) {
  launch(pool, [&ran, depth, fanout] {
    ran.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the run is complete
    if (depth == 0) return;
    // current(): the scheduler running this job, whichever thread (worker or helper) runs it
    for (int i = 0; i < fanout; ++i) spawn_tree(*scheduler::current(), ran, depth - 1, fanout);
  });
}

// tree_size is the number of jobs spawn_tree(pool, ran, depth, fanout) launches.
inline int tree_size(int depth, int fanout) {
  int total = 0;
  int level = 1;
  for (int d = 0; d <= depth; ++d, level *= fanout) total += level;
  return total;
}

}  // namespace magpie::test
