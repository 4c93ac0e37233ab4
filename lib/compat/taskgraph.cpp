// The TaskGraph layer's compiled part: graph events, the interface over a scheduler (named
// threads, waits), and its misuse reports. Public headers only, like any user's code
// (tools/check_layers.py).
#include <magpie/diagnostics.h>
#include <magpie/taskgraph.h>
#include <magpie/wait.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace magpie::taskgraph {

namespace {

// The render thread is the game thread until a rendering thread says otherwise.
std::atomic<std::uint32_t> render_thread{named_threads::game_thread};

std::string thread_name(named_threads::type thread) {
  std::uint32_t index = thread & named_threads::thread_index_mask;
  std::string name;
  switch (index) {
    case named_threads::rhi_thread: name = "rhi_thread"; break;
    case named_threads::game_thread: name = "game_thread"; break;
    case named_threads::actual_rendering_thread: name = "actual_rendering_thread"; break;
    case named_threads::audio_thread: name = "audio_thread"; break;
    case named_threads::any_thread: name = "any_thread"; break;
    default: name = "thread " + std::to_string(index); break;
  }
  if (named_threads::get_queue_index(thread) != 0) name += " (local queue)";
  return name;
}

void report_taskgraph_misuse(const std::string& message) { report(diagnostic_kind::misuse, "taskgraph: " + message); }

// named_or_report is the magpie named thread `thread` names, or empty (reported) when it
// names none: the interface's per-thread calls need a real named thread.
std::optional<named_thread> named_or_report(named_threads::type thread, const char* operation) {
  if (named_threads::get_thread_index(thread) != named_threads::any_thread && named_threads::is_named(thread)) {
    return named_threads::to_named_thread(thread);
  }
  report_taskgraph_misuse(std::string(operation) + "(" + thread_name(thread) + "): not a named thread; ignored");
  return std::nullopt;
}

// brief_looks is how many times a named thread's wait looks at what others are running,
// yielding in between, before it sends itself a return task and processes its queue.
constexpr int brief_looks = 32;

// retraction_chunk is how many tasks a named thread's wait hands wait_all at a time: one
// run of the deque's (lib/tasks/task_wait.cpp takes back at most 64 at once).
constexpr std::size_t retraction_chunk = 64;

// retract_newest_first takes back and runs what it can of `run` without blocking, newest
// first as wait_all does, a chunk at a time, and returns how many of the oldest it left
// unseen or not complete: everything after them completed. In a batch just launched the
// newest lie on this thread's deque and the oldest went to workers, so what is left is
// looked at once more, and what was run here is not.
std::size_t retract_newest_first(std::span<const graph_event_ref> run) {
  std::size_t left = run.size();
  while (left != 0) {
    std::size_t first = left > retraction_chunk ? left - retraction_chunk : 0;
    if (!magpie::wait_all(run.subspan(first, left - first), std::chrono::nanoseconds(0))) break;
    left = first;
  }
  return left;
}

bool all_complete(std::span<const graph_event_ref> tasks) noexcept {
  for (const graph_event_ref& each : tasks) {
    if (!each->is_complete()) return false;
  }
  return true;
}

// report_unattached_need reports, once for a wait, the first of `pending` that runs only on
// a named thread no thread has attached to `pool`: the waiting named thread would process
// its own queue until one attaches, and without a word nobody would know why it hangs.
// Whether it reported one.
bool report_unattached_need(const scheduler& pool, std::span<const task<>> pending, named_thread waiting) {
  for (const task<>& each : pending) {
    std::optional<named_thread> bound = each.runs_on();
    if (!bound || pool.is_attached(*bound)) continue;
    std::string needed = thread_name(named_threads::from_named_thread(*bound));
    report(diagnostic_kind::misuse,
           "taskgraph: a wait on " + thread_name(named_threads::from_named_thread(waiting)) + " waits for task '" +
               each.name() + "', which runs only on " + needed + ", and no thread has attached as " + needed +
               " to this scheduler: the wait goes on until a thread attaches as " + needed + " and runs its queue",
           severity::warning);
    return true;
  }
  return false;
}

// describe_pending names, for a wait's reports, the tasks (a std::vector<task<>> at
// `state`) a named thread's wait is waiting for: the first three, and how many more.
std::string describe_pending(const void* state) {
  const auto& pending = *static_cast<const std::vector<task<>>*>(state);
  constexpr std::size_t named_at_most = 3;
  std::string text = pending.size() == 1 ? "taskgraph: task " : "taskgraph: tasks ";
  for (std::size_t at = 0; at < pending.size() && at < named_at_most; ++at) {
    if (at != 0) text += ", ";
    // appended piecewise, not "'" + string: GCC 12's -Wrestrict misfires on that at -O3
    text += '\'';
    text += pending[at].name();
    text += '\'';
  }
  if (pending.size() > named_at_most) text += " and " + std::to_string(pending.size() - named_at_most) + " more";
  return text;
}

}  // namespace

