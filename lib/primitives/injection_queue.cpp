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

basic_injection_queue::impl& basic_injection_queue::made() {
  // acquire: pairs with the release of the CAS below, so the queue is seen constructed
  if (impl* existing = impl_.load(std::memory_order_acquire)) return *existing;
  auto fresh = std::make_unique<impl>();
  impl* expected = nullptr;
  // acq_rel: release publishes the constructed queue; acquire reads the one another push made
  if (impl_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel, std::memory_order_acquire)) {
    return *fresh.release();
  }
  return *expected;  // another push made it first; ours is freed
}

void basic_injection_queue::push(void* item) {
  if (!made().queue.enqueue(item)) throw std::bad_alloc();
}

void* basic_injection_queue::try_pop() noexcept {
  impl* made = impl_.load(std::memory_order_acquire);  // acquire: pairs with made()'s CAS
  void* item = nullptr;
  return made != nullptr && made->queue.try_dequeue(item) ? item : nullptr;
}

std::size_t basic_injection_queue::size_approx() const noexcept {
  const impl* made = impl_.load(std::memory_order_acquire);  // acquire: pairs with made()'s CAS
  return made != nullptr ? made->queue.size_approx() : 0;
}

}  // namespace magpie::detail
