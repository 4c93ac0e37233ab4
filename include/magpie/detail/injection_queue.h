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
//
// moodycamel's dequeue is eventually consistent: while one consumer backs out of a lost
// race (a few instructions), another consumer's dequeue may report an empty queue beside
// an item. counted_injection_queue adds the count that rules that out, for consumers that
// act on "empty" (a worker about to park).
#pragma once

#include <magpie/detail/atomics.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace magpie::detail {

// basic_injection_queue is the untyped queue of non-null pointers.
// The moodycamel queue behind it is made by the first push: a scheduler holds dozens of
// these (four per named thread) and most never see an item.
class basic_injection_queue {
 public:
  basic_injection_queue() noexcept = default;
  ~basic_injection_queue();
  basic_injection_queue(const basic_injection_queue&) = delete;
  basic_injection_queue& operator=(const basic_injection_queue&) = delete;

  // push appends `item`; items one thread pushes are popped in the order pushed.
  void push(void* item);

  // try_pop removes an item, or returns nullptr when the queue looked empty (which it may,
  // for a moment, beside an item: see the head of this file).
  void* try_pop() noexcept;

  // size_approx is the number of items at some recent moment.
  std::size_t size_approx() const noexcept;

 private:
  struct impl;
  impl& storage();
  std::atomic<impl*> impl_{nullptr};  // null until the first push
};

// injection_queue is basic_injection_queue typed for `T*`.
template <class T>
class injection_queue {
 public:
  // push appends `item` (non-null); FIFO per producer thread.
  void push(T* item) { queue_.push(item); }

  // try_pop removes an item, or returns nullptr when the queue looked empty (which it may,
  // for a moment, beside an item: see the head of this file).
  T* try_pop() noexcept { return static_cast<T*>(queue_.try_pop()); }

  // size_approx is the number of items at some recent moment.
  std::size_t size_approx() const noexcept { return queue_.size_approx(); }

 private:
  basic_injection_queue queue_;
};

// counted_injection_queue is injection_queue plus a count of the items no pop has claimed.
// A pop claims one (the count) before it dequeues, then dequeues until it gets one: a
// claim is always backed by an item, pushed before the count rose. So try_pop returns
// nothing only when every item pushed before it looked is taken or being taken by another
// pop, and an emptiness check is one load. The count costs each push and pop one more
// read-modify-write, on a line of its own.
template <class T>
class counted_injection_queue {
 public:
  // push appends `item` (non-null); FIFO per producer thread.
  void push(T* item) {
    queue_.push(item);
    // release: pairs with claim's acquire, so a pop that counts this item sees it queued
    unclaimed_.fetch_add(1, std::memory_order_release);
  }

  // try_pop removes an item, or returns nullptr when every item pushed before it looked
  // was taken or claimed by another pop. Lock-free but for one wait: after a claim it may
  // wait for another consumer to finish backing out of a lost race.
  T* try_pop() noexcept {
    if (!claim()) return nullptr;
    // moodycamel may hide the claimed item only while another consumer backs out of a lost
    // race: look again, yielding if that consumer was preempted there.
    for (int attempt = 0;; ++attempt) {
      if (T* item = queue_.try_pop()) return item;
      if (attempt < 64) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }

  // looks_empty says no item is left unclaimed, at some recent moment: one load.
  bool looks_empty() const noexcept {
    return unclaimed_.load(std::memory_order_relaxed) <= 0;  // relaxed: a hint; callers re-check after a fence
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

  injection_queue<T> queue_;
  alignas(cache_line) std_atomics::atomic<std::int64_t> unclaimed_{0};
};

}  // namespace magpie::detail
