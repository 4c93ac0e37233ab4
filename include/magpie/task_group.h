// Layer 3 — fork-join: spawn children, join them.
//
//   int fib(int n) {
//     if (n < 2) return n;
//     int a = 0;
//     magpie::task_group group;
//     group.run([&] { a = fib(n - 1); });   // a child: may be stolen by an idle worker
//     int b = fib(n - 2);                    // meanwhile, the parent works too
//     group.wait();                          // join: runs its own children not yet stolen
//     return a + b;
//   }
//
// A child is as light as a work item gets: no handle, no reference count, no num_locks —
// a block holding the callable and the group's address: the group's own inline slot for
// the first small child the creating thread runs after each join (fib's one child per
// group), else a pooled block. run() pushes it onto the calling worker's deque (newest
// first for the owner, oldest first for thieves), so the joining thread finds its own
// children on top of its deque and runs them cache-hot, while thieves take the oldest —
// the biggest — pieces of work. The group remembers its creating thread's deque, so that
// thread's run() and wait() are inline code that looks nothing up (used only while the
// thread keeps that deque: a detach makes the group take the general paths).
//
// While children it spawned are stolen, the joining thread runs other work only within a
// bound on nesting (64 levels), then spins and sleeps. From a thread that is not a worker
// the joining thread runs children itself, so fork-join works with zero workers.
//
// wait() rethrows the first exception a child threw (later ones are dropped; every child
// still runs). The group is reusable after wait(). Misuse is reported: destroying a group
// with children not joined (the destructor then joins them), or two threads in wait() at
// once. See docs/fork-join-tutorial.md.
#pragma once

#include <magpie/detail/deque.h>
#include <magpie/detail/task_pool.h>
#include <magpie/detail/thread_context.h>
#include <magpie/detail/thread_tag.h>
#include <magpie/detail/work_item.h>
#include <magpie/scheduler.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace magpie {

class task_group;

namespace detail {

struct loop_runner;  // parallel_for's: spawns and counts a loop's pieces (magpie/parallel_for.h)

// group_child_name marks a work item as a task_group child (its address, not its text).
inline constexpr char group_child_name[] = "task_group child";

// group_child_base is what a joining thread reads to recognise its own children.
struct group_child_base : work_item {
  task_group* group = nullptr;
  group_child_base* next_private = nullptr;  // in the group's private stack (see spawn)
};

// group_child is one child of a task_group.
template <class Body>
struct group_child final : group_child_base {
  Body body;

  template <class F>
  group_child(task_group* owner, F&& callable) : body(std::forward<F>(callable)) {
    group = owner;
    handler = &handle;
    name = group_child_name;
  }

  static bool handle(work_item* self, work_action action) noexcept;
};

}  // namespace detail

// task_group runs children and joins them.
class task_group {
 public:
  // task_group uses the scheduler the calling thread works for (the running task's, the
  // one whose execute() it is inside, the one it is attached to as a named thread), else
  // the default scheduler; or `owner`. The scheduler follows the work: a group's children
  // run in its scheduler's context wherever they run, even inline in a joiner that works
  // for no scheduler, so the groups, loops and launches inside them use it too; code the
  // caller runs itself between run() and wait() is its own (wrap it in execute() to bring
  // it along).
  //
  // Inline: fib makes a group per call. Everything it needs is in the thread's context,
  // read by name here and in remember_home (see current_thread_context's declaration).
  task_group() : home_(detail::this_thread_tag()) {
    if (detail::current_thread_context.owner == nullptr) {
      owner_ = default_owner();  // no deque of this thread's serves it: the general paths
      return;
    }
    owner_ = detail::current_thread_context.owner;
    remember_home();
  }
  explicit task_group(scheduler& owner);

  // ~task_group reports a group destroyed with children not joined, then joins them —
  // except while an exception unwinds, when it joins them quietly. (It asks only whether
  // an exception is in flight, not whether it was when the group was made: asking on
  // every construction costs a call into the C++ runtime per spawn in recursive code.)
  ~task_group() {
    // acquire: pairs with child_done, as join's loads
    if (outstanding(unfinished_.load(std::memory_order_acquire), 0) != 0) join_unjoined();
  }

  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  // run spawns `body` as a child. Any thread (children may spawn siblings); but when wait()
  // runs on another thread than the one that made the group, that thread must not run()
  // meanwhile (its spawns are counted apart, for the joiner to read).
  template <class Body>
  void run(Body&& body) {
    run_at(priority::normal, std::forward<Body>(body));
  }