named_threads::type named_threads::get_render_thread() noexcept {
  // acquire: pairs with set_render_thread's release (the setter attached first)
  return static_cast<type>(render_thread.load(std::memory_order_acquire));
}

void named_threads::set_render_thread(type t) noexcept {
  render_thread.store(t, std::memory_order_release);  // release: pairs with get_render_thread's acquire
}

namespace internal {

void report_bad_thread(named_threads::type desired, const char* operation) {
  report_taskgraph_misuse(std::string(operation) + ": " + thread_name(desired) +
                " is neither any_thread nor one of magpie's 16 named threads; running it on any thread");
}

void report_misuse(const char* message) { report_taskgraph_misuse(message); }

}  // namespace internal

graph_event_ref graph_event::create_graph_event() { return graph_event_ref(task_event("graph_event")); }

void graph_event::dispatch_subsequents() {
  if (task_event* event = this->event()) {
    event->trigger();
    return;
  }
  if (!is_valid()) {
    report_taskgraph_misuse("dispatch_subsequents on an empty graph_event_ref; ignored");
    return;
  }
  report_taskgraph_misuse(std::string("dispatch_subsequents on the completion event of graph task '") + name() +
                "', which completes when its do_task returns; ignored");
}

void graph_event::dispatch_subsequents(named_threads::type) { dispatch_subsequents(); }

void graph_event::dont_complete_until(graph_event_ref other) {
  if (!is_valid()) {
    report_taskgraph_misuse("dont_complete_until on an empty graph_event_ref; ignored");
    return;
  }
  if (!other.is_valid()) return;  // nothing to wait for
  if (is_in_task() && static_cast<const task<>&>(*this) == this_task()) {
    add_nested(other);
    return;
  }
  if (task_event* event = this->event()) {
    event->add_prerequisites(static_cast<const task<>&>(other));  // after dispatch: reported by the event
    return;
  }
  report_taskgraph_misuse(std::string("dont_complete_until on graph task '") + name() +
                "' from outside its do_task; ignored (only a running task can wait for nested work)");
}

void graph_event::wait(named_threads::type current_thread_if_known) {
  if (current_thread_if_known == named_threads::any_thread) {
    // Retraction first, through this handle, as every wait here begins; from a thread that
    // names none, magpie's wait does the rest. (A thread named is checked even when the
    // event is complete: below.)
    if (is_completed() || (try_retract_and_execute() && is_completed())) return;
    if (!scheduler::current_named_thread()) {
      task<>::wait();
      return;
    }
  }
  scheduler* mine = scheduler::current();
  task_graph_interface here(mine != nullptr ? *mine : default_scheduler());
  here.wait_until_task_completes(graph_event_ref(as_task()), current_thread_if_known);
}

void return_graph_task::do_task(named_threads::type current_thread, const graph_event_ref&) {
  scheduler* pool = scheduler::current();
  std::optional<named_thread> me = scheduler::current_named_thread();
  named_threads::type wanted = named_threads::get_thread_index(thread_);
  if (wanted == named_threads::any_thread || pool == nullptr || !me ||
      named_threads::from_named_thread(*me) != wanted) {
    report_taskgraph_misuse("return_graph_task for " + thread_name(thread_) + " ran on " + thread_name(current_thread) +
                  "; nothing to return from");
    return;
  }
  pool->request_return(*me, named_threads::queue_of(thread_));
}

