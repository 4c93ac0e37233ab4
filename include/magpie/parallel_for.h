// Layer 3 — loops: parallel_for, parallel_reduce, parallel_invoke, on task_group.
//
//   magpie::parallel_for(pixels.size(), [&](std::size_t i) { shade(pixels[i]); });
//   double total = magpie::parallel_reduce(values.size(), 0.0,
//       [&](std::size_t i) { return values[i]; }, std::plus<>());
//   magpie::parallel_invoke([&] { sort(left); }, [&] { sort(right); });
//
// The calling thread starts on the whole range and takes part until every iteration ran;
// other threads join in by taking halves of what is left. A thread works through its range
// in short steps, growing, and before each one looks at its deque: if that is empty, it
// queues the upper half of what it has left, for an idle thread to take. So a part of the
// range that costs more than the rest is halved again and again as threads run out of
// work, however the cost falls, down to `min_batch_size` iterations; and a thread that
// nobody takes from pays only a push and a pop per halving. Any thread but the caller that
// takes a half counts it on a counter of its own, which pays the half's one count in the
// loop when its last piece finishes (wherever that ran): the loop's shared counter changes
// once per steal, and no thread but the caller waits for anything. The first exception an
// iteration throws is rethrown; the loop stops as soon as every thread has finished the
// step it was in, so iterations not yet started may not run. A loop runs on the scheduler
// the calling thread works for, else the default one: inside `pool.execute(...)`, on
// `pool`.
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
  std::size_t min_batch_size = 1;  // fewer iterations than this are not worth a piece of their own
  bool force_single_thread = false;  // run on the calling thread only (debugging, measuring)
  bool unbalanced = false;           // iterations vary in cost: look for idle threads more often
  bool background_priority = false;  // pieces run at background priority
};

namespace detail {

// loop_plan is how a loop of `count` iterations is shared out.
struct loop_plan {
  std::size_t count = 0;
  std::size_t grain = 1;         // pieces start on multiples of it (min_batch_size, or a reduce's block)
  std::size_t longest_step = 1;  // most iterations a thread runs between two looks at its deque
  std::size_t eager_piece = 1;   // a thread without a deque of its own halves its range down to this
  bool shared = false;           // other threads may take part
  priority at = priority::normal;
};

// plan_loop plans a loop for the calling thread's scheduler. With `blocks_per_thread`, the
// grain is raised so that the range holds at most that many grains per thread: a reduce's
// blocks, each folded on its own.
loop_plan plan_loop(std::size_t count, const parallel_for_options& options, std::size_t blocks_per_thread = 0) noexcept;

// reduce_blocks_per_thread is how finely parallel_reduce cuts its range into blocks.
inline constexpr std::size_t reduce_blocks_per_thread = 16;

// divide_rounding_up is ⌈dividend / divisor⌉ (divisor > 0). The usual
// (dividend + divisor - 1) / divisor wraps once either is near SIZE_MAX: a huge
// min_batch_size then planned nothing and the loop ran nothing.
constexpr std::size_t divide_rounding_up(std::size_t dividend, std::size_t divisor) noexcept {
  return dividend / divisor + (dividend % divisor != 0 ? 1 : 0);
}

// A loop body, for the runner, is a type with
//   segment start();    run(segment&, begin, end);
// The iterations one thread runs in one go form a segment: `run` is called on adjacent
// ranges of it, in order, with the state `start` made for it. Segments cover the range
// without overlapping, and each starts on a multiple of the plan's grain.

// for_loop runs `body(i)` for each iteration: its segments keep nothing.
template <class Body>
struct for_loop {
  Body& body;
  struct segment {};
  segment start() const noexcept { return {}; }
  void run(segment&, std::size_t begin, std::size_t end) const {
    for (std::size_t i = begin; i < end; ++i) body(i);
  }
};

// reduce_loop folds map(i) with `combine` over each block of `block` iterations (the
// plan's grain: pieces start on block boundaries, so one thread runs a block whole), left
// to right from `identity`, into partial[block index]; the caller folds the blocks in
// order. The blocks depend only on the count, the options and the thread count, so a
// floating-point reduce gives the same answer on every run with the same threads.
template <class T, class Map, class Combine>
struct reduce_loop {
  const T& identity;
  Map& map;
  Combine& combine;
  std::vector<T>& partial;
  std::size_t block;
  std::size_t count;

