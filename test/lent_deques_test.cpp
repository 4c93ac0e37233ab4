// Suite "lent_deques": a thread of no scheduler that launches (`main` with a plain
// scheduler) borrows one of its deques (lib/scheduler/lent_deques.cpp): its launches go there, its
// waits take them back, workers steal from it, and it hands the deque back when it exits.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("lent_deques: an unattached thread's launches are taken back by its waits, leaving nothing queued") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  const std::int64_t before = detail::live_tasks();
  const std::thread::id me = std::this_thread::get_id();
  SUBCASE("wait_all, in runs") {
    std::vector<task<int>> handles;
    for (int i = 0; i < 1000; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
    CHECK(wait_all(handles));
    for (int i = 0; i < 1000; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);
  }
  SUBCASE("one by one, oldest first and newest first") {
    std::vector<task<std::thread::id>> handles;
    for (int i = 0; i < 500; ++i) handles.push_back(pool.launch("part", [] { return std::this_thread::get_id(); }));
    for (std::size_t i = 0; i < 250; ++i) CHECK(handles[i].get_result() == me);
    for (std::size_t i = 500; i-- > 250;) CHECK(handles[i].get_result() == me);
  }
  // A task run in place while its entry stayed queued would still be held by the entry.
  CHECK(detail::live_tasks() == before);
}

TEST_CASE("lent_deques: workers steal from the deque lent to an unattached thread") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::atomic<int> ran{0};
  std::vector<task<>> handles;
  for (int i = 0; i < 1000; ++i) handles.push_back(pool.launch("part", [&ran] { ran.fetch_add(1); }));
  while (ran.load() != 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));  // no retraction here
  CHECK(pool.counters().stolen > 0);
  CHECK(wait_all(handles));
}

TEST_CASE("lent_deques: tasks left on the deque of a thread that exited still run") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    std::vector<task<>> handles;
    std::thread([&] {
      for (int i = 0; i < 300; ++i) handles.push_back(pool.launch("orphaned", [&ran] { ran.fetch_add(1); }));
    }).join();
    // The deque went back with its thread; the tasks are this thread's to retract, or the
    // workers' to steal. Its next borrower inherits what is left.
    for (std::size_t i = 0; i < handles.size(); i += 2) handles[i].wait();
    std::thread([&] { CHECK(wait_all(handles)); }).join();
    CHECK(ran.load() == 300);
  }
}

TEST_CASE("lent_deques: a thread holding a destroyed scheduler's deque borrows afresh from the next") {
  no_leaks leaks;
  std::thread user([] {
    for (int round = 0; round < 20; ++round) {
      auto pool = std::make_unique<scheduler>(test::options_with(round % 2));
      std::vector<task<int>> handles;
      for (int i = 0; i < 50; ++i) handles.push_back(pool->launch("part", [i] { return i; }));
      CHECK(wait_all(handles));
      for (int i = 0; i < 50; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);
      handles.clear();
      pool.reset();  // this thread still records the deque it held: stale from here on
    }
  });
  user.join();  // hands back what it still records: every record is stale
}

// slot_of is the scheduler slot `pool` took (scheduler_slot): what its tasks name.
std::uint8_t slot_of(scheduler& pool) {
  task<> probe = pool.launch("probe", [] {});
  std::uint8_t index = magpie::detail::task_access::base(probe)->owner_index;
  probe.wait();
  return index;
}

