// The only translation unit that includes moodycamel::ConcurrentQueue (see
// include/magpie/detail/injection_queue.h for why); lib/meson.build compiles it with
// -Wno-error=tsan.
#include <magpie/detail/injection_queue.h>

#if __has_include(<concurrentqueue/concurrentqueue.h>)
#include <concurrentqueue/concurrentqueue.h>  // Debian's libconcurrentqueue-dev
#else
#include <concurrentqueue.h>  // the meson wrap fallback
#endif

#include <memory>
#include <new>

namespace magpie::detail {

struct basic_injection_queue::impl {
  moodycamel::ConcurrentQueue<void*> queue;
};

basic_injection_queue::~basic_injection_queue() { delete impl_.load(std::memory_order_relaxed); }  // relaxed: no push or pop is left

basic_injection_queue::impl& basic_injection_queue::storage() {
  // acquire: pairs with the release of the CAS below, so the queue is seen constructed
  if (impl* existing = impl_.load(std::memory_order_acquire)) return *existing;
  auto fresh = std::make_unique<impl>();
  impl* expected = nullptr;
  // release: publishes the constructed queue (the winner read null: nothing to acquire);
  // acquire on failure: the loser enqueues into the queue another first push constructed
  if (impl_.compare_exchange_strong(expected, fresh.get(), std::memory_order_release, std::memory_order_acquire)) {
    return *fresh.release();
  }
  return *expected;  // another push made it first; ours is freed
}

void basic_injection_queue::push(void* item) {
  if (!storage().queue.enqueue(item)) throw std::bad_alloc();
}

void* basic_injection_queue::try_pop() noexcept {
  impl* existing = impl_.load(std::memory_order_acquire);  // acquire: pairs with storage()'s CAS
  void* item = nullptr;
  return existing != nullptr && existing->queue.try_dequeue(item) ? item : nullptr;
}

std::size_t basic_injection_queue::size_approx() const noexcept {
  const impl* existing = impl_.load(std::memory_order_acquire);  // acquire: pairs with storage()'s CAS
  return existing != nullptr ? existing->queue.size_approx() : 0;
}

}  // namespace magpie::detail
