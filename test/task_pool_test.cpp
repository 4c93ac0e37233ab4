// Tests for include/magpie/detail/task_pool.h — per-thread pools with cross-thread frees.
#include <magpie/detail/task_pool.h>
#include <magpie/task_memory.h>

#include "support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace pool = magpie::detail::task_pool;

TEST_SUITE("task_pool") {

TEST_CASE("task_pool: blocks are distinct, 64-byte aligned and writable, and come back for reuse") {
  std::int64_t before = pool::live_blocks();
  // Every class, and each side of every class boundary.
  for (std::size_t size : {1u, 48u, 64u, 65u, 100u, 128u, 129u, 150u, 192u, 193u, 200u, 256u, 257u, 300u, 384u,
                           385u, 511u, 512u}) {
    CAPTURE(size);
    std::vector<void*> blocks;
    std::set<void*> distinct;
    for (int i = 0; i < 3000; ++i) {  // more than one slab's worth
      void* block = pool::allocate(size);
      REQUIRE(reinterpret_cast<std::uintptr_t>(block) % 64 == 0);
      std::memset(block, i & 0xff, size);
      blocks.push_back(block);
      distinct.insert(block);
    }
    // Blocks too small for the request would overlap: a later fill would show in an earlier one.
    bool intact = true;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const auto* bytes = static_cast<const unsigned char*>(blocks[i]);
      for (std::size_t at = 0; at < size; ++at) intact = intact && bytes[at] == (i & 0xff);
    }
    CHECK(intact);
    CHECK(distinct.size() == blocks.size());
    CHECK(pool::live_blocks() == before + 3000);
    for (void* block : blocks) pool::deallocate(block, size);
    CHECK(pool::live_blocks() == before);
    void* again = pool::allocate(size);
    CHECK(distinct.count(again) == 1);  // the most recently freed block is reused
    pool::deallocate(again, size);
  }
}

TEST_CASE("task_pool: requests above the largest class go to operator new") {
  std::int64_t before = pool::live_blocks();
  void* big = pool::allocate(pool::largest_pooled + 1);
  std::memset(big, 0, pool::largest_pooled + 1);
  CHECK(pool::live_blocks() == before);
  pool::deallocate(big, pool::largest_pooled + 1);
}

TEST_CASE("task_pool: blocks freed on another thread return to their owner's pool") {
  std::int64_t before = pool::live_blocks();
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) blocks.push_back(pool::allocate(64));
  std::thread other([&] {
    for (void* block : blocks) pool::deallocate(block, 64);
  });
  other.join();
  CHECK(pool::live_blocks() == before);
  // Exhaust the local list; the returned ones must then come back (no fresh slab needed
  // for them to be found again).
  std::set<void*> returned(blocks.begin(), blocks.end());
  std::vector<void*> again;
  std::size_t reused = 0;
  for (int i = 0; i < 4000; ++i) {
    again.push_back(pool::allocate(64));
    reused += returned.count(again.back());
  }
  CHECK(reused == returned.size());
  for (void* block : again) pool::deallocate(block, 64);
}

TEST_CASE("task_pool: a thread's heap is adopted after the thread exits") {
  std::int64_t before = pool::live_blocks();
  void* survivor = nullptr;
  std::thread first([&] { survivor = pool::allocate(128); });
  first.join();
  std::thread second([&] {
    void* block = pool::allocate(128);
    pool::deallocate(block, 128);
  });
  second.join();
  pool::deallocate(survivor, 128);  // freed long after its thread ended
  CHECK(pool::live_blocks() == before);
}

// allocates_at_exit allocates and frees a block in its destructor. As a thread_local made
// before its thread's first allocation, it is destroyed after that thread's heap was parked.
struct allocates_at_exit {
  ~allocates_at_exit() { pool::deallocate(pool::allocate(128), 128); }
};

TEST_CASE("task_pool: an allocation after the thread's heap was parked at exit leaves the heap parked") {
  std::thread([] { pool::deallocate(pool::allocate(128), 128); }).join();  // a heap is parked
  const std::size_t parked = pool::parked_heap_count();
  const std::int64_t before = pool::live_blocks();
  for (int i = 0; i < 4; ++i) {
    std::thread([] {
      thread_local allocates_at_exit late;
      (void)late;
      pool::deallocate(pool::allocate(128), 128);
    }).join();
    CHECK(pool::parked_heap_count() == parked);
  }
  CHECK(pool::live_blocks() == before);
}

