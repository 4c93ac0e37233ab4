// Layer 3 — the task object behind every handle (docs/tasks.md, "The state machine").
//
// A task is a work_item (so the scheduler can queue it) plus:
//   * `state`: the num_locks word (detail/task_state.h) — launch lock, prerequisites,
//     then the execution flag, the body and unfinished nested tasks;
//   * `subsequents`: the lock-free closable list of edges to tasks waiting for it;
//   * `references`: one 64-bit word counting all references (low half) and, among them,
//     user handles (high half), so that dropping the last handle of an untriggered event is
//     noticed in the same read-modify-write that drops it;
//   * the prerequisite edges it was launched with, just before it in the same pool block
//     (no second allocation, no pointer: prerequisite_groups), and rarely used parts
//     (nested edges, pipe, exception, an event's prerequisite groups) out of line in
//     `extras`. The header is 48 bytes: a task with 16 bytes of captures is one cache line.
//
// Who frees a task: whoever drops its last reference, and nothing else decides it
// (destroy_task, lib/tasks/task_references.cpp). The owners of a reference: each handle; the
// system, from launch until the task has run (a queued task) or completed (an event or
// inline task); each subsequent that lists the task as a prerequisite, until that subsequent
// starts (an inline one begun by the completion of its one prerequisite leaves it to that
// completion, which drops it with the system's); the edge of each nested task, on its
// parent, until the nested task completes; a pipe's "last task" slot. A handle is also
// counted as a handle, so whoever lets go of the last handle knows it; while that handle
// still holds the task, it does the last handle's duties: an untriggered event can no longer
// be triggered (it triggers it, or reports what waits for it), and a waiter that ran the
// task for its handles may have left them the queue's reference
// (task_state::leave_reference_to_handles: a store where a drop would take a
// read-modify-write), which goes with the last handle. A dropper that sees the count hold
// only what it owns destroys without a write: nobody can add a reference without holding
// one. A launch given a task's only handle by rvalue gives that handle to its edge. An
// inline task's edge keeps it as a handle (task_edge::holds_handle), and the push that
// links it tags the task's subsequent list: whoever lets go of the edge's hold drops a
// handle, with the last handle's duties, and one that does so before the task completed
// (a waiter that claimed the subsequent's prerequisites) clears the tag first. The launch
// never looks at the task after the push, which may free it at once. A queued task's
// pusher must look at it after the push (it may have finished open), so its launch links
// first, then uncounts the handle (the reference stays), and a completer meanwhile still
// sees a handle and closes the list with a locked exchange. Until then the edge's
// reference may already be gone (its subsequent ran and let go): the count is then zero
// with a handle still counted, and whoever leaves the whole word zero destroys the task
// — the uncounting launch, then. Whoever completes a task holds a reference to it until the
// completion is done, the inline subsequents it runs included; and a launch that finds its
// prerequisites complete runs an inline task while its caller holds them. So the body of an
// inline task with one prerequisite may read that prerequisite's result with no reference of
// its own (magpie/async.h's next does).
//
// Everything that is not a template lives in lib/tasks/task*.cpp.
#pragma once

#include <magpie/detail/subsequent_list.h>
#include <magpie/detail/task_pool.h>
#include <magpie/detail/task_state.h>
#include <magpie/detail/work_item.h>
#include <magpie/scheduler.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <concepts>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace magpie {
class pipe;
}

namespace magpie::detail {

struct task_base;

// edge_kind says what finishing an edge's prerequisite does to its subsequent.
enum class edge_kind : std::uint8_t {
  prerequisite,  // removes one lock
  pipe,          // removes the pipe's lock: the previous piped task completed
  nested,        // releases one nested part of a running parent
  any,           // triggers a when_any event
  inline_prerequisite,  // removes one lock of an inline task, which the last one's remover runs
};

// task_edge is one "subsequent waits for prerequisite" link, held in the prerequisite's
// subsequent list.
struct task_edge {
  subsequent_list_hook<task_edge> hook;
  task_base* subsequent = nullptr;
  task_base* prerequisite = nullptr;  // nullptr: counted as completed at once
  edge_kind kind = edge_kind::prerequisite;
  // holds_handle: what the edge holds on `prerequisite` is the handle a launch was given
  // (the only handle of an inline task: link_only_prerequisite), not a reference of its
  // own, so whoever lets go of the edge's hold drops a handle. Written before the edge is
  // pushed; read only by that one owner of the hold, which owns the edge too (it lies in
  // the subsequent's block).
  bool holds_handle = false;
};
static_assert(sizeof(task_edge) == 32, "magpie: task_edge grew past 32 bytes");

// edge_group is a header preceded by `count` edges. The edges come first so that a task's
// own group can sit just before the task in one block: the task finds it at a fixed offset
// below itself whatever its body's type (task_impl::create).
struct edge_group {
  edge_group* next = nullptr;  // the next group in a list of them (an event's, the nested ones)
  std::uint32_t count = 0;

