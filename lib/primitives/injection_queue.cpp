// The only translation unit that includes moodycamel::ConcurrentQueue (see
// include/magpie/detail/injection_queue.h for why); lib/meson.build compiles it with
// -Wno-error=tsan.
#include <magpie/detail/injection_queue.h>

#if __has_include(<concurrentqueue/concurrentqueue.h>)
#include <concurrentqueue/concurrentqueue.h>  // Debian's libconcurrentqueue-dev
#else
#include <concurrentqueue.h>  // the meson wrap fallback
#endif

#include <thread>

namespace magpie::detail {

struct basic_injection_queue::impl {
  moodycamel::ConcurrentQueue<void*> queue;
};

basic_injection_queue::basic_injection_queue() : impl_(std::make_unique<impl>()) {}
basic_injection_queue::~basic_injection_queue() = default;

void basic_injection_queue::push(void* item) {
  if (!impl_->queue.enqueue(item)) throw std::bad_alloc();
  // release: pairs with claim's acquire, so a pop that counts this item sees it queued
  unclaimed_.fetch_add(1, std::memory_order_release);
}

void* basic_injection_queue::take_claimed() noexcept {
  // The claim stands for an item pushed before the count rose; moodycamel may hide it from
  // this dequeue only while another consumer backs out of a lost race (a few instructions),
  // so look again, yielding if that consumer was preempted there.
  void* item = nullptr;
  for (int attempt = 0; !impl_->queue.try_dequeue(item); ++attempt) {
    if (attempt < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  return item;
}

}  // namespace magpie::detail
