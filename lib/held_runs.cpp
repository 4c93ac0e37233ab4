#include "held_runs.h"

namespace magpie::detail {

constinit thread_local held_run* innermost_held_run = nullptr;
constinit thread_local bool spilled_in_wait_all = false;

held_run::held_run(work_item* const* items, std::size_t count, work_stealing_deque<work_item*>* deque,
                   scheduler::impl* owner) noexcept
    : items_(items), count_(count), deque_(deque), owner_(owner), outer_(innermost_held_run) {
  innermost_held_run = this;
}

held_run::~held_run() { innermost_held_run = outer_; }

void spill_held_runs_slowly() noexcept {
  for (held_run* run = innermost_held_run; run != nullptr; run = run->outer_) {
    if (run->next_ >= run->count_) continue;
    // Last to run first: the next one ends up newest, where this thread's own pops look.
    for (std::size_t i = run->count_; i-- > run->next_;) run->deque_->push(run->items_[i]);
    run->count_ = run->next_;
    spilled_in_wait_all = true;
    run->owner_->wake_for(priority::normal);
  }
}

}  // namespace magpie::detail
