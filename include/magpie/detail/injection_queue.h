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

#include <magpie/detail/atomics.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace magpie::detail {

// basic_injection_queue is the untyped queue of non-null pointers.
//
// moodycamel's dequeue is eventually consistent: a consumer backing out of a lost race
// can, for a moment, make another consumer's dequeue report empty beside an item. A
// worker's last look before parking must not be told that, so the queue keeps its own
// count of items not yet claimed by a pop. A pop claims one (the count) before it
// dequeues, and then dequeues until it gets one: a claim is always backed by an item,
// pushed before the count rose. So try_pop returns nothing only when every item pushed
// before it looked is taken or being taken by another pop.
class basic_injection_queue {
 public:
  basic_injection_queue();
  ~basic_injection_queue();
  basic_injection_queue(const basic_injection_queue&) = delete;
  basic_injection_queue& operator=(const basic_injection_queue&) = delete;

  // push appends `item`; items one thread pushes are popped in the order pushed.
  void push(void* item);

  // try_pop removes an item, or returns nullptr when every item pushed before it looked
  // was taken or claimed by another pop.
  void* try_pop() noexcept { return claim() ? take_claimed() : nullptr; }

  // looks_empty is `size_approx() == 0`: one load.
  bool looks_empty() const noexcept {
    return unclaimed_.load(std::memory_order_relaxed) <= 0;  // relaxed: a hint; callers re-check after a fence
  }

  // size_approx is the number of items no pop has claimed, at some recent moment.
  std::size_t size_approx() const noexcept {
    std::int64_t count = unclaimed_.load(std::memory_order_relaxed);  // relaxed: a hint, as looks_empty
    return count > 0 ? static_cast<std::size_t>(count) : 0;
  }

 private:
  // claim counts one item as this pop's, if one is unclaimed.
  bool claim() noexcept {
    std::int64_t count = unclaimed_.load(std::memory_order_relaxed);  // relaxed: the CAS's guess
    do {
      if (count <= 0) return false;
      // acquire: pairs with push's release increment, so the item that backs the claim is
      // visible to the dequeue that follows
    } while (!unclaimed_.compare_exchange_weak(count, count - 1, std::memory_order_acquire,
                                               std::memory_order_relaxed));  // relaxed: we only retry
    return true;
  }

  // take_claimed dequeues the item a claim stands for.
  void* take_claimed() noexcept;

  struct impl;
  std::unique_ptr<impl> impl_;
  alignas(cache_line) std_atomics::atomic<std::int64_t> unclaimed_{0};
};

// injection_queue is basic_injection_queue typed for `T*`.
template <class T>
class injection_queue {
 public:
  // push appends `item` (non-null); FIFO per producer thread.
  void push(T* item) { queue_.push(item); }

  // try_pop removes an item, or returns nullptr when every item pushed before it looked
  // was taken or claimed by another pop.
  T* try_pop() noexcept { return static_cast<T*>(queue_.try_pop()); }

  // looks_empty is `size_approx() == 0`: one load.
  bool looks_empty() const noexcept { return queue_.looks_empty(); }

  // size_approx is the number of items no pop has claimed, at some recent moment.
  std::size_t size_approx() const noexcept { return queue_.size_approx(); }

 private:
  basic_injection_queue queue_;
};

}  // namespace magpie::detail
