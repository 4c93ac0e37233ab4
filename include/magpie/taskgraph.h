// Layer 4 — compatibility: Unreal's legacy TaskGraph API (TGraphTask, FFunctionGraphTask,
// FNullGraphTask, FReturnGraphTask, FTaskGraphInterface, AsyncTask) over magpie's tasks, so
// that code written against the TaskGraph ports by renaming. Built on the public API only.
//
//   using namespace magpie::taskgraph;
//   struct update_bounds {
//     mesh* target;
//     named_threads::type get_desired_thread() { return named_threads::any_thread; }
//     static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
//     void do_task(named_threads::type, const graph_event_ref&) { target->update_bounds(); }
//   };
//   graph_event_ref bounds = graph_task<update_bounds>::create_task().construct_and_dispatch_when_ready(&m);
//   graph_event_array after{bounds};
//   function_graph_task::create_and_dispatch_when_ready([&] { draw(m); }, "draw", &after,
//                                                       named_threads::game_thread);
//
// Every graph task is one magpie task: prerequisites are its prerequisites, the desired
// thread its placement (placement_for), its completion event the task itself. The static
// functions use the scheduler of the calling task, else the one the calling named thread is
// attached to, else default_scheduler(). Port name by name with docs/porting-from-unreal.md.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/taskgraph_event.h>
#include <magpie/taskgraph_named_threads.h>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

namespace magpie::taskgraph {

// subsequents_mode is Unreal's ESubsequentsMode: whether a graph task has a completion
// event others can wait on (track_subsequents) or none (fire_and_forget, a little cheaper).
enum class subsequents_mode { track_subsequents, fire_and_forget };

template <class T>
class graph_task;

namespace internal {

// report_misuse reports a misuse of the TaskGraph layer.
void report_misuse(const char* message);

// debug_name is T's get_debug_name() where it has one, else "graph_task".
template <class T>
const char* debug_name(const T& object) {
  if constexpr (requires { { object.get_debug_name() } -> std::convertible_to<const char*>; }) {
    return object.get_debug_name();
  } else {
    return "graph_task";
  }
}

// make_object builds T from the arguments: by a constructor, or, for an aggregate, from its
// members in order. Clang before 16 lacks parenthesized aggregate initialization, so an
// aggregate is built with braces; the result is a prvalue, constructed in its final place.
template <class T, class... A>
T make_object(A&&... args) {
  if constexpr (std::is_constructible_v<T, A&&...>) {
    return T(std::forward<A>(args)...);
  } else {
    return T{std::forward<A>(args)...};
  }
}

// object_slot holds a graph task's T: in the task's body when T can move there, else on the
// heap (Unreal constructs T in place, so T need not be movable).
template <class T, bool in_place = std::is_move_constructible_v<T>>
class object_slot {
 public:
  template <class... A>
  explicit object_slot(std::in_place_t, A&&... args) : object_(make_object<T>(std::forward<A>(args)...)) {}
  T& get() noexcept { return object_; }

 private:
  T object_;
};
template <class T>
class object_slot<T, false> {
 public:
  template <class... A>
  explicit object_slot(std::in_place_t, A&&... args)
      : object_(new T(make_object<T>(std::forward<A>(args)...))) {}
  T& get() noexcept { return *object_; }

 private:
  std::unique_ptr<T> object_;
};

// graph_task_body is the body of the magpie task a graph task runs as: T itself (destroyed
// with the body, after do_task and before completion, as Unreal destroys it) and the thread
// do_task is told it runs on. T's pointer and the thread fit the 16 bytes a task keeps in
// its one cache line.
template <class T>
class graph_task_body {
 public:
  template <class... A>
  explicit graph_task_body(std::in_place_t, A&&... args) : slot_(std::in_place, std::forward<A>(args)...) {}

  T& object() noexcept { return slot_.get(); }
  void set_run_as(named_threads::type run_as) noexcept { run_as_ = run_as; }

  void operator()() {
    if (T::get_subsequents_mode() == subsequents_mode::fire_and_forget) {
      slot_.get().do_task(run_as_, graph_event_ref());
    } else {
      const graph_event_ref::running_task_ref self;
      slot_.get().do_task(run_as_, self.get());
    }
  }

 private:
  object_slot<T> slot_;
  named_threads::type run_as_ = named_threads::any_thread;
};

// held_graph_task_body is the body of a task made by construct_and_hold: it also owns the
// graph_task the user unlocks, which goes with the body once the task has run.
template <class T>
class held_graph_task_body : public graph_task_body<T> {
 public:
  held_graph_task_body(graph_task_body<T>&& body, std::unique_ptr<graph_task<T>> held) noexcept
      : graph_task_body<T>(std::move(body)), held_(std::move(held)) {}

