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
// the caller works through its own. Any other thread that takes a half splits it onto a
// counter of its own, which pays the half's one count in the loop when its last piece
// finishes (wherever that ran): the loop's shared counter changes once per steal, not once
// per batch, and no thread but the caller waits for anything. The calling thread takes part
// and returns when every iteration ran; the first exception an iteration threw is rethrown
// (the batch it was in stops; every other batch still runs). A loop runs on the scheduler
// the calling thread works for, else the default one: inside `pool.execute(...)`, on
// `pool`, with batches planned for its threads.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/detail/atomics.h>
#include <magpie/detail/task_pool.h>
#include <magpie/task_group.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
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

// loop_subtree accounts for a range of batches that a thread other than the loop's caller
// took (a piece). The taker works through it as a fork-join would, without ever waiting: it
// splits the range, pushing the upper halves onto its own deque, runs the lowest batch,
// then takes back and runs, newest first, each half no other thread took meanwhile, and
// splits that the same way. What it takes back costs no count. A half another thread took
// is paid for by that thread when the half (and everything it split off) has finished: one
// subtraction from `owed`. When the taker is done it adds the number of halves it did not
// take back. Whoever brings `owed` to zero from then on (the taker itself, if every taken
// half has already been paid for) frees the subtree and pays the taken piece's own count
// where it was counted: its parent subtree, or the loop's group. So the loop's shared
// counter changes once per steal, not once per batch, and no thread but the caller waits
// for anything. `owed` counts modulo 2^32: it stays below zero until the taker settles, and
// no subtraction before that can end at zero, since a loop has far fewer pieces (at most
// sixteen batches per thread) than 2^32.
struct loop_subtree {
  std_atomics::atomic<std::uint32_t> owed{0};
  loop_subtree* parent = nullptr;  // where the taken piece is counted; nullptr: the loop's group
};

// loop_run is what every piece of one loop shares: it lives in the caller's frame, which
// outlives every piece (the caller joins the group).
template <class EachBatch>
struct loop_run {
  task_group& group;
  const loop_plan& plan;
  const EachBatch& each_batch;
};

// loop_piece_name marks a piece counted in a subtree: only pieces counted in the group
// itself carry group_child_name, so that the joiner takes only those as its own.
inline constexpr char loop_piece_name[] = "parallel_for piece";

// loop_piece_base is a range of batches [first, last) waiting to run, counted in
// `counted_in` (nullptr: a child of the loop's group).
struct loop_piece_base : group_child_base {
  loop_subtree* counted_in = nullptr;
  std::size_t first = 0;
  std::size_t last = 0;
};

// loop_piece is a piece of one loop.
template <class EachBatch>
struct loop_piece final : loop_piece_base {
  const loop_run<EachBatch>* loop;

  loop_piece(const loop_run<EachBatch>& run, loop_subtree* counter, std::size_t from, std::size_t to) noexcept
      : loop(&run) {
    group = &run.group;
    handler = &handle;
    name = counter == nullptr ? group_child_name : loop_piece_name;
    counted_in = counter;
    first = from;
    last = to;
  }

  static bool handle(work_item* self, work_action action) noexcept;
};

// loop_runner splits a loop's ranges and counts its pieces (task_group lets it spawn and
// count children).
struct loop_runner {
  using deque_type = work_stealing_deque<work_item*>;

  // split runs batches [first, last) of `loop` on the loop's caller, halving the range
  // onto the group until one batch is left, which runs here.
  template <class EachBatch>
  static void split(const loop_run<EachBatch>& loop, std::size_t first, std::size_t last) {
    while (last - first > 1) {
      std::size_t middle = first + (last - first) / 2;
      push_half(loop, nullptr, middle, last);
      last = middle;
    }
    loop.each_batch(first);
  }

  // run_piece runs a piece's range where `action` says, then pays its count. The loop's
  // caller splits onto the group: its spawns cost no read-modify-write, and its join takes
  // them back. Any other thread takes the piece over on a subtree of its own.
  template <class EachBatch>
  static void run_piece(const loop_run<EachBatch>& loop, loop_subtree* counted_in, std::size_t first,
                        std::size_t last, work_action action) noexcept {
    task_group& group = loop.group;
    if (action == work_action::discard) {
      group.child_failed(never_ran());
      finish(group, counted_in);
      return;
    }
    if (counted_in == nullptr && action == work_action::run) group.child_started();
    if (action == work_action::run_joined || group.is_home()) {  // only the caller joins the group
      try {
        split(loop, first, last);
      } catch (...) {  // no memory to queue a half: the batches below it are dropped, the loop rethrows
        group.child_failed(std::current_exception());
      }
    } else if (loop_subtree* taken = make_subtree(counted_in)) {
      // Halves of another priority go to the shared queues, never onto this deque.
      deque_type* own = loop.plan.at == priority::normal ? own_deque(group) : nullptr;
      std::uint32_t not_taken_back = 0;
      try {
        run_taken(loop, taken, own, first, last, not_taken_back);
      } catch (...) {  // as split's: what was queued still runs and pays
        group.child_failed(std::current_exception());
      }
      settle(group, taken, not_taken_back);  // pays this piece's count once nothing is owed
      return;
    } else {  // no memory for a subtree: run the range here, batch by batch
      for (std::size_t index = first; index < last; ++index) {
        try {
          loop.each_batch(index);
        } catch (...) {
          group.child_failed(std::current_exception());
        }
      }
    }
    if (counted_in != nullptr || action != work_action::run_joined) finish(group, counted_in);  // the joiner counts its own
  }

