// Tests for include/magpie/detail/deque.h — the Chase-Lev work-stealing deque — and for the
// owner-side looks a waiting thread makes at it (lib/tasks/deque_owner_view.h).
#include <magpie/detail/deque.h>

#include "../lib/tasks/deque_owner_view.h"

#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

using magpie::detail::deque_owner_view;
using magpie::detail::work_stealing_deque;

TEST_SUITE("deque") {

TEST_CASE("deque: the owner pops the newest item first") {
  work_stealing_deque<int> deque;
  for (int i = 0; i < 10; ++i) deque.push(i);
  for (int i = 9; i >= 0; --i) CHECK(deque.pop() == i);
  CHECK_FALSE(deque.pop().has_value());
}

TEST_CASE("deque: thieves steal the oldest item first") {
  work_stealing_deque<int> deque;
  for (int i = 0; i < 10; ++i) deque.push(i);
  for (int i = 0; i < 10; ++i) CHECK(deque.steal() == i);
  CHECK_FALSE(deque.steal().has_value());
}

TEST_CASE("deque: pop and steal meet in the middle without losing an item") {
  work_stealing_deque<int> deque;
  for (int i = 0; i < 6; ++i) deque.push(i);
  CHECK(deque.steal() == 0);
  CHECK(deque.pop() == 5);
  CHECK(deque.steal() == 1);
  CHECK(deque.pop() == 4);
  CHECK(deque.pop() == 3);
  CHECK(deque.steal() == 2);
  CHECK(deque.empty());
}

TEST_CASE("deque: the owner takes the oldest item back only if it is the one expected") {
  work_stealing_deque<int> deque;
  for (int i = 1; i <= 3; ++i) deque.push(i);
  CHECK_FALSE(deque.steal_if(2));  // not the oldest
  CHECK(deque.steal_if(1));
  CHECK_FALSE(deque.steal_if(1));  // gone
  CHECK(deque.steal() == 2);
  CHECK(deque.steal_if(3));  // the last item
  CHECK(deque.empty());
  CHECK_FALSE(deque.steal_if(3));
  deque.push(4);  // the indices still line up
  CHECK(deque.pop() == 4);
}

TEST_CASE("deque: take_back takes the expected item from the newest end, else the oldest") {
  work_stealing_deque<int> deque;
  deque_owner_view owner(deque);
  for (int i = 1; i <= 4; ++i) deque.push(i);
  CHECK(owner.oldest_is(1));
  CHECK_FALSE(owner.oldest_is(4));
  CHECK(owner.take_back(4));      // the newest
  CHECK(owner.take_back(1));      // the oldest
  CHECK_FALSE(owner.take_back(2 + 5));  // neither end
  CHECK_FALSE(owner.take_back(1));      // gone already
  CHECK(owner.oldest_is(2));
  CHECK_FALSE(owner.pop_if(2));  // not the newest
  CHECK(owner.pop_if(3));
  deque.push(3);  // back, for the pops below
  CHECK(deque.pop() == 3);
  CHECK(deque.pop() == 2);
  CHECK(deque.empty());
}

namespace {

// race_thieves pushes 0..count-1 while two thieves steal, calling `owner_takes(deque, i,
// take)` after each push (`take(item)` counts an item the owner took), then checks that
// every item was taken exactly once.
template <class OwnerTakes>
void race_thieves(int count, OwnerTakes owner_takes) {
  work_stealing_deque<int> deque;
  std::vector<std::atomic<int>> taken(static_cast<std::size_t>(count));
  auto take = [&taken](int item) { taken[static_cast<std::size_t>(item)].fetch_add(1); };
  std::atomic<bool> done{false};
  std::vector<std::thread> thieves;
  for (int t = 0; t < 2; ++t) {
    thieves.emplace_back([&] {
      while (!done.load()) {
        if (auto item = deque.steal()) take(*item);
      }
    });
  }
  for (int i = 0; i < count; ++i) {
    deque.push(i);
    owner_takes(deque, i, take);
  }
  while (auto item = deque.pop()) take(*item);
  done.store(true);
  for (auto& each : thieves) each.join();
  while (auto item = deque.steal()) take(*item);
  for (auto& each : taken) CHECK(each.load() == 1);
}

}  // namespace

TEST_CASE("deque stress: the owner takes its oldest items back while thieves steal" * doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    int oldest = 0;
    race_thieves(100'000, [&oldest](work_stealing_deque<int>& deque, int i, auto take) {
      if (i % 3 != 2) return;
      for (; oldest <= i; ++oldest) {  // the owner goes after its oldest, which a thief may have taken
        if (deque.steal_if(oldest)) take(oldest);
      }
    });
  }
}