task_graph_interface& task_graph_interface::get() {
  static task_graph_interface over_default(default_scheduler());
  return over_default;
}

void task_graph_interface::attach_to_thread(named_threads::type thread) {
  if (auto named = named_or_report(thread, "attach_to_thread")) pool_->attach(*named);
}

std::uint64_t task_graph_interface::process_thread_until_idle(named_threads::type thread) {
  if (auto named = named_or_report(thread, "process_thread_until_idle")) {
    return pool_->process_until_idle(*named, named_threads::queue_of(thread));
  }
  return 0;
}

void task_graph_interface::process_thread_until_request_return(named_threads::type thread) {
  if (auto named = named_or_report(thread, "process_thread_until_request_return")) {
    pool_->process_until_request_return(*named, named_threads::queue_of(thread));
  }
}

void task_graph_interface::request_return(named_threads::type thread) {
  if (auto named = named_or_report(thread, "request_return")) {
    pool_->request_return(*named, named_threads::queue_of(thread));
  }
}

bool task_graph_interface::is_thread_processing_tasks(named_threads::type thread) const {
  if (named_threads::get_thread_index(thread) == named_threads::any_thread || !named_threads::is_named(thread)) {
    return false;
  }
  return pool_->is_processing(named_threads::to_named_thread(thread), named_threads::queue_of(thread));
}

named_threads::type task_graph_interface::get_current_thread_if_known(bool local_queue) const {
  if (scheduler::current() != pool_) return named_threads::any_thread;
  std::optional<named_thread> named = scheduler::current_named_thread();
  if (!named) return named_threads::any_thread;
  named_threads::type index = named_threads::from_named_thread(*named);
  return local_queue ? static_cast<named_threads::type>(index | named_threads::local_queue) : index;
}

bool task_graph_interface::is_current_thread_known() const {
  return get_current_thread_if_known() != named_threads::any_thread;
}

int task_graph_interface::get_num_worker_threads() const {
  return static_cast<int>(pool_->worker_count());
}

void task_graph_interface::wait_until_task_completes(const graph_event_ref& task, named_threads::type current) {
  wait_for(std::span<const graph_event_ref>(&task, 1), current, !task.may_run_on_named_thread());
}

void task_graph_interface::wait_until_tasks_complete(const graph_event_array& tasks, named_threads::type current) {
  wait_for(std::span<const graph_event_ref>(tasks.data(), tasks.size()), current, !tasks.may_hold_named_thread_tasks());
}

