// Suite "concurrency_limiter": at most N at once, unique slots, wait, lifetime.
#include "support.h"
#include "task_support.h"

#include <magpie/chaos.h>
#include <magpie/concurrency_limiter.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

namespace {

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
void push_probed(task_concurrency_limiter& limiter, occupancy_probe& probe, int count) {
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
void push_from_threads(task_concurrency_limiter& limiter, occupancy_probe& probe, std::vector<long>& per_slot,
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

// task_memory_padding makes a piece's closure bigger than the task pool serves.
constexpr std::size_t task_memory_padding = magpie::detail::task_pool::largest_pooled + 1;

// chaos_for_this_case runs one test case with chaos at `rate` at least, with the process's
// seed (MAGPIE_CHAOS) if it has one, and puts back what was there when the case ends.
class chaos_for_this_case {
 public:
  chaos_for_this_case(std::uint64_t seed, double rate) : before_(magpie::chaos::current()) {
    magpie::chaos::options chosen{.seed = before_ ? before_->seed : seed, .rate = rate};
    if (before_ && before_->rate > rate) chosen.rate = before_->rate;
    magpie::chaos::start(chosen);
  }
  ~chaos_for_this_case() {
    if (before_) {
      magpie::chaos::start(*before_);
    } else {
      magpie::chaos::stop();
    }
  }
  chaos_for_this_case(const chaos_for_this_case&) = delete;
  chaos_for_this_case& operator=(const chaos_for_this_case&) = delete;

 private:
  std::optional<magpie::chaos::options> before_;
};

}  // namespace

// Each pusher waits for its own pieces: more pushing threads than the limiter keeps count
// lanes for, so some share one. A wait that returned while one of the caller's pieces was
// still queued or running shows as an unset mark (and under TSan as a race on it).
TEST_CASE("concurrency_limiter: a wait from each of many pushing threads returns once its own pieces ran") {
  for (unsigned workers : test::worker_counts) {
    for (std::uint32_t limit : {1u, 3u}) {
      CAPTURE(workers);
      CAPTURE(limit);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      constexpr int pushers = 20;
      constexpr int per_pusher = 40;
      std::vector<std::vector<char>> marks(pushers, std::vector<char>(per_pusher, 0));  // plain: each pusher's own
      std::atomic<int> unmarked{0};
      std::atomic<int> timed_out{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < pushers; ++t) {
        threads.emplace_back([&, t] {
          std::vector<char>& mine = marks[static_cast<std::size_t>(t)];
          for (int i = 0; i < per_pusher; ++i) {
            limiter.push("marks", [&mine, i](std::uint32_t) { mine[static_cast<std::size_t>(i)] = 1; });
          }
          if (!limiter.wait(std::chrono::seconds(30))) timed_out.fetch_add(1);
          for (char mark : mine) unmarked.fetch_add(mark == 0 ? 1 : 0);
        });
      }
      for (std::thread& each : threads) each.join();
      CHECK(timed_out.load() == 0);
      CHECK(unmarked.load() == 0);
      CHECK(limiter.wait(std::chrono::seconds(30)));
    }
  }
}

TEST_CASE("concurrency_limiter: every pushed piece runs once, never more than N at once, in unique slots") {
  for (unsigned workers : test::worker_counts) {
    for (std::uint32_t limit : {1u, 2u, 3u}) {
      CAPTURE(workers);
      CAPTURE(limit);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      occupancy_probe probe(limit);
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      CHECK(limiter.max_concurrency() == limit);
      push_probed(limiter, probe, 200);
      CHECK(limiter.wait());
      CHECK(probe.ran.load() == 200);
      CHECK(probe.most.load() <= static_cast<int>(limit));
      CHECK(probe.most.load() >= 1);
      CHECK(probe.bad_slots.load() == 0);
    }
  }
}

TEST_CASE("concurrency_limiter: wait returns false on time-out while work is held, true once it ran") {
  no_leaks leaks;
  scheduler pool(test::options_with(2));
  task_concurrency_limiter limiter(1, priority::normal, pool);
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  limiter.push("holder", [&](std::uint32_t) {
    started.store(true);
    while (!release.load()) std::this_thread::yield();
    ran.fetch_add(1);
  });
  limiter.push("queued", [&](std::uint32_t) { ran.fetch_add(1); });
  // Running on a worker already: a wait cannot take it back (a wait retracts first, as a
  // task's timed wait does, so one that found it unstarted would run it here).
  while (!started.load()) std::this_thread::yield();
  CHECK_FALSE(limiter.wait(std::chrono::milliseconds(5)));
  release.store(true);
  CHECK(limiter.wait());
  CHECK(ran.load() == 2);
  CHECK(limiter.wait(std::chrono::milliseconds(0)));  // nothing pushed since: at once
}

TEST_CASE("concurrency_limiter: wait from inside a task retracts queued work rather than deadlock") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    // With 0 or 1 workers the waiting task occupies every thread there is: nothing else
    // runs the limiter's tasks unless the wait takes them back.
    task<bool> waiter = pool.launch("waiter", [&] {
      task_concurrency_limiter limiter(2);
      for (int i = 0; i < 50; ++i) limiter.push("piece", [&](std::uint32_t) { ran.fetch_add(1); });
      return limiter.wait();
    });
    CHECK(waiter.get_result());
    CHECK(ran.load() == 50);
  }
}

