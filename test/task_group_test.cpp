// Suite "task_group": spawning and joining children.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

// Failing allocations on demand, for the out-of-memory case: a thread sets fail_here and
// its next operator new throws. GCC cannot see that these replacements pair malloc with
// free themselves.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
thread_local bool fail_here = false;
}  // namespace

void* operator new(std::size_t size) {
  if (fail_here) throw std::bad_alloc();
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

using namespace magpie;
using test::group_fib;
using test::no_leaks;

namespace {

// fib_throwing throws once the recursion reaches `depth` (libfork's exception test).
long fib_throwing(int n, int depth) {
  if (depth == 7) throw std::runtime_error("too deep");
  if (n < 2) return n;
  long a = 0;
  task_group group;
  group.run([&] { a = fib_throwing(n - 1, depth + 1); });
  long b = fib_throwing(n - 2, depth + 1);
  group.wait();
  return a + b;
}

}  // namespace

TEST_CASE("task_group: fork-join fib gives the right answer on every worker count") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    long answer = pool.launch("fib", [] { return group_fib(20); }).get_result();
    CHECK(answer == 6765);
    // And from a thread that is not a worker: it runs children itself when nobody else can.
    task_group outside(pool);
    long from_outside = 0;
    outside.run([&] { from_outside = group_fib(15); });
    outside.wait();
    CHECK(from_outside == 610);
  }
}

TEST_CASE("task_group: reusable after wait, and children may spawn siblings") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_group group(pool);
  std::atomic<int> ran{0};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      group.run([&] {
        ran.fetch_add(1);
        group.run([&] { ran.fetch_add(1); });  // a sibling, from a child
      });
    }
    group.wait();
    CHECK(ran.load() == 20 * (round + 1));
  }
}

TEST_CASE("task_group: on a thread with its own deque, a child the joiner runs itself may spawn siblings") {
  // wait()'s inline path pops the one child, runs it, and must notice the siblings it made.
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // the attached thread pushes children onto its own deque
  task_group group(pool);
  int ran = 0;
  for (int round = 0; round < 3; ++round) {
    group.run([&] {
      ++ran;
      group.run([&] {
        ++ran;
        group.run([&] { ++ran; });  // a grandchild-level sibling, spawned by a sibling
      });
    });
    group.wait();
    CHECK(ran == 3 * (round + 1));
  }
  group.wait();  // nothing spawned: returns at once
  CHECK(ran == 9);
  pool.detach();
}


TEST_CASE("task_group: the first small child after each join lives in the group, the rest in the pool") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  task_group group(pool);
  int ran = 0;
  for (int round = 0; round < 3; ++round) {
    std::int64_t blocks = detail::task_pool::live_blocks();
    group.run([&] { ++ran; });
    CHECK(detail::task_pool::live_blocks() == blocks);  // in the group's inline slot
    group.run([&] { ++ran; });
    CHECK(detail::task_pool::live_blocks() == blocks + 1);  // the slot is taken: a pooled block
    group.wait();
    CHECK(detail::task_pool::live_blocks() == blocks);
    CHECK(ran == 2 * (round + 1));
  }
}

TEST_CASE("task_group: a first child larger than the inline slot is pooled, and the slot serves the next small one") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  task_group group(pool);
  for (int round = 0; round < 3; ++round) {
    std::int64_t blocks = detail::task_pool::live_blocks();
    std::array<long, 32> big{};  // 256 bytes of captures: more than the slot holds
    big[31] = round;
    long seen = -1;
    group.run([big, &seen] { seen = big[31]; });
    CHECK(detail::task_pool::live_blocks() == blocks + 1);  // too big for the slot
    int small = 0;
    group.run([&small] { ++small; });
    CHECK(detail::task_pool::live_blocks() == blocks + 1);  // the slot, still free, takes it
    group.wait();
    CHECK(detail::task_pool::live_blocks() == blocks);
    CHECK(seen == round);
    CHECK(small == 1);
  }
}

