// Layer 3 — loops: parallel_for, parallel_reduce, parallel_invoke, on task_group.
//
//   magpie::parallel_for(pixels.size(), [&](std::size_t i) { shade(pixels[i]); });
//   double total = magpie::parallel_reduce(values.size(), 0.0,
//       [&](std::size_t i) { return values[i]; }, std::plus<>());
//   magpie::parallel_invoke([&] { sort(left); }, [&] { sort(right); });
//
// The range is cut into batches (at least `min_batch_size` iterations each; about four per
// thread, or sixteen when `unbalanced` says iterations differ in cost). Batches are spread
// by recursive halving: a task takes a range of batches, spawns its upper half as a child
// and keeps the lower half, until one batch is left — so idle workers steal big halves and
// the caller works through its own. The calling thread takes part and returns when every
// iteration ran; the first exception an iteration threw is rethrown (the batch it was in
// stops; every other batch still runs). A loop runs on the scheduler the calling thread
// works for, else the default one: inside `pool.execute(...)`, on `pool`, with batches
// planned for its threads.
#pragma once

#include <magpie/task_group.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace magpie {

// parallel_for_options tunes a loop (the flags of UE's ParallelFor).
struct parallel_for_options {
  std::size_t min_batch_size = 1;  // fewer iterations than this are not worth a task
  bool force_single_thread = false;  // run on the calling thread only (debugging, measuring)
  bool unbalanced = false;           // iterations vary in cost: cut finer so thieves even it out
  bool background_priority = false;  // batches run at background priority
};

namespace detail {

// loop_plan is how a loop of `count` iterations is cut.
struct loop_plan {
  std::size_t batch = 1;    // iterations per batch (the last may be shorter)
  std::size_t batches = 0;  // number of batches
  priority at = priority::normal;
};

loop_plan plan_loop(std::size_t count, const parallel_for_options& options) noexcept;

// divide_rounding_up is ⌈dividend / divisor⌉ (divisor > 0). The usual
// (dividend + divisor - 1) / divisor wraps once either is near SIZE_MAX: a huge
// min_batch_size then planned no batches and the loop ran nothing.
constexpr std::size_t divide_rounding_up(std::size_t dividend, std::size_t divisor) noexcept {
  return dividend / divisor + (dividend % divisor != 0 ? 1 : 0);
}

// batch_begin is the first iteration of batch `index` (< plan.batches): it is below the
// loop's count, so the product cannot wrap.
constexpr std::size_t batch_begin(const loop_plan& plan, std::size_t index) noexcept { return index * plan.batch; }

// batch_end is one past the last iteration of batch `index` of a loop of `count`. It adds
// to the batch's start only what is left of the range, since (index + 1) * batch wraps when
// the batch is near SIZE_MAX.
constexpr std::size_t batch_end(const loop_plan& plan, std::size_t count, std::size_t index) noexcept {
  std::size_t begin = batch_begin(plan, index);
  return begin + std::min(plan.batch, count - begin);
}

// split_batches runs `each_batch(first, last)` for batches [first, last) of `plan`,
// halving the range onto `group` until one batch is left.
template <class EachBatch>
void split_batches(task_group& group, const loop_plan& plan, std::size_t first, std::size_t last,
                   const EachBatch& each_batch) {
  while (last - first > 1) {
    std::size_t middle = first + (last - first) / 2;
    group.run_at(plan.at, [&group, &plan, middle, last, &each_batch] {
      split_batches(group, plan, middle, last, each_batch);
    });
    last = middle;
  }
  each_batch(first);
}

// for_each_batch runs `each_batch(index)` for every batch of `plan`, the caller included.
template <class EachBatch>
void for_each_batch(const loop_plan& plan, const EachBatch& each_batch) {
  if (plan.batches == 0) return;
  if (plan.batches == 1) {
    each_batch(0);
    return;
  }
  task_group group;
  try {
    split_batches(group, plan, 0, plan.batches, each_batch);
  } catch (...) {
    try {
      group.wait();
    } catch (...) {
    }
    throw;  // the caller's own batch threw first
  }
  group.wait();
}

}  // namespace detail

// parallel_for runs body(i) for every i in [0, count).
template <class Body>
void parallel_for(std::size_t count, Body&& body, parallel_for_options options = {}) {
  detail::loop_plan plan = detail::plan_loop(count, options);
  detail::for_each_batch(plan, [&body, &plan, count](std::size_t index) {
    std::size_t end = detail::batch_end(plan, count, index);
    for (std::size_t i = detail::batch_begin(plan, index); i < end; ++i) body(i);
  });
}

// parallel_reduce combines map(i) over [0, count) with `combine`, starting from
// `identity`: each batch folds left to right, then the batches fold in order, so an
// associative `combine` gives the serial answer even if it does not commute.
template <class T, class Map, class Combine>
T parallel_reduce(std::size_t count, T identity, Map&& map, Combine&& combine, parallel_for_options options = {}) {
  detail::loop_plan plan = detail::plan_loop(count, options);
  std::vector<T> partial(plan.batches, identity);
  detail::for_each_batch(plan, [&](std::size_t index) {
    std::size_t end = detail::batch_end(plan, count, index);
    T folded = identity;
    for (std::size_t i = detail::batch_begin(plan, index); i < end; ++i) folded = combine(std::move(folded), map(i));
    partial[index] = std::move(folded);
  });
  T result = std::move(identity);
  for (T& each : partial) result = combine(std::move(result), std::move(each));
  return result;
}

// parallel_invoke runs every callable, the last on the calling thread, and returns when
// all have; it rethrows the first exception.
template <class... Callables>
void parallel_invoke(Callables&&... callables) {
  static_assert(sizeof...(Callables) >= 1, "parallel_invoke needs something to run");
  task_group group;
  std::size_t remaining = sizeof...(Callables);
  auto start = [&](auto& callable) {
    if (--remaining == 0) {
      try {
        callable();
      } catch (...) {
        try {
          group.wait();
        } catch (...) {
        }
        throw;
      }
    } else {
      group.run([&callable] { callable(); });
    }
  };
  (start(callables), ...);
  group.wait();
}

}  // namespace magpie
