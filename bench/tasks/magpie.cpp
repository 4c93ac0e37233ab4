// Task-model workloads on magpie (docs/benchmarks.md, "Workloads"): empty tasks one at a time and in a batch,
// UE's launch-wait latency, 10k tasks released by one event, a linear chain (build and
// run timed apart). Peer: bench/tasks/tbb.cpp. "N threads" = N − 1 workers + this thread,
// attached as the game thread.
#include "../common/harness.h"
#include "../common/magpie_threads.h"

#include <magpie/magpie.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

// one_at_a_time launches `count` tasks, each waited for (get_result) before the next.
void one_at_a_time(magpie::scheduler& pool, std::size_t count) {
  std::size_t sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += pool.launch("empty", [i] { return i; }).get_result();
  check(sum == count * (count - 1) / 2, "one at a time");
}

// launch_batch launches `count` empty tasks into `handles`, then `wait` waits for them.
template <class Wait>
void launch_batch(magpie::scheduler& pool, std::size_t count, std::vector<magpie::task<>>& handles, Wait&& wait) {
  bench::padded_atomic<std::size_t> ran{0};
  for (std::size_t i = 0; i < count; ++i) {
    handles.push_back(pool.launch("empty", [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // relaxed: read after the wait
  }
  wait(handles);
  handles.clear();
  check(ran.load() == count, "batch");
}

void wait_all_at_once(std::vector<magpie::task<>>& handles) { magpie::wait_all(handles); }

void wait_oldest_first(std::vector<magpie::task<>>& handles) {
  for (auto& each : handles) each.wait();  // in launch order, one by one
}

void wait_newest_first(std::vector<magpie::task<>>& handles) {
  for (auto each = handles.rbegin(); each != handles.rend(); ++each) each->wait();
}

// wait_in_order waits for the handles one by one in `order` (a permutation, made before the
// timing: waiting at random).
auto wait_in_order(const std::vector<std::size_t>& order) {
  return [&order](std::vector<magpie::task<>>& handles) {
    for (std::size_t index : order) handles[index].wait();
  };
}

// read_in_order_after_wait_all waits for all the handles at once, then reads each in `order`
// and asks its task whether it completed.
auto read_in_order_after_wait_all(const std::vector<std::size_t>& order) {
  return [&order](std::vector<magpie::task<>>& handles) {
    magpie::wait_all(handles);
    std::size_t completed = 0;
    for (std::size_t index : order) completed += handles[index].is_completed() ? 1 : 0;
    check(completed == handles.size(), "read in order");
  };
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie task-model benchmarks");
  bench::trace_if_asked(chosen);
  const std::size_t singles = chosen.quick ? (1u << 16) : (1u << 18);
  const std::size_t batch = chosen.quick ? (1u << 17) : (1u << 20);
  const std::size_t chain = chosen.quick ? (1u << 16) : (1u << 20);
  const std::size_t spawned = 10'000;
  const std::size_t held = chosen.quick ? (1u << 16) : (1u << 18);

  {
    magpie::scheduler pool(bench::magpie_options(1));
    pool.attach(magpie::named_thread::game);
    std::vector<magpie::task<>> handles(held);  // touched before: the caller's memory, not the tasks'
    double bytes = bench::bytes_per_task(held, [&](auto measure) {
      bench::padded_atomic<std::size_t> ran{0};
      std::size_t step = 1;
      for (auto& handle : handles) handle = pool.launch("held", [&ran, step] { ran.fetch_add(step, std::memory_order_relaxed); });  // relaxed: read after wait_all
      measure();
      magpie::wait_all(handles);
      check(ran.load() == held, "bytes per task");
    });
    bench::record(chosen, "magpie", "task_bytes", "16B", 1, {bytes}, 0, "bytes");
    pool.detach();
  }

  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    pool.attach(magpie::named_thread::game);

    auto singly = bench::time_runs(chosen.runs, [&] { one_at_a_time(pool, singles); });
    bench::record(chosen, "magpie", "task_empty_one_at_a_time", std::to_string(singles), threads, singly, singles);

    std::vector<magpie::task<>> handles;
    handles.reserve(batch);
    auto batched = bench::time_runs(chosen.runs, [&] { launch_batch(pool, batch, handles, wait_all_at_once); });
    bench::record(chosen, "magpie", "task_empty_batch", std::to_string(batch), threads, batched, batch);

    std::vector<double> latencies;
    for (int sample = 0; sample < 1000; ++sample) {
      auto start = std::chrono::steady_clock::now();
      pool.launch("latency", [] {}).wait();
      latencies.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    bench::record(chosen, "magpie", "task_latency_p50", "1000", threads, {bench::percentile(latencies, 50)}, 0);
    bench::record(chosen, "magpie", "task_latency_p99", "1000", threads, {bench::percentile(latencies, 99)}, 0);

    auto batch_spawn = bench::time_runs(chosen.runs, [&] {
      bench::padded_atomic<std::size_t> ran{0};
      magpie::task_event gate("gate", pool);
      for (std::size_t i = 0; i < spawned; ++i) {
        handles.push_back(pool.launch("gated", [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }, gate));  // relaxed: read after wait_all
      }
      gate.trigger();
      magpie::wait_all(handles);
      handles.clear();
      check(ran.load() == spawned, "batch spawn");
    });
    bench::record(chosen, "magpie", "batch_spawn", std::to_string(spawned), threads, batch_spawn, spawned);

    std::vector<double> run_only;
    auto build_and_run = bench::time_runs(chosen.runs, [&] {
      std::size_t hops = 0;
      magpie::task_event gate("gate", pool);
      magpie::task<> last = gate;
      for (std::size_t i = 0; i < chain; ++i) last = pool.launch("hop", [&hops] { ++hops; }, last);
      auto start = std::chrono::steady_clock::now();
      gate.trigger();
      last.wait();
      run_only.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      check(hops == chain, "chain");
    });
    run_only.erase(run_only.begin(), run_only.end() - chosen.runs);  // the warm-up runs
    bench::record(chosen, "magpie", "linear_chain_run", std::to_string(chain), threads, run_only, chain);
    bench::record(chosen, "magpie", "linear_chain_build_run", std::to_string(chain), threads, build_and_run, chain);

    // The same task at a time while a trace records (docs/tracing.md): the difference from
    // task_empty_one_at_a_time is the recording's cost, about six events per task.
    if (!magpie::trace::is_recording()) {
      auto traced = bench::time_runs(chosen.runs, [&] {
        magpie::trace::start();
        one_at_a_time(pool, singles);
        magpie::trace::stop();
        magpie::trace::clear();
      });
      bench::record(chosen, "magpie", "task_one_at_a_time_traced", std::to_string(singles), threads, traced, singles);
    }
    pool.detach();
  }

  // The same shapes as a newcomer writes them: a plain scheduler used from `main`, which is
  // not attached (docs/benchmarks.md, "Which rows attach").
  for (unsigned threads : chosen.threads) {
    // A newcomer's batch: a std::vector of 2^18 handles (2^16 quick), waited for all at once
    // or one by one in launch order, from `main` attached and plain: the ratio of each pair
    // is what not attaching costs.
    for (bool attached : {true, false}) {
      magpie::scheduler pool(bench::magpie_options(threads));
      if (attached) pool.attach(magpie::named_thread::game);
      const std::string plain = attached ? "" : "_unattached";
      std::vector<magpie::task<>> handles;
      handles.reserve(held);
      auto all = bench::time_runs(chosen.runs, [&] { launch_batch(pool, held, handles, wait_all_at_once); });
      bench::record(chosen, "magpie", "task_vector_wait_all" + plain, std::to_string(held), threads, all, held);
      auto in_order = bench::time_runs(chosen.runs, [&] { launch_batch(pool, held, handles, wait_oldest_first); });
      bench::record(chosen, "magpie", "task_vector_wait_in_order" + plain, std::to_string(held), threads, in_order, held);
      if (attached) pool.detach();
    }

    magpie::scheduler pool(bench::magpie_options(threads));

    auto singly = bench::time_runs(chosen.runs, [&] { one_at_a_time(pool, singles); });
    bench::record(chosen, "magpie", "task_empty_one_at_a_time_unattached", std::to_string(singles), threads, singly, singles);

    std::vector<magpie::task<>> handles;
    handles.reserve(batch);
    auto batched = bench::time_runs(chosen.runs, [&] { launch_batch(pool, batch, handles, wait_all_at_once); });
    bench::record(chosen, "magpie", "task_empty_batch_unattached", std::to_string(batch), threads, batched, batch);

    auto oldest_first = bench::time_runs(chosen.runs, [&] { launch_batch(pool, batch, handles, wait_oldest_first); });
    bench::record(chosen, "magpie", "task_wait_oldest_first_unattached", std::to_string(batch), threads, oldest_first, batch);

    auto newest_first = bench::time_runs(chosen.runs, [&] { launch_batch(pool, batch, handles, wait_newest_first); });
    bench::record(chosen, "magpie", "task_wait_newest_first_unattached", std::to_string(batch), threads, newest_first, batch);

    std::vector<std::size_t> order(batch);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), std::mt19937_64(20261127));
    auto at_random = bench::time_runs(chosen.runs, [&] { launch_batch(pool, batch, handles, wait_in_order(order)); });
    bench::record(chosen, "magpie", "task_wait_random_order_unattached", std::to_string(batch), threads, at_random, batch);
    // The floor of any wait in that order: wait_all, then each handle read in that order and
    // its task asked whether it completed (a random read of the handle and of the task).
    auto floor = bench::time_runs(chosen.runs, [&] { launch_batch(pool, batch, handles, read_in_order_after_wait_all(order)); });
    bench::record(chosen, "magpie", "task_wait_random_order_floor", std::to_string(batch), threads, floor, batch);
  }
}
