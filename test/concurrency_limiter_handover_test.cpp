// Suite "concurrency_limiter_handover": races where a slot or a piece changes hands —
// pushes from many threads, bursts against finishers running dry, a push as a slot is given
// back, a waiter that pushed nothing, a slot claimed before its last holder let go, pieces
// pushed from pieces amid timed waits, a limiter destroyed while its pieces run.
#include "limiter_support.h"
#include "support.h"
#include "task_support.h"

#include <magpie/chaos.h>
#include <magpie/concurrency_limiter.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <thread>
#include <vector>

using namespace magpie;
using test::lone_int;
using test::no_leaks;

using test::occupancy_probe;
using test::push_from_threads;

namespace {

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

namespace {

// marked_pieces records, per piece id, how often the piece ran and whether its push has
// returned; ids are handed out in push order by `next_id`.
struct marked_pieces {
  explicit marked_pieces(std::size_t capacity) : runs(capacity), pushed(capacity) {}

  // push_marked pushes piece `id`; a piece that is not a child pushes one child from inside
  // its body, under the same limiter, while it holds its slot.
  void push_marked(task_concurrency_limiter& limiter, occupancy_probe& probe, std::size_t id, bool child) {
    limiter.push("marked", [this, &limiter, &probe, id, child](std::uint32_t slot) {
      probe.enter(slot);
      runs[id].fetch_add(1);
      if (!child) push_marked(limiter, probe, next_id.fetch_add(1), true);
      probe.leave(slot);
    });
    pushed[id].store(true);  // the push returned: a wait that begins after this must see the piece run
  }

  std::vector<std::atomic<int>> runs;
  std::vector<std::atomic<bool>> pushed;
  std::atomic<std::size_t> next_id{0};
};

}  // namespace

// Pushers on four threads, each piece pushing a child from inside its body, while another
// thread waits again and again with short time-outs: every wait that returns true has seen
// each piece whose push returned before it began run; at the end each piece ran exactly
// once and never more than N ran at once. Then a limiter destroyed while its pieces still
// run and wait in its queue: the pieces finish under its limit all the same.
TEST_CASE("concurrency_limiter: pieces pushed from threads and from pieces amid timed waits run once each, at most N at once" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : test::wide_worker_counts) {
      for (std::uint32_t limit : {1u, 3u}) {
        CAPTURE(workers);
        CAPTURE(limit);
        no_leaks leaks;
        scheduler pool(test::options_with(workers));
        constexpr int pushers = 4;
        constexpr int per_pusher = 120;
        constexpr std::size_t total = std::size_t{pushers} * per_pusher * 2;  // each with its child
        marked_pieces pieces(total);
        occupancy_probe probe(limit);
        task_concurrency_limiter limiter(limit, priority::normal, pool);
        std::atomic<bool> stop{false};
        std::atomic<int> early_returns{0};
        std::atomic<int> returned_true{0};
        std::thread timed_waiter([&] {
          std::vector<std::size_t> before;
          for (int turn = 0; !stop.load(); ++turn) {
            before.clear();
            for (std::size_t id = 0; id < total; ++id) {
              if (pieces.pushed[id].load()) before.push_back(id);
            }
            if (!limiter.wait(std::chrono::microseconds(turn % 4 * 50))) continue;
            returned_true.fetch_add(1);
            for (std::size_t id : before) early_returns.fetch_add(pieces.runs[id].load() == 0 ? 1 : 0);
          }
        });
        std::vector<std::thread> threads;
        for (int t = 0; t < pushers; ++t) {
          threads.emplace_back([&] {
            for (int i = 0; i < per_pusher; ++i) pieces.push_marked(limiter, probe, pieces.next_id.fetch_add(1), false);
          });
        }
        for (std::thread& each : threads) each.join();
        CHECK(limiter.wait(std::chrono::seconds(30)));
        stop.store(true);
        timed_waiter.join();
        CHECK(early_returns.load() == 0);
        REQUIRE(pieces.next_id.load() == total);
        int not_once = 0;
        for (std::size_t id = 0; id < total; ++id) not_once += pieces.runs[id].load() == 1 ? 0 : 1;
        CHECK(not_once == 0);
        CHECK(probe.most.load() <= static_cast<int>(limit));
        CHECK(probe.bad_slots.load() == 0);

        occupancy_probe late_probe(limit);
        std::vector<long> per_slot(limit, 0);  // plain memory: TSan sees any overlap of a slot
        {
          task_concurrency_limiter doomed(limit, priority::normal, pool);
          push_from_threads(doomed, late_probe, per_slot, 3, 100);
        }  // destroyed with pieces queued and running: they hold what they need
        pool.shutdown();  // runs whatever is left of them
        CHECK(late_probe.ran.load() == 300);
        CHECK(late_probe.most.load() <= static_cast<int>(limit));
        CHECK(late_probe.bad_slots.load() == 0);
      }
    }
  }
}