TEST_CASE("deque: a run of the oldest items is taken at once, as far as the caller wants and below the end given") {
  using take = work_stealing_deque<int>::oldest_take;
  work_stealing_deque<int> deque;
  for (int i = 0; i < 8; ++i) deque.push(i);
  const std::int64_t end = deque.end_index();
  deque.push(8);  // pushed after the end was read: left alone
  int out[8] = {};
  auto all = [](std::int64_t, int) { return take::take; };
  CHECK(deque.take_oldest(out, 3, end, all) == 3);  // room for three
  CHECK((out[0] == 0 && out[1] == 1 && out[2] == 2));
  auto up_to_4 = [](std::int64_t, int item) { return item == 4 ? take::take_and_stop : take::take; };
  CHECK(deque.take_oldest(out, 8, end, up_to_4) == 2);
  CHECK((out[0] == 3 && out[1] == 4));
  std::int64_t asked = 0;
  auto while_expected = [&asked](std::int64_t i, int item) {
    asked = i + 1;
    return item == 5 + i && i < 1 ? take::take : take::stop;
  };
  CHECK(deque.take_oldest(out, 8, end, while_expected) == 1);  // 5, then stopped before 6
  CHECK(asked == 2);
  CHECK(deque.take_oldest(out, 8, end, [](std::int64_t, int) { return take::stop; }) == 0);
  CHECK(deque.take_oldest(out, 8, end, all) == 2);  // 6 and 7; 8 lies at the end
  CHECK((out[0] == 6 && out[1] == 7));
  CHECK(deque.take_oldest(out, 8, end, all) == 0);
  CHECK(deque.steal() == 8);
  CHECK(deque.empty());
  deque.push(9);  // the indices still line up
  CHECK(deque.pop() == 9);
}

TEST_CASE("deque stress: the owner takes runs of its oldest items while thieves steal" * doctest::test_suite("stress")) {
  using take_answer = work_stealing_deque<int>::oldest_take;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    race_thieves(100'000, [](work_stealing_deque<int>& deque, int i, auto take) {
      if (i % 7 != 6) return;
      int run[16];
      std::int64_t got = deque.take_oldest(run, 1 + i % 16, deque.end_index(),
                                           [](std::int64_t, int) { return take_answer::take; });
      for (std::int64_t k = 0; k < got; ++k) {
        if (k > 0) CHECK(run[k] == run[k - 1] + 1);  // a run, oldest first, with no gap
        take(run[k]);
      }
    });
  }
}

TEST_CASE("deque: a run of the newest items is matched and popped at once, never reaching the oldest") {
  work_stealing_deque<int> deque;
  deque_owner_view owner(deque);
  for (int i = 0; i < 6; ++i) deque.push(i);
  const int newest[] = {5, 4, 3, 9};
  int asked = 0;
  auto from = [&asked](const int* items) {
    return [&asked, items](std::int64_t i) {
      ++asked;
      return items[i];
    };
  };
  CHECK(owner.newest_matching(from(newest), 4) == 3);  // stops at the first item that differs
  CHECK(asked == 4);
  CHECK(owner.newest_matching(from(newest), 2) == 2);
  const int wrong[] = {4, 5};
  asked = 0;
  CHECK(owner.newest_matching(from(wrong), 2) == 0);
  CHECK(asked == 1);  // nothing asked for past the first mismatch
  bool hid_items = true;
  CHECK(deque.pop_newest(3, hid_items));
  CHECK(deque.size_approx() == 3);
  CHECK_FALSE(deque.pop_newest(3, hid_items));  // would take the oldest item, which thieves contend for
  CHECK_FALSE(hid_items);                        // refused before anything moved
  CHECK(deque.size_approx() == 3);
  CHECK(deque.pop_newest(2, hid_items));
  CHECK(deque.pop() == 0);
  CHECK_FALSE(deque.pop().has_value());
  CHECK(deque.steal() == std::nullopt);
}

// A run that a thief's take makes reachable is put back after it was hidden from thieves
// for a moment: the caller is told, so that it can wake a worker whose look came then.
TEST_CASE("deque: pop_newest says when it put back a run it had hidden from thieves") {
  work_stealing_deque<int> deque;
  for (int i = 0; i < 3; ++i) deque.push(i);
  CHECK(deque.steal() == 0);  // the owner has not seen top move: the run of 2 looks safe
  bool hid_items = false;
  CHECK_FALSE(deque.pop_newest(2, hid_items));  // top reached the run: put back
  CHECK(hid_items);
  CHECK(deque.size_approx() == 2);
  CHECK(deque.steal() == 1);
  CHECK(deque.steal() == 2);
}