  task_edge* edges() noexcept { return reinterpret_cast<task_edge*>(this) - count; }
  const task_edge* edges() const noexcept { return reinterpret_cast<const task_edge*>(this) - count; }

  // bytes is the size of a group of `count` edges.
  static constexpr std::size_t bytes(std::size_t count) noexcept {
    return count * sizeof(task_edge) + sizeof(edge_group);
  }

  // place_before puts a group of `count` edges (not yet constructed) in the memory that
  // ends at `end`.
  static edge_group* place_before(void* end, std::size_t count) noexcept {
    auto* group = new (static_cast<unsigned char*>(end) - sizeof(edge_group)) edge_group();
    group->count = static_cast<std::uint32_t>(count);
    return group;
  }

  // create_alone / destroy_alone: a group in a pool block of its own (lib/tasks/task_references.cpp).
  static edge_group* create_alone(std::size_t count);
  static void destroy_alone(edge_group* group) noexcept;
};
static_assert(sizeof(task_edge) % alignof(edge_group) == 0 && sizeof(edge_group) % alignof(task_edge) == 0);

// task_kind says what happens when a task's last lock goes.
enum class task_kind : std::uint8_t {
  queued,  // scheduled on its scheduler (or named thread)
  inline_run,  // run at once by whichever thread removed the last lock
  event,   // nothing to run: it completes
};

// task_flags are bits of task_base::flags.
enum task_flags : std::uint8_t {
  triggered = 1,           // a task event's trigger() ran (or its launch lock went otherwise)
  has_waiter = 2,          // some thread blocked on it: notify on scheduling and completion
  body_returned = 4,       // its body returned with nested tasks unfinished: extras->nested is settled
  has_exception = 8,       // extras->exception holds what the body threw (none: skipped, canceled)
  exception_observed = 16, // someone asked: no unhandled-exception report at destruction
  piped = 32,              // launched into a pipe: extras (and its pipe) were set before launch
  nested_exception = 64,   // extras->nested_exception holds a nested task's exception
  nested_exception_claimed = 128,  // the one nested task whose exception is kept is chosen
};

// task_op is what a task's type-specific function is asked to do, beside the scheduler's
// run and discard: the task's handler (work_item::handler) answers both, told apart by
// the action (as_action).
enum class task_op : std::uint8_t {
  run = static_cast<std::uint8_t>(work_action::item_specific),  // run the body, keep the result or the exception, destroy the body
  drop_body,  // destroy the body without running it (the task never ran)
  destroy,  // destroy the result and the object, and free its memory
};

constexpr work_action as_action(task_op op) noexcept { return static_cast<work_action>(op); }
constexpr bool is_task_op(work_action action) noexcept { return action >= work_action::item_specific; }

// task_extras holds what most tasks never need; it takes a pool block of its own.
struct task_extras {
  std::exception_ptr exception;
  std::exception_ptr nested_exception;  // the first nested task's that threw (flag nested_exception)
  edge_group* prerequisites = nullptr;  // an event's groups (other tasks' is before them)
  // One single-edge group per add_nested; each edge holds a reference to its nested task.
  // The list goes with the last of its holds: the completion's, and one per waiter that
  // walks it after the body returned (flag body_returned) to retract what is left.
  edge_group* nested = nullptr;
  std::atomic<std::uint32_t> nested_holds{1};
  edge_group* owned = nullptr;   // groups whose edges hold no reference (when_any's)
  magpie::pipe* pipe = nullptr;
  task_edge pipe_edge;
  // The piped task before this one, with a reference, while this one waits for it: a
  // waiter retracting this one runs that one first. Whoever exchanges it out owns the
  // reference (a retracting waiter puts it back; completion and destruction drop it).
  std::atomic<task_base*> pipe_predecessor{nullptr};
};

// target_none marks a task that is not bound to a named thread.
inline constexpr std::uint8_t target_none = 0xff;

// target_of packs a named thread, its queue and the high-priority bit into task_base::target
// (index << 2 | local queue << 1 | high).
constexpr std::uint8_t target_of(named_thread thread, thread_queue queue, bool high) noexcept {
  return static_cast<std::uint8_t>(thread.index() << 2 | (queue == thread_queue::local ? 2u : 0u) | (high ? 1u : 0u));
}
// target_thread, target_queue and target_is_high unpack a target other than target_none.
constexpr named_thread target_thread(std::uint8_t target) noexcept { return named_thread(target >> 2u); }
constexpr thread_queue target_queue(std::uint8_t target) noexcept {
  return (target & 2u) != 0 ? thread_queue::local : thread_queue::main;
}
constexpr bool target_is_high(std::uint8_t target) noexcept { return (target & 1u) != 0; }

struct task_base : work_item {

