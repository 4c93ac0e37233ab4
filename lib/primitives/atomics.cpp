// Futex-based parking (Linux; std::atomic::wait elsewhere) and the heavy half of the
// asymmetric barriers (membarrier) for std_atomics.
#include <magpie/detail/atomics.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <magpie/detail/event_count.h>  // deadline_after

#include <chrono>
#include <thread>
#endif

namespace magpie::detail {

std::atomic<bool> asymmetric_barriers_enabled{false};

#if defined(__linux__)
bool std_atomics::enable_asymmetric_barriers() noexcept {
  static const bool registered = [] {
    long commands = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (commands < 0 || (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  // relaxed: read by the barriers of tasks, which exist only after a scheduler, whose
  // construction calls this first
  if (registered) asymmetric_barriers_enabled.store(true, std::memory_order_relaxed);
  return registered;
}

void std_atomics::heavy_barrier(call_site where) noexcept {
  if (!asymmetric_barriers_enabled.load(std::memory_order_relaxed)) {  // relaxed: as above
    fence_seq_cst(where);
    return;
  }
  counting::on_fence(counting::operation::heavy_barrier, where);
  // Registered, the command cannot fail (EINVAL and EPERM are the unregistered answers);
  // should it, no thread's barrier was made, and going on would lose a wake-up.
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) std::abort();
}
#else
bool std_atomics::enable_asymmetric_barriers() noexcept { return false; }
void std_atomics::heavy_barrier(call_site where) noexcept { fence_seq_cst(where); }
#endif

#if defined(__linux__)
namespace {
// std::atomic<uint32_t> is layout-compatible with uint32_t, which is what the kernel
// compares; the futex word never leaves the object that owns it.
std::uint32_t* futex_address(std::atomic<std::uint32_t>& word) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return reinterpret_cast<std::uint32_t*>(&word);
}

long futex(std::atomic<std::uint32_t>& word, int op, std::uint32_t value,
           const timespec* timeout) noexcept {
  return syscall(SYS_futex, futex_address(word), op | FUTEX_PRIVATE_FLAG, value, timeout,
                 nullptr, 0);
}
}  // namespace

void std_atomics::wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  futex(word, FUTEX_WAIT, expected, nullptr);
}

bool std_atomics::wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                           std::int64_t timeout_ns) noexcept {
  if (timeout_ns <= 0) return false;
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
  timeout.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
  long result = futex(word, FUTEX_WAIT, expected, &timeout);
  return !(result == -1 && errno == ETIMEDOUT);
}

void std_atomics::wake_one(std::atomic<std::uint32_t>& word) noexcept {
  futex(word, FUTEX_WAKE, 1, nullptr);
}

void std_atomics::wake_all(std::atomic<std::uint32_t>& word) noexcept {
  futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}
#else
void std_atomics::wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  word.wait(expected);  // seq_cst default: the caller re-reads the word anyway
}

bool std_atomics::wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                           std::int64_t timeout_ns) noexcept {
  // The standard has no timed atomic wait: poll with short sleeps until the deadline.
  auto deadline = deadline_after(std::chrono::nanoseconds(timeout_ns));  // saturating: a huge timeout is no time-out
  while (word.load() == expected) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

void std_atomics::wake_one(std::atomic<std::uint32_t>& word) noexcept { word.notify_one(); }
void std_atomics::wake_all(std::atomic<std::uint32_t>& word) noexcept { word.notify_all(); }
#endif

}  // namespace magpie::detail