  // wait joins every child run so far, then rethrows the first exception one threw.
  void wait() {
    // The common shape first, inline (fib's): the home thread joins its one child, still
    // on top of its deque. Anything else — a stolen child, more children, another
    // thread, misuse — takes the general path.
    if (on_home_deque() && joiner_.load(std::memory_order_relaxed) == nullptr) {  // relaxed: only a misuse check (see wait_general)
      joiner_.store(home_, std::memory_order_relaxed);  // relaxed: as above
      std::uint32_t ran_here = 0;
      // relaxed: this thread's own count (see outstanding)
      if (spawned_at_home_.load(std::memory_order_relaxed) != home_counted_) {
        bool pushed_back = false;
        if (auto mine = home_deque_->pop_matching([this](detail::work_item* item) { return is_child(item); }, pushed_back)) {
          (*mine)->handler(*mine, detail::work_action::run_joined);
          ran_here = 1;
        } else if (pushed_back) {
          wake_workers();  // for what went back: a thief may have found it gone (pop_matching)
        }
      }
      // acquire: pairs with child_done, as join's loads
      if (outstanding(unfinished_.load(std::memory_order_acquire), ran_here) == 0) {
        end_join();
      } else {
        join(ran_here);
      }
      joiner_.store(nullptr, std::memory_order_release);  // release: as wait_general's
      if (failed_.load(std::memory_order_acquire)) rethrow_first();  // acquire: pairs with child_failed's exchange
      return;
    }
    wait_general();
  }

  // has_exception says whether a child has thrown since the last wait().
  bool has_exception() const noexcept { return failed_.load(std::memory_order_acquire); }  // acquire: pairs with child_failed's exchange

  // run_at is run() for a chosen priority (parallel_for's background flag).
  template <class Body>
  void run_at(priority at, Body&& body) {
    using child = detail::group_child<std::decay_t<Body>>;
    const bool home = detail::this_thread_tag() == home_;
    if constexpr (sizeof(child) <= inline_child_bytes && alignof(child) <= alignof(std::max_align_t)) {
      if (home && !inline_child_taken_) {  // only the home thread reads or writes the flag here
        inline_child_taken_ = true;  // if the body's copy throws, the slot waits for the next join
        child* made = new (inline_child_) child(this, std::forward<Body>(body));
        try {
          spawn(made, at, home);
        } catch (...) {  // not queued (no memory for the queue): not counted either
          made->~child();
          inline_child_taken_ = false;
          throw;
        }
        return;
      }
    }
    void* memory = detail::task_pool::allocate(sizeof(child));
    child* made = nullptr;
    try {
      made = new (memory) child(this, std::forward<Body>(body));
      spawn(made, at, home);
    } catch (...) {  // the copy threw, or the child could not be queued (and is not counted)
      if (made != nullptr) made->~child();
      detail::task_pool::deallocate(memory, sizeof(child));
      throw;
    }
  }

  // is_child says whether `item` is a child of this group (for the joining thread).
  bool is_child(const detail::work_item* item) const noexcept {
    return item->name == detail::group_child_name && static_cast<const detail::group_child_base*>(item)->group == this;
  }

 private:
  template <class Body>
  friend struct detail::group_child;
  friend struct detail::loop_runner;

  // unfinished_ holds twice a count of children plus a sleeper bit (bit 0): the joiner
  // sleeps on the word (a futex), so the last child knows from its own decrement whether
  // to wake it — it touches nothing of the group after that. Children finishing anywhere
  // but in the joiner's own loop subtract one; children spawned away from the home thread
  // add one. The home thread (the group's creator) counts its spawns in spawned_at_home_
  // with a plain store instead, and the joiner adds them to the word only before it
  // sleeps: the word may run below zero meanwhile (it wraps, bit 0 untouched).
  static constexpr std::uint32_t sleeper_bit = 1;
  static constexpr std::uint32_t one_child = 2;

