// Tests for include/magpie/detail/event_count.h — parking without lost wake-ups.
#include <magpie/detail/event_count.h>

#include "support.h"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using magpie::detail::event_count;

namespace {

// tickets is a counter of available work; take() claims one if any is left.
struct tickets {
  std::atomic<int> available{0};

  bool take() {
    // acquire: pairs with give()'s release; the event count's fences carry the Dekker part
    int seen = available.load(std::memory_order_acquire);
    while (seen > 0) {
      if (available.compare_exchange_weak(seen, seen - 1, std::memory_order_acq_rel,  // acq_rel: as above
                                          std::memory_order_acquire)) {  // acquire: as above
        return true;
      }
    }
    return false;
  }
  void give(int count = 1) { available.fetch_add(count, std::memory_order_release); }  // release: pairs with take()'s acquire
};

// park_until_ticket is the waiter side of the protocol, exactly as a worker uses it.
void park_until_ticket(event_count<>& events, tickets& work) {
  for (;;) {
    if (work.take()) return;
    auto key = events.prepare_wait();
    if (work.take()) {
      events.cancel_wait();
      return;
    }
    events.commit_wait(key);
  }
}

void wait_until(const std::atomic<int>& value, int target) {
  while (value.load(std::memory_order_acquire) < target) std::this_thread::yield();  // acquire: pairs with the releasing increments
}

}  // namespace