// With no workers, a wait runs this thread's queue in launch order; the limiter's wait holds
// its runner out of reach meanwhile, so it must not: an older body waiting for the limiter
// would wait for the piece in that runner for ever (the bounded wait below would time out).
TEST_CASE("concurrency_limiter: with no workers, a body launched before a piece may wait for the limiter") {
  for (bool attached : {false, true}) {
    CAPTURE(attached);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    if (attached) pool.attach(named_thread::game);
    {
      task_concurrency_limiter limiter(1, priority::normal, pool);
      bool emptied = false;
      task<> older = pool.launch("waits for the limiter", [&] { emptied = limiter.wait(std::chrono::seconds(30)); });
      bool ran = false;
      limiter.push("piece", [&ran](std::uint32_t) { ran = true; });
      CHECK(limiter.wait());
      CHECK(ran);
      older.wait();
      CHECK(emptied);
    }
    if (attached) pool.detach();
  }
}

// A wait on a limiter whose pieces all run elsewhere sleeps: first it puts back the tasks a
// wait_all of this thread holds aside (lib/tasks/held_runs.h), one of which the running piece
// waits for; otherwise the wait sleeps its whole time-out while the task that
// triggers the piece's event lies held aside by the thread asleep.
TEST_CASE("concurrency_limiter: a wait that sleeps inside a wait_all's run puts the rest of the run back") {
  no_leaks leaks;
  scheduler_options options;
  options.workers = 1;
  options.background_workers = 0;  // the one worker runs the piece: nobody else could take the run
  scheduler pool(options);
  task_event event("triggered by a task of the run", pool);
  {
    task_concurrency_limiter limiter(1, priority::normal, pool);
    std::atomic<bool> go{false};
    std::atomic<bool> piece_started{false};
    limiter.push("piece", [&](std::uint32_t) {
      piece_started = true;
      while (!go.load()) std::this_thread::yield();
      event.wait();
    });
    while (!piece_started.load()) std::this_thread::yield();  // the worker runs the piece
    std::thread other([&] { CHECK(limiter.wait(std::chrono::seconds(30))); });  // holds the runner, asleep
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::atomic<bool> emptied{false};
    task<> filler = pool.launch("below the run", [] {});
    std::vector<task<>> parts;
    parts.push_back(pool.launch("triggers", [&event] { event.trigger(); }));
    parts.push_back(pool.launch("waits for the limiter", [&] {
      go = true;
      emptied = limiter.wait(std::chrono::seconds(20));
    }));
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    CHECK(emptied.load());
    event.trigger();
    other.join();
    filler.wait();
  }
}

TEST_CASE("concurrency_limiter: a limiter destroyed before its work finished lets the work finish") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> ran{0};
    task_event go("go", pool);
    {
      task_concurrency_limiter limiter(2, priority::normal, pool);
      for (int i = 0; i < 20; ++i) {
        limiter.push("late", [&, go](std::uint32_t) {
          go.wait();
          ran.fetch_add(1);
        });
      }
    }
    go.trigger();
    // The pieces are tasks of `pool`; its shutdown runs whatever is left.
    pool.shutdown();
    CHECK(ran.load() == 20);
  }
}

TEST_CASE("concurrency_limiter: work pushed from inside limited work runs under the same limit") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    occupancy_probe probe(2);
    task_concurrency_limiter limiter(2, priority::normal, pool);
    for (int i = 0; i < 10; ++i) {
      limiter.push("parent", [&](std::uint32_t slot) {
        probe.enter(slot);
        for (int j = 0; j < 3; ++j) {
          limiter.push("child", [&](std::uint32_t child_slot) {
            probe.enter(child_slot);
            probe.leave(child_slot);
          });
        }
        probe.leave(slot);
      });
    }
    CHECK(limiter.wait());
    CHECK(probe.ran.load() == 40);
    CHECK(probe.most.load() <= 2);
    CHECK(probe.bad_slots.load() == 0);
  }
}