// A thread's record of a lent deque names its scheduler by slot and serial; when the
// thread exits it pins the slot and reads the serial of whichever scheduler is there now.
// Here that is a scheduler made after the record's one went, in the same slot (slots come
// round after 255 others), and the thread has no edge to it but the slot itself: the
// claim's release (the CAS publishing the new owner into a free slot, or the store after
// the census read of a retired one) and the pin's acquire (at_published) order the new
// scheduler's construction before the read. Weaken one and TSan reports the read of
// `serial` racing with its write.
TEST_CASE("lent_deques: a thread exiting with a record of a scheduler whose slot came round reads the new one's serial") {
  for (bool retired : {false, true}) {
    CAPTURE(retired);
    no_leaks leaks;
    auto first = std::make_unique<scheduler>(test::options_with(0));
    std::atomic<bool> borrowed{false};
    std::atomic<bool> exit_now{false};
    std::atomic<std::uint32_t> first_slot{256};
    task<> kept;  // retired: a task of `first` outlives it, so its slot is retired, not freed
    std::thread holder([&] {
      task<> mine = first->launch("borrows a deque", [] {});  // the launch borrows one of its deques
      first_slot.store(magpie::detail::task_access::base(mine)->owner_index, std::memory_order_relaxed);  // relaxed: published by `borrowed`
      mine.wait();
      if (retired) kept = mine;
      mine = task<>();
      borrowed.store(true, std::memory_order_release);  // release: the pair of the acquire below
      // relaxed: no edge from the thread that makes the slot's next scheduler, on purpose
      while (!exit_now.load(std::memory_order_relaxed)) std::this_thread::yield();
    });  // exits holding a record of `first`'s deque: hands it back pinned (give_back)
    while (!borrowed.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: the holder's release
    const std::uint32_t slot = first_slot.load(std::memory_order_relaxed);  // relaxed: read after `borrowed`
    REQUIRE(slot < 256);
    first.reset();
    kept = task<>();  // the slot's census reads 0 from here: the next claimant takes it
    // Schedulers made one at a time take the slots round the table from the one after the
    // last taken, so the 256th or so takes `slot` again.
    std::unique_ptr<scheduler> again;
    for (int made = 0; made < 600 && again == nullptr; ++made) {
      auto next = std::make_unique<scheduler>(test::options_with(0));
      if (slot_of(*next) == slot) again = std::move(next);
    }
    REQUIRE(again != nullptr);
    exit_now.store(true, std::memory_order_relaxed);  // relaxed: as said above
    holder.join();
    // The stale record handed back nothing of the new scheduler's: its lending still works.
    std::thread([&] { CHECK(again->launch("after", [] { return 7; }).get_result() == 7); }).join();
    CHECK(again->launch("after", [] { return 8; }).get_result() == 8);
  }
}

namespace {
// launch_at_thread_exit runs `then` from a thread_local's destructor. Made before its
// thread's first launch, it is destroyed after that launch's thread-exit returners have
// handed the thread's lent deque, pin record and census record back.
struct launch_at_thread_exit {
  std::function<void()> then;
  ~launch_at_thread_exit() {
    if (then) then();
  }
};
thread_local launch_at_thread_exit at_thread_exit;
}  // namespace

TEST_CASE("lent_deques: a thread_local's destructor launches and waits after the thread handed its records back") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    std::atomic<bool> late_finished{false};
    std::thread([&] {
      at_thread_exit.then = [&] {  // constructs the thread_local first
        task<> late = pool.launch("late", [&ran] { ran.fetch_add(1); });
        late_finished.store(late.wait(std::chrono::seconds(10)));
      };
      task<> early = pool.launch("early", [&ran] { ran.fetch_add(1); });  // borrows a deque: claims every record
      early.wait();
    }).join();
    CHECK(late_finished.load());
    CHECK(ran.load() == 2);
    // Another thread borrows a deque and waits on it as usual.
    std::thread([&] {
      std::vector<task<>> again;
      for (int i = 0; i < 100; ++i) again.push_back(pool.launch("again", [&ran] { ran.fetch_add(1); }));
      CHECK(wait_all(again));
    }).join();
    CHECK(ran.load() == 102);
  }
}

