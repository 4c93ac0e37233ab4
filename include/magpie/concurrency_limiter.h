// Layer 3 — the concurrency limiter: at most N pieces of one kind of work at once.
//
//   magpie::task_concurrency_limiter decoders(4);          // four decoders, no more
//   for (auto& file : files) {
//     decoders.push("decode", [&file](std::uint32_t slot) {
//       decode(file, scratch[slot]);                        // slot: unique among those running
//     });
//   }
//   decoders.wait();
//
// push queues the work; it runs as a task of the limiter's priority once fewer than N
// pieces run. Each piece gets a slot in [0, N), unique among the pieces running at that
// moment, to index a fixed-size array of per-slot state. A piece that finishes takes the
// next queued piece on the same thread, in the same task. Nothing here takes a lock: pieces
// are counted where they are pushed and where they finish, each thread or slot on a cache
// line of its own, one atomic word counts the slots in use (written only when a slot changes
// hands), free slot indices are bits, and queued work waits in a lock-free queue.
//
// wait() returns once every pushed piece has run; from any thread, a worker included: it
// runs queued pieces itself when a slot is free, and takes back (retracts) a started-but-
// not-yet-running limiter task rather than block behind it. A limiter may be destroyed
// before its work finished: the work still runs, and keeps what it needs alive itself.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/detail/task_pool.h>
#include <magpie/scheduler.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace magpie {

namespace detail {

// limited_item is one piece of work pushed into a limiter, type-erased.
struct limited_item {
  // run_and_destroy runs the work with its slot, then destroys the item (also on a throw).
  void (*run_and_destroy)(limited_item* self, std::uint32_t slot);
  // destroy frees the item without running it.
  void (*destroy)(limited_item* self) noexcept;
  const char* name;
};

// limited_item_of<F> holds work `F` in a block of the task pool.
template <class F>
struct limited_item_of final : limited_item {
  F work;

  template <class G>
  limited_item_of(const char* item_name, G&& given) : limited_item{&run_it, &destroy_it, item_name}, work(std::forward<G>(given)) {}

  template <class G>
  static limited_item* make(const char* item_name, G&& given) {
    void* memory = task_pool::allocate(sizeof(limited_item_of));
    try {
      return new (memory) limited_item_of(item_name, std::forward<G>(given));
    } catch (...) {
      task_pool::deallocate(memory, sizeof(limited_item_of));
      throw;
    }
  }

  static void run_it(limited_item* self, std::uint32_t slot) {
    struct destroy_at_end {
      limited_item* item;
      ~destroy_at_end() { destroy_it(item); }
    } guard{self};
    static_cast<limited_item_of*>(self)->work(slot);
  }

  static void destroy_it(limited_item* self) noexcept {
    auto* typed = static_cast<limited_item_of*>(self);
    typed->~limited_item_of();
    task_pool::deallocate(typed, sizeof(limited_item_of));
  }
};

class limiter_state;

}  // namespace detail

// task_concurrency_limiter runs pushed work as tasks, at most `max_concurrency` at once.
class task_concurrency_limiter {
 public:
  // most_at_once is the largest max_concurrency a limiter keeps. Each running piece holds
  // a thread, so a larger N limits nothing in practice: it is taken as this one, without a
  // report (UINT32_MAX is a fine way to say "no limit"), and slots lie in [0, most_at_once).
  static constexpr std::uint32_t most_at_once = 4096;

  // task_concurrency_limiter uses the calling task's scheduler, else the calling named
  // thread's, else the default scheduler; its work runs at priority `work_priority`.
  // max_concurrency 0 is reported and taken as 1; above most_at_once, taken as that.
  explicit task_concurrency_limiter(std::uint32_t max_concurrency, priority work_priority = priority::normal);
  task_concurrency_limiter(std::uint32_t max_concurrency, priority work_priority, scheduler& owner);

  // ~task_concurrency_limiter lets work still queued or running finish without it.
  ~task_concurrency_limiter();

  task_concurrency_limiter(const task_concurrency_limiter&) = delete;
  task_concurrency_limiter& operator=(const task_concurrency_limiter&) = delete;

  // push queues `work`, called as work(std::uint32_t slot) once a slot is free. A piece
  // that throws is reported as an unhandled exception; the limiter carries on.
  template <class F>
  void push(const char* name, F&& work) {
    static_assert(std::is_invocable_v<std::decay_t<F>&, std::uint32_t>,
                  "magpie: limited work is called as work(std::uint32_t slot)");
    push_item(detail::limited_item_of<std::decay_t<F>>::make(name, std::forward<F>(work)));
  }

  // wait returns true once every piece pushed so far has run (pieces pushed meanwhile
  // count too), false if `timeout` passed first. Runs queued pieces on this thread when it can.
  bool wait(std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max());

  // max_concurrency is N: how many pieces may run at once (after the clamp above).
  std::uint32_t max_concurrency() const noexcept;

 private:
  void push_item(detail::limited_item* item);

  std::shared_ptr<detail::limiter_state> state_;  // shared with the limiter's running tasks
};

}  // namespace magpie