TEST_CASE("task_group: a child in the inline slot that throws is rethrown by wait, and the slot serves again") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    pool.launch("slot", [] {
      task_group group;
      for (int round = 0; round < 50; ++round) {
        group.run([round] {
          if (round % 2 == 0) throw std::runtime_error("slot child failed");
        });
        if (round % 2 == 0) {
          CHECK_THROWS_AS(group.wait(), std::runtime_error);
        } else {
          CHECK_NOTHROW(group.wait());
        }
        CHECK_FALSE(group.has_exception());
      }
      // After every join the slot is free: the next small child takes no pooled block.
      std::int64_t blocks = detail::task_pool::live_blocks();
      int ran = 0;
      group.run([&ran] { ++ran; });
      CHECK(detail::task_pool::live_blocks() == blocks);
      group.wait();
      CHECK(ran == 1);
    }).wait();
  }
}

TEST_CASE("task_group: a child in the inline slot runs once whether a thief takes it or its joiner pops it") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    const int rounds = 200;
    int stolen = 0;
    int popped = 0;
    bool all_once = pool.launch("slot owner", [&] {
      const auto owner = std::this_thread::get_id();
      task_group group;
      bool once = true;
      for (int round = 0; round < rounds; ++round) {
        std::atomic<int> runs{0};
        std::atomic<bool> away{false};
        group.run([&runs, &away, owner] {
          runs.fetch_add(1);
          away = std::this_thread::get_id() != owner;
        });
        // Odd rounds give a thief time (bounded) to take the child; even ones join at once.
        if (round % 2 == 1 && workers > 0) {
          auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
          while (runs.load() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        }
        group.wait();
        once = once && runs.load() == 1;
        (away.load() ? stolen : popped) += 1;
      }
      return once;
    }).get_result();
    CHECK(all_once);
    CHECK(stolen + popped == rounds);
    CHECK(popped > 0);                  // even rounds: the joiner usually finds it still queued
    if (workers >= 2) CHECK(stolen > 0);  // odd rounds: an idle worker steals it
    if (workers == 0) CHECK(stolen == 0);
  }
}

namespace {
// copy_throws is a callable whose copy fails: run() must throw and leave nothing behind.
struct copy_throws {
  int* ran;
  explicit copy_throws(int* counter) : ran(counter) {}
  copy_throws(const copy_throws&) { throw std::runtime_error("copy failed"); }
  void operator()() const { ++*ran; }
};
}  // namespace

TEST_CASE("task_group: a child whose callable throws while being copied is not spawned") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_group group(pool);
  int ran = 0;
  copy_throws failing(&ran);
  CHECK_THROWS_AS(group.run(failing), std::runtime_error);  // would take the inline slot
  CHECK_THROWS_AS(group.run(failing), std::runtime_error);  // would take a pooled block
  int fine = 0;
  group.run([&] { ++fine; });
  group.wait();
  CHECK(ran == 0);
  CHECK(fine == 1);
}

TEST_CASE("task_group: a run() that finds no memory to grow the deque throws and leaves the group joinable") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));  // no thread but this one: every child stays queued
  pool.attach(named_thread::game);        // so that this thread's children go to its deque
  int count = 0;
  {
    task_group group(pool);
    for (int i = 0; i < 256; ++i) group.run([&count] { ++count; });  // fills the first ring
    int threw = 0;
    fail_here = true;  // no doctest assertion until it is off again: they allocate
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        group.run([&count] { count += 1000; });  // needs a bigger ring
      } catch (const std::bad_alloc&) {
        ++threw;
      }
    }
    fail_here = false;
    CHECK(threw == 2);
    group.wait();  // a run() that threw must not be counted, or this waits for ever for it
  }
  pool.detach();
  CHECK(count == 256);
}