  static constexpr std::uint64_t one_reference = 1;
  static constexpr std::uint64_t one_handle = (std::uint64_t{1} << 32) | 1;  // a handle is also a reference
  // has_own_group, in work_item::tag: the task's prerequisite edges sit just before it
  // in its block (task_impl::create).
  static constexpr std::uint8_t has_own_group = 1u << 5;
  // resumes_coroutine, in work_item::tag: the task resumes a suspended coroutine
  // (magpie/coroutine.h); add_nested from its body nests in the coroutine's task instead.
  static constexpr std::uint8_t resumes_coroutine = 1u << 6;

  // work_item::tag holds kind() in bits 0-1, task_priority() in 2-4, has_own_group,
  // resumes_coroutine and is_task (set by initialise, which every task goes through). The
  // three bytes below sit in work_item's padding after it.
  std_atomics::atomic<std::uint8_t> flags{0};
  std::uint8_t target = target_none;   // named thread: index << 2 | local queue << 1 | high
  std::uint8_t owner_index = 0;        // its scheduler's slot among the living ones (lib/: owner_of)
  task_state<> state;
  std_atomics::atomic<std::uint64_t> references{one_handle + one_reference};  // a handle and the system
  subsequent_list<task_edge> subsequents;
  task_extras* extras = nullptr;  // written before launch (before trigger) or by the running body

