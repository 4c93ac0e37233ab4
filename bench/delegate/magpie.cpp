// Micro-benchmark of delegates: a unicast call, and a multicast broadcast per listener.
#include <magpie/delegate.h>

#include <benchmark/benchmark.h>

#include <memory>

namespace {

struct listener_object {
  int hits = 0;
  void hit(int amount) { hits += amount; }
};

void unicast_lambda(benchmark::State& state) {
  magpie::delegate<int(int)> twice;
  twice.bind([](int x) { return 2 * x; });
  int value = 1;
  for (auto _ : state) benchmark::DoNotOptimize(value = twice.execute(value) & 0xff);
}
BENCHMARK(unicast_lambda);

// Time per listener: broadcast to range(0) member-function listeners.
void broadcast_members(benchmark::State& state) {
  magpie::multicast_delegate<void(int)> event;
  std::vector<listener_object> objects(static_cast<std::size_t>(state.range(0)));
  for (auto& each : objects) event.add(&each, &listener_object::hit);
  for (auto _ : state) event.broadcast(1);
  state.SetItemsProcessed(state.iterations() * state.range(0));
  benchmark::DoNotOptimize(objects.front().hits);
}
BENCHMARK(broadcast_members)->Arg(1)->Arg(16)->Arg(1024);

// The same with weakly bound listeners (a lock of the weak_ptr per call).
void broadcast_weak(benchmark::State& state) {
  magpie::multicast_delegate<void(int)> event;
  std::vector<std::shared_ptr<listener_object>> objects;
  for (int i = 0; i < state.range(0); ++i) {
    objects.push_back(std::make_shared<listener_object>());
    event.add(std::weak_ptr<listener_object>(objects.back()), &listener_object::hit);
  }
  for (auto _ : state) event.broadcast(1);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(broadcast_weak)->Arg(16)->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
