// Suite "counting": the counting build's tallies (magpie/detail/counted_atomic.h) — per
// call site counts of loads, stores, read-modify-writes and fences, and the cache-line
// moves between threads. Built only with -Dcounting=enabled.
#include <doctest/doctest.h>

#include "task_support.h"

#include <magpie/detail/atomics.h>
#include <magpie/detail/counted_atomic.h>

#include <cstring>
#include <semaphore>
#include <thread>
#include <vector>

namespace {

namespace counting = magpie::detail::counting;
using counting::operation;

// at finds the counts of this file's line `line` in `sites`; all zero when it did nothing.
counting::site_counts at(const counting::totals& sites, std::uint32_t line) {
  for (const counting::site_counts& site : sites) {
    if (site.line == line && std::strstr(site.file, "counting_test.cpp") != nullptr) return site;
  }
  return {};
}

using word64 = magpie::detail::std_atomics::atomic<std::uint64_t>;
using word32 = magpie::detail::std_atomics::atomic<std::uint32_t>;

// One call site each; the line after each names its line.
void first_thread_adds(word64& word) { word.fetch_add(1, std::memory_order_relaxed); }  // relaxed: the semaphores order the turns
constexpr std::uint32_t first_line = __LINE__ - 1;
void second_thread_adds(word64& word) { word.fetch_add(1, std::memory_order_relaxed); }  // relaxed: as above
constexpr std::uint32_t second_line = __LINE__ - 1;
void publish(word32& flag, std::uint32_t value) { flag.store(value, std::memory_order_release); }  // release: pairs with look's acquire
constexpr std::uint32_t store_line = __LINE__ - 1;
std::uint32_t look(const word32& flag) { return flag.load(std::memory_order_acquire); }  // acquire: pairs with publish's release
constexpr std::uint32_t load_line = __LINE__ - 1;
bool swap_from_7(word32& flag) {
  std::uint32_t expected = 7;
  return flag.compare_exchange_strong(expected, 3, std::memory_order_relaxed);  // relaxed: it fails by design
}
constexpr std::uint32_t cas_line = __LINE__ - 2;

std::uint64_t all_of(const counting::totals& sites, operation what) {
  std::uint64_t sum = 0;
  for (const counting::site_counts& site : sites) sum += site.count(what);
  return sum;
}

}  // namespace

TEST_CASE("counting: two threads taking turns on one word give each site its RMWs and each hand-over one move") {
  counting::reset();
  alignas(64) word64 word{0};
  std::binary_semaphore second_turn{0}, first_again{0};
  std::thread first([&] {
    for (int i = 0; i < 3; ++i) first_thread_adds(word);
    second_turn.release();
    first_again.acquire();
    first_thread_adds(word);
  });
  std::thread second([&] {
    second_turn.acquire();
    second_thread_adds(word);
    second_thread_adds(word);
    first_again.release();
  });
  first.join();
  second.join();
  counting::totals sites = counting::snapshot();
  CHECK(word.load() == 6);
  // The first thread's first RMW meets a line nobody held: no move. The second thread's
  // first RMW takes the line (one move), its second finds it at home; the first thread's
  // last RMW takes it back (one move).
  CHECK(at(sites, first_line).count(operation::rmw) == 4);
  CHECK(at(sites, first_line).moves == 1);
  CHECK(at(sites, second_line).count(operation::rmw) == 2);
  CHECK(at(sites, second_line).moves == 1);
}

TEST_CASE("counting: a reader moves a line once per write it has not seen; a writer holding a copy moves nothing") {
  counting::reset();
  alignas(64) word32 flag{0};
  std::binary_semaphore written{0}, read{0};
  std::thread writer([&] {
    publish(flag, 1);
    written.release();
    read.acquire();
    publish(flag, 2);
    written.release();
  });
  std::uint32_t seen = 0;
  bool swapped = true;
  std::thread reader([&] {
    for (int round = 0; round < 2; ++round) {
      written.acquire();
      for (int i = 0; i < 5; ++i) seen += look(flag);
      read.release();
    }
    swapped = swap_from_7(flag);
  });
  writer.join();
  reader.join();
  counting::totals sites = counting::snapshot();
  CHECK(seen == 5 * 1 + 5 * 2);
  CHECK_FALSE(swapped);
  CHECK(at(sites, store_line).count(operation::store) == 2);
  CHECK(at(sites, store_line).moves == 0);  // the writer still held a copy: it wrote the line last
  CHECK(at(sites, load_line).count(operation::load) == 10);
  CHECK(at(sites, load_line).moves == 2);   // the first look after each store
  CHECK(at(sites, cas_line).count(operation::failed_cas) == 1);
  CHECK(at(sites, cas_line).count(operation::rmw) == 0);
  CHECK(at(sites, cas_line).moves == 0);    // the reader already held the line
}

TEST_CASE("counting: fences are counted where they are called, and since() subtracts a snapshot") {
  counting::totals before = counting::snapshot();
  const std::uint32_t fence_line = __LINE__ + 1;
  for (int i = 0; i < 3; ++i) magpie::detail::std_atomics::fence_seq_cst();
  counting::totals after = counting::since(before);
  CHECK(at(after, fence_line).count(operation::fence) == 3);
  CHECK(after.size() == 1);
}

TEST_CASE("counting: a scheduler's launches are counted at the core's own sites") {
  for (unsigned workers : magpie::test::worker_counts) {
    CAPTURE(workers);
    magpie::scheduler pool(magpie::test::options_with(workers));
    constexpr int tasks = 1000;
    counting::totals before = counting::snapshot();
    std::vector<magpie::task<>> handles;
    for (int i = 0; i < tasks; ++i) handles.push_back(pool.launch("counted", [] {}));
    magpie::wait_all(handles);
    handles.clear();
    counting::totals during = counting::since(before);
    // Each task's launch takes at least one read-modify-write of its state.
    CHECK(all_of(during, operation::rmw) >= std::uint64_t{tasks});
    bool core_site = false;
    for (const counting::site_counts& site : during) core_site |= std::strstr(site.file, "task_state.h") != nullptr;
    CHECK(core_site);
  }
}