  task_kind kind() const noexcept { return static_cast<task_kind>(tag & 3u); }
  priority task_priority() const noexcept { return static_cast<priority>((tag >> 2u) & 7u); }
  // Complete once its subsequent list is closed, or once its body (and every nested task)
  // is done where the waiter that took it back leaves the list open (lib/tasks/wait_retraction.cpp).
  bool is_completed() const noexcept { return subsequents.is_closed() || state.has_finished(); }
  bool has_flag(std::uint8_t bit) const noexcept {
    return (flags.load(std::memory_order_acquire) & bit) != 0;  // acquire: pairs with set_flag's release half
  }
  // set_flag sets `bit` and returns whether it was already set.
  bool set_flag(std::uint8_t bit) noexcept {
    // seq_cst: has_waiter is one side of a Dekker pairing with remove_locks / close (lib/tasks/task.cpp)
    return (flags.fetch_or(bit, std::memory_order_seq_cst) & bit) != 0;
  }
  task_extras& ensure_extras();
  // apply asks the task's type to do `op` (handler is the type's function).
  void apply(task_op op) noexcept { handler(this, as_action(op)); }
};

// The header is 48 bytes (see the top of this file): a task with 16 bytes of captures
// fills one cache line.
static_assert(sizeof(task_base) == 48, "magpie: task_base grew past 48 bytes");

// named_thread_of is the named thread `task` was placed on, if any.
inline std::optional<named_thread> named_thread_of(const task_base* task) noexcept {
  if (task->target == target_none) return std::nullopt;
  return target_thread(task->target);
}

// prerequisite_groups is the list of groups of `task`'s prerequisite edges: a task's own
// group, just before it, or an event's groups, each in a block of its own. Fixed at launch
// for a task; for an event, read only by its owner until it is triggered.
inline edge_group* prerequisite_groups(task_base* task) noexcept {
  if ((task->tag & task_base::has_own_group) != 0) return reinterpret_cast<edge_group*>(task) - 1;
  return task->kind() == task_kind::event && task->extras != nullptr ? task->extras->prerequisites : nullptr;
}
inline const edge_group* prerequisite_groups(const task_base* task) noexcept {
  return prerequisite_groups(const_cast<task_base*>(task));
}

// task_with_result<R> places the result at an offset independent of the body type, so a
// task<R> handle can reach it.
template <class R>
struct task_with_result : task_base {
  alignas(R) unsigned char result_storage[sizeof(R)];
  R& result() noexcept { return *std::launder(reinterpret_cast<R*>(result_storage)); }
};

template <>
struct task_with_result<void> : task_base {};

// --- lib/tasks/task*.cpp ------------------------------------------------------------------------

// memory: every task block comes from the task pool; `bytes` is recorded for the free.
inline void* allocate_task(std::size_t bytes) { return task_pool::allocate(bytes); }
inline void free_task(void* memory, std::size_t bytes) noexcept { task_pool::deallocate(memory, bytes); }

// add_handle / drop_handle / add_reference / drop_reference count references
// (drop_reference drops `count` at once); the last owner to go destroys the task.
void add_handle(task_base* task) noexcept;
void drop_handle(task_base* task) noexcept;
void add_reference(task_base* task) noexcept;
void drop_reference(task_base* task, std::uint32_t count = 1) noexcept;

// run_queued is the scheduler's half of every task type's handler: it runs (or, at
// shutdown, discards) a task the scheduler hands back.
bool run_queued(work_item* item, work_action action) noexcept;

// initialise fills in what every new task needs, and counts it among its scheduler's live
// tasks (every task is made through it); `target` per task_base::target.
void initialise(task_base* task, const char* name, task_kind kind, scheduler& owner,
                priority task_priority, std::uint8_t target) noexcept;

// add_prerequisites registers `task` (not yet launched) behind each of `count` tasks,
// using `group`'s edges. Null entries count as completed.
void add_prerequisites(task_base* task, task_base* const* prerequisites, std::size_t count,
                       edge_group* group) noexcept;

// launch_behind launches a new task (not an event, not piped) behind `count` prerequisites:
// their locks stand in for the launch lock, so launching costs no read-modify-write of its
// own unless some prerequisite has already completed. `handed`, if not nullptr, is the slot
// of a handle to the one prerequisite (`count` 1) that the caller gives up: when it is that
// task's only handle, the edge keeps it (the slot is emptied, nothing dropped) in place of a
// reference of its own: an inline task's as a handle (task_edge::holds_handle), a queued
// task's uncounted to a reference after the push.
void launch_behind(task_base* task, task_base* const* prerequisites, std::size_t count, edge_group* group,
                   task_base** handed = nullptr) noexcept;

// enter_pipe makes a task (not yet launched) one of `into`'s: its extras, its flag and the
// pipe's lock. Before add_prerequisites: a prerequisite that completes meanwhile on another
// thread must find the task either not yet linked or wholly piped; seeing it half made, it
// would take the launch lock for the pipe's and join the pipe ahead of the launcher.
void enter_pipe(task_base* task, magpie::pipe* into) noexcept;

// launch_task removes the launch lock (a piped task, enter_pipe, then joins `into` once
// only the pipe's lock is left); from then on the system owns the task. `into` is the
// pipe, or nullptr.
void launch_task(task_base* task, magpie::pipe* into) noexcept;

// trigger removes a task event's launch lock once; later calls do nothing.
void trigger(task_base* event) noexcept;

// complete_now makes a freshly created task complete (make_completed_task).
void complete_now(task_base* task) noexcept;

// wait waits for `task`: retraction, a brief spin, then blocking; false on time-out.
// `through` is the handle's pointer the caller waits through, if it has one: while it still
// holds `task` after a retraction, the queue's reference can be left to the handles
// (lib/tasks/wait_retraction.cpp).
bool wait(task_base* task, const std::chrono::steady_clock::time_point* deadline,
          task_base* const* through = nullptr) noexcept;

// wait_all waits for the tasks the handles at `handles[0..count)` hold (newest launched
// first, or oldest first where waits_in_launch_order says; none invalid). A run of them at
// that end of this thread's own deque, in that order, is taken back in one go and run here
// (lib/tasks/wait_launch_order.cpp); the rest are waited for one by one,
// until `deadline` if there is one (false: one had not completed by then). Without one, a
// wait cut short by misuse (waiting on itself: reported) does not stop the rest.
bool wait_all(task_base* const* const* handles, std::size_t count,
              const std::chrono::steady_clock::time_point* deadline) noexcept;

// waits_in_launch_order says whether wait_all should hand over a range that starts with
// `task` oldest first: its scheduler has no workers, nothing of magpie's is on this thread's
// stack, and `task` is the oldest entry of this thread's deque (lib/tasks/wait_launch_order.cpp).
bool waits_in_launch_order(const task_base* task) noexcept;

// try_retract_and_execute runs `task` (after its prerequisites) on this thread if it has
// not started; true if it is complete or was run here. `through` as for wait.
bool try_retract_and_execute(task_base* task, task_base* const* through = nullptr) noexcept;

// rethrow_if_failed rethrows the body's exception (or a nested task's), marking it observed.
void rethrow_if_failed(task_base* task);

// has_failed says whether the task's body (or a nested task) threw: what rethrow_if_failed
// rethrows. Inline, so that a result read pays the call only when there is one to rethrow.
inline bool has_failed(const task_base* task) noexcept { return task->has_flag(has_exception | nested_exception); }

// throw_wait_failed throws task_wait_failed for a get_result whose wait could not end.
[[noreturn]] void throw_wait_failed(const task_base* task);

// observe_exception says whether the body threw, marking the exception observed.
bool observe_exception(task_base* task) noexcept;

// add_nested makes the running task wait for `nested` before it completes.
void add_nested(task_base* nested) noexcept;

// current_task is the task the calling thread is running, or nullptr.
task_base* current_task() noexcept;

// scheduler_for_free_functions: the running task's scheduler, else the one the calling
// named thread is attached to, else the default scheduler.
scheduler& scheduler_for_free_functions() noexcept;

// report_invalid reports use of an invalid handle in `operation`.
void report_invalid(const char* operation) noexcept;

// live_tasks counts tasks created and not yet destroyed, all threads together.
std::int64_t live_tasks() noexcept;

// --- the type-specific part ---------------------------------------------------------------

// skippable_body: a body that may ask to be skipped before it starts (a canceled token's,
// magpie/cancellation.h); hold_canceled then gives the task its exception instead.
template <class Body>
concept skippable_body = requires(const Body& body) {
  { body.skip_requested() } noexcept -> std::same_as<bool>;
};
void hold_canceled(task_base* task) noexcept;

// task_impl<Body, R> is a task running `Body`, whose result is `R`; its prerequisite edges,
// if it has any, come before it in the same block.
template <class Body, class R>
struct task_impl final : task_with_result<R> {
  alignas(Body) unsigned char body_storage[sizeof(Body)];

