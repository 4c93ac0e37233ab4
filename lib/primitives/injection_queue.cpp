// The only translation unit that includes moodycamel::ConcurrentQueue (see
// include/magpie/detail/injection_queue.h for why); lib/meson.build compiles it with
// -Wno-error=tsan.
#include <magpie/detail/injection_queue.h>

#if __has_include(<concurrentqueue/concurrentqueue.h>)
#include <concurrentqueue/concurrentqueue.h>  // Debian's libconcurrentqueue-dev
#else
#include <concurrentqueue.h>  // the meson wrap fallback
#endif

namespace magpie::detail {

struct basic_injection_queue::impl {
  moodycamel::ConcurrentQueue<void*> queue;
};

basic_injection_queue::basic_injection_queue() : impl_(std::make_unique<impl>()) {}
basic_injection_queue::~basic_injection_queue() = default;

void basic_injection_queue::push(void* item) {
  if (!impl_->queue.enqueue(item)) throw std::bad_alloc();
}

void* basic_injection_queue::try_pop() noexcept {
  void* item = nullptr;
  return impl_->queue.try_dequeue(item) ? item : nullptr;
}

std::size_t basic_injection_queue::size_approx() const noexcept {
  return impl_->queue.size_approx();
}

}  // namespace magpie::detail
