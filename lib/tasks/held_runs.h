// Private to lib/: runs of queue entries a thread took off its own deque at once and runs
// one by one (wait_all takes up to 64 with one CAS or one fence: lib/tasks/wait_launch_order.cpp).
//
// While one body of such a run executes, the entries after it are out of every queue: no
// helper, worker or steal can find them. A body that helps (try_run_one, a task_group's
// join) or blocks (anything in a blocking_scope: waits, joins, pipes) may need one of them
// to go on: a body spinning on try_run_one for a flag a later entry sets, a join whose
// child lies later in the run, an event a later entry triggers while a helping thread
// stands by to run it (each hangs while the entry stays hidden). So before this thread helps or
// blocks, spill_held_runs puts every entry not yet begun back on the deque it came from,
// where workers and helpers steal and this thread pops: below what the bodies pushed since
// the run was taken (a join pops its own child only while it is the newest entry: on top
// of it, a later task of the run would be helped, nested inside the body it waits for, and
// hang). The deque's low water (the lowest its end has been since the
// run was taken) says where that begins: a body may pop below the end the run left, then
// push there (so the end alone can lie above that push). The entries put back may still
// lie above entries newer than the run, where it was taken from the oldest end: until this
// thread's last wait_all in progress returns, its waits run only their own tasks
// (tasks_tls.spilled_in_wait_all). Every entry a held run spills is one of their handles,
// so by then each is complete.
//
//   held_run held(items, count, deque, owner);
//   for (std::size_t i; held.next(i);) run(items[i]);   // stops early once spilled
#pragma once

#include "../scheduler/scheduler_impl.h"
#include "thread_state.h"

#include <cstddef>
#include <cstdint>

namespace magpie::detail {

class held_run {
 public:
  // held_run makes `items[0..count)`, taken off `deque`, this thread's deque of `owner`,
  // this thread's innermost held run.
  held_run(work_item* const* items, std::size_t count, work_stealing_deque<work_item*>* deque,
           scheduler::impl* owner) noexcept;
  ~held_run();
  held_run(const held_run&) = delete;
  held_run& operator=(const held_run&) = delete;

  // next gives the index of the next entry to run; false once each was given or spilled.
  bool next(std::size_t& index) noexcept {
    if (next_ >= count_) return false;
    index = next_++;
    return true;
  }

 private:
  friend void spill_held_runs_slowly() noexcept;

  work_item* const* items_;
  std::size_t next_ = 0;
  std::size_t count_;
  work_stealing_deque<work_item*>* deque_;
  std::int64_t outer_low_water_;  // the deque's low water before this run took it over
  scheduler::impl* owner_;
  held_run* outer_;
};

void spill_held_runs_slowly() noexcept;

// spill_held_runs puts the entries of this thread's held runs not yet begun back on their
// deques (see above). Called before helping or blocking.
inline void spill_held_runs() noexcept {
  if (tasks_tls.innermost_held_run != nullptr) [[unlikely]] spill_held_runs_slowly();
}

}  // namespace magpie::detail