 private:
  std::unique_ptr<graph_task<T>> held_;
};

// run_as is what do_task is told for a task placed by `desired`: the named thread and
// queue (game_thread_local for the game thread's local queue), or any_thread for a task
// for any thread, whichever thread runs it (a worker, or a thread that retracted it): the
// task was not placed on a named thread, and asking the thread would cost a look-up per run.
constexpr named_threads::type run_as(named_threads::type desired) noexcept {
  if (named_threads::get_thread_index(desired) == named_threads::any_thread || !named_threads::is_named(desired)) {
    return named_threads::any_thread;
  }
  return static_cast<named_threads::type>(desired & (named_threads::thread_index_mask | named_threads::queue_index_mask));
}

// launch_graph_body launches a graph task's body for `desired` (placed by placement_for,
// misuse reported as `operation`) behind `prerequisites` (none if null). One prerequisite,
// a chain's usual case, goes as a single handle: the range form walks the array, while a
// handle is one pointer for launch to link. Flattened because with three launch calls here
// the compiler keeps launch's task set-up out of line, and the call (its prerequisite
// buffer built on the stack and torn down again) would make a graph-task chain hop dearer
// than magpie's own launch, which inlines it. The placement is made here, not by the caller: the
// three-byte placement, built a byte at a time and passed in a register, made the load
// that packs it wait for the stores (a failed store-to-load forwarding, some 12 cycles).
template <class Body>
[[gnu::flatten]] task<> launch_graph_body(const char* name, Body&& body, const graph_event_array* prerequisites,
                                          named_threads::type desired, const char* operation) {
  const placement where = placement_for(desired, operation);
  if (prerequisites == nullptr || prerequisites->empty()) return magpie::launch(name, std::forward<Body>(body), where);
  if (prerequisites->size() == 1) {
    return magpie::launch(name, std::forward<Body>(body), static_cast<const task<>&>((*prerequisites)[0]), where);
  }
  return magpie::launch(name, std::forward<Body>(body), *prerequisites, where);
}

// dispatch_graph_body launches as launch_graph_body does and returns the completion event,
// which knows, for a task for any thread, that it runs on no named thread (a wait over it
// then need not read the task to tell).
template <class Body>
graph_event_ref dispatch_graph_body(const char* name, Body&& body, const graph_event_array* prerequisites,
                                    named_threads::type desired, const char* operation) {
  if (prerequisites == nullptr && desired == named_threads::any_thread) {
    return graph_event_ref(magpie::launch(name, std::forward<Body>(body)), launched_for_any_thread);
  }
  task<> launched = launch_graph_body(name, std::forward<Body>(body), prerequisites, desired, operation);
  if (run_as(desired) != named_threads::any_thread) return graph_event_ref(std::move(launched));
  return graph_event_ref(std::move(launched), launched_for_any_thread);
}

}  // namespace internal

// graph_task<T> is Unreal's TGraphTask<T>. T provides get_desired_thread(), a static
// get_subsequents_mode() and do_task(named_threads::type current, const graph_event_ref&
// my_completion_event); optionally get_debug_name(). T is constructed from the arguments
// given to the constructor, lives until do_task returns, and is destroyed before the
// completion event completes. As in Unreal, references do not pass through the
// constructor's arguments: pass pointers.
template <class T>
class graph_task {
 public:
  // constructor is what create_task returns: construct T, then dispatch it or hold it.
  class constructor {
   public:
    // construct_and_dispatch_when_ready makes T(args...) and runs its do_task once the
    // prerequisites completed; returns its completion event (empty for fire_and_forget).
    template <class... A>
    graph_event_ref construct_and_dispatch_when_ready(A&&... args) {
      internal::graph_task_body<T> body(std::in_place, std::forward<A>(args)...);
      named_threads::type desired = body.object().get_desired_thread();
      body.set_run_as(internal::run_as(desired));
      const char* name = internal::debug_name(body.object());
      if (T::get_subsequents_mode() == subsequents_mode::fire_and_forget) {
        (void)internal::launch_graph_body(name, std::move(body), prerequisites_, desired, "graph_task");
        return {};
      }
      return internal::dispatch_graph_body(name, std::move(body), prerequisites_, desired, "graph_task");
    }

    // construct_and_hold makes T(args...) but runs it only after unlock() (and the
    // prerequisites). The returned graph_task is valid until the task has run; one never
    // unlocked never runs and is never freed, as in Unreal.
    template <class... A>
    graph_task* construct_and_hold(A&&... args) {
      internal::graph_task_body<T> body(std::in_place, std::forward<A>(args)...);
      named_threads::type desired = body.object().get_desired_thread();
      body.set_run_as(internal::run_as(desired));
      const char* name = internal::debug_name(body.object());
      auto held = std::unique_ptr<graph_task>(new graph_task(name));
      if (prerequisites_ != nullptr) held->gate_.add_prerequisites(*prerequisites_);
      graph_task* result = held.get();
      // The body owns the graph_task: it goes when the task has run.
      internal::held_graph_task_body<T> owning(std::move(body), std::move(held));
      result->completion_ = magpie::launch(name, std::move(owning), result->gate_, placement_for(desired, "graph_task"));
      return result;
    }

