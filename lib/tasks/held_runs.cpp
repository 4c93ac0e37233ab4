#include "held_runs.h"

#include <algorithm>
#include <vector>

namespace magpie::detail {

held_run::held_run(work_item* const* items, std::size_t count, work_stealing_deque<work_item*>* deque,
                   scheduler::impl* owner) noexcept
    : items_(items), count_(count), deque_(deque), outer_low_water_(deque->low_water()), owner_(owner),
      outer_(tasks_tls.innermost_held_run) {
  deque->set_low_water(deque->end_index());
  tasks_tls.innermost_held_run = this;
  scheduler_tls.before_help_or_block = &spill_held_runs_slowly;  // the scheduler's hook: spill before it helps or blocks
}

held_run::~held_run() {
  // The run this one is nested in (if any) tracks its low water across this one's time too.
  deque_->set_low_water(std::min(outer_low_water_, deque_->low_water()));
  tasks_tls.innermost_held_run = outer_;
  if (outer_ == nullptr) scheduler_tls.before_help_or_block = nullptr;
}

void spill_held_runs_slowly() noexcept {
  // Innermost first: an outer run's entries then go below what the inner one put back, as
  // they lay before either was taken.
  std::vector<work_item*> pushed_since;  // rare: a spill is a body helping or blocking
  // Each run's low water: the deque's own for the innermost; for a run nested around others,
  // the lowest of that and what each inner one kept of it (outer_low_water_).
  work_stealing_deque<work_item*>* deque = nullptr;
  std::int64_t low_water = 0;
  for (held_run* run = tasks_tls.innermost_held_run; run != nullptr; run = run->outer_) {
    if (run->deque_ != deque) {
      deque = run->deque_;
      low_water = deque->low_water();
    }
    const std::int64_t floor = low_water;
    low_water = std::min(low_water, run->outer_low_water_);
    if (run->next_ >= run->count_) continue;
    // What the bodies pushed since the run was taken comes off (newest first; thieves may
    // take some meanwhile, from the other end) and goes back on top of the run's rest.
    pushed_since.clear();
    while (run->deque_->end_index() > floor) {
      std::optional<work_item*> newest = run->deque_->pop();
      if (!newest) break;  // thieves took the rest
      pushed_since.push_back(*newest);
    }
    // Last to run first: the next one ends up newest of the run, where this thread's pops look.
    for (std::size_t i = run->count_; i-- > run->next_;) run->deque_->push(run->items_[i]);
    for (std::size_t i = pushed_since.size(); i-- > 0;) run->deque_->push(pushed_since[i]);
    run->count_ = run->next_;
    tasks_tls.spilled_in_wait_all = true;
    run->owner_->wake_for(priority::normal);
  }
}

}  // namespace magpie::detail