  // run_taken runs batches [first, last) of a range taken on `subtree`: it halves the range
  // onto `own` (or a shared queue, without one), runs the lowest batch, then takes back and
  // runs the halves still on top of `own`. `not_taken_back` counts the halves pushed and
  // not taken back here.
  template <class EachBatch>
  static void run_taken(const loop_run<EachBatch>& loop, loop_subtree* subtree, deque_type* own, std::size_t first,
                        std::size_t last, std::uint32_t& not_taken_back) {
    std::uint32_t pushed = 0;
    while (last - first > 1) {
      std::size_t middle = first + (last - first) / 2;
      push_half(loop, subtree, middle, last);
      ++pushed;
      ++not_taken_back;
      last = middle;
    }
    try {
      loop.each_batch(first);
    } catch (...) {  // this batch stops; the halves still run
      loop.group.child_failed(std::current_exception());
    }
    for (; pushed > 0 && own != nullptr; --pushed) {
      loop_piece_base* back = take_back(loop.group, own, subtree);
      if (back == nullptr) break;  // the rest were taken: their takers pay for them
      --not_taken_back;
      std::size_t back_first = back->first;
      std::size_t back_last = back->last;
      task_pool::deallocate(back, sizeof(loop_piece<EachBatch>));
      run_taken(loop, subtree, own, back_first, back_last, not_taken_back);
    }
  }

  // push_half makes a piece of batches [first, last) counted in `counted_in` and queues it:
  // a child of the group, spawned by the loop's caller; else a half of a taken range.
  template <class EachBatch>
  static void push_half(const loop_run<EachBatch>& loop, loop_subtree* counted_in, std::size_t first,
                        std::size_t last) {
    void* memory = task_pool::allocate(sizeof(loop_piece<EachBatch>));
    auto* piece = new (memory) loop_piece<EachBatch>(loop, counted_in, first, last);
    try {
      if (counted_in == nullptr) {
        loop.group.spawn(piece, loop.plan.at, true);
      } else {
        queue(loop.group, piece, loop.plan.at);
      }
    } catch (...) {  // not queued, so not counted
      task_pool::deallocate(memory, sizeof(loop_piece<EachBatch>));
      throw;
    }
  }

  // make_subtree makes a subtree for a piece this thread took, counted in `parent`;
  // nullptr without memory.
  static loop_subtree* make_subtree(loop_subtree* parent) noexcept;
  // settle is the taker's end of a subtree: `not_taken_back` halves are still to be paid for.
  static void settle(task_group& group, loop_subtree* subtree, std::uint32_t not_taken_back) noexcept;
  // finish pays one count in `subtree` (nullptr: the group), and each subtree that leaves
  // owing nothing pays its own count in its parent.
  static void finish(task_group& group, loop_subtree* subtree) noexcept;
  // own_deque is the calling thread's own deque in the group's scheduler, if it has one.
  static deque_type* own_deque(task_group& group) noexcept;
  // queue queues a half of a taken range.
  static void queue(task_group& group, loop_piece_base* piece, priority at);
  // take_back pops the newest item of `own` if it is a piece of `subtree`; else nullptr.
  static loop_piece_base* take_back(task_group& group, deque_type* own, loop_subtree* subtree);
  static std::exception_ptr never_ran() noexcept;
};

template <class EachBatch>
bool loop_piece<EachBatch>::handle(work_item* self, work_action action) noexcept {
  auto* me = static_cast<loop_piece*>(self);
  const loop_run<EachBatch>& loop = *me->loop;
  loop_subtree* counted_in = me->counted_in;
  std::size_t first = me->first;
  std::size_t last = me->last;
  // Freed before the range runs: the halves it splits off reuse the block while it is hot.
  static_assert(std::is_trivially_destructible_v<loop_piece>);
  task_pool::deallocate(me, sizeof(loop_piece));
  loop_runner::run_piece(loop, counted_in, first, last, action);
  return true;
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
  const loop_run<EachBatch> loop{group, plan, each_batch};
  try {
    loop_runner::split(loop, 0, plan.batches);
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