  Body& body() noexcept { return *std::launder(reinterpret_cast<Body*>(body_storage)); }

  // The pool aligns blocks to a cache line; a body asking for more cannot be placed.
  static_assert(alignof(Body) <= 64, "magpie: a task body aligned to more than 64 bytes is not supported");

  // lead_bytes is how far into its block a task with `count` prerequisite edges starts:
  // their group comes first (rounded up to keep the task aligned), so that a task without
  // them is the block's first byte and one with them finds the group just below itself.
  static constexpr std::size_t lead_bytes(std::size_t count) noexcept {
    return count == 0 ? 0 : (edge_group::bytes(count) + alignof(task_impl) - 1) / alignof(task_impl) * alignof(task_impl);
  }

  // create allocates a task with room for `prerequisite_count` edges in its own group.
  template <class F>
  static task_impl* create(F&& body, std::size_t prerequisite_count) {
    std::size_t lead = lead_bytes(prerequisite_count);
    auto* block = static_cast<unsigned char*>(allocate_task(lead + sizeof(task_impl)));
    auto* self = new (block + lead) task_impl;  // no (): the storage for body and result stays unzeroed
    try {
      new (self->body_storage) Body(std::forward<F>(body));
    } catch (...) {
      self->~task_impl();
      free_task(block, lead + sizeof(task_impl));
      throw;
    }
    if (prerequisite_count != 0) {
      edge_group::place_before(self, prerequisite_count);
      self->tag = task_base::has_own_group;  // initialise keeps it
    }
    self->handler = &handle;
    return self;
  }