  struct segment {
    T folded;
  };
  segment start() const { return segment{identity}; }
  void run(segment& each, std::size_t begin, std::size_t end) const {
    while (begin < end) {
      std::size_t block_start = begin - begin % block;
      std::size_t block_end = block_start + std::min(block, count - block_start);  // cannot wrap
      std::size_t stop = std::min(end, block_end);
      for (std::size_t i = begin; i < stop; ++i) each.folded = combine(std::move(each.folded), map(i));
      begin = stop;
      if (begin == block_end) {
        partial[block_start / block] = std::move(each.folded);
        each.folded = identity;
      }
    }
  }
};

// loop_subtree accounts for a range that a thread other than the loop's caller took (a
// piece). The taker runs it as the caller runs the whole loop, halving what is left onto
// its own deque when that is empty, and never waits: when its range is done it takes back
// and runs, newest first, each half no other thread took meanwhile. What it takes back
// costs no count. A half another thread took is paid for by that thread when the half
// (and everything it split off) has finished: one subtraction from `owed`. When the taker
// is done it adds the number of halves it did not take back. Whoever brings `owed` to zero
// from then on (the taker itself, if every taken half has already been paid for) frees
// the subtree and pays the taken piece's own count where it was counted: its parent
// subtree, or the loop's group. So the loop's shared counter changes once per steal, not
// once per half, and no thread but the caller waits for anything. `owed` counts modulo
// 2^32: it stays below zero until the taker settles, and no subtraction before that can
// end at zero, since fewer halves of one subtree are taken than the loop has grains, far
// fewer than 2^32 in any loop that ends.
struct loop_subtree {
  std_atomics::atomic<std::uint32_t> owed{0};
  loop_subtree* parent = nullptr;  // where the taken piece is counted; nullptr: the loop's group
};

// loop_run is what every piece of one loop shares: it lives in the caller's frame, which
// outlives every piece (the caller joins the group).
template <class Loop>
struct loop_run {
  task_group& group;
  const loop_plan& plan;
  Loop& body;
};

// loop_piece_name marks a piece counted in a subtree: only pieces counted in the group
// itself carry group_child_name, so that the joiner takes only those as its own.
inline constexpr char loop_piece_name[] = "parallel_for piece";

// loop_piece_base is a range of iterations [first, last) waiting to run, counted in
// `counted_in` (nullptr: a child of the loop's group).
struct loop_piece_base : group_child_base {
  loop_subtree* counted_in = nullptr;
  std::size_t first = 0;
  std::size_t last = 0;
};

// loop_piece is a piece of one loop.
template <class Loop>
struct loop_piece final : loop_piece_base {
  const loop_run<Loop>* loop;

  loop_piece(const loop_run<Loop>& run, loop_subtree* counter, std::size_t from, std::size_t to) noexcept
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

// loop_runner shares a loop's range out and counts its pieces (task_group lets it spawn
// and count children).
//
// A thread works through its range in steps, each twice as long as the one before, up to
// the plan's longest step, and looks at its deque before each: if the deque is empty (a
// thief took whatever it held, or it never held anything), it queues the upper half of
// what is left and starts again from short steps. So a thread offers work only when none
// of its own is waiting to be taken, an idle thread always finds some, and a costly part
// of the range is halved again and again as threads run out, down to the grain; a thread
// nobody steals from pays one push and one pop per halving. A thread with no deque of its
// own (or a background loop, whose pieces go to the shared queues) halves eagerly down to
// the plan's eager piece instead.
struct loop_runner {
  using deque_type = work_stealing_deque<work_item*>;

  // run_caller runs the whole loop on its caller, which joins the group afterwards.
  template <class Loop>
  static void run_caller(const loop_run<Loop>& loop) noexcept {
    std::uint32_t pushed = 0;  // counted by the group instead
    run_range(loop, nullptr, halves_deque(loop), 0, loop.plan.count, pushed, true);
  }

