#include "held_runs.h"

#include <vector>

namespace magpie::detail {

constinit thread_local held_run* innermost_held_run = nullptr;
constinit thread_local bool spilled_in_wait_all = false;

held_run::held_run(work_item* const* items, std::size_t count, work_stealing_deque<work_item*>* deque,
                   scheduler::impl* owner) noexcept
    : items_(items), count_(count), deque_(deque), base_(deque->end_index()), owner_(owner),
      outer_(innermost_held_run) {
  innermost_held_run = this;
}

held_run::~held_run() { innermost_held_run = outer_; }

void spill_held_runs_slowly() noexcept {
  // Innermost first: an outer run's entries then go below what the inner one put back, as
  // they lay before either was taken.
  std::vector<work_item*> pushed_since;  // rare: a spill is a body helping or blocking
  for (held_run* run = innermost_held_run; run != nullptr; run = run->outer_) {
    if (run->next_ >= run->count_) continue;
    // What the bodies pushed since the run was taken comes off (newest first; thieves may
    // take some meanwhile, from the other end) and goes back on top of the run's rest.
    pushed_since.clear();
    while (run->deque_->end_index() > run->base_) {
      std::optional<work_item*> newest = run->deque_->pop();
      if (!newest) break;  // thieves took the rest
      pushed_since.push_back(*newest);
    }
    // Last to run first: the next one ends up newest of the run, where this thread's pops look.
    for (std::size_t i = run->count_; i-- > run->next_;) run->deque_->push(run->items_[i]);
    for (std::size_t i = pushed_since.size(); i-- > 0;) run->deque_->push(pushed_since[i]);
    run->count_ = run->next_;
    spilled_in_wait_all = true;
    run->owner_->wake_for(priority::normal);
  }
}

}  // namespace magpie::detail