TEST_CASE("concurrency_limiter: a throwing piece is reported and the rest still run") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_concurrency_limiter limiter(1, priority::normal, pool);
  std::atomic<int> ran{0};
  limiter.push("thrower", [](std::uint32_t) { throw std::runtime_error("boom"); });
  limiter.push("after", [&](std::uint32_t) { ran.fetch_add(1); });
  CHECK(limiter.wait());
  CHECK(ran.load() == 1);
  auto seen = recorder.reports();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].kind == diagnostic_kind::unhandled_exception);
  CHECK(seen[0].message.find("thrower") != std::string::npos);
  CHECK(seen[0].message.find("boom") != std::string::npos);
}

TEST_CASE("concurrency_limiter: max_concurrency 0 is reported and runs as 1") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  scheduler pool(test::options_with(1));
  task_concurrency_limiter limiter(0, priority::normal, pool);
  CHECK(recorder.count() == 1);
  CHECK(limiter.max_concurrency() == 1);
  std::atomic<int> ran{0};
  limiter.push("one", [&](std::uint32_t slot) { ran.fetch_add(slot == 0 ? 1 : 100); });
  CHECK(limiter.wait());
  CHECK(ran.load() == 1);
}

TEST_CASE("concurrency_limiter: a max_concurrency past what can run at once is clamped, not allocated") {
  for (unsigned workers : test::worker_counts) {
    for (std::uint32_t limit : {task_concurrency_limiter::most_at_once + 1, 0xFFFFFFC1u, 0xFFFFFFFFu}) {
      CAPTURE(workers);
      CAPTURE(limit);
      test::diagnostic_recorder recorder;
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      CHECK(limiter.max_concurrency() == task_concurrency_limiter::most_at_once);
      occupancy_probe probe(task_concurrency_limiter::most_at_once);
      push_probed(limiter, probe, 100);
      CHECK(limiter.wait());
      CHECK(probe.ran.load() == 100);
      CHECK(probe.bad_slots.load() == 0);
      CHECK(recorder.count() == 0);
    }
  }
}

TEST_CASE("concurrency_limiter: a wait with a timeout too long to add to the clock waits for the work") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_concurrency_limiter limiter(1, priority::normal, pool);
    std::atomic<bool> release{false};
    std::atomic<int> ran{0};
    limiter.push("held", [&](std::uint32_t) {
      while (!release.load()) std::this_thread::yield();
      ran.fetch_add(1);
    });
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.store(true);
    });
    CHECK(limiter.wait(std::chrono::nanoseconds::max() - std::chrono::nanoseconds(1)));
    CHECK(ran.load() == 1);
    releaser.join();
  }
}

// Six threads push at once, over every worker count up to far more workers than slots.
TEST_CASE("concurrency_limiter: slots index a fixed buffer without races, pieces pushed from many threads" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::wide_worker_counts) {
      for (std::uint32_t limit : {1u, 2u, 4u, 70u}) {
        CAPTURE(workers);
        CAPTURE(limit);
        no_leaks leaks;
        scheduler pool(test::options_with(workers));
        occupancy_probe probe(limit);
        std::vector<long> per_slot(limit, 0);  // plain memory: TSan sees any overlap of a slot
        task_concurrency_limiter limiter(limit, priority::normal, pool);
        constexpr int producers = 6;
        constexpr int per_producer = 100;
        push_from_threads(limiter, probe, per_slot, producers, per_producer);
        CHECK(limiter.wait(std::chrono::seconds(30)));
        CHECK(probe.ran.load() == producers * per_producer);
        CHECK(probe.most.load() <= static_cast<int>(limit));
        CHECK(probe.bad_slots.load() == 0);
        long total = 0;
        for (long each : per_slot) total += each;
        CHECK(total == producers * per_producer);
      }
    }
  }
}