void task_graph_interface::wait_for(std::span<const graph_event_ref> tasks, named_threads::type current,
                                    bool none_named) {
  // may_run_on_named is each task's may_run_on_named_thread, unless none is.
  auto may_run_on_named = [none_named](const graph_event_ref& one) {
    return !none_named && one.may_run_on_named_thread();
  };
  // The named thread the caller is of this interface's scheduler, if any.
  std::optional<named_thread> attached;
  if (scheduler::current() == pool_) attached = scheduler::current_named_thread();
  bool named = attached.has_value();
  named_thread thread = attached.value_or(named_thread::game);  // used only when `named`
  thread_queue queue = thread_queue::main;
  named_threads::type index = named_threads::get_thread_index(current);
  if (index != named_threads::any_thread) {
    if (!named || named_threads::from_named_thread(thread) != index) {
      report_taskgraph_misuse("wait_until_tasks_complete(" + thread_name(current) +
                              ") called on a thread that is not that named thread of this scheduler; "
                              "waiting without processing its queue");
      named = false;
    } else {
      queue = named_threads::queue_of(current);
    }
  }
  // Done already? Only when the newest is: in a batch just launched it is not (the oldest
  // have run on workers meanwhile, and a walk through them would read each task once more
  // than the wait below does).
  if (tasks.empty() || (tasks.back().is_completed() && all_complete(tasks))) return;
  // Unreal's return-task pattern: a task on this thread's own queue, behind everything
  // waited for, ends the processing loop, so all of the queue's work runs meanwhile. Not
  // on a queue this thread is already processing (never re-entered), and not without
  // workers, where nobody else would run what the return task waits for: there the wait
  // retracts it instead.
  bool has_workers = pool_->worker_count() > 0;
  if (named && has_workers && !pool_->is_processing(thread, queue)) {
    // Retraction first, as Unreal's wait does: what has not started runs here, so only what
    // others are running is left to wait for. Tasks for a named thread run in the order
    // given (one producer's commands to this thread, waited for in the order sent, run in
    // that order). Any-thread tasks launched from here lie on this thread's deque: a
    // wait_all that does not block takes them back in runs, newest first, up to one it
    // cannot complete at once; only the tasks older than its chunk are looked at again.
    // Where each task runs is asked of its reference (may_run_on_named_thread), which knows
    // for the tasks this layer launched without reading them.
    std::vector<std::span<const graph_event_ref>> unfinished;  // the runs wait_all left
    bool named_tasks = false;  // retracted below, in order
    for (std::size_t at = 0; at < tasks.size();) {
      std::size_t end = at;
      if (none_named) end = tasks.size();
      while (end < tasks.size() && !may_run_on_named(tasks[end])) ++end;
      std::span<const graph_event_ref> run = tasks.subspan(at, end - at);
      if (std::size_t left = retract_newest_first(run); left != 0) unfinished.push_back(run.first(left));
      if (end < tasks.size()) named_tasks = true;
      at = end + 1;
    }
    if (unfinished.empty() && !named_tasks) return;
    std::vector<task<>> pending;
    auto retract_or_keep = [&pending](const task<>& one) {
      if (!one.is_completed() && (!one.try_retract_and_execute() || !one.is_completed())) pending.push_back(one);
    };
    for (std::span<const graph_event_ref> run : unfinished) {
      for (const graph_event_ref& each : run) retract_or_keep(each);
    }
    if (named_tasks) {
      for (const graph_event_ref& each : tasks) {
        if (may_run_on_named(each)) retract_or_keep(each);
      }
    }
    // A brief look before the return task: work a worker is finishing ends the wait without
    // a wake-up through the queue.
    for (int look = 0; look < brief_looks && !pending.empty(); ++look) {
      std::erase_if(pending, [](const task<>& one) { return one.is_completed(); });
      if (!pending.empty()) std::this_thread::yield();
    }
    if (pending.empty()) return;
    bool unattached_reported = report_unattached_need(*pool_, pending, thread);
    scheduler* pool = pool_;
    task<> returner = pool_->launch("return_graph_task", [pool, thread, queue] { pool->request_return(thread, queue); },
                                    pending, on_thread(thread, queue, true));
    // A return requested earlier by someone else ends a round early: go on until ours ran.
    // The loop reports, as a blocking wait does, a stall and a need of an unattached thread.
    detail::awaited_work awaited{describe_pending, &pending, unattached_reported};
    while (!returner.is_completed()) detail::process_until_return_for(*pool_, thread, queue, awaited);
    return;
  }
  if (tasks.size() == 1) {
    tasks[0].task<>::wait();  // through the caller's own handle
    return;
  }
  // A named thread's tasks first, one by one in the order given: wait_all goes newest first
  // where there are workers, and on their own thread would run one producer's commands in
  // reverse. Then the rest together.
  if (!none_named) {
    for (const graph_event_ref& each : tasks) {
      if (each.may_run_on_named_thread()) each.task<>::wait();
    }
  }
  magpie::wait_all(tasks);
}

void task_graph_interface::trigger_event_when_tasks_complete(task_event& event, const graph_event_array& tasks,
                                                             named_threads::type) {
  if (all_complete(std::span<const graph_event_ref>(tasks.data(), tasks.size()))) {
    event.trigger();
    return;
  }
  (void)pool_->launch("trigger_event_when_tasks_complete", [event]() mutable { event.trigger(); }, tasks, run_inline);
}

}  // namespace magpie::taskgraph
