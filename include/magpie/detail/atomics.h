// Layer 1 — the atomics policy.
//
// Every lock-free part of magpie is a template over an atomics policy. Production code
// uses `std_atomics`; the model checks in test/model/ substitute an instrumented policy
// so the *same* code runs under Relacy's weak-memory exploration. This is also the only
// file where a memory fence may appear (GCC rejects `atomic_thread_fence` under
// ThreadSanitizer, and TSan does not model fences): the lock-free parts express their
// orderings with seq_cst operations instead.
#pragma once

#include <atomic>
#include <cstdint>

namespace magpie::detail {

// std_atomics is the production policy: plain std::atomic plus futex parking on Linux.
struct std_atomics {
  template <class T>
  using atomic = std::atomic<T>;

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
  // publishing work and checking for sleepers (event_count), and between a wait_all run's
  // "finished" stores and its looks for pushers and waiters (lib/task_wait.cpp). Under
  // ThreadSanitizer, which neither models fences nor lets GCC compile them with -Werror,
  // it is a seq_cst read-modify-write on a shared word instead.
  static void fence_seq_cst() noexcept {
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