// Producers that push in bursts with gaps between them make finishers run dry again and
// again: each one lingers, then gives its slot back, often just as a producer queues the
// next piece. Plain per-slot memory lets TSan see two pieces in one slot at once.
TEST_CASE("concurrency_limiter: bursts against finishers that run dry keep at most N at once, one per slot" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (std::uint32_t limit : {1u, 2u, 4u}) {
      CAPTURE(limit);
      no_leaks leaks;
      scheduler pool(test::options_with(8));
      occupancy_probe probe(limit);
      std::vector<long> per_slot(limit, 0);
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      constexpr int producers = 3;
      constexpr int bursts = 40;
      auto produce = [&](int seed) {
        for (int burst = 0; burst < bursts; ++burst) {
          for (int i = 0; i < 1 + (burst * 7 + seed) % 9; ++i) {
            limiter.push("burst", [&](std::uint32_t slot) {
              probe.enter(slot);
              if (slot < per_slot.size()) ++per_slot[slot];
              probe.leave(slot);
            });
          }
          for (int gap = 0; gap < (burst + seed) % 4; ++gap) std::this_thread::yield();
        }
      };
      std::vector<std::thread> others;
      for (int seed = 1; seed < producers; ++seed) others.emplace_back(produce, seed);
      produce(0);
      for (std::thread& other : others) other.join();
      CHECK(limiter.wait(std::chrono::seconds(30)));
      int expected = 0;
      for (int seed = 0; seed < producers; ++seed) {
        for (int burst = 0; burst < bursts; ++burst) expected += 1 + (burst * 7 + seed) % 9;
      }
      CHECK(probe.ran.load() == expected);
      CHECK(probe.most.load() <= static_cast<int>(limit));
      CHECK(probe.bad_slots.load() == 0);
      long total = 0;
      for (long each : per_slot) total += each;
      CHECK(total == expected);
    }
  }
}

// One piece at a time, each pushed a little after the previous one ends, the delay swept
// round by round across the time a finisher takes to give its slot back: the push that
// queues behind the running piece and the finisher giving the slot up race. A piece left
// queued with no slot taken would never run; a waiter asleep must be woken by the last
// finisher. Either shows as a bounded wait that times out.
TEST_CASE("concurrency_limiter: a piece pushed as the running one gives its slot back still runs" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      for (std::uint32_t limit : {1u, 2u}) {
        CAPTURE(workers);
        CAPTURE(limit);
        no_leaks leaks;
        scheduler pool(test::options_with(workers));
        task_concurrency_limiter limiter(limit, priority::normal, pool);
        std::atomic<int> ran{0};
        std::atomic<int> ending{0};
        constexpr int rounds = 400;
        int emptied = 0;
        for (int round = 0; round < rounds; ++round) {
          for (std::uint32_t i = 0; i < limit; ++i) {
            limiter.push("ending", [&](std::uint32_t) {
              ran.fetch_add(1);
              ending.fetch_add(1);
            });
          }
          if (workers != 0) {  // with none, the pieces run in the wait below
            const auto seen = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (ending.load() < static_cast<int>(limit) * (round + 1) && std::chrono::steady_clock::now() < seen) {
              std::this_thread::yield();
            }
            const auto pushed_at = std::chrono::steady_clock::now() + std::chrono::nanoseconds(60 * (round % 50));
            while (std::chrono::steady_clock::now() < pushed_at) {
            }
          }
          const bool slow = round % 8 == 1;  // slow enough for the waiters below to fall asleep
          limiter.push("pushed as it ends", [&ran, slow](std::uint32_t) {
            if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            ran.fetch_add(1);
          });
          if (!slow) {
            emptied += limiter.wait(std::chrono::seconds(10)) ? 1 : 0;
          } else {
            // Two waiters on other threads: while one blocks on the task it took back, the
            // other finds none and sleeps until the last piece ends.
            std::atomic<int> both{0};
            auto wait_here = [&] { both.fetch_add(limiter.wait(std::chrono::seconds(10)) ? 1 : 0); };
            std::thread first(wait_here);
            std::thread second(wait_here);
            first.join();
            second.join();
            emptied += both.load() == 2 ? 1 : 0;
          }
          if (emptied != round + 1) break;  // one time-out says it: no need to sit through more
        }
        CHECK(emptied == rounds);
        CHECK(ran.load() == rounds * static_cast<int>(limit + 1));
      }
    }
  }
}

