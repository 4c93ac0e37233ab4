// What "N threads" means for magpie in every benchmark (DESIGN §7): N − 1 workers plus the
// calling thread, which launches the work and takes part by waiting or joining.
#pragma once

#include <magpie/scheduler.h>

namespace bench {

// magpie_options configures a scheduler of `threads` threads counting the caller.
inline magpie::scheduler_options magpie_options(unsigned threads) {
  magpie::scheduler_options options;
  options.workers = threads - 1;  // the calling thread is the N-th
  options.background_workers = 0;
  return options;
}

}  // namespace bench