  // run_piece runs a piece's range where `action` says, then pays its count. The loop's
  // caller halves onto the group: its spawns cost no read-modify-write, and its join takes
  // them back. Any other thread takes the piece over on a subtree of its own.
  template <class Loop>
  static void run_piece(const loop_run<Loop>& loop, loop_subtree* counted_in, std::size_t first, std::size_t last,
                        work_action action) noexcept {
    task_group& group = loop.group;
    if (action == work_action::discard) {
      group.child_failed(never_ran());
      finish(group, counted_in);
      return;
    }
    if (counted_in == nullptr && action == work_action::run) group.child_started();
    std::uint32_t pushed = 0;
    if (action == work_action::run_joined || group.is_home()) {  // only the caller joins the group
      run_range(loop, nullptr, halves_deque(loop), first, last, pushed, true);
    } else if (loop_subtree* taken = make_subtree(counted_in)) {
      run_taken(loop, taken, first, last, pushed);
      settle(group, taken, pushed);  // pays this piece's count once nothing is owed
      return;
    } else {  // no memory for a subtree: run the range here, whole
      run_range(loop, nullptr, nullptr, first, last, pushed, false);
    }
    if (counted_in != nullptr || action != work_action::run_joined) finish(group, counted_in);  // the joiner counts its own
  }

  // run_taken runs a range taken on `subtree`, then takes back and runs the halves it
  // queued that are still on top of its deque. `not_taken_back` counts the halves queued
  // and not taken back here.
  template <class Loop>
  static void run_taken(const loop_run<Loop>& loop, loop_subtree* subtree, std::size_t first, std::size_t last,
                        std::uint32_t& not_taken_back) noexcept {
    deque_type* own = halves_deque(loop);
    run_range(loop, subtree, own, first, last, not_taken_back, true);
    while (not_taken_back > 0 && own != nullptr) {
      loop_piece_base* back = take_back(loop.group, own, subtree);
      if (back == nullptr) return;  // the rest were taken: their takers pay for them
      --not_taken_back;
      std::size_t back_first = back->first;
      std::size_t back_last = back->last;
      task_pool::deallocate(back, sizeof(loop_piece<Loop>));
      run_range(loop, subtree, own, back_first, back_last, not_taken_back, true);
    }
  }

  // run_range runs iterations [first, last) as one segment, in steps, halving what is left
  // onto `counted_in` (nullptr: the group) when `may_halve` and the thread wants to (see
  // wants_half); `pushed` counts the halves queued. It stops at the first exception an
  // iteration throws, recorded in the group, and before any step once another has been:
  // a loop that threw ends as soon as every thread finishes the step it is in.
  template <class Loop>
  static void run_range(const loop_run<Loop>& loop, loop_subtree* counted_in, const deque_type* own, std::size_t first,
                        std::size_t last, std::uint32_t& pushed, bool may_halve) noexcept {
    const loop_plan& plan = loop.plan;
    try {
      auto segment = loop.body.start();
      std::size_t next = first;
      std::size_t step = plan.grain;
      while (next < last) {
        if (loop.group.has_exception()) return;
        if (may_halve && wants_half(plan, own, last - next)) {
          // `next` is a multiple of the grain (steps are), and so is the middle: a piece
          // starts on a grain's boundary (a reduce's block).
          std::size_t half = (last - next) / 2;
          std::size_t middle = next + (half - half % plan.grain);
          push_half(loop, counted_in, middle, last);
          ++pushed;
          last = middle;
          step = plan.grain;  // someone took work: look again soon
        }
        std::size_t end = next + std::min(step, last - next);
        loop.body.run(segment, next, end);
        next = end;
        step = step < plan.longest_step / 2 ? step * 2 : plan.longest_step;
      }
    } catch (...) {  // an iteration threw, or no memory to queue a half
      loop.group.child_failed(std::current_exception());
    }
  }