TEST_CASE("deque: the low water is the lowest end since it was set: items pushed since lie at or above it") {
  work_stealing_deque<int> deque;
  for (int i = 0; i < 6; ++i) deque.push(i);
  deque.set_low_water(deque.end_index());
  CHECK(deque.low_water() == 6);
  deque.push(6);
  CHECK(deque.low_water() == 6);  // pushes never lower it
  CHECK(deque.pop() == 6);
  CHECK(deque.pop() == 5);
  CHECK(deque.low_water() == 5);
  deque.push(50);  // lands at index 5, at the low water
  bool hid_items = false;
  CHECK(deque.pop_newest(2, hid_items));
  CHECK(deque.low_water() == 4);
  CHECK(deque.steal() == 0);  // thieves move the other end: no change
  CHECK(deque.low_water() == 4);
  deque.set_low_water(deque.end_index());
  CHECK(deque.low_water() == 4);
  CHECK(deque.pop() == 3);
  CHECK(deque.low_water() == 3);

  // A pop that puts the item back takes nothing: the low water stays (a join looking for
  // its own child on top of a thread's deque does this).
  deque.set_low_water(deque.end_index());
  bool pushed_back = false;
  CHECK_FALSE(deque.pop_matching([](int) { return false; }, pushed_back).has_value());
  CHECK(pushed_back);
  CHECK(deque.low_water() == deque.end_index());
  // Also when the item was the last one, which the pop takes by moving top: it goes back one
  // index higher, still below the low water.
  while (deque.pop()) {
  }
  deque.push(7);
  deque.set_low_water(deque.end_index());
  CHECK_FALSE(deque.pop_matching([](int) { return false; }, pushed_back).has_value());
  CHECK(deque.low_water() == deque.end_index());
  CHECK(deque.pop() == 7);
}

TEST_CASE("deque: popping an empty deque returns nothing and does not wrap the indices") {
  work_stealing_deque<int> deque;
  for (int i = 0; i < 1000; ++i) REQUIRE_FALSE(deque.pop().has_value());
  CHECK(deque.size_approx() == 0);
  CHECK_FALSE(deque.steal().has_value());
  deque.push(7);
  CHECK(deque.size_approx() == 1);
  CHECK(deque.steal() == 7);
  CHECK_FALSE(deque.pop().has_value());
}

TEST_CASE("deque: the ring grows and keeps every item in order") {
  work_stealing_deque<std::uint64_t> deque(2);
  CHECK(deque.capacity() == 2);
  for (std::uint64_t i = 0; i < 1000; ++i) deque.push(i);
  CHECK(deque.capacity() >= 1000);
  CHECK(deque.size_approx() == 1000);
  for (std::uint64_t i = 0; i < 500; ++i) REQUIRE(deque.steal() == i);
  for (std::uint64_t i = 999; i >= 500; --i) REQUIRE(deque.pop() == i);
  CHECK(deque.empty());
}

TEST_CASE("deque: growth after wrap-around copies the live window") {
  work_stealing_deque<int> deque(4);
  // Move top and bottom far past the ring size so the live items straddle its end.
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 3; ++i) deque.push(i);
    for (int i = 0; i < 3; ++i) REQUIRE(deque.steal() == i);
  }
  for (int i = 0; i < 20; ++i) deque.push(i);
  CHECK(deque.capacity() >= 20);
  CHECK(deque.steal() == 0);
  for (int i = 19; i >= 1; --i) REQUIRE(deque.pop() == i);
  CHECK(deque.empty());
}

TEST_CASE("deque: the initial capacity rounds up to a power of two") {
  CHECK(work_stealing_deque<int>(0).capacity() == 2);
  CHECK(work_stealing_deque<int>(3).capacity() == 4);
  CHECK(work_stealing_deque<int>(256).capacity() == 256);
  CHECK(work_stealing_deque<int>(257).capacity() == 512);
}

#if MAGPIE_DEBUG_CHECKS
TEST_CASE("deque: push and pop from a thread that does not own the deque are reported") {
  magpie::test::diagnostic_recorder recorder;
  work_stealing_deque<int> deque;
  deque.push(1);  // this thread becomes the owner
  std::thread intruder([&] {
    deque.push(2);
    (void)deque.pop();
  });
  intruder.join();
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].message.find("push") != std::string::npos);
  CHECK(reports[1].message.find("pop") != std::string::npos);
}

TEST_CASE("deque: set_owner hands the deque to another thread without a report") {
  magpie::test::diagnostic_recorder recorder;
  work_stealing_deque<int> deque;
  std::thread worker;
  deque.set_owner(std::thread::id{});
  worker = std::thread([&] {
    deque.push(1);
    CHECK(deque.pop() == 1);
  });
  worker.join();
  CHECK(recorder.count() == 0);
}
#endif

}  // TEST_SUITE("deque")

