// How parallel loops are cut into batches (include/magpie/parallel_for.h).
#include <magpie/detail/task_base.h>
#include <magpie/parallel_for.h>

namespace magpie::detail {

loop_plan plan_loop(std::size_t count, const parallel_for_options& options) noexcept {
  loop_plan plan;
  if (count == 0) return plan;
  if (options.force_single_thread) {
    plan.batch = count;
    plan.batches = 1;
    return plan;
  }
  scheduler& owner = scheduler_for_free_functions();
  std::size_t threads = std::size_t{owner.worker_count()} + 1;  // the caller takes part
  if (options.background_priority) {
    threads = std::size_t{owner.background_worker_count()} + 1;
    plan.at = priority::background_normal;
  }
  // A few batches per thread leave thieves something to even out; unbalanced loops more.
  std::size_t wanted = threads * (options.unbalanced ? 16 : 4);
  std::size_t batch = (count + wanted - 1) / wanted;
  plan.batch = std::max({batch, options.min_batch_size, std::size_t{1}});
  plan.batches = (count + plan.batch - 1) / plan.batch;
  return plan;
}

}  // namespace magpie::detail
