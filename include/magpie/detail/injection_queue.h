// Layer 1 — the injection queue: how work launched from outside the workers gets in.
//
// A lock-free multi-producer multi-consumer queue of pointers, FIFO per producer thread,
// backed by moodycamel::ConcurrentQueue. moodycamel's header uses atomic_thread_fence,
// which GCC rejects under -fsanitize=thread with -Werror, so it is included in exactly one
// translation unit (lib/primitives/injection_queue.cpp) and reached through this opaque wrapper.
//
//   injection_queue<job> queue;
//   queue.push(j);                          // any thread
//   if (job* next = queue.try_pop()) ...    // any thread
#pragma once

#include <cstddef>
#include <memory>

namespace magpie::detail {

// basic_injection_queue is the untyped queue of non-null pointers.
class basic_injection_queue {
 public:
  basic_injection_queue();
  ~basic_injection_queue();
  basic_injection_queue(const basic_injection_queue&) = delete;
  basic_injection_queue& operator=(const basic_injection_queue&) = delete;

  // push appends `item`; items one thread pushes are popped in the order pushed.
  void push(void* item);

  // try_pop removes an item, or returns nullptr when the queue looked empty.
  void* try_pop() noexcept;

  // size_approx is the number of items at some recent moment.
  std::size_t size_approx() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// injection_queue is basic_injection_queue typed for `T*`.
template <class T>
class injection_queue {
 public:
  // push appends `item` (non-null); FIFO per producer thread.
  void push(T* item) { queue_.push(item); }

  // try_pop removes an item, or returns nullptr when the queue looked empty.
  T* try_pop() noexcept { return static_cast<T*>(queue_.try_pop()); }

  // size_approx is the number of items at some recent moment.
  std::size_t size_approx() const noexcept { return queue_.size_approx(); }

 private:
  basic_injection_queue queue_;
};

}  // namespace magpie::detail
