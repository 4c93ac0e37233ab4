// How parallel loops are cut into batches (include/magpie/parallel_for.h).
#include <magpie/detail/task_base.h>
#include <magpie/parallel_for.h>

#include <limits>

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

loop_plan plan_loop(std::size_t count, const parallel_for_options& options) noexcept {
  loop_plan plan;
  if (count == 0) return plan;
  if (options.force_single_thread) {
    plan.batch = count;
    plan.batches = 1;
    return plan;
  }
  scheduler& owner = scheduler_for_free_functions();
  std::size_t threads = threads_with_caller(owner.worker_count());
  if (options.background_priority) {
    threads = threads_with_caller(owner.background_worker_count());
    plan.at = priority::background_normal;
  }
  // A few batches per thread leave thieves something to even out; unbalanced loops more.
  std::size_t wanted = saturating_multiply(threads, options.unbalanced ? 16 : 4);
  std::size_t batch = divide_rounding_up(count, wanted);
  plan.batch = std::max({batch, options.min_batch_size, std::size_t{1}});
  plan.batches = divide_rounding_up(count, plan.batch);
  return plan;
}

}  // namespace magpie::detail
