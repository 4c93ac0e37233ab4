// The launch-order rule of schedulers without workers, and wait_all: a wait on such a
// scheduler runs what this thread queued before its task in the order it was queued, and
// wait_all takes runs of its handles back off this thread's deque at once (lib/tasks/held_runs.h).
#include "held_runs.h"
#include "launch_site.h"
#include "thread_state.h"
#include "wait_internal.h"

#include <algorithm>

namespace magpie::detail {

namespace {

constexpr std::size_t run_limit = 64;

// Launch order without workers. A scheduler with no workers runs nothing until a thread
// waits or helps, and Unreal's no-threading mode runs each task at its launch. A wait from
// a thread with nothing of magpie's beneath it on its stack (at_top_level) first runs the
// tasks of the awaited task's launch site (launch_site) that lie below it on this thread's
// deque, oldest first. So a batch launched in a loop and waited for in any order runs in
// launch order, in the order it lies in memory (a task claimed out of the middle of the
// deque paid a whole memory latency behind the locked instructions of the wait before).
// Entries of other launch sites are not run: each goes back at the newest end and waits as
// before (run_queued_before), and one met first stops the run. A task launched elsewhere in
// the code, run earlier than its wait asks, may wait for what the waiting thread or a newer
// task does (an event main triggers later, a pipe to drain, a limiter, a task_group to
// join), where Unreal would have run it at its launch, before any of that existed; each of
// these would hang. docs/scheduler.md lists what a wait with no workers still cannot serve.
// Beneath a body the rule would be unsound even within a launch site: an entry launched
// after that body's task may wait for it to complete. wait_all goes further: it takes its
// own handles oldest first (take_oldest_run), whatever their launch sites, when its range
// starts at the deque's oldest end (waits_in_launch_order), since it waits for all of them
// anyway.

// guest_scope puts a thread of no scheduler in `host`'s context (guest_of) from the first
// body a wait's run in launch order runs until its last round ends, where each body
// would otherwise enter and leave it on its own: a copy of the thread's context in and out
// per task. A wait that runs nothing does not enter it. On a thread of `host` it does nothing.
class guest_scope {
 public:
  explicit guest_scope(scheduler::impl& host) noexcept : host_(host), needed_(this_thread_context().owner != &host) {}
  guest_scope(const guest_scope&) = delete;
  guest_scope& operator=(const guest_scope&) = delete;

  // enter enters the host's context, once, where this thread is not one of its threads.
  void enter() noexcept {
    if (needed_ && !guest_) guest_.emplace(host_, /*lend_deque=*/true);
  }

