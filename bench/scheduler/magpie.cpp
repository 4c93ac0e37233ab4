// Scheduler workloads on magpie: empty-job throughput (launched by the calling thread,
// and by a worker), idle CPU after the work drains, and wake-to-run latency of a parked
// worker. Peer: bench/scheduler/tbb.cpp.
#include "../common/harness.h"
#include "../common/magpie_threads.h"

#include <magpie/detail/atomics.h>
#include <magpie/detail/task_pool.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>

#include <atomic>
#include <stdexcept>

namespace {

// pooled gives a job type magpie's task memory pool, as the task model's tasks will have
// (oneTBB's task_group allocates from its own small-object pool too).
struct pooled {
  static void* operator new(std::size_t size) { return magpie::detail::task_pool::allocate(size); }
  static void operator delete(void* memory, std::size_t size) { magpie::detail::task_pool::deallocate(memory, size); }
};

struct empty_job : magpie::detail::work_item, pooled {
  explicit empty_job(std::atomic<std::uint64_t>& counter) : done(&counter) {
    handler = &handle;
    name = "empty";
  }
  static bool handle(magpie::detail::work_item* self, magpie::detail::work_action) noexcept {
    auto* me = static_cast<empty_job*>(self);
    me->done->fetch_add(1, std::memory_order_release);  // release: pairs with the waiter's acquire
    delete me;
    return true;
  }
  std::atomic<std::uint64_t>* done;
};

// fan_out_job launches `count` empty jobs from wherever it runs (a worker: its deque).
struct fan_out_job : magpie::detail::work_item, pooled {
  fan_out_job(std::uint64_t jobs, std::atomic<std::uint64_t>& counter) : count(jobs), done(&counter) {
    handler = &handle;
    name = "fan out";
  }
  static bool handle(magpie::detail::work_item* self, magpie::detail::work_action) noexcept {
    auto* me = static_cast<fan_out_job*>(self);
    magpie::scheduler& pool = *magpie::scheduler::current();
    for (std::uint64_t i = 0; i < me->count; ++i) magpie::detail::schedule_item(pool, new empty_job(*me->done));
    delete me;
    return true;
  }
  std::uint64_t count;
  std::atomic<std::uint64_t>* done;
};

// help_until_done is the calling thread's join: it runs work while there is some, then
// spins briefly and yields — never a pure spin, since the worker finishing the last
// stolen job may share this core and a spinning waiter would starve it for a time slice.
void help_until_done(magpie::scheduler& pool, const std::atomic<std::uint64_t>& done, std::uint64_t target) {
  unsigned misses = 0;
  while (done.load(std::memory_order_acquire) < target) {  // acquire: pairs with the jobs' release
    if (pool.try_run_one()) {
      misses = 0;
    } else if (++misses < 64) {
      magpie::detail::cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void wait_until_parked(magpie::scheduler& pool) {
  while (pool.counters().parked_workers < pool.worker_count()) std::this_thread::yield();
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie scheduler benchmarks");
  bench::trace_if_asked(chosen);
  const std::uint64_t jobs = chosen.quick ? (1u << 16) : (1u << 18);
  const std::string param = std::to_string(jobs);
  for (unsigned threads : chosen.threads) {
    // A scheduler made, given one task to run and wait for, and destroyed: what a program,
    // a test case or a tool that makes its own pays each time; from a plain thread.
    const int cycles = chosen.quick ? 50 : 200;
    auto lifecycle = bench::time_runs(chosen.runs, [&] {
      for (int cycle = 0; cycle < cycles; ++cycle) {
        magpie::scheduler own(bench::magpie_options(threads));
        own.launch("empty", [] {}).wait();
      }
    });
    bench::record(chosen, "magpie", "scheduler_lifecycle", std::to_string(cycles), threads, lifecycle,
                  static_cast<std::uint64_t>(cycles));

    magpie::scheduler pool(bench::magpie_options(threads));
    // The calling thread takes part as the game thread: its launches go to its own deque,
    // which the workers steal from (UE's game-thread local queue).
    pool.attach(magpie::named_thread::game);

    auto from_caller = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::uint64_t> done{0};
      for (std::uint64_t i = 0; i < jobs; ++i) magpie::detail::schedule_item(pool, new empty_job(done));
      help_until_done(pool, done, jobs);
    });
    bench::record(chosen, "magpie", "empty_jobs_from_caller", param, threads, from_caller, jobs);

    auto from_worker = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::uint64_t> done{0};
      magpie::detail::schedule_item(pool, new fan_out_job(jobs, done));
      help_until_done(pool, done, jobs);
    });
    bench::record(chosen, "magpie", "empty_jobs_from_worker", param, threads, from_worker, jobs);

    if (threads == 1) {
      pool.detach();
      continue;  // idle and wake-up figures need workers
    }

    std::vector<double> idle_cpu;
    for (int run = 0; run < chosen.runs; ++run) {
      wait_until_parked(pool);
      double before = bench::process_cpu_seconds();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      idle_cpu.push_back(bench::process_cpu_seconds() - before);
    }
    bench::record(chosen, "magpie", "idle_cpu_100ms", "cpu_s", threads, idle_cpu, 0);

    std::vector<double> latencies;
    for (int sample = 0; sample < (chosen.quick ? 50 : 200); ++sample) {
      wait_until_parked(pool);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      bench::padded_atomic<std::int64_t> ran_at{0};
      struct stamp_job : magpie::detail::work_item {
        std::atomic<std::int64_t>* when;
        static bool handle(magpie::detail::work_item* self, magpie::detail::work_action) noexcept {
          auto* me = static_cast<stamp_job*>(self);
          me->when->store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);  // release: pairs with the acquire below
          delete me;
          return true;
        }
      };
      auto* job = new stamp_job;
      job->handler = &stamp_job::handle;
      job->when = &ran_at;
      auto launched = std::chrono::steady_clock::now().time_since_epoch().count();
      magpie::detail::schedule_item(pool, job);
      while (ran_at.load(std::memory_order_acquire) == 0) std::this_thread::yield();  // acquire: pairs with the job's release; yield as the tbb peer does
      latencies.push_back(static_cast<double>(ran_at.load() - launched) * 1e-9);
    }
    bench::record(chosen, "magpie", "wake_latency_p50", "seconds", threads, {bench::percentile(latencies, 50)}, 0);
    bench::record(chosen, "magpie", "wake_latency_p99", "seconds", threads, {bench::percentile(latencies, 99)}, 0);
    pool.detach();
  }
  return 0;
}
