// Layer 3 — the task object behind every handle (DESIGN §3).
//
// A task is a work_item (so the scheduler can queue it) plus:
//   * `state`: the num_locks word (detail/task_state.h) — launch lock, prerequisites,
//     then the execution flag, the body and unfinished nested tasks;
//   * `subsequents`: the lock-free closable list of edges to tasks waiting for it;
//   * `references`: one 64-bit word counting all references (low half) and, among them,
//     user handles (high half), so that dropping the last handle of an untriggered event is
//     noticed in the same read-modify-write that drops it;
//   * the prerequisite edges it was launched with, in the same pool block when known at
//     launch (no second allocation), and rarely used parts (nested edges, pipe, exception)
//     out of line in `extras`.
//
// Reference owners: each handle; the system, from launch until the task has run (a
// queued task) or completed (an event or inline task); each subsequent that lists the
// task as a prerequisite, until that subsequent starts; the edge of each nested task, on
// its parent, until the nested task completes; a pipe's "last task" slot.
//
// Everything that is not a template lives in lib/task.cpp.
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
#include <exception>
#include <functional>
#include <new>
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
};

// task_edge is one "subsequent waits for prerequisite" link, held in the prerequisite's
// subsequent list.
struct task_edge {
  subsequent_list_hook<task_edge> hook;
  task_base* subsequent = nullptr;
  task_base* prerequisite = nullptr;  // nullptr: counted as completed at once
  edge_kind kind = edge_kind::prerequisite;
};

// edge_group is a header followed by `count` edges.
struct edge_group {
  edge_group* next = nullptr;
  std::uint32_t count = 0;
  bool own_block = false;  // allocated on its own (else it trails the task in one block)

  task_edge* edges() noexcept { return reinterpret_cast<task_edge*>(this + 1); }
  const task_edge* edges() const noexcept { return reinterpret_cast<const task_edge*>(this + 1); }

  // bytes is the size of a group of `count` edges.
  static constexpr std::size_t bytes(std::size_t count) noexcept {
    return sizeof(edge_group) + count * sizeof(task_edge);
  }
};

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
  has_exception = 8,       // extras->exception holds what the body threw
  exception_observed = 16, // someone asked: no unhandled-exception report at destruction
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

// task_extras holds what most tasks never need.
struct task_extras {
  std::exception_ptr exception;
  edge_group* nested = nullptr;  // one single-edge group per add_nested
  edge_group* owned = nullptr;   // groups whose edges hold no reference (when_any's)
  magpie::pipe* pipe = nullptr;
  task_edge pipe_edge;
};

// target_none marks a task that is not bound to a named thread.
inline constexpr std::uint8_t target_none = 0xff;

struct task_base : work_item {

  static constexpr std::uint64_t one_reference = 1;
  static constexpr std::uint64_t one_handle = (std::uint64_t{1} << 32) | 1;  // a handle is also a reference

  task_state<> state;
  std::atomic<std::uint8_t> flags{0};
  std::uint8_t kind_and_priority = 0;  // kind() in bits 0-1, task_priority() above; set by initialise
  std::uint8_t target = target_none;   // named thread: index << 2 | local queue << 1 | high
  std::uint8_t owner_index = 0;        // its scheduler's slot among the living ones (lib/: owner_of)
  std::atomic<std::uint64_t> references{one_handle + one_reference};  // a handle and the system
  subsequent_list<task_edge> subsequents;
  edge_group* prerequisite_groups = nullptr;  // written before launch only
  task_extras* extras = nullptr;              // written before launch or by the running body

  task_kind kind() const noexcept { return static_cast<task_kind>(kind_and_priority & 3u); }
  priority task_priority() const noexcept { return static_cast<priority>(kind_and_priority >> 2u); }
  bool is_completed() const noexcept { return subsequents.is_closed(); }
  bool has_flag(std::uint8_t bit) const noexcept {
    return (flags.load(std::memory_order_acquire) & bit) != 0;  // acquire: pairs with set_flag's release half
  }
  // set_flag sets `bit` and returns whether it was already set.
  bool set_flag(std::uint8_t bit) noexcept {
    // seq_cst: has_waiter is one side of a Dekker pairing with release_lock / close (lib/task.cpp)
    return (flags.fetch_or(bit, std::memory_order_seq_cst) & bit) != 0;
  }
  task_extras& ensure_extras();
  // apply asks the task's type to do `op` (handler is the type's function).
  void apply(task_op op) noexcept { handler(this, as_action(op)); }
};

// task_with_result<R> places the result at an offset independent of the body type, so a
// task<R> handle can reach it.
template <class R>
struct task_with_result : task_base {
  alignas(R) unsigned char result_storage[sizeof(R)];
  R& result() noexcept { return *std::launder(reinterpret_cast<R*>(result_storage)); }
};

template <>
struct task_with_result<void> : task_base {};