 private:
  scheduler::impl& host_;
  const bool needed_;
  std::optional<guest_of> guest_;
};

// run_queued_before runs the tasks of `task`'s launch site that `own`, this thread's deque,
// held below it when this call began, oldest first, up to `task` if it is among them (then
// what run_taken_back says of it); nothing when it was not. An entry of another site is
// taken, then put back at the newest end (the oldest belongs to the thieves), where it runs
// when waited for or helped; the run goes on past it, unless it was the first entry met
// (see "Launch order without workers"). A stale entry (is_stale_task: a task already begun,
// of whatever site) is dropped.
// One entry per CAS: an entry's launch site can be read only once it is ours (a thief may
// have taken and freed it), and entries taken ahead in a batch would be hidden while the
// bodies before them run, from a body that helps (try_run_one, a task_group's join) and
// from a helping thread that would steal them (either would hang). Held aside as wait_all's
// runs are (lib/tasks/held_runs.h), a spill would put older tasks above newer ones for
// later waits, where wait_all's spills end with it. The run stops once `deadline` (if any)
// has passed. `ran_any` says whether it ran anything. Bodies run inside `guest`.
std::optional<bool> run_queued_before(task_base* task, task_deque* own, guest_scope& guest,
                                      const std::chrono::steady_clock::time_point* deadline, bool& ran_any) noexcept {
  const std::int64_t end = own->end_index();
  // Read now: once it has run, a body run after it may free it.
  const launch_site site = launch_site_of(task);
  using take = task_deque::oldest_take;
  auto one = [](std::int64_t, work_item*) { return take::take_and_stop; };
  for (;;) {
    if (ran_any && deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return std::nullopt;
    work_item* item = nullptr;
    if (own->take_oldest(&item, 1, end, one) == 0) return std::nullopt;
    if (item != task && launch_site_of(item) != site) {
      if (is_stale_task(item)) {  // a task claimed past its entry: dropped, not passed over
        drop_stale(item);
        continue;
      }
      if (!ran_any) {
        // Met first: the run stops. The task, if newest, is taken back before the entry goes
        // on top of it.
        bool task_taken = deque_owner_view(*own).pop_if(static_cast<work_item*>(task));
        own->push(item);
        if (!task_taken) return std::nullopt;
        guest.enter();
        return run_taken_back(task, 0, nullptr);  // the wait holds it: see wait()
      }
      own->push(item);
      continue;
    }
    ran_any = true;
    guest.enter();
    auto* each = static_cast<task_base*>(item);
    if (each == task) return run_taken_back(task, 0, nullptr);  // the wait holds it: see wait()
    if (!own->empty()) {
      run_taken_back(each, 0, nullptr);  // finished open: a locked instruction fewer than its handler's run
    } else if (deadline != nullptr) {
      // The last one queued, under a deadline: closed, so that what its completion readies
      // (a chain's next link) is queued for the next look, which checks the deadline first.
      run_taken_back(each, 0, nullptr, /*open=*/false);
    } else {
      // The last one queued (a chain's next link, readied by the one before): its handler
      // runs what its completion readies at once if it is of the run's launch site (the
      // chain's hop; tasks_thread_state::launch_order_run), where a task finished open
      // would queue it for the next look.
      each->handler(each, work_action::run);
    }
  }
}

}  // namespace

std::optional<bool> run_in_launch_order(task_base* task, const std::chrono::steady_clock::time_point* deadline,
                                        bool& ran_any) noexcept {
  ran_any = false;
  if (task->target != target_none) return std::nullopt;  // on a named thread's queue, not the deque
  waiter_deque found(task);  // found and pinned once for every round
  if (found.deque() == nullptr) return std::nullopt;
  // Each round ends where the deque ended when it began: what its runs readied (a chain's
  // next link) comes in the next round, until a round runs nothing.
  guest_scope guest(*found.owner());
  // The run's site, for the ready loops of the bodies it runs (tasks_thread_state), until
  // the run returns.
  struct run_site_scope {
    launch_site outer = tasks_tls.launch_order_run;
    explicit run_site_scope(launch_site site) noexcept { tasks_tls.launch_order_run = site; }
    ~run_site_scope() { tasks_tls.launch_order_run = outer; }
    run_site_scope(const run_site_scope&) = delete;
    run_site_scope& operator=(const run_site_scope&) = delete;
  } run_site(launch_site_of(task));
  for (;;) {
    std::optional<bool> ran_task = run_queued_before(task, found.deque(), guest, deadline, ran_any);
    if (ran_task || !ran_any || task->is_completed()) return ran_task;
    if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return std::nullopt;
    ran_any = false;
  }
}

namespace {

// take_back_run takes the newest run of `handles` (up to run_limit) off `own`, this
// thread's own deque (of scheduler `owner`), at once, when they lie on top of it in that
// order, into `taken`; returns how many (0 when fewer than two: a single task goes the
// ordinary way, through retract).
std::size_t take_back_run(scheduler::impl* owner, task_deque* own, task_base* const* const* handles,
                          std::size_t count, work_item** taken) noexcept {
  if (own == nullptr || count < 2) return 0;
  // Each handle is read only once the one before matched: where the newest is not on top
  // (a graph's sink, waiting on its prerequisites) this costs one look, not a run's worth.
  auto expected = [&](std::int64_t i) -> work_item* { return taken[i] = *handles[i]; };
  auto run = static_cast<std::size_t>(deque_owner_view(*own).newest_matching(expected, static_cast<std::int64_t>(std::min(count, run_limit))));
  if (run < 2) return 0;
  bool hid_items = false;
  if (!own->pop_newest(static_cast<std::int64_t>(run), hid_items)) {
    if (hid_items) owner->wake_for(priority::normal);  // a thief may have found them gone meanwhile
    return 0;
  }
  return run;
}

// take_oldest_run takes the oldest run of `handles` (up to run_limit) off `own`, this
// thread's deque, at once, when they lie at its oldest end in that order (a range waited
// for oldest first, in launch order: see in_launch_order_here), into `taken`; returns how
// many (0 when fewer than two, as take_back_run).
std::size_t take_oldest_run(task_deque* own, task_base* const* const* handles, std::size_t count,
                            work_item** taken) noexcept {
  if (own == nullptr || count < 2) return 0;
  using take = task_deque::oldest_take;
  return static_cast<std::size_t>(own->take_oldest(
      taken, static_cast<std::int64_t>(std::min(count, run_limit)), own->end_index(),
      [handles](std::int64_t i, work_item* item) { return item == *handles[i] ? take::take : take::stop; }));
}

// take_back_and_run takes back a run of `handles` and runs it here; returns how many were
// taken: with no workers the oldest run, when the range comes oldest first from the deque's
// oldest end (take_oldest_run, waits_in_launch_order); else the newest (take_back_run). A
// thread of no scheduler looks on the deque lent to it by the first task's scheduler,
// pinned while it runs them. The run is held aside (lib/tasks/held_runs.h): a body that helps or
// blocks puts back what has not begun, which the caller then waits for one by one.
std::size_t take_back_and_run(task_base* const* const* handles, std::size_t count) noexcept {
  work_item* taken[run_limit];  // the handles' tasks
  if (count < 2 || *handles[0] == nullptr) return 0;  // (a body run earlier may have emptied a handle)
  waiter_deque found(*handles[0]);
  task_deque* own = found.deque();
  if (own == nullptr) return 0;  // another scheduler's task: not on this deque
  std::size_t run = in_launch_order_here(found.owner()) ? take_oldest_run(own, handles, count, taken) : 0;
  if (run == 0) run = take_back_run(found.owner(), own, handles, count, taken);
  if (run == 0) return 0;
  held_run held(taken, run, own, found.owner());
  run_held_run(held, taken, handles);
  return run;
}

}  // namespace

bool waits_in_launch_order(const task_base* task) noexcept {
  // Only where the range starts at the oldest end of this thread's deque: else its runs come
  // back newest first, as with workers (whatever lies below may not run before it).
  waiter_deque found(task);
  return found.deque() != nullptr && in_launch_order_here(found.owner()) &&
         deque_owner_view(*found.deque()).oldest_is(static_cast<work_item*>(const_cast<task_base*>(task)));
}

bool wait_all(task_base* const* const* handles, std::size_t count,
              const std::chrono::steady_clock::time_point* deadline) noexcept {
  // tasks_tls.wait_all_depth counts this thread's wait_alls in progress. A spill's aftermath
  // (spilled_in_wait_all) ends when the last of them returns: every entry a held run
  // spills is one of their handles, and by then each is complete (unless a timed one gave
  // up first: what it left then runs in whatever order waits and helpers come to it).
  struct depth_scope {
    depth_scope() noexcept { ++tasks_tls.wait_all_depth; }
    ~depth_scope() {
      if (--tasks_tls.wait_all_depth == 0) tasks_tls.spilled_in_wait_all = false;
    }
  } in_wait_all;
  std::size_t next = 0;
  bool runs_likely = true;  // until a look finds none: then the rest go one by one
  while (next < count) {
    std::size_t run = runs_likely ? take_back_and_run(handles + next, count - next) : 0;
    runs_likely = run != 0;
    // What the run did not complete (nested tasks still running, another waiter ran it, a
    // body replaced a later handle), and whatever did not lie on the deque, is waited for.
    std::size_t end = next + std::max<std::size_t>(run, 1);
    // (A run is taken back whatever the deadline: running it here is how it completes soonest.)
    for (; next < end; ++next) {
      task_base* task = *handles[next];
      // Untimed, a wait returns early only on misuse (waiting on itself, reported): go on.
      if (task != nullptr && !task->is_completed() && !wait(task, deadline, handles[next]) && deadline != nullptr) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace magpie::detail