  // spawn queues a counted child: inline, the home thread's normal-priority push onto its
  // own deque; anything else out of line.
  void spawn(detail::group_child_base* child, priority at, bool home) {
    if (home && at == priority::normal && on_home_deque() &&
        // relaxed: `true` is the constructor's value, which publishes nothing; `false` sends
        // the child to schedule(), which decides (and reads nothing shutdown wrote)
        (home_accepting_ == nullptr || home_accepting_->load(std::memory_order_relaxed))) {
      // relaxed: this thread is the only writer; the joiner reads it as outstanding() says
      spawned_at_home_.store(spawned_at_home_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      try {
        home_deque_->push(child);
      } catch (...) {  // no memory to grow the deque: not queued, so not counted (run_at rethrows)
        // relaxed: as the increment
        spawned_at_home_.store(spawned_at_home_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        throw;
      }
      if (wakes_workers_) wake_workers();
      return;
    }
    spawn_general(child, at);
  }
  void spawn_general(detail::group_child_base* child, priority at);
  // queue hands a child already counted (by the caller) to a queue: see spawn_general.
  void queue(detail::group_child_base* child, priority at, bool home);
  static scheduler::impl* default_owner();  // may throw: creating the default scheduler can
  // remember_home keeps the calling thread's own deque, if it has one for owner_, with
  // what its spawns need: read once here rather than per spawn.
  void remember_home() noexcept {
    using detail::current_thread_context;
    home_generation_ = detail::own_deque_generation;
    // the general paths look each time
    if (current_thread_context.owner != owner_ || current_thread_context.deque == nullptr) return;
    home_deque_ = current_thread_context.deque;
    home_accepting_ = current_thread_context.push_gate;
    wakes_workers_ = current_thread_context.wakes_workers;
  }
  void wake_workers() noexcept;
  bool is_home() const noexcept { return detail::this_thread_tag() == home_; }
  // on_home_deque says whether the calling thread is the home thread and still owns the
  // deque the group remembered (not detached, or re-attached, since). No two threads ever
  // share a generation, and a thread with a deque has a non-zero one, so the generation
  // alone tells the home thread apart (even from a new thread that took a dead one's tag).
  bool on_home_deque() const noexcept {
    return home_deque_ != nullptr && detail::own_deque_generation == home_generation_;
  }
  // releases_memory says whether a finished child's block goes back to the pool.
  bool releases_memory(const void* child) const noexcept { return child != inline_child_; }
  bool run_private_children() noexcept;
  // join runs and waits until no child is outstanding; `ran_here` own children already ran
  // on this thread, not yet taken off the count.
  void join(std::uint32_t ran_here) noexcept;
  // end_join resets the accounting once every child has finished (the joiner's).
  void end_join() noexcept {
    home_counted_ = spawned_at_home_.load(std::memory_order_relaxed);  // relaxed: as in outstanding
    unfinished_.store(0, std::memory_order_relaxed);  // relaxed: no child is left to read it
    inline_child_taken_ = false;  // its child has finished (the home thread is not in run() now)
  }
  void join_unjoined() noexcept;
  void wait_general();
  [[noreturn]] void rethrow_first();
  bool help(int joiner_depth) noexcept;
  void child_started() noexcept;
  void child_failed(std::exception_ptr error) noexcept;
  void child_done() noexcept;

  // What the joiner still waits for: the word's count, plus home spawns not yet in it,
  // less the children it ran itself (modulo 2^31; see unfinished_).
  std::uint32_t outstanding(std::uint32_t word, std::uint32_t ran_here) const noexcept {
    // relaxed: the home thread's own writes; or, for a joiner elsewhere, ordered by its
    // acquire load of `word`, made first (a home child spawns before its count drops)
    std::uint32_t unaccounted_home = spawned_at_home_.load(std::memory_order_relaxed) - home_counted_;
    return ((word >> 1) + unaccounted_home - ran_here) & (~std::uint32_t{0} >> 1);
  }

  scheduler::impl* owner_;
  const void* home_;  // the creating thread's tag (detail::this_thread_tag)
  // The creating thread's own deque (a worker's or an attached named thread's), else
  // nullptr: read once here rather than per spawn, and used only while the thread's
  // own_deque_generation still matches (an attached thread may detach).
  detail::work_stealing_deque<detail::work_item*>* home_deque_ = nullptr;
  std::uint64_t home_generation_ = 0;
  // An attached thread's pushes wait for the scheduler to accept outside work; a worker's
  // need no check (nullptr).
  const std::atomic<bool>* home_accepting_ = nullptr;
  bool wakes_workers_ = false;  // the scheduler has workers to wake for a pushed child
  // Written by the home thread only: a relaxed load and store, no read-modify-write.
  detail::std_atomics::atomic<std::uint32_t> spawned_at_home_{0};
  std::uint32_t home_counted_ = 0;  // the joiner's: how many home spawns it has accounted for
  alignas(64) detail::std_atomics::atomic<std::uint32_t> unfinished_{0};
  detail::std_atomics::atomic<void*> thief_{nullptr};  // the last worker that ran one of our children: leapfrog target
  // Children nobody but the joiner can run (no workers, no deque of our own): a stack the
  // joiner takes whole, so its children run newest first without a queue in between.
  std::atomic<detail::group_child_base*> private_children_{nullptr};
  std::atomic<const void*> joiner_{nullptr};  // the tag of the thread inside wait(), if any
  std::atomic<bool> failed_{false};
  std::exception_ptr first_exception_;
  // The inline slot: taken by the home thread's run(), free again once a join has run
  // every child (so no child in it can still be running). Its own cache line: a thief
  // that takes the child reads it there.
  static constexpr std::size_t inline_child_bytes = 64;
  bool inline_child_taken_ = false;
  alignas(64) unsigned char inline_child_[inline_child_bytes];
};

template <class Body>
bool detail::group_child<Body>::handle(work_item* self, work_action action) noexcept {
  auto* me = static_cast<group_child*>(self);
  task_group* group = me->group;
  if (action != work_action::discard) {
    if (action == work_action::run) group->child_started();  // a joiner running its own is no thief
    try {
      me->body();
    } catch (...) {
      group->child_failed(std::current_exception());
    }
  } else {
    group->child_failed(std::make_exception_ptr(std::runtime_error("task_group child never ran: scheduler shut down")));
  }
  bool pooled = group->releases_memory(me);
  me->~group_child();
  if (pooled) task_pool::deallocate(me, sizeof(group_child));
  // A joiner running its own child counts it itself: no read-modify-write on the count.
  if (action != work_action::run_joined) group->child_done();  // last: the group may go once the count drops
  return true;
}

}  // namespace magpie