// --- lib/task.cpp -------------------------------------------------------------------------

// memory: every task block comes from the task pool; `bytes` is recorded for the free.
inline void* allocate_task(std::size_t bytes) { return task_pool::allocate(bytes); }
inline void free_task(void* memory, std::size_t bytes) noexcept { task_pool::deallocate(memory, bytes); }

// add_handle / drop_handle / add_reference / release count references (release drops
// `count` at once).
void add_handle(task_base* task) noexcept;
void drop_handle(task_base* task) noexcept;
void add_reference(task_base* task) noexcept;
void release(task_base* task, std::uint32_t count = 1) noexcept;

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
// own unless some prerequisite has already completed.
void launch_behind(task_base* task, task_base* const* prerequisites, std::size_t count,
                   edge_group* group) noexcept;

// launch_task removes the launch lock (the task joins `into` first when piped); from then
// on the system owns the task. `into` is the pipe, or nullptr.
void launch_task(task_base* task, magpie::pipe* into) noexcept;

// trigger removes a task event's launch lock once; later calls do nothing.
void trigger(task_base* event) noexcept;

// complete_now makes a freshly created task complete (make_completed_task).
void complete_now(task_base* task) noexcept;

// wait waits for `task`: retraction, a brief spin, then blocking; false on time-out.
// `through` is the handle's pointer the caller waits through, if it has one: while it still
// holds `task` after a retraction, the queue's reference can be left to the handles
// (lib/task_wait.cpp).
bool wait(task_base* task, const std::chrono::steady_clock::time_point* deadline,
          task_base* const* through = nullptr) noexcept;

// wait_all waits for the tasks the handles at `handles[0..count)` hold (newest launched
// first; none invalid). A run of them on top of this thread's own deque, in that order, is
// taken back in one go and run here (lib/task_wait.cpp); the rest are waited for one by one,
// until `deadline` if there is one (false: one had not completed by then). Without one, a
// wait cut short by misuse (waiting on itself: reported) does not stop the rest.
bool wait_all(task_base* const* const* handles, std::size_t count,
              const std::chrono::steady_clock::time_point* deadline) noexcept;

// try_retract_and_execute runs `task` (after its prerequisites) on this thread if it has
// not started; true if it is complete or was run here. `through` as for wait.
bool try_retract_and_execute(task_base* task, task_base* const* through = nullptr) noexcept;

// rethrow_if_failed rethrows the body's exception, marking it observed.
void rethrow_if_failed(task_base* task);

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

// task_impl<Body, R> is a task running `Body`, whose result is `R`; `edges` prerequisite
// edges trail it in the same block.
template <class Body, class R>
struct task_impl final : task_with_result<R> {
  alignas(Body) unsigned char body_storage[sizeof(Body)];

  Body& body() noexcept { return *std::launder(reinterpret_cast<Body*>(body_storage)); }

  static constexpr std::size_t edges_offset() noexcept {
    return (sizeof(task_impl) + alignof(edge_group) - 1) / alignof(edge_group) * alignof(edge_group);
  }

  // create allocates a task with room for `prerequisite_count` trailing edges.
  template <class F>
  static task_impl* create(F&& body, std::size_t prerequisite_count) {
    std::size_t bytes = prerequisite_count == 0 ? sizeof(task_impl)
                                                : edges_offset() + edge_group::bytes(prerequisite_count);
    void* memory = allocate_task(bytes);
    auto* self = new (memory) task_impl;  // no (): the storage for body and result stays unzeroed
    try {
      new (self->body_storage) Body(std::forward<F>(body));
    } catch (...) {
      self->~task_impl();
      free_task(memory, bytes);
      throw;
    }
    self->handler = &handle;
    return self;
  }

  // block_bytes is what create allocated: the trailing edges, if any, are the only group
  // a task that is not an event ever has (create_and_launch).
  std::size_t block_bytes() const noexcept {
    return this->prerequisite_groups == nullptr ? sizeof(task_impl)
                                                : edges_offset() + edge_group::bytes(this->prerequisite_groups->count);
  }

  // trailing_group is the edge group in this task's block (only with prerequisites).
  edge_group* trailing_group() noexcept {
    return new (reinterpret_cast<unsigned char*>(this) + edges_offset()) edge_group();
  }

  // handle: the task ops first (each task takes two: run and destroy), then the
  // scheduler's actions.
  static bool handle(work_item* item, work_action action) noexcept {
    auto* self = static_cast<task_impl*>(item);
    if (action == as_action(task_op::run)) {
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
      if constexpr (!std::is_void_v<R>) {
        // The result exists if the body ran and did not throw (a task that never ran
        // holds task_never_ran as its exception).
        if (self->state.has_begun() && !self->has_flag(has_exception)) self->result().~R();
      }
      std::size_t bytes = self->block_bytes();
      self->~task_impl();
      free_task(self, bytes);
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