TEST_SUITE("event_count") {

TEST_CASE("event_count: a notify between prepare_wait and commit_wait makes the commit return") {
  event_count<> events;
  auto key = events.prepare_wait();
  CHECK(events.waiters() == 1);
  events.notify_one();
  events.commit_wait(key);  // must not block: the watchdog names this test if it does
  CHECK(events.waiters() == 0);
}

TEST_CASE("event_count: cancel_wait withdraws the announcement") {
  event_count<> events;
  (void)events.prepare_wait();
  (void)events.prepare_wait();
  CHECK(events.waiters() == 2);
  events.cancel_wait();
  events.cancel_wait();
  CHECK(events.waiters() == 0);
}

TEST_CASE("event_count: a notify with no announced waiter is not remembered") {
  event_count<> events;
  events.notify_one();
  events.notify_all();
  auto key = events.prepare_wait();
  CHECK_FALSE(events.commit_wait_for(key, std::chrono::milliseconds(5)));
  CHECK(events.waiters() == 0);
}

TEST_CASE("event_count: a notify while every waiter has a wake-up coming grants nothing more") {
  event_count<> events;
  auto key = events.prepare_wait();
  CHECK(events.notify_one());
  CHECK_FALSE(events.notify_one());  // the woken worker is not running yet: no second futex call
  CHECK(events.signals() == 1);
  events.commit_wait(key);
  CHECK(events.waiters() == 0);
  CHECK(events.signals() == 0);
}

TEST_CASE("event_count: notify_all wakes each waiter announced before it, and no later one") {
  event_count<> events;
  auto first = events.prepare_wait();
  auto second = events.prepare_wait();
  CHECK(events.notify_all());
  CHECK(events.signals() == 0);  // a broadcast, not wake-ups a later waiter could take
  auto late = events.prepare_wait();
  CHECK_FALSE(events.commit_wait_for(late, std::chrono::milliseconds(5)));
  events.commit_wait(first);  // must return: the watchdog names this test if it blocks
  CHECK(events.commit_wait_for(second, std::chrono::minutes(10)));
  CHECK(events.waiters() == 0);
}

TEST_CASE("event_count: a notify_one wake-up is left for the waiter a notify_all already woke") {
  event_count<> events;
  auto woken_by_broadcast = events.prepare_wait();
  CHECK(events.notify_all());
  auto late = events.prepare_wait();
  CHECK(events.notify_one());
  events.commit_wait(woken_by_broadcast);  // leaves on the broadcast, leaving the signal...
  CHECK(events.signals() == 1);
  CHECK(events.commit_wait_for(late, std::chrono::minutes(10)));  // ...to the waiter that needs it
  CHECK(events.waiters() == 0);
  CHECK(events.signals() == 0);
}

TEST_CASE("event_count: a waiter that cancels after being signalled takes its signal with it") {
  event_count<> events;
  (void)events.prepare_wait();
  CHECK(events.notify_one());
  events.cancel_wait();
  CHECK(events.signals() == 0);
  auto key = events.prepare_wait();
  CHECK_FALSE(events.commit_wait_for(key, std::chrono::milliseconds(5)));  // no stale wake-up
}

TEST_CASE("event_count: a cancel leaves the signal to a waiter it may belong to") {
  event_count<> events;
  auto sleeper = events.prepare_wait();
  (void)events.prepare_wait();
  CHECK(events.notify_one());
  events.cancel_wait();  // two waiters, one signal: it may be the sleeper's
  CHECK(events.waiters() == 1);
  CHECK(events.signals() == 1);
  events.commit_wait(sleeper);  // must return: the watchdog names this test if it blocks
  CHECK(events.waiters() == 0);
}

TEST_CASE("event_count: a timed wait that times out holding a signal reports it") {
  event_count<> events;
  auto key = events.prepare_wait();
  CHECK(events.notify_one());
  CHECK(events.commit_wait_for(key, std::chrono::nanoseconds(0)));
  CHECK(events.signals() == 0);
  CHECK(events.waiters() == 0);
}

TEST_CASE("event_count: commit_wait_for returns true when another thread notifies") {
  event_count<> events;
  std::atomic<int> armed{0};
  bool notified = false;
  std::thread waiter([&] {
    auto key = events.prepare_wait();
    armed.store(1, std::memory_order_release);  // release: pairs with wait_until's acquire
    notified = events.commit_wait_for(key, std::chrono::minutes(10));
  });
  wait_until(armed, 1);
  events.notify_one();
  waiter.join();
  CHECK(notified);
}

TEST_CASE("event_count: with N waiters armed, each single notify releases one of them") {
  for (int waiters : {1, 2, 4, 8}) {
    CAPTURE(waiters);
    for (int repeat = 0; repeat < 20; ++repeat) {
      event_count<> events;
      tickets work;
      std::atomic<int> released{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < waiters; ++i) {
        threads.emplace_back([&] {
          park_until_ticket(events, work);
          released.fetch_add(1, std::memory_order_release);  // release: pairs with wait_until's acquire
        });
      }
      while (events.waiters() < static_cast<std::uint32_t>(waiters)) std::this_thread::yield();
      for (int i = 1; i <= waiters; ++i) {
        work.give();
        events.notify_one();
        wait_until(released, i);  // a lost wake-up hangs here, and the watchdog names the test
      }
      for (auto& thread : threads) thread.join();
      CHECK(released.load() == waiters);
      CHECK(events.waiters() == 0);
    }
  }
}

TEST_CASE("event_count: notify_all releases every armed waiter") {
  event_count<> events;
  std::atomic<bool> go{false};
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      for (;;) {
        auto key = events.prepare_wait();
        if (go.load(std::memory_order_acquire)) {  // acquire: pairs with the release store of go
          events.cancel_wait();
          break;
        }
        events.commit_wait(key);
      }
      released.fetch_add(1, std::memory_order_release);  // release: pairs with wait_until's acquire
    });
  }
  while (events.waiters() < 6) std::this_thread::yield();
  go.store(true, std::memory_order_release);  // release: the event count's fences do the Dekker part
  events.notify_all();
  wait_until(released, 6);
  for (auto& thread : threads) thread.join();
  CHECK(released.load() == 6);
}

}  // TEST_SUITE("event_count")

