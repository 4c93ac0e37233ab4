// Tests for include/magpie/detail/injection_queue.h — the moodycamel-backed queue.
#include <magpie/detail/injection_queue.h>

#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using magpie::detail::counted_injection_queue;
using magpie::detail::injection_queue;

namespace {
struct item {
  int producer;
  int sequence;
};
}  // namespace

TEST_SUITE("injection_queue") {

TEST_CASE("injection_queue: one producer's items come out in the order pushed") {
  injection_queue<item> queue;
  std::vector<item> items(100);
  for (int i = 0; i < 100; ++i) {
    items[static_cast<std::size_t>(i)] = {0, i};
    queue.push(&items[static_cast<std::size_t>(i)]);
  }
  CHECK(queue.size_approx() == 100);
  for (int i = 0; i < 100; ++i) {
    item* next = queue.try_pop();
    REQUIRE(next != nullptr);
    CHECK(next->sequence == i);
  }
  CHECK(queue.try_pop() == nullptr);
}

TEST_CASE("injection_queue: items from several producers keep each producer's order") {
  constexpr int producers = 4;
  constexpr int per_producer = 20'000;
  injection_queue<item> queue;
  std::vector<std::vector<item>> items(producers, std::vector<item>(per_producer));
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        auto& slot = items[static_cast<std::size_t>(p)][static_cast<std::size_t>(i)];
        slot = {p, i};
        queue.push(&slot);
      }
    });
  }
  std::vector<int> next_expected(producers, 0);
  int received = 0;
  while (received < producers * per_producer) {
    if (item* next = queue.try_pop()) {
      REQUIRE(next->sequence == next_expected[static_cast<std::size_t>(next->producer)]);
      ++next_expected[static_cast<std::size_t>(next->producer)];
      ++received;
    }
  }
  for (auto& thread : threads) thread.join();
  CHECK(queue.try_pop() == nullptr);
}

TEST_CASE("injection_queue: a queue nobody pushed to is empty") {
  injection_queue<item> queue;
  CHECK(queue.try_pop() == nullptr);
  CHECK(queue.size_approx() == 0);
}

TEST_CASE("injection_queue: first pushes racing from several threads all land, while a consumer looks") {
  // The queue's storage is made by the first push: several threads may make it at once.
  constexpr int producers = 4;
  for (int round = 0; round < 200; ++round) {
    injection_queue<item> queue;
    std::vector<item> items(producers);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        items[static_cast<std::size_t>(p)] = {p, 0};
        ready.fetch_add(1);
        while (ready.load() < producers + 1) std::this_thread::yield();
        queue.push(&items[static_cast<std::size_t>(p)]);
      });
    }
    while (ready.load() < producers) std::this_thread::yield();
    ready.fetch_add(1);
    std::vector<int> seen(producers, 0);
    int received = 0;
    while (received < producers) {
      if (item* next = queue.try_pop()) {
        ++seen[static_cast<std::size_t>(next->producer)];
        ++received;
      }
    }
    for (auto& thread : threads) thread.join();
    CHECK(queue.try_pop() == nullptr);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; }));
  }
}

TEST_CASE("counted_injection_queue: looks empty exactly while no item is left to claim") {
  counted_injection_queue<item> queue;
  item a{0, 0};
  item b{0, 1};
  CHECK(queue.looks_empty());
  CHECK(queue.try_pop() == nullptr);
  queue.push(&a);
  queue.push(&b);
  CHECK_FALSE(queue.looks_empty());
  CHECK(queue.try_pop() == &a);
  CHECK_FALSE(queue.looks_empty());
  CHECK(queue.try_pop() == &b);
  CHECK(queue.looks_empty());
  CHECK(queue.try_pop() == nullptr);
}

}  // TEST_SUITE("injection_queue")

TEST_CASE("injection_queue: several consumers take every item exactly once" *
          doctest::test_suite("stress")) {
  constexpr int total = 200'000;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    injection_queue<item> queue;
    std::vector<item> items(total);
    std::vector<std::atomic<int>> seen(total);
    std::atomic<int> taken{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < 2; ++p) {
      threads.emplace_back([&, p] {
        for (int i = p; i < total; i += 2) {
          items[static_cast<std::size_t>(i)] = {p, i};
          queue.push(&items[static_cast<std::size_t>(i)]);
        }
      });
    }
    for (int c = 0; c < 3; ++c) {
      threads.emplace_back([&] {
        while (taken.load(std::memory_order_relaxed) < total) {  // relaxed: a loop bound; the pops synchronise
          if (item* next = queue.try_pop()) {
            seen[static_cast<std::size_t>(next->sequence)].fetch_add(1, std::memory_order_relaxed);  // relaxed: read after join
            taken.fetch_add(1, std::memory_order_relaxed);  // relaxed: a loop bound
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& count) { return count.load() == 1; }));
  }
}

// A pop that loses the race for one item must not hide the next one: moodycamel's own
// dequeue (injection_queue's) can, for a moment, report an empty queue beside an item
// pushed while another consumer was backing out of a lost race; counted_injection_queue's
// may not. Two racers pop without pause; the main thread pushes two items and pops after
// each. When its pop finds nothing, it stops the racers and looks again: an item it then
// finds was in the queue, untaken, when its pop came back empty.
TEST_CASE("counted_injection_queue: a pop returns nothing only when every item is taken or being taken" *
          doctest::test_suite("stress")) {
  counted_injection_queue<item> queue;
  std::vector<item> items(2);
  std::atomic<bool> stop_racers{false};
  std::atomic<int> racers_stopped{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> racers;
  for (int r = 0; r < 2; ++r) {
    racers.emplace_back([&] {
      while (!done.load()) {
        if (stop_racers.load()) {
          racers_stopped.fetch_add(1);
          while (stop_racers.load() && !done.load()) std::this_thread::yield();
          racers_stopped.fetch_sub(1);
          continue;
        }
        (void)queue.try_pop();
      }
    });
  }
  int hidden = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500 * magpie::test::stress_repeat());
  while (hidden == 0 && std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 256; ++i) {
      queue.push(&items[0]);
      (void)queue.try_pop();
      queue.push(&items[1]);
      if (queue.try_pop() != nullptr) continue;
      stop_racers.store(true);
      while (racers_stopped.load() != 2) std::this_thread::yield();
      if (queue.try_pop() != nullptr) ++hidden;
      while (queue.try_pop() != nullptr) {
      }
      stop_racers.store(false);
      while (racers_stopped.load() != 0) std::this_thread::yield();
    }
  }
  done.store(true);
  for (auto& racer : racers) racer.join();
  CHECK(hidden == 0);
}