   private:
    friend class graph_task;
    explicit constructor(const graph_event_array* prerequisites) noexcept : prerequisites_(prerequisites) {}
    const graph_event_array* prerequisites_;
  };

  // create_task starts making a graph task behind `prerequisites` (may be null; read before
  // the constructor call returns). The current thread is only a hint.
  static constructor create_task(const graph_event_array* prerequisites = nullptr,
                                 named_threads::type current_thread_if_known = named_threads::any_thread) {
    (void)current_thread_if_known;
    return constructor(prerequisites);
  }

  // unlock lets a task made by construct_and_hold run. Exactly once: a second call before
  // the task has run is reported and ignored (after it has run, the graph_task is gone).
  void unlock(named_threads::type current_thread_if_known = named_threads::any_thread) {
    (void)current_thread_if_known;
    // acq_rel: the first unlock wins; the second sees it
    if (unlocked_.exchange(true, std::memory_order_acq_rel)) {
      internal::report_misuse("graph_task::unlock called twice; ignored");
      return;
    }
    task_event gate = gate_;  // the task may run, and free *this, once the gate opens
    gate.trigger();
  }

  // get_completion_event is the held task's completion event; asking a fire_and_forget
  // task is reported (it has none) and gives an empty reference. Ask before unlock().
  graph_event_ref get_completion_event() const {
    if (T::get_subsequents_mode() == subsequents_mode::fire_and_forget) {
      internal::report_misuse("graph_task::get_completion_event on a fire_and_forget task, which has none");
      return {};
    }
    return graph_event_ref(completion_);
  }

 private:
  explicit graph_task(const char* name) : gate_(name) {}

  task_event gate_;
  task<> completion_;
  std::atomic<bool> unlocked_{false};
};

// function_graph_task is Unreal's FFunctionGraphTask: a callable as a graph task.
struct function_graph_task {
  // create_and_dispatch_when_ready runs `function` — void() or void(named_threads::type,
  // const graph_event_ref& my_completion_event) — on `desired_thread` once the
  // prerequisites completed, and returns its completion event.
  template <class F>
  static graph_event_ref create_and_dispatch_when_ready(F&& function, const char* name = "",
                                                       const graph_event_array* prerequisites = nullptr,
                                                       named_threads::type desired_thread = named_threads::any_thread) {
    if constexpr (std::is_invocable_v<std::decay_t<F>&>) {
      return internal::dispatch_graph_body(name, std::forward<F>(function), prerequisites, desired_thread,
                                           "function_graph_task");
    } else {
      static_assert(std::is_invocable_v<std::decay_t<F>&, named_threads::type, const graph_event_ref&>,
                    "function_graph_task takes void() or void(named_threads::type, const graph_event_ref&)");
      named_threads::type run_as = internal::run_as(desired_thread);
      auto body = [function = std::forward<F>(function), run_as]() mutable {
        const graph_event_ref::running_task_ref self;
        function(run_as, self.get());
      };
      return internal::dispatch_graph_body(name, std::move(body), prerequisites, desired_thread, "function_graph_task");
    }
  }
};

// null_graph_task is Unreal's FNullGraphTask: does nothing, so that its completion event
// gathers its prerequisites into one.
class null_graph_task {
 public:
  // null_graph_task(name, desired_thread) is named `name` and runs on `desired_thread`.
  explicit null_graph_task(const char* name = "null_graph_task",
                           named_threads::type desired_thread = named_threads::any_thread) noexcept
      : name_(name), desired_(desired_thread) {}
  // get_desired_thread, get_subsequents_mode, get_debug_name and do_task are the graph task
  // interface (see graph_task): where it runs, that its event is tracked, its name, and its
  // body, which does nothing.
  named_threads::type get_desired_thread() const noexcept { return desired_; }
  static subsequents_mode get_subsequents_mode() noexcept { return subsequents_mode::track_subsequents; }
  const char* get_debug_name() const noexcept { return name_; }
  void do_task(named_threads::type, const graph_event_ref&) noexcept {}

 private:
  const char* name_;
  named_threads::type desired_;
};

// return_graph_task is Unreal's FReturnGraphTask: run on a named thread's queue, it makes
// that thread's process_thread_until_request_return return.
class return_graph_task {
 public:
  // return_graph_task(thread) makes `thread`'s process_thread_until_request_return return.
  explicit return_graph_task(named_threads::type thread_to_return_from) noexcept : thread_(thread_to_return_from) {}
  // get_desired_thread, get_subsequents_mode, get_debug_name and do_task are the graph task
  // interface (see graph_task): it runs on the thread it returns from, its event is tracked,
  // and its body requests the return.
  named_threads::type get_desired_thread() const noexcept { return thread_; }
  static subsequents_mode get_subsequents_mode() noexcept { return subsequents_mode::track_subsequents; }
  const char* get_debug_name() const noexcept { return "return_graph_task"; }
  void do_task(named_threads::type current_thread, const graph_event_ref&);