// A thread that pushed nothing learns that the pieces are done from wait() alone: it sees
// them counted as run only through the count's last decrement, the finisher giving its
// slot back, so that decrement's release is its one edge to the last piece's writes. It
// looks once the pieces have had time to finish, so that wait's first look reads zero
// (a later look would go through the runner tasks, whose completion orders them too).
TEST_CASE("concurrency_limiter: a thread that waits without pushing sees every piece's writes" *
          doctest::test_suite("stress")) {
  constexpr int pieces = 4;
  constexpr int rounds = 150;
  struct alignas(64) lone_int {
    int value = 0;
  };
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_concurrency_limiter limiter(2, priority::normal, pool);
      std::array<lone_int, pieces> written{};
      std::atomic<int> finished{0};
      std::atomic<int> round_pushed{-1};
      std::atomic<int> round_seen{-1};
      std::atomic<bool> abandoned{false};
      int wrong = 0;  // the watcher's alone
      std::thread watcher([&] {
        for (int round = 0; round < rounds; ++round) {
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (round_pushed.load(std::memory_order_acquire) < round && std::chrono::steady_clock::now() < give_up) {
            if (abandoned.load(std::memory_order_relaxed)) return;
            std::this_thread::yield();
          }
          // relaxed: no edge to the pieces but the limiter's; with no workers they run in the wait
          const auto done_by = workers == 0 ? std::chrono::steady_clock::now() : give_up;
          while (finished.load(std::memory_order_relaxed) < pieces * (round + 1) &&
                 std::chrono::steady_clock::now() < done_by) {
            std::this_thread::yield();
          }
          std::this_thread::sleep_for(std::chrono::microseconds(round % 4 * 50));  // past the finishers' linger
          if (!limiter.wait(std::chrono::seconds(20))) ++wrong;
          for (const lone_int& each : written) wrong += each.value != round + 1 ? 1 : 0;
          round_seen.store(round, std::memory_order_release);
        }
      });
      for (int round = 0; round < rounds; ++round) {
        for (int i = 0; i < pieces; ++i) {
          limiter.push("writes", [&written, &finished, i, round](std::uint32_t) {
            written[static_cast<std::size_t>(i)].value = round + 1;
            finished.fetch_add(1, std::memory_order_relaxed);  // relaxed: must not order the write itself
          });
        }
        round_pushed.store(round, std::memory_order_release);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (round_seen.load(std::memory_order_acquire) < round && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::yield();
        }
        if (round_seen.load(std::memory_order_acquire) != round) {
          abandoned.store(true, std::memory_order_relaxed);
          break;
        }
      }
      watcher.join();
      CHECK(round_seen.load() == rounds - 1);
      CHECK(wrong == 0);
      CHECK(limiter.wait(std::chrono::seconds(20)));
    }
  }
}

// A holder that gives its slot back frees the slot's bit, then uncounts the slot; chaos
// delays it in between. Meanwhile another holder gives its slot back, finds a piece queued,
// takes a slot again and claims the lowest free bit: the delayed holder's. Its count came
// from its own give-back, not the delayed one's, so the bit's release and acquire are the
// only edge from the previous piece in that slot to the next; plain per-slot memory shows
// under TSan if either is missing. So the pieces share no other edge: they touch no atomic
// but relaxed counters, and each is too big for the task pool (whose returned blocks would
// pass an edge through their owner). Producers push in bursts with gaps, so that holders
// run dry and give their slots back again and again.
TEST_CASE("concurrency_limiter: a slot claimed while its last holder has not given it back sees that holder's piece" *
          doctest::test_suite("stress")) {
  chaos_for_this_case chaos(29, 0.3);
  struct alignas(64) slot_memory {
    long pieces = 0;  // plain: written by the pieces in this slot alone
  };
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {2u, 8u}) {  // two holders at once need two workers
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr std::uint32_t limit = 2;
      std::array<slot_memory, limit> per_slot{};
      std::atomic<int> out_of_range{0};
      task_concurrency_limiter limiter(limit, priority::normal, pool);
      constexpr int producers = 2;
      constexpr int bursts = 300;
      auto produce = [&](int seed) {
        for (int burst = 0; burst < bursts; ++burst) {
          for (int i = 0; i < 1 + (burst + seed) % 3; ++i) {
            std::array<char, task_memory_padding> past_the_pool{};
            limiter.push("handed over", [&per_slot, &out_of_range, past_the_pool](std::uint32_t slot) {
              if (slot >= limit) {
                out_of_range.fetch_add(1, std::memory_order_relaxed);  // relaxed: must order nothing
                return;
              }
              per_slot[slot].pieces += 1 + past_the_pool[0];
            });
          }
          const auto gap = std::chrono::steady_clock::now() + std::chrono::microseconds((burst * 7 + seed) % 5);
          while (std::chrono::steady_clock::now() < gap) std::this_thread::yield();
        }
      };
      std::thread other(produce, 1);
      produce(0);
      other.join();
      CHECK(limiter.wait(std::chrono::seconds(30)));
      long expected = 0;
      for (int seed = 0; seed < producers; ++seed) {
        for (int burst = 0; burst < bursts; ++burst) expected += 1 + (burst + seed) % 3;
      }
      CHECK(out_of_range.load() == 0);
      CHECK(per_slot[0].pieces + per_slot[1].pieces == expected);
    }
  }
}
