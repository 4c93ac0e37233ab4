// How parallel loops are planned, and how a taken piece pays its count
// (include/magpie/parallel_for.h).
#include "../scheduler/scheduler_impl.h"

#include <magpie/detail/task_base.h>
#include <magpie/parallel_for.h>

#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace magpie::detail {

namespace {

// saturating_multiply clamps at SIZE_MAX instead of wrapping: a wrapped batch target could
// be zero (a division by zero) or absurdly small.
std::size_t saturating_multiply(std::size_t left, std::size_t right) noexcept {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  return right != 0 && left > most / right ? most : left * right;
}

// threads_with_caller is `workers` plus the calling thread, which takes part; it cannot
// wrap even where std::size_t is no wider than unsigned.
std::size_t threads_with_caller(unsigned workers) noexcept {
  std::size_t threads = workers;
  return threads == std::numeric_limits<std::size_t>::max() ? threads : threads + 1;
}

}  // namespace

loop_plan plan_loop(std::size_t count, const parallel_for_options& options, std::size_t blocks_per_thread) noexcept {
  loop_plan plan;
  plan.count = count;
  plan.grain = std::max(options.min_batch_size, std::size_t{1});
  plan.longest_step = plan.grain;
  plan.eager_piece = plan.grain;
  if (count == 0) return plan;
  std::size_t threads = 1;
  if (!options.force_single_thread) {
    scheduler& owner = scheduler_for_free_functions();
    threads = threads_with_caller(owner.worker_count());
    if (options.background_priority) {
      threads = threads_with_caller(owner.background_worker_count());
      plan.at = priority::background_normal;
    }
  }
  if (blocks_per_thread != 0) {
    plan.grain = std::max(plan.grain, divide_rounding_up(count, saturating_multiply(threads, blocks_per_thread)));
  }
  plan.shared = threads > 1 && count / 2 >= plan.grain;
  // A step is short enough that a thread looks at its deque many times in its share of the
  // loop, and long enough that the look costs nothing beside it; unbalanced loops look more
  // often. Steps are whole grains, so that a thread halves its range on a grain's boundary.
  // A thread without a deque cannot tell whether its halves were taken, so it halves
  // eagerly, down to a few pieces per thread.
  std::size_t looks = options.unbalanced ? 256 : 64;
  plan.longest_step = std::max(plan.grain, divide_rounding_up(count, saturating_multiply(threads, looks)));
  plan.longest_step -= plan.longest_step % plan.grain;
  std::size_t pieces = options.unbalanced ? 16 : 4;
  plan.eager_piece = std::max(plan.grain, divide_rounding_up(count, saturating_multiply(threads, pieces)));
  return plan;
}

loop_subtree* loop_runner::make_subtree(loop_subtree* parent) noexcept {
  static_assert(sizeof(loop_subtree) <= 64, "a subtree is one pool block, a line of its own");
  void* memory = nullptr;
  try {
    memory = task_pool::allocate(sizeof(loop_subtree));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  auto* made = new (memory) loop_subtree;
  made->parent = parent;
  return made;
}

void loop_runner::settle(task_group& group, loop_subtree* subtree, std::uint32_t not_taken_back) noexcept {
  // Every half was taken back here: no other thread ever saw the subtree, and nothing is owed.
  // Else the halves' takers have subtracted what they paid so far; adding what they owe in
  // all leaves zero only if every one has paid.
  // acq_rel: pairs with the takers' subtractions in finish, both ways: whoever ends at zero
  // sees every batch of the subtree, and passes that on with its payment
  if (not_taken_back != 0 && subtree->owed.fetch_add(not_taken_back, std::memory_order_acq_rel) + not_taken_back != 0) {
    return;
  }
  loop_subtree* parent = subtree->parent;
  static_assert(std::is_trivially_destructible_v<loop_subtree>);
  task_pool::deallocate(subtree, sizeof(loop_subtree));
  finish(group, parent);
}

void loop_runner::finish(task_group& group, loop_subtree* subtree) noexcept {
  while (subtree != nullptr) {
    // acq_rel: as settle's; until the taker settles the count is below zero, so only a
    // subtraction after the settling addition can end at zero
    if (subtree->owed.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    loop_subtree* parent = subtree->parent;
    task_pool::deallocate(subtree, sizeof(loop_subtree));
    subtree = parent;
  }
  group.child_done();  // last: the caller may return once the group's count drops
}

loop_runner::deque_type* loop_runner::own_deque(task_group& group) noexcept { return group.owner_->own_deque(); }

void loop_runner::queue(task_group& group, loop_piece_base* piece, priority at) { group.queue(piece, at, false); }

loop_piece_base* loop_runner::take_back(task_group& group, deque_type* own, loop_subtree* subtree) noexcept {
  bool pushed_back = false;
  auto mine = own->pop_matching(
      [subtree](work_item* item) {
        return item->name == loop_piece_name && static_cast<loop_piece_base*>(item)->counted_in == subtree;
      },
      pushed_back);
  if (mine) return static_cast<loop_piece_base*>(*mine);
  if (pushed_back) group.wake_workers();  // for what went back: a thief may have found it gone (pop_matching)
  return nullptr;
}

std::exception_ptr loop_runner::never_ran() noexcept {
  return std::make_exception_ptr(std::runtime_error("parallel_for piece never ran: scheduler shut down"));
}

}  // namespace magpie::detail
