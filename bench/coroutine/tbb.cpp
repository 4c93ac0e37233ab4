// The concurrency limiter's peer: a oneTBB task_group whose tasks take a counting
// semaphore of N before they run (bench/coroutine/magpie.cpp's limiter_n rows).
#include "../common/harness.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <semaphore>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "oneTBB semaphore-guarded task_group (the limiter's peer)");
  const std::size_t limited = chosen.quick ? (1u << 15) : (1u << 17);
  for (unsigned threads : chosen.threads) {
    tbb::global_control control(tbb::global_control::max_allowed_parallelism, threads);
    tbb::task_arena arena(static_cast<int>(threads));
    for (std::ptrdiff_t limit : {1, 2, 4}) {
      auto throughput = bench::time_runs(chosen.runs, [&] {
        bench::padded_atomic<std::size_t> ran{0};
        std::counting_semaphore<64> slots(limit);
        arena.execute([&] {
          tbb::task_group group;
          for (std::size_t i = 0; i < limited; ++i) {
            group.run([&] {
              slots.acquire();
              ran.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after wait
              slots.release();
            });
          }
          group.wait();
        });
        if (ran.load() != limited) throw std::runtime_error("wrong answer: semaphore task_group");
      });
      bench::record(chosen, "tbb", "limiter_n" + std::to_string(limit), std::to_string(limited), threads, throughput, limited);
    }
  }
}