namespace {

// Sizes 1, 4, 13, 40, … up to 265,720 (×3+1), as in Taskflow's and libfork's deque tests.
std::vector<std::size_t> stress_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t n = 1; n <= 265'720; n = n * 3 + 1) sizes.push_back(n);
  return sizes;
}

// Owner pushes 0..n-1, popping one item after every third push; `thieves` threads steal
// until the owner is done and the deque is empty. Returns every item taken, by anyone.
// With `runs`, the owner instead takes back runs of up to 8 of the items it just pushed
// with newest_matching and pop_newest.
std::vector<std::size_t> take_everything(std::size_t n, int thieves, bool runs = false) {
  work_stealing_deque<std::size_t> deque(2);  // tiny, so growth races the thieves
  std::atomic<bool> owner_done{false};
  std::vector<std::vector<std::size_t>> taken(static_cast<std::size_t>(thieves) + 1);
  std::vector<std::thread> threads;
  for (int t = 1; t <= thieves; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = taken[static_cast<std::size_t>(t)];
      for (unsigned misses = 0;;) {
        // acquire: pairs with the owner's release store of owner_done
        bool finished = owner_done.load(std::memory_order_acquire);
        if (auto item = deque.steal()) {
          mine.push_back(*item);
        } else if (finished && deque.empty()) {
          return;
        } else if (++misses % 64 == 0) {
          std::this_thread::yield();  // more thieves than cores: let the owner run
        }
      }
    });
  }
  auto& own = taken[0];
  for (std::size_t i = 0; i < n; ++i) {
    deque.push(i);
    if (runs && i % 8 == 7) {
      std::size_t newest[8];
      for (std::size_t j = 0; j < 8; ++j) newest[j] = i - j;
      auto length = static_cast<std::int64_t>(1 + (i / 8) % 8);
      std::int64_t matched = deque_owner_view(deque).newest_matching([&newest](std::int64_t j) { return newest[j]; }, length);
      bool hid_items = false;
      if (matched > 0 && deque.pop_newest(matched, hid_items)) own.insert(own.end(), newest, newest + matched);
    } else if (!runs && i % 3 == 2) {
      if (auto item = deque.pop()) own.push_back(*item);
    }
  }
  while (auto item = deque.pop()) own.push_back(*item);
  owner_done.store(true, std::memory_order_release);  // release: pairs with the thieves' acquire load
  for (auto& thread : threads) thread.join();
  std::vector<std::size_t> all;
  for (auto& part : taken) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace

TEST_CASE("deque: every item is taken exactly once by the owner and the thieves" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    for (int thieves : {1, 2, 4}) {
      for (std::size_t n : stress_sizes()) {
        CAPTURE(thieves);
        CAPTURE(n);
        std::vector<std::size_t> expected(n);
        std::iota(expected.begin(), expected.end(), std::size_t{0});
        REQUIRE(take_everything(n, thieves) == expected);
        REQUIRE(take_everything(n, thieves, true) == expected);  // runs taken back at once
      }
    }
  }
}

TEST_CASE("deque: a thief and the owner race for the last item and exactly one wins" *
          doctest::test_suite("stress")) {
  constexpr int rounds = 20'000;
  for (int repeat = 0; repeat < magpie::test::stress_repeat(); ++repeat) {
    work_stealing_deque<int> deque(2);
    std::atomic<int> round_started{-1};
    std::atomic<int> thief_done{-1};
    std::vector<int> stolen(rounds, 0);
    std::thread thief([&] {
      for (int round = 0; round < rounds; ++round) {
        while (round_started.load(std::memory_order_acquire) < round) {  // acquire: pairs with the owner's release
          std::this_thread::yield();  // the owner may share this core
        }
        if (auto item = deque.steal()) stolen[static_cast<std::size_t>(round)] = *item;
        thief_done.store(round, std::memory_order_release);  // release: publishes stolen[round]
      }
    });
    int owner_wins = 0;
    int thief_wins = 0;
    for (int round = 0; round < rounds; ++round) {
      deque.push(round + 1);
      round_started.store(round, std::memory_order_release);  // release: the push happens before the thief's steal
      std::optional<int> popped = deque.pop();
      while (thief_done.load(std::memory_order_acquire) < round) {  // acquire: pairs with the thief's release
        std::this_thread::yield();  // the thief may share this core
      }
      int by_thief = stolen[static_cast<std::size_t>(round)];
      REQUIRE(popped.has_value() != (by_thief != 0));
      REQUIRE((popped.has_value() ? *popped : by_thief) == round + 1);
      (popped ? owner_wins : thief_wins) += 1;
    }
    thief.join();
    CHECK(owner_wins + thief_wins == rounds);
    CHECK(deque.empty());
  }
}
