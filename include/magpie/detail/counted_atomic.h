// The counting build's atomics (meson -Dcounting=enabled; MAGPIE_COUNTING 1 in
// magpie/config.h): every read-modify-write, store, load and fence the core makes through
// its atomics policy is counted per call site, together with the cache-line moves it
// causes, so contention can be measured as counts on any machine, oversubscribed or not.
//
//   counting::totals before = counting::snapshot();
//   ... run a workload ...
//   for (const counting::site_counts& site : counting::since(before)) print(site);
//
// counted_atomic<T> is a std::atomic<T> whose operations take the caller's
// std::source_location as a defaulted last argument; std_atomics::atomic<T> names it in the
// counting build only, so every other build compiles exactly the plain std::atomic.
// Because it derives from std::atomic<T>, code that binds a std::atomic<T>& to one still
// compiles; what it does through that reference is not counted.
//
// A cache-line move is counted when a thread touches a line it holds no valid copy of: it
// did not write the line last and has not read it since the last write (the MESI view:
// a write leaves the writer the only holder, a read adds the reader). The history of the
// lines lives in a direct-mapped table; a line that collides with another forgets its
// history, so moves are a slight undercount. Counts are per thread and summed on demand;
// counting costs a table look-up per operation, so the figures are counts, never times.
//
// Everything below exists in the counting build only: elsewhere the non-counting stand-ins
// in magpie/detail/atomics.h own these names, so including this header there adds nothing.
#pragma once

#include <magpie/config.h>

#if MAGPIE_COUNTING

#include <atomic>
#include <cstdint>
#include <source_location>
#include <type_traits>
#include <vector>

namespace magpie::detail::counting {

// operation names what a counted call did to shared memory.
enum class operation : std::uint8_t {
  load,        // an atomic load
  store,       // an atomic store
  rmw,         // a read-modify-write that wrote (fetch_*, exchange, a successful CAS)
  failed_cas,  // a compare-exchange that failed: a locked instruction on x86 all the same
  fence,       // a full fence (std_atomics::fence_seq_cst, fence_after_atomic on other CPUs)
  light_barrier,  // the light half of the asymmetric barrier (a compiler barrier when enabled)
  heavy_barrier,  // the heavy half (membarrier: an IPI to every running thread of the process)
  count_,
};

inline constexpr std::size_t operation_count = static_cast<std::size_t>(operation::count_);

// site_counts is what one call site did, summed over every thread.
struct site_counts {
  const char* file = "";
  const char* function = "";
  std::uint32_t line = 0;
  std::uint64_t by_operation[operation_count] = {};
  std::uint64_t moves = 0;  // cache-line moves caused by the site's loads, stores and RMWs

  // count is the number of the site's calls that were `what`.
  std::uint64_t count(operation what) const noexcept { return by_operation[static_cast<std::size_t>(what)]; }
};

// totals is every site's counts at one moment.
using totals = std::vector<site_counts>;

// snapshot sums every thread's counts, living and exited, one entry per call site
// (file and line; the same header line compiled into several files is one site).
totals snapshot();

// since is `snapshot() - before`, the sites that did anything since `before`, busiest first.
totals since(const totals& before);

// reset forgets every count and every line's history. Call it while no other thread
// makes counted calls (a test between phases); a workload measured while workers idle
// should use snapshot and since instead.
void reset();

// on_access counts one load, store or RMW of the atomic at `address` by the calling thread.
void on_access(const volatile void* address, operation what, const std::source_location& where) noexcept;

// on_fence counts one fence or barrier by the calling thread.
void on_fence(operation what, const std::source_location& where) noexcept;

// counted_atomic is std::atomic<T> with each operation counted at its caller's site.
template <class T>
class counted_atomic : public std::atomic<T> {
  using base = std::atomic<T>;
  using here = std::source_location;
  static constexpr std::memory_order seq_cst = std::memory_order_seq_cst;
  // arithmetic: fetch_add and fetch_sub exist (integers other than bool, and pointers).
  static constexpr bool arithmetic = (std::is_integral_v<T> && !std::is_same_v<T, bool>) || std::is_pointer_v<T>;
  using difference = std::conditional_t<std::is_pointer_v<T>, std::ptrdiff_t, T>;

  void count(operation what, const here& where) const noexcept { on_access(this, what, where); }

 public:
  using base::base;
  counted_atomic() noexcept = default;
  using base::operator=;

  T load(std::memory_order order = seq_cst, here where = here::current()) const noexcept {
    count(operation::load, where);
    return base::load(order);
  }
  void store(T desired, std::memory_order order = seq_cst, here where = here::current()) noexcept {
    count(operation::store, where);
    base::store(desired, order);
  }
  T exchange(T desired, std::memory_order order = seq_cst, here where = here::current()) noexcept {
    count(operation::rmw, where);
    return base::exchange(desired, order);
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order success, std::memory_order failure,
                             here where = here::current()) noexcept {
    bool done = base::compare_exchange_weak(expected, desired, success, failure);
    count(done ? operation::rmw : operation::failed_cas, where);
    return done;
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order order = seq_cst,
                             here where = here::current()) noexcept {
    bool done = base::compare_exchange_weak(expected, desired, order);
    count(done ? operation::rmw : operation::failed_cas, where);
    return done;
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order success, std::memory_order failure,
                               here where = here::current()) noexcept {
    bool done = base::compare_exchange_strong(expected, desired, success, failure);
    count(done ? operation::rmw : operation::failed_cas, where);
    return done;
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order order = seq_cst,
                               here where = here::current()) noexcept {
    bool done = base::compare_exchange_strong(expected, desired, order);
    count(done ? operation::rmw : operation::failed_cas, where);
    return done;
  }

  T fetch_add(difference delta, std::memory_order order = seq_cst, here where = here::current()) noexcept
    requires arithmetic {
    count(operation::rmw, where);
    return base::fetch_add(delta, order);
  }
  T fetch_sub(difference delta, std::memory_order order = seq_cst, here where = here::current()) noexcept
    requires arithmetic {
    count(operation::rmw, where);
    return base::fetch_sub(delta, order);
  }
  T fetch_and(T bits, std::memory_order order = seq_cst, here where = here::current()) noexcept
    requires std::is_integral_v<T> {
    count(operation::rmw, where);
    return base::fetch_and(bits, order);
  }
  T fetch_or(T bits, std::memory_order order = seq_cst, here where = here::current()) noexcept
    requires std::is_integral_v<T> {
    count(operation::rmw, where);
    return base::fetch_or(bits, order);
  }
  T fetch_xor(T bits, std::memory_order order = seq_cst, here where = here::current()) noexcept
    requires std::is_integral_v<T> {
    count(operation::rmw, where);
    return base::fetch_xor(bits, order);
  }
};

}  // namespace magpie::detail::counting

#endif  // MAGPIE_COUNTING
