// Helpers for the task-model suites (task, task_event, nested, pipe, wait).
#pragma once

#include <magpie/magpie.h>

#include "support.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <thread>
#include <type_traits>
#include <utility>

namespace magpie::test {

// no_leaks checks, when it goes out of scope, that every task created since it was made
// has been destroyed and every pool block returned. Tasks are released by worker threads
// just after they complete, so it waits (bounded) for the counts to settle first; declare
// it before the scheduler so that the scheduler's shutdown comes first. A task of an
// earlier test (on the default scheduler, whose workers outlive each test) may still be on
// its way to release when it is made: it takes the counts once they hold still, and at the
// end accepts counts below them (that task's release), never above.
class no_leaks {
 public:
  no_leaks() { settle(); }
  ~no_leaks() {
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((detail::live_tasks() > tasks_ || detail::task_pool::live_blocks() > blocks_) &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    CHECK(detail::live_tasks() <= tasks_);
    CHECK(detail::task_pool::live_blocks() <= blocks_);
  }
  no_leaks(const no_leaks&) = delete;
  no_leaks& operator=(const no_leaks&) = delete;

 private:
  // settle reads the counts until they are the same 2 ms apart (at most 200 ms).
  void settle() {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    tasks_ = detail::live_tasks();
    blocks_ = detail::task_pool::live_blocks();
    while (std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const std::int64_t tasks = detail::live_tasks();
      const std::int64_t blocks = detail::task_pool::live_blocks();
      if (tasks == tasks_ && blocks == blocks_) return;
      tasks_ = tasks;
      blocks_ = blocks;
    }
  }

  std::int64_t tasks_ = 0;
  std::int64_t blocks_ = 0;
};

// attached_as attaches the calling thread for the lifetime of the object.
struct attached_as {
  attached_as(scheduler& pool, named_thread thread) : pool_(pool) { pool_.attach(thread); }
  ~attached_as() { pool_.detach(); }
  attached_as(const attached_as&) = delete;
  attached_as& operator=(const attached_as&) = delete;
  scheduler& pool_;
};

// small_pool builds scheduler options with `workers` workers and no background workers.
inline scheduler_options small_pool(unsigned workers = 2) {
  scheduler_options options;
  options.workers = workers;
  options.background_workers = 0;
  return options;
}

// options_with builds scheduler options with `workers` workers, one of them also taking
// background work; with zero, only waiting threads run work.
inline scheduler_options options_with(unsigned workers) {
  scheduler_options options;
  options.workers = workers;
  options.background_workers = workers == 0 ? 0 : 1;
  return options;
}

// inside runs `body` inside a task of `pool`, so that the free functions use `pool`.
template <class Body>
auto inside(scheduler& pool, Body body) {
  return std::move(pool.launch("test driver", std::move(body)).get_result());
}

// made_while_read is a bidirectional range of `count` elements, each made by make(index)
// as it is read (a prvalue on every dereference), as std::views::transform's are: it stands
// for the ranges of handles computed on the fly that prerequisites and waits accept. It is
// written out because clang 14 cannot instantiate libstdc++ 12's views.
template <class Make>
class made_while_read {
 public:
  made_while_read(std::size_t count, Make make) : count_(count), make_(std::move(make)) {}

  class iterator {
   public:
    using iterator_concept = std::bidirectional_iterator_tag;
    using value_type = std::invoke_result_t<const Make&, std::size_t>;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    iterator(const made_while_read* range, std::size_t index) : range_(range), index_(index) {}
    value_type operator*() const { return range_->make_(index_); }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++index_;
      return before;
    }
    iterator& operator--() {
      --index_;
      return *this;
    }
    iterator operator--(int) {
      iterator before = *this;
      --index_;
      return before;
    }
    bool operator==(const iterator& other) const { return index_ == other.index_; }

   private:
    const made_while_read* range_ = nullptr;
    std::size_t index_ = 0;
  };

  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, count_}; }

 private:
  std::size_t count_;
  Make make_;
};

// group_fib is fib(n) by fork-join: each call spawns fib(n - 1) into a task_group on the
// calling thread's scheduler and computes fib(n - 2) itself.
inline long group_fib(int n) {
  if (n < 2) return n;
  long a = 0;
  task_group group;
  group.run([&] { a = group_fib(n - 1); });
  long b = group_fib(n - 2);
  group.wait();
  return a + b;
}

}  // namespace magpie::test