  // own_group is the group create placed before the task (only with prerequisites). A
  // task that is not an event has no other (create_and_launch).
  edge_group* own_group() noexcept { return reinterpret_cast<edge_group*>(this) - 1; }

  // lead is lead_bytes for this task, read back from its own group.
  std::size_t lead() noexcept {
    return (this->tag & task_base::has_own_group) != 0 ? lead_bytes(own_group()->count) : 0;
  }

  // handle: the task ops first (each task takes two: run and destroy), then the
  // scheduler's actions.
  static bool handle(work_item* item, work_action action) noexcept {
    auto* self = static_cast<task_impl*>(item);
    if (action == as_action(task_op::run)) {
      // Only a body launched with a cancellation token pays for this check (one relaxed load).
      if constexpr (skippable_body<Body>) {
        if (self->body().skip_requested()) {
          hold_canceled(self);
          self->body().~Body();
          return true;
        }
      }
      try {
        if constexpr (std::is_void_v<R>) {
          std::invoke(self->body());
        } else {
          new (self->result_storage) R(std::invoke(self->body()));
        }
      } catch (...) {
        self->ensure_extras().exception = std::current_exception();
        self->flags.fetch_or(has_exception, std::memory_order_relaxed);  // relaxed: published by completion
      }
      self->body().~Body();
      return true;
    }
    if (action == as_action(task_op::destroy)) {
      if constexpr (!std::is_void_v<R> && !std::is_trivially_destructible_v<R>) {
        // The result exists if the body ran and did not throw (a task that never ran
        // holds task_never_ran as its exception). A trivial one needs neither look.
        if (self->state.has_begun() && !self->has_flag(has_exception)) self->result().~R();
      }
      std::size_t lead = self->lead();
      self->~task_impl();
      free_task(reinterpret_cast<unsigned char*>(self) - lead, lead + sizeof(task_impl));
      return true;
    }
    if (action == as_action(task_op::drop_body)) {
      self->body().~Body();
      return true;
    }
    return run_queued(item, action);
  }
};

// completed_task<R> holds a ready-made result (make_completed_task).
template <class R>
struct completed_task final : task_with_result<R> {
  template <class... Args>
  static completed_task* create(Args&&... args) {
    void* memory = allocate_task(sizeof(completed_task));
    auto* self = new (memory) completed_task;  // no (): as task_impl
    try {
      if constexpr (!std::is_void_v<R>) new (self->result_storage) R(std::forward<Args>(args)...);
    } catch (...) {
      self->~completed_task();
      free_task(memory, sizeof(completed_task));
      throw;
    }
    self->handler = &handle;
    return self;
  }

  static bool handle(work_item* item, work_action action) noexcept {
    if (!is_task_op(action)) return run_queued(item, action);
    if (static_cast<task_op>(action) != task_op::destroy) return true;
    auto* self = static_cast<completed_task*>(item);
    if constexpr (!std::is_void_v<R>) self->result().~R();
    self->~completed_task();
    free_task(self, sizeof(completed_task));
    return true;
  }
};

// event_task is a task event: no body, no result.
struct event_task final : task_with_result<void> {
  static event_task* create() {
    void* memory = allocate_task(sizeof(event_task));
    auto* self = new (memory) event_task;
    self->handler = &handle;
    return self;
  }
  static bool handle(work_item* item, work_action action) noexcept {
    if (!is_task_op(action)) return run_queued(item, action);
    if (static_cast<task_op>(action) != task_op::destroy) return true;
    auto* self = static_cast<event_task*>(item);
    self->~event_task();
    free_task(self, sizeof(event_task));
    return true;
  }
};

}  // namespace magpie::detail
