// Helpers of the concurrency limiter's tests: a probe of the pieces running at once and
// pushers of probed pieces.
#pragma once

#include <magpie/concurrency_limiter.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace magpie::test {

// occupancy_probe records, for work running under a limiter of `limit`, the most pieces
// seen running at once and any slot out of range or used twice at the same moment.
struct occupancy_probe {
  explicit occupancy_probe(std::uint32_t limit) : slots_busy(limit) {}

  void enter(std::uint32_t slot) {
    int now = running.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    if (slot >= slots_busy.size()) {
      bad_slots.fetch_add(1);
      return;
    }
    if (slots_busy[slot].exchange(true)) bad_slots.fetch_add(1);
  }
  void leave(std::uint32_t slot) {
    if (slot < slots_busy.size()) slots_busy[slot].store(false);
    running.fetch_sub(1);
    ran.fetch_add(1);
  }

  std::vector<std::atomic<bool>> slots_busy;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::atomic<int> bad_slots{0};
  std::atomic<int> ran{0};
};

// push_probed pushes `count` pieces that each occupy their slot for a moment.
inline void push_probed(task_concurrency_limiter& limiter, occupancy_probe& probe, int count) {
  for (int i = 0; i < count; ++i) {
    limiter.push("probed", [&probe](std::uint32_t slot) {
      probe.enter(slot);
      std::this_thread::yield();
      probe.leave(slot);
    });
  }
}

// push_from_threads pushes `per_thread` probed pieces from each of `threads` threads at
// once, each piece counting itself in plain per-slot memory (TSan sees two pieces in one
// slot at once), and returns once every pusher returned.
inline void push_from_threads(task_concurrency_limiter& limiter, occupancy_probe& probe, std::vector<long>& per_slot,
                       int threads, int per_thread) {
  std::atomic<int> ready{0};
  std::vector<std::thread> pushers;
  for (int t = 0; t < threads; ++t) {
    pushers.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) {
        limiter.push("from many", [&probe, &per_slot](std::uint32_t slot) {
          probe.enter(slot);
          if (slot < per_slot.size()) ++per_slot[slot];
          probe.leave(slot);
        });
      }
    });
  }
  for (std::thread& pusher : pushers) pusher.join();
}

// slot_holders fills a limiter's slots with pieces that hold them until release(): hold
// returns once all of them run, each on a thread of its own. Declared before the scheduler,
// so that it outlives the pieces.
struct slot_holders {
  void hold(task_concurrency_limiter& limiter) {
    const int slots = static_cast<int>(limiter.max_concurrency());
    for (int i = 0; i < slots; ++i) {
      limiter.push("holder", [this](std::uint32_t) {
        holding.fetch_add(1);
        while (!released.load()) std::this_thread::yield();
      });
    }
    while (holding.load() < slots) std::this_thread::yield();
  }
  void release() { released.store(true); }

  std::atomic<int> holding{0};
  std::atomic<bool> released{false};
};
}  // namespace magpie::test
