// Micro-benchmark of the event count: the notify a launch pays when nobody sleeps, the
// prepare/cancel pair an idle worker pays per look for work, and a park/wake round trip.
#include <magpie/detail/event_count.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>

namespace {

using magpie::detail::event_count;

void notify_nobody_waiting(benchmark::State& state) {
  event_count<> events;
  for (auto _ : state) events.notify_one();
}
BENCHMARK(notify_nobody_waiting);

void prepare_then_cancel(benchmark::State& state) {
  event_count<> events;
  for (auto _ : state) {
    benchmark::DoNotOptimize(events.prepare_wait());
    events.cancel_wait();
  }
}
BENCHMARK(prepare_then_cancel);

// Ping-pong: the benchmark thread hands the turn to a parked partner and parks until the
// partner hands it back. The time is one round trip: two parks and two wakes.
void park_wake_round_trip(benchmark::State& state) {
  enum turn : int { partners_turn, mains_turn, stop };
  event_count<> to_partner;
  event_count<> to_main;
  std::atomic<int> ball{mains_turn};
  auto wait_until = [&](event_count<>& events, auto ready) {
    for (;;) {
      if (ready(ball.load(std::memory_order_acquire))) return;  // acquire: pairs with the hand-over stores
      auto key = events.prepare_wait();
      if (ready(ball.load(std::memory_order_acquire))) {  // acquire: as above
        events.cancel_wait();
        return;
      }
      events.commit_wait(key);
    }
  };
  std::thread partner([&] {
    for (;;) {
      wait_until(to_partner, [](int b) { return b != mains_turn; });
      if (ball.load(std::memory_order_acquire) == stop) return;  // acquire: as above
      ball.store(mains_turn, std::memory_order_release);  // release: hands the turn back
      to_main.notify_one();
    }
  });
  for (auto _ : state) {
    ball.store(partners_turn, std::memory_order_release);  // release: hands the turn over
    to_partner.notify_one();
    wait_until(to_main, [](int b) { return b == mains_turn; });
  }
  ball.store(stop, std::memory_order_release);  // release: tells the partner to leave
  to_partner.notify_one();
  partner.join();
}
BENCHMARK(park_wake_round_trip)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
