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

// Ping-pong: the benchmark thread posts a ticket and wakes a parked partner, which posts
// one back. The time is one round trip: two parks and two wakes.
void park_wake_round_trip(benchmark::State& state) {
  event_count<> to_partner;
  event_count<> to_main;
  std::atomic<int> ball{0};  // 1: the partner's turn, 2: main's turn, 3: stop
  auto wait_for = [&](event_count<>& events, int turn) {
    for (;;) {
      if (ball.load(std::memory_order_seq_cst) >= turn) return;  // seq_cst: re-check in the Dekker pair
      auto key = events.prepare_wait();
      if (ball.load(std::memory_order_seq_cst) >= turn) {  // seq_cst: as above
        events.cancel_wait();
        return;
      }
      events.commit_wait(key);
    }
  };
  std::thread partner([&] {
    for (;;) {
      wait_for(to_partner, 1);
      int expected = 1;
      if (!ball.compare_exchange_strong(expected, 2)) return;  // 3: told to stop
      to_main.notify_one();
    }
  });
  for (auto _ : state) {
    ball.store(1);
    to_partner.notify_one();
    wait_for(to_main, 2);
  }
  ball.store(3);
  to_partner.notify_one();
  partner.join();
}
BENCHMARK(park_wake_round_trip)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