 private:
  named_threads::type thread_;
};

// trigger_event_graph_task is Unreal's FTriggerEventGraphTask: triggers a task_event.
class trigger_event_graph_task {
 public:
  // trigger_event_graph_task(event, desired_thread) triggers `event` on `desired_thread`.
  explicit trigger_event_graph_task(task_event event,
                                    named_threads::type desired_thread = named_threads::any_thread) noexcept
      : event_(std::move(event)), desired_(desired_thread) {}
  // get_desired_thread, get_subsequents_mode, get_debug_name and do_task are the graph task
  // interface (see graph_task): where it runs, that its event is tracked, its name, and its
  // body, which triggers the event.
  named_threads::type get_desired_thread() const noexcept { return desired_; }
  static subsequents_mode get_subsequents_mode() noexcept { return subsequents_mode::track_subsequents; }
  const char* get_debug_name() const noexcept { return "trigger_event_graph_task"; }
  void do_task(named_threads::type, const graph_event_ref&) noexcept { event_.trigger(); }

 private:
  task_event event_;
  named_threads::type desired_;
};

// task_graph_interface is Unreal's FTaskGraphInterface over one magpie scheduler: named
// threads attach to it and process their queues through it, and it waits for graph events.
class task_graph_interface {
 public:
  // get is the interface over default_scheduler().
  static task_graph_interface& get();

  // task_graph_interface(pool) is an interface over `pool`.
  explicit task_graph_interface(scheduler& pool) noexcept : pool_(&pool) {}

  // attach_to_thread attaches the calling thread as the named thread `thread`.
  void attach_to_thread(named_threads::type thread);

  // process_thread_until_idle runs the queue `thread` names (main or local) until it is
  // empty; returns how many tasks ran. Only on that thread; re-entry is reported.
  std::uint64_t process_thread_until_idle(named_threads::type thread);

  // process_thread_until_request_return runs the queue until request_return is called.
  void process_thread_until_request_return(named_threads::type thread);

  // request_return makes process_thread_until_request_return on `thread` return once it
  // has run what is queued. Any thread.
  void request_return(named_threads::type thread);

  // is_thread_processing_tasks says whether `thread`'s queue is being processed.
  bool is_thread_processing_tasks(named_threads::type thread) const;

  // get_current_thread_if_known is the calling thread's index (with local_queue if asked)
  // when it is attached to this interface's scheduler, else any_thread.
  named_threads::type get_current_thread_if_known(bool local_queue = false) const;

  // is_current_thread_known says whether the calling thread is an attached named thread.
  bool is_current_thread_known() const;

  // get_num_worker_threads is the number of worker threads, foreground and background.
  int get_num_worker_threads() const;

  // wait_until_task_completes waits for one event; see wait_until_tasks_complete.
  void wait_until_task_completes(const graph_event_ref& task,
                                 named_threads::type current = named_threads::any_thread);

  // wait_until_tasks_complete returns once every event in `tasks` completed. A named
  // thread (current, or known from attachment) runs its own queue meanwhile, as Unreal's
  // return-task pattern does — unless it is already processing that queue, which it never
  // re-enters; any other thread retracts what it waits for and runs it. Naming a thread the
  // caller is not is reported.
  void wait_until_tasks_complete(const graph_event_array& tasks,
                                 named_threads::type current = named_threads::any_thread);

  // trigger_event_when_tasks_complete triggers `event` once every event in `tasks`
  // completed: at once when they already have, else on the thread that completes the last
  // (no worker is needed, so it cannot deadlock when every worker waits).
  void trigger_event_when_tasks_complete(task_event& event, const graph_event_array& tasks,
                                         named_threads::type current = named_threads::any_thread);

  // scheduler_of is the scheduler behind this interface.
  scheduler& scheduler_of() const noexcept { return *pool_; }

 private:
  // wait_for is both waits; `none_named`: known that none of `tasks` runs on a named thread.
  void wait_for(std::span<const graph_event_ref> tasks, named_threads::type current, bool none_named);

  scheduler* pool_;
};

// async_task is Unreal's AsyncTask: run `function` (void()) on `thread`, fire and forget.
// An exception it throws is reported as unhandled.
template <class F>
void async_task(named_threads::type thread, F&& function) {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "async_task takes a void() callable");
  (void)magpie::launch("async_task", std::forward<F>(function), placement_for(thread, "async_task"));
}

}  // namespace magpie::taskgraph
