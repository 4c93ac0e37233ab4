// Replaces the global operator new/delete of the test executable that includes it (once,
// in one file) so that a test can count the allocations a stretch of code makes:
//   test::allocations.store(0); test::counting.store(true); ...; test::counting.store(false);
// GCC cannot see that these replacements pair malloc with free themselves.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace magpie::test {
inline std::atomic<bool> counting{false};
inline std::atomic<long> allocations{0};
}  // namespace magpie::test

void* operator new(std::size_t size) {
  // relaxed: a test statistic, read after the counted stretch on the same thread
  if (magpie::test::counting.load(std::memory_order_relaxed)) magpie::test::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