  // wants_half says whether a thread with `left` iterations to go should queue half of
  // them: each half must hold a grain; then, with a deque, only when it is empty.
  static bool wants_half(const loop_plan& plan, const deque_type* own, std::size_t left) noexcept {
    if (left / 2 < plan.grain) return false;
    return own != nullptr ? own->empty() : left / 2 >= plan.eager_piece;
  }

  // halves_deque is where this thread's halves of `loop` go and come back from: its own
  // deque, for a loop at normal priority; else nullptr (the shared queues).
  template <class Loop>
  static deque_type* halves_deque(const loop_run<Loop>& loop) noexcept {
    return loop.plan.at == priority::normal ? own_deque(loop.group) : nullptr;
  }

  // push_half makes a piece of iterations [first, last) counted in `counted_in` and queues
  // it: a child of the group, spawned by the loop's caller; else a half of a taken range.
  template <class Loop>
  static void push_half(const loop_run<Loop>& loop, loop_subtree* counted_in, std::size_t first, std::size_t last) {
    void* memory = task_pool::allocate(sizeof(loop_piece<Loop>));
    auto* piece = new (memory) loop_piece<Loop>(loop, counted_in, first, last);
    try {
      if (counted_in == nullptr) {
        loop.group.spawn(piece, loop.plan.at, true);
      } else {
        queue(loop.group, piece, loop.plan.at);
      }
    } catch (...) {  // not queued, so not counted
      task_pool::deallocate(memory, sizeof(loop_piece<Loop>));
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
  static loop_piece_base* take_back(task_group& group, deque_type* own, loop_subtree* subtree) noexcept;
  static std::exception_ptr never_ran() noexcept;
};

template <class Loop>
bool loop_piece<Loop>::handle(work_item* self, work_action action) noexcept {
  auto* me = static_cast<loop_piece*>(self);
  const loop_run<Loop>& loop = *me->loop;
  loop_subtree* counted_in = me->counted_in;
  std::size_t first = me->first;
  std::size_t last = me->last;
  // Freed before the range runs: the halves it splits off reuse the block while it is hot.
  static_assert(std::is_trivially_destructible_v<loop_piece>);
  task_pool::deallocate(me, sizeof(loop_piece));
  loop_runner::run_piece(loop, counted_in, first, last, action);
  return true;
}

// run_loop runs every iteration of `plan` through `body`, the caller included, and
// rethrows the first exception an iteration threw.
template <class Loop>
void run_loop(const loop_plan& plan, Loop& body) {
  if (plan.count == 0) return;
  if (!plan.shared) {
    auto segment = body.start();
    body.run(segment, 0, plan.count);
    return;
  }
  task_group group;
  const loop_run<Loop> loop{group, plan, body};
  loop_runner::run_caller(loop);
  group.wait();
}

}  // namespace detail

// parallel_for runs body(i) for every i in [0, count).
template <class Body>
void parallel_for(std::size_t count, Body&& body, parallel_for_options options = {}) {
  detail::loop_plan plan = detail::plan_loop(count, options);
  detail::for_loop<std::remove_reference_t<Body>> loop{body};
  detail::run_loop(plan, loop);
}

// parallel_reduce combines map(i) over [0, count) with `combine`, starting from
// `identity`. The range is cut into blocks (at most sixteen per thread, none below
// `min_batch_size`); each block folds left to right from `identity`, then the blocks fold
// in order. So an associative `combine` gives the serial answer even if it does not
// commute, and a floating-point sum the same answer on every run with the same threads.
template <class T, class Map, class Combine>
T parallel_reduce(std::size_t count, T identity, Map&& map, Combine&& combine, parallel_for_options options = {}) {
  detail::loop_plan plan = detail::plan_loop(count, options, detail::reduce_blocks_per_thread);
  std::vector<T> partial(count == 0 ? 0 : detail::divide_rounding_up(count, plan.grain), identity);
  detail::reduce_loop<T, std::remove_reference_t<Map>, std::remove_reference_t<Combine>> loop{
      identity, map, combine, partial, plan.grain, count};
  detail::run_loop(plan, loop);
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