TEST_CASE("task_pool: trim_task_memory gives back the slabs with no live block and keeps the rest") {
  std::int64_t before = pool::live_blocks();
  std::thread owner([] {
    constexpr std::size_t slab = 64 * 1024;
    constexpr std::size_t per_slab = slab / 256 - 1;  // the slab header takes the first block
    CHECK(magpie::task_memory_held() == 0);           // a new thread has no pool yet
    // The thread may adopt an exited thread's pool, with slabs that other tests' blocks
    // still live in: count from what a first trim leaves.
    pool::deallocate(pool::allocate(256), 256);
    magpie::trim_task_memory();
    const std::size_t base = magpie::task_memory_held();
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < 4 * per_slab; ++i) blocks.push_back(pool::allocate(256));
    CHECK(magpie::task_memory_held() == base + 4 * slab);
    void* survivor = blocks.front();  // keeps the first slab
    // Half come back through another thread (the owner's "returned" stack), half here.
    std::thread other([&] {
      for (std::size_t i = 1; i < blocks.size(); i += 2) pool::deallocate(blocks[i], 256);
    });
    other.join();
    for (std::size_t i = 2; i < blocks.size(); i += 2) pool::deallocate(blocks[i], 256);
    CHECK(magpie::trim_task_memory() == 3 * slab);
    CHECK(magpie::task_memory_held() == base + slab);
    // The kept slab's free blocks still serve allocations.
    std::vector<void*> again;
    for (std::size_t i = 1; i < per_slab; ++i) again.push_back(pool::allocate(256));
    CHECK(magpie::task_memory_held() == base + slab);
    for (void* each : again) pool::deallocate(each, 256);
    CHECK(magpie::trim_task_memory() == 0);  // the survivor still lives there
    pool::deallocate(survivor, 256);
    CHECK(magpie::trim_task_memory() == slab);
    CHECK(magpie::task_memory_held() == base);
  });
  owner.join();
  CHECK(pool::live_blocks() == before);
}

TEST_CASE("task_pool: a thread's free slabs go back to the system when it exits") {
  std::thread burst([] {
    std::vector<void*> blocks;
    for (int i = 0; i < 5000; ++i) blocks.push_back(pool::allocate(128));  // ~10 slabs
    for (void* each : blocks) pool::deallocate(each, 128);
  });
  burst.join();
  std::thread adopter([] {
    void* block = pool::allocate(128);  // adopts the burst's parked heap, trimmed at exit
    CHECK(magpie::task_memory_held() < 5 * 64 * 1024);  // untrimmed, it would hold ten slabs
    pool::deallocate(block, 128);
  });
  adopter.join();
}

}  // TEST_SUITE("task_pool")

TEST_CASE("task_pool: producers allocate, consumers free, every block exactly once" *
          doctest::test_suite("stress")) {
  constexpr int per_producer = 20'000;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    std::int64_t before = pool::live_blocks();
    std::vector<std::atomic<void*>> handoff(2 * per_producer);
    std::vector<std::thread> threads;
    for (int p = 0; p < 2; ++p) {
      threads.emplace_back([&, p] {
        for (int i = 0; i < per_producer; ++i) {
          void* block = pool::allocate(256);
          std::memset(block, p, 256);
          handoff[static_cast<std::size_t>(p * per_producer + i)].store(block, std::memory_order_release);  // release: pairs with the consumer's acquire
          if (i % 7 == 0) pool::deallocate(pool::allocate(64), 64);  // interleave local traffic
        }
      });
    }
    for (int c = 0; c < 2; ++c) {
      threads.emplace_back([&, c] {
        for (std::size_t i = static_cast<std::size_t>(c); i < handoff.size(); i += 2) {
          void* block = nullptr;
          while ((block = handoff[i].load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();  // acquire: pairs with the producer
          pool::deallocate(block, 256);
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(pool::live_blocks() == before);
  }
}

TEST_CASE("task_pool stress: a heap made while another thread counts live blocks is counted whole" *
          doctest::test_suite("stress")) {
  // More threads than there are parked heaps make their first allocation at once, so most
  // make a fresh heap and publish it while another thread walks every heap in
  // live_blocks(). The walker has no edge to those threads but the publication itself
  // (the counters below are relaxed): the heap's link and zeroed counters must reach it
  // through that alone.
  constexpr int fresh_threads = 64;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    const std::int64_t before = pool::live_blocks();
    std::atomic<int> allocated{0};
    std::atomic<bool> may_exit{false};
    std::vector<void*> blocks(fresh_threads, nullptr);
    std::thread walker([&] {
      // relaxed: the count only ends the walk; it must not order the heaps before it
      while (allocated.load(std::memory_order_relaxed) < fresh_threads) (void)pool::live_blocks();
    });
    std::vector<std::thread> threads;
    for (int i = 0; i < fresh_threads; ++i) {
      threads.emplace_back([&, i] {
        blocks[static_cast<std::size_t>(i)] = pool::allocate(64);
        allocated.fetch_add(1, std::memory_order_relaxed);  // relaxed: as the walker's load
        // Held until every thread has its heap, so that no heap is parked and adopted meanwhile
        while (!may_exit.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release below
      });
    }
    walker.join();
    may_exit.store(true, std::memory_order_release);  // release: pairs with the threads' acquire
    for (auto& thread : threads) thread.join();
    for (void* block : blocks) pool::deallocate(block, 64);
    CHECK(pool::live_blocks() == before);
  }
}