TEST_CASE("lent_deques: more unattached threads than deques to lend launch through the shared queue") {
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  std::atomic<int> wrong{0};
  std::vector<std::thread> users;
  std::atomic<int> ready{0};
  for (int t = 0; t < 24; ++t) {
    users.emplace_back([&] {
      std::vector<task<int>> handles;
      for (int i = 0; i < 20; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
      ready.fetch_add(1);
      while (ready.load() != 24) std::this_thread::yield();  // every thread holds what it got
      for (int i = 0; i < 20; ++i) {
        if (handles[static_cast<std::size_t>(i)].get_result() != i) wrong.fetch_add(1);
      }
    });
  }
  for (auto& each : users) each.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("lent_deques stress: short-lived threads launch and wait while workers steal, then the scheduler goes" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < 5 * test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u, 4u}) {
      CAPTURE(workers);
      no_leaks leaks;
      auto pool = std::make_unique<scheduler>(test::options_with(workers));
      std::atomic<int> wrong{0};
      std::vector<std::thread> users;
      for (int t = 0; t < 8; ++t) {
        users.emplace_back([&, t] {
          for (int round = 0; round < 10; ++round) {
            std::vector<task<int>> handles;
            for (int i = 0; i < 40; ++i) {
              handles.push_back(pool->launch("part", [i, t] {
                task_group children;  // fork-join inside: onto the lent deque when retracted here
                std::atomic<int> sum{0};
                for (int k = 0; k <= i % 4; ++k) children.run([&sum, k] { sum.fetch_add(k); });
                children.wait();
                return i + t + sum.load() - (i % 4) * (i % 4 + 1) / 2;
              }));
            }
            for (std::size_t i = 0; i < handles.size(); ++i) {
              std::size_t pick = (round % 2 == 0) ? i : handles.size() - 1 - i;
              if (handles[pick].get_result() != static_cast<int>(pick) + t) wrong.fetch_add(1);
            }
          }
        });
      }
      for (auto& each : users) each.join();
      pool.reset();
      CHECK(wrong.load() == 0);
    }
  }
}

TEST_CASE("lent_deques stress: a deque handed back by an exiting thread reaches its next borrower whole" *
          doctest::test_suite("stress")) {
  // Every deque is lent; one holder grows its deque past the first ring, takes its tasks
  // back and exits, while a thread that has waited for a deque all along launches through
  // the shared queue, trying to borrow at each launch. The borrower learns of the exit only
  // through a relaxed flag and keeps the handles of what it launched (so no completion
  // hands it anything): the deque's owner-side state (its top as last seen, its rings)
  // reaches it only through the hand-back itself. Without workers no thief gives it an
  // edge of its own; the other counts run the same hand-over with thieves about.
  constexpr int holders = 16;  // the deques a scheduler lends
  constexpr int holder_tasks = 600;  // past the first ring's 256
  constexpr int borrower_tasks = 200;
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    for (int repeat = 0; repeat < 3 * test::stress_repeat(); ++repeat) {
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<int> holding{0};
      std::atomic<bool> holder_gone{false};
      std::atomic<bool> may_exit{false};
      std::atomic<int> ran{0};
      std::atomic<int> wrong{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < holders; ++t) {
        threads.emplace_back([&, t] {
          task<> first = pool.launch("borrows a deque", [&ran] { ran.fetch_add(1); });
          holding.fetch_add(1, std::memory_order_release);  // release: pairs with the borrower's acquire
          if (t == 0) {
            std::vector<task<int>> handles;
            for (int i = 0; i < holder_tasks; ++i) handles.push_back(pool.launch("held", [i] { return i; }));
            for (int i = holder_tasks - 1; i >= 0; --i) {  // newest first: each is taken back off the bottom
              if (handles[static_cast<std::size_t>(i)].get_result() != i) wrong.fetch_add(1);
            }
            first.wait();
            return;  // hands its deque back on the way out
          }
          first.wait();
          while (!may_exit.load(std::memory_order_acquire)) std::this_thread::yield();  // acquire: pairs with the release below
        });
      }
      std::thread borrower([&] {
        while (holding.load(std::memory_order_acquire) < holders) std::this_thread::yield();  // acquire: pairs with the holders' release
        std::vector<task<int>> handles;
        // Launches go to the shared queue until the hand-back; the flag only bounds the loop
        // (relaxed: it must not order the holder's exit before the borrowing)
        for (int i = 0, after = 0; after < borrower_tasks; ++i) {
          handles.push_back(pool.launch("borrower's", [i] { return i; }));
          if (holder_gone.load(std::memory_order_relaxed)) {
            ++after;
          } else {
            std::this_thread::yield();
          }
        }
        for (std::size_t i = 0; i < handles.size(); ++i) {
          if (handles[i].get_result() != static_cast<int>(i)) wrong.fetch_add(1);
        }
      });
      threads[0].join();
      holder_gone.store(true, std::memory_order_relaxed);  // relaxed: as the borrower's load
      borrower.join();
      may_exit.store(true, std::memory_order_release);  // release: pairs with the holders' acquire
      for (auto& each : threads) {
        if (each.joinable()) each.join();
      }
      CHECK(wrong.load() == 0);
      CHECK(ran.load() == holders);
    }
  }
}
