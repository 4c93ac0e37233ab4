// Layer 1 — the atomics policy.
//
// Every lock-free part of magpie is a template over an atomics policy. Production code
// uses `std_atomics`; the model checks in test/model/ substitute an instrumented policy
// so the *same* code runs under Relacy's weak-memory exploration. This is also the only
// file where a memory fence may appear (GCC rejects `atomic_thread_fence` under
// ThreadSanitizer, and TSan does not model fences): the lock-free parts express their
// orderings with seq_cst operations instead.
#pragma once

#include <magpie/detail/chaos_points.h>

#include <atomic>
#include <cstdint>

#if MAGPIE_COUNTING
#include <magpie/detail/counted_atomic.h>
#endif

namespace magpie::detail {

#if MAGPIE_COUNTING
using call_site = std::source_location;
#else
// call_site is where a fence was called from: the caller's source location in the counting
// build (magpie/detail/counted_atomic.h), an empty argument otherwise, where counting::on_fence
// compiles to nothing too.
struct call_site {
  static constexpr call_site current() noexcept { return {}; }
};
namespace counting {
enum class operation : std::uint8_t { fence, light_barrier, heavy_barrier };
inline void on_fence(operation, call_site) noexcept {}
}  // namespace counting
#endif

// asymmetric_barriers_enabled says light_barrier may be a compiler barrier only: the heavy
// half is membarrier. Set once, by the first scheduler's constructor (before any task
// exists, so every barrier of a task's protocol reads it set or every one reads it clear).
extern std::atomic<bool> asymmetric_barriers_enabled;

// std_atomics is the production policy: plain std::atomic plus futex parking on Linux.
struct std_atomics {
  template <class T>
#if MAGPIE_COUNTING
  using atomic = counting::counted_atomic<T>;
#else
  using atomic = std::atomic<T>;
#endif

  // wait blocks while `word` still holds `expected`; it may return spuriously.
  static void wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept;

  // wait_for is `wait` bounded by `timeout_ns`; it returns false when the time ran out.
  static bool wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       std::int64_t timeout_ns) noexcept;

  // wake_one wakes at most one thread blocked in `wait` on `word`.
  static void wake_one(std::atomic<std::uint32_t>& word) noexcept;

  // wake_all wakes every thread blocked in `wait` on `word`.
  static void wake_all(std::atomic<std::uint32_t>& word) noexcept;

  // fence_seq_cst is the one full fence magpie uses: the Dekker barrier between
  // publishing work and checking for sleepers (event_count), and the fallback of the
  // asymmetric barriers below. Under ThreadSanitizer, which neither models fences nor lets
  // GCC compile them with -Werror, it is a seq_cst read-modify-write on a shared word
  // instead.
  static void fence_seq_cst(call_site where = call_site::current()) noexcept {
    counting::on_fence(counting::operation::fence, where);
#if defined(__SANITIZE_THREAD__)
    static std::atomic<std::uint32_t> tsan_fence_word{0};
    tsan_fence_word.fetch_add(0, std::memory_order_seq_cst);
#elif defined(__x86_64__)
    // A locked no-op on the stack is a full barrier on x86 (as Linux's smp_mb) and costs
    // about half of `mfence`, which is what GCC emits for atomic_thread_fence.
    asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc");
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  }

  // fence_after_atomic is fence_seq_cst for a caller whose last atomic operation was a
  // read-modify-write: on x86-64 that locked instruction already is a full barrier, so only
  // the compiler is held back (as Linux's smp_mb__after_atomic).
  static void fence_after_atomic(call_site where = call_site::current()) noexcept {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    (void)where;
    std::atomic_signal_fence(std::memory_order_seq_cst);
#else
    fence_seq_cst(where);
#endif
  }

  // light_barrier and heavy_barrier are the halves of an asymmetric Dekker barrier: a store,
  // light_barrier, a look on one side and a store, heavy_barrier, a look on the other never
  // both miss the other's store. The light half, taken on a hot path (a task's completion by
  // the waiter that took it back, lib/tasks/wait_retraction.cpp), only stops the compiler moving memory
  // accesses across it. The heavy half, taken rarely (a push to, or a block on, such a task
  // while it runs), is Linux membarrier: every running thread of the process executes a full
  // barrier before it returns, so one lands between the light side's store and its look, or
  // before both, or after both. Where membarrier is unavailable both halves are
  // fence_seq_cst. (As liburcu's and folly's asymmetric fences.)
  static void light_barrier(call_site where = call_site::current()) noexcept {
    if (asymmetric_barriers_enabled.load(std::memory_order_relaxed)) {  // relaxed: set before any task existed
      counting::on_fence(counting::operation::light_barrier, where);
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      fence_seq_cst(where);
    }
  }
  static void heavy_barrier(call_site where = call_site::current()) noexcept;

  // chaos_point is a chaos point (magpie/chaos.h) inside a lock-free template; the Relacy
  // policy's is empty, as the model checker chooses the schedules itself.
  static void chaos_point(chaos::site where) noexcept { chaos::point(where); }

  // enable_asymmetric_barriers registers the process for membarrier (once; later calls only
  // answer) and says whether light_barrier is now the cheap half.
  static bool enable_asymmetric_barriers() noexcept;
};

// cpu_relax is the spin-loop hint (x86 `pause`); it lets a sibling hyper-thread run.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// cache_line is the padding unit that keeps independently written atomics apart.
inline constexpr std::size_t cache_line = 64;

}  // namespace magpie::detail
