// Micro-benchmark of the Chase-Lev deque: the owner's push+pop pair, an uncontended
// steal, and steals racing the owner from other threads.
#include <magpie/detail/deque.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using deque_type = magpie::detail::work_stealing_deque<std::uintptr_t>;

void push_pop(benchmark::State& state) {
  deque_type deque;
  std::uintptr_t item = 1;
  for (auto _ : state) {
    deque.push(item);
    benchmark::DoNotOptimize(deque.pop());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(push_pop);

void push_steal(benchmark::State& state) {
  deque_type deque;
  std::uintptr_t item = 1;
  for (auto _ : state) {
    deque.push(item);
    benchmark::DoNotOptimize(deque.steal());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(push_steal);

// The owner pushes a batch and pops it back while `range(0)` thieves steal from it; the
// time is per item taken by anyone.
void contended(benchmark::State& state) {
  deque_type deque;
  int thieves = static_cast<int>(state.range(0));
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> stolen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < thieves; ++t) {
    threads.emplace_back([&] {
      std::int64_t mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {  // relaxed: a stop flag; join orders the rest
        if (deque.steal()) ++mine;
      }
      stolen.fetch_add(mine, std::memory_order_relaxed);  // relaxed: read after join
    });
  }
  constexpr int batch = 256;
  std::int64_t popped = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) deque.push(static_cast<std::uintptr_t>(i + 1));
    while (deque.pop()) ++popped;
  }
  stop.store(true, std::memory_order_relaxed);  // relaxed: the thieves only need to see it eventually
  for (auto& thread : threads) thread.join();
  state.SetItemsProcessed(popped + stolen.load());
  state.counters["stolen_share"] =
      static_cast<double>(stolen.load()) / static_cast<double>(popped + stolen.load());
}
BENCHMARK(contended)->Arg(1)->Arg(3)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