TEST_CASE("task_group stress: groups reused 20,000 times with stolen children on 2 workers" *
          doctest::test_suite("stress")) {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  long total = pool.launch("reuse", [] {
    long sum = 0;
    task_group group;
    for (int round = 0; round < 20'000 * test::stress_repeat(); ++round) {
      long first = 0;
      long second = 0;
      group.run([&first, round] { first = round; });   // the inline slot: a thief may take it
      group.run([&second, round] { second = 2L * round; });
      group.wait();
      sum += first + second - 3L * round;
    }
    return sum;
  }).get_result();
  CHECK(total == 0);
}

TEST_CASE("task_group: 10,000 children that each burn 1 KB of stack and join their own group") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  std::atomic<long> sum{0};
  pool.launch("root", [&] {
    task_group group;
    for (int i = 0; i < 10'000; ++i) {
      group.run([&sum, i] {
        volatile char stack[1024];
        stack[i % 1024] = static_cast<char>(i);
        task_group inner;
        long a = 0;
        inner.run([&a, i] { a = i; });
        inner.run([&sum] { sum.fetch_add(1); });
        inner.wait();
        sum.fetch_add(a + stack[i % 1024] - static_cast<char>(i));
      });
    }
    group.wait();
  }).wait();
  CHECK(sum.load() == 10'000 + 10'000L * 9'999 / 2);
}

TEST_CASE("task_group: the first exception is rethrown by wait; every child still runs") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_group group(pool);
    std::atomic<int> ran{0};
    for (int i = 0; i < 50; ++i) {
      group.run([&ran, i] {
        ran.fetch_add(1);
        if (i % 10 == 3) throw std::runtime_error("child " + std::to_string(i));
      });
    }
    CHECK_THROWS_AS(group.wait(), std::runtime_error);
    CHECK(ran.load() == 50);
    CHECK_FALSE(group.has_exception());
    group.run([] {});
    CHECK_NOTHROW(group.wait());  // reusable, exception cleared
  }
}

TEST_CASE("task_group: recursive fib throwing at depth 7 — below it succeeds, above it throws, 1,000 times") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  for (int repeat = 0; repeat < 1000; ++repeat) {
    // group_fib(n) calls reach depth n − 1 (group_fib(1) and group_fib(0) do not recurse): depth 7 from n = 8.
    int n = repeat % 12;
    bool threw = false;
    long answer = -1;
    try {
      answer = pool.launch("fib throwing", [n] { return fib_throwing(n, 0); }).get_result();
    } catch (const std::runtime_error&) {
      threw = true;
    }
    if (n < 8) {
      CHECK_FALSE(threw);
      CHECK(answer == group_fib(n));
    } else {
      CHECK(threw);
    }
  }
}

TEST_CASE("task_group: destroyed without wait while children run is reported, then joined") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  std::thread releaser([&] {  // lets the child finish once the destructor has reported
    while (recorder.count() == 0) std::this_thread::yield();
    release.store(true);
  });
  {
    task_group group(pool);
    group.run([&] {
      while (!release.load()) std::this_thread::yield();
      ran.fetch_add(1);
    });
  }
  releaser.join();
  CHECK(ran.load() == 1);
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
  std::ostringstream this_thread_id;
  this_thread_id << std::this_thread::get_id();
  CHECK(recorder.count_naming("destroyed on thread " + this_thread_id.str() + " with 1 children not joined") == 1);
}

TEST_CASE("task_group: wait from two threads at once is reported") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(0));  // the child can only run inside the main thread's wait
  task_group group(pool);
  std::thread second;
  group.run([&] {
    // We run inside the first wait(); a second thread now waits too.
    second = std::thread([&] { group.wait(); });
    while (recorder.count() == 0) std::this_thread::yield();
  });
  std::ostringstream second_id;
  group.wait();
  second_id << second.get_id();
  second.join();
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].kind == diagnostic_kind::misuse);
  CHECK(recorder.count_naming("task_group::wait called on thread " + second_id.str() + " while another thread waits") == 1);
}

TEST_CASE("task_group stress: fib on 1, 2 and 8 workers, repeated" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      for (int round = 0; round < 5; ++round) {
        CHECK(pool.launch("fib", [] { return group_fib(22); }).get_result() == 17711);
      }
    }
  }
}