TEST_CASE("event_count: producers and parking consumers pass every item without a lost wake-up" *
          doctest::test_suite("stress")) {
  constexpr int producers = 2;
  constexpr int items_per_producer = 50'000;
  constexpr int total = producers * items_per_producer;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    for (int consumers : {1, 3, 8}) {
      CAPTURE(consumers);
      event_count<> events;
      tickets work;
      std::atomic<int> consumed{0};
      std::vector<std::thread> consumer_threads;
      for (int c = 0; c < consumers; ++c) {
        consumer_threads.emplace_back([&] {
          // Tickets past `total` are the ones handed out to stop the consumers.
          do {
            park_until_ticket(events, work);
          } while (consumed.fetch_add(1, std::memory_order_relaxed) + 1 <= total);  // relaxed: only the count matters
        });
      }
      std::vector<std::thread> producer_threads;
      for (int p = 0; p < producers; ++p) {
        producer_threads.emplace_back([&] {
          for (int i = 0; i < items_per_producer; ++i) {
            work.give();
            events.notify_one();
          }
        });
      }
      for (auto& thread : producer_threads) thread.join();
      for (int c = 0; c < consumers; ++c) {
        work.give();
        events.notify_one();
      }
      for (auto& thread : consumer_threads) thread.join();  // a lost wake-up hangs here
      CHECK(consumed.load() == total + consumers);
      CHECK(events.waiters() == 0);
    }
  }
}

TEST_CASE("event_count: timed waiters racing notify_one's grants lose no item and leave no signal" *
          doctest::test_suite("stress")) {
  // Consumers wait with short time-outs, so time-outs race the grants all the time: a signal
  // taken twice, or left to nobody, shows up as a hang or as signals() != 0 at the end.
  constexpr int items = 20'000;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    event_count<> events;
    tickets work;
    std::atomic<int> consumed{0};
    std::vector<std::thread> consumers;
    for (int c = 0; c < 3; ++c) {
      consumers.emplace_back([&] {
        while (consumed.load(std::memory_order_relaxed) < items) {  // relaxed: only ends the loop
          if (work.take()) {
            consumed.fetch_add(1, std::memory_order_relaxed);  // relaxed: only the count matters
            continue;
          }
          auto key = events.prepare_wait();
          if (work.take()) {
            events.cancel_wait();
            consumed.fetch_add(1, std::memory_order_relaxed);  // relaxed: as above
            continue;
          }
          (void)events.commit_wait_for(key, std::chrono::microseconds(20));
        }
      });
    }
    for (int i = 0; i < items; ++i) {
      work.give();
      events.notify_one();
    }
    for (auto& thread : consumers) thread.join();
    CHECK(consumed.load() == items);
    CHECK(events.waiters() == 0);
    CHECK(events.signals() == 0);
  }
}

TEST_CASE("event_count: waiters of different conditions, woken by notify_all, all leave" *
          doctest::test_suite("stress")) {
  // Each waiter waits for its own flag. Half wait without a time-out; the other half time out
  // every 20 µs and announce themselves again, so late waiters keep arriving just after a
  // broadcast. The setter sets one flag, broadcasts, and waits for that waiter's answer
  // before the next, so no later broadcast can rescue a waiter whose wake-up another took:
  // it would sleep forever, and the watchdog names this test. (A notify_all whose signals
  // any waiter could take would strand a waiter here.)
  constexpr int waiters = 6;
  constexpr int rounds = 200;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    event_count<> events;
    std::array<std::atomic<int>, waiters> flags{};
    std::array<std::atomic<int>, waiters> answers{};
    std::vector<std::thread> threads;
    for (int w = 0; w < waiters; ++w) {
      threads.emplace_back([&, w] {
        for (int round = 1; round <= rounds; ++round) {
          for (;;) {
            if (flags[w].load(std::memory_order_acquire) >= round) break;  // acquire: pairs with the setter's release
            auto key = events.prepare_wait();
            if (flags[w].load(std::memory_order_acquire) >= round) {  // acquire: as above
              events.cancel_wait();
              break;
            }
            if (w % 2 == 0) {
              events.commit_wait(key);
            } else {
              (void)events.commit_wait_for(key, std::chrono::microseconds(20));
            }
          }
          answers[w].store(round, std::memory_order_release);  // release: pairs with the setter's acquire
        }
      });
    }
    for (int round = 1; round <= rounds; ++round) {
      for (int w = 0; w < waiters; ++w) {
        flags[w].store(round, std::memory_order_release);  // release: pairs with the waiters' acquire
        events.notify_all();
        while (answers[w].load(std::memory_order_acquire) < round) std::this_thread::yield();  // acquire: pairs with the answer
      }
    }
    for (auto& thread : threads) thread.join();
    CHECK(events.waiters() == 0);
    CHECK(events.signals() == 0);
  }
}
