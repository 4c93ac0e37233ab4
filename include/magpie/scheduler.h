// Layer 2 — the scheduler: worker threads, injection queues, priorities, parking,
// standby workers, named threads and shutdown.
//
//   magpie::scheduler pool({.workers = 4, .background_workers = 1});  // 4 workers, 1 of them background
//   auto answer = pool.launch("answer", [] { return 42; });  // magpie/task.h; any thread
//   int result = pool.execute([] { return fib(30); });  // on this thread, as one of pool's
//
//   pool.attach(magpie::named_thread::game);          // on the game thread
//   pool.launch("draw", draw, magpie::on_thread(magpie::named_thread::game));  // runs on the game thread
//   pool.process_until_idle(magpie::named_thread::game);
//
// Work arrives as work items (internal); tasks (magpie/task.h) are the way in.
// A worker pushes normal-priority work onto its own Chase-Lev deque (LIFO for itself,
// stolen FIFO by the others); every other launch goes through a per-priority injection
// queue. Idle workers spin briefly, then park on an event count; a launch that finds
// nobody parked costs one fence and one load. See docs/scheduler.md.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/chaos_options.h>
#include <magpie/detail/work_item.h>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace magpie {

namespace detail {
struct scheduler_access;
}

// priority orders work: a dequeue point always takes higher priorities first. Background
// priorities run only on background workers (and threads that help while waiting).
enum class priority : std::uint8_t { high, normal, background_high, background_normal, background_low };

// priority_count is the number of priorities.
inline constexpr std::size_t priority_count = 5;

// is_background says whether `p` is one of the three background priorities.
constexpr bool is_background(priority p) noexcept { return p >= priority::background_high; }

// worker_kind says which priorities a worker takes: foreground workers take high and
// normal work; background workers take all five, high first.
enum class worker_kind : std::uint8_t { foreground, background };

// worker_info describes a worker thread to the start and exit hooks.
struct worker_info {
  unsigned index;      // 0-based within its kind; standby workers are numbered apart
  // kind says which priorities the worker takes.
  worker_kind kind;
  bool standby;        // a standby worker covering for a blocked one
};

// default_worker_count is N − 1 when the environment says MAGPIE_NUM_THREADS=N (N ≥ 1
// threads of foreground work counting the caller, as OpenMP's OMP_NUM_THREADS), else
// hardware threads − 1 (the caller being the main thread), at least 1. It reads the
// environment on every call; a value that is not a count from 1 to 65536 is reported once
// and ignored.
unsigned default_worker_count() noexcept;

// thread_count is a number of threads, taken from any integer type without a cast (a
// benchmark's std::int64_t argument, say). A value below zero or beyond `unsigned` throws
// std::out_of_range naming it (in a constant expression: a compile error).
class thread_count {
 public:
  // thread_count() is zero threads.
  constexpr thread_count() noexcept = default;
  // thread_count(count) takes `count` from any integer type but bool, range-checked; it is
  // implicit so that `.workers = n` compiles.
  template <std::integral Integer>
    requires(!std::same_as<std::remove_cv_t<Integer>, bool>)
  constexpr thread_count(Integer count) : value_(checked(count)) {}
  // operator unsigned is the count.
  constexpr operator unsigned() const noexcept { return value_; }

 private:
  template <class Integer>
  static constexpr unsigned checked(Integer count) {
    if (!std::in_range<unsigned>(count)) {
      throw std::out_of_range("magpie: thread count " + std::to_string(count) + " is out of range (0 to " +
                              std::to_string(~0u) + ")");
    }
    return static_cast<unsigned>(count);
  }
  unsigned value_ = 0;
};

// scheduler_options configures a scheduler. Every field has a default, so a designated
// initialiser may name any of them (`{.workers = 2}`).
struct scheduler_options {
  // workers is how many worker threads run foreground (high and normal) work; the thread
  // that waits takes part too, so `{.workers = n - 1}` runs n threads of it. 0: work runs
  // on waiting threads only.
  thread_count workers = default_worker_count();
  // background_workers is how many of `workers` also take background work: a part of them,
  // not added to them (UE's background workers are a subset of its workers). At most
  // `workers`: more mean all of them.
  thread_count background_workers = 1;
  // Cap per kind on the standby workers that keep the pool at full width while workers
  // block; default: that kind's pool size (UE: 2× the pool). Past it one more runs only when
  // every thread of the kind is blocked (docs/scheduler.md, "Waiting inside a task").
  std::optional<thread_count> max_standby_workers{};
  // spin_for is how long an idle worker keeps looking before it parks: long enough that a
  // producer launching one job at a time does not pay a futex wake per job, short enough
  // to leave an idle process at ~0 % CPU. A worker that stole since its last search spins
  // four times as long (docs/scheduler.md, "Idle → parked"). Values above 10 ms are taken
  // as 10 ms (an idle worker still parks); zero or less: no spin.
  std::chrono::microseconds spin_for{50};
  std::function<void(const worker_info&)> on_worker_start{};  // run on each worker thread first (names, affinity, profilers)
  std::function<void(const worker_info&)> on_worker_exit{};   // run on each worker thread last
  // chaos turns chaos mode on for the whole process from this scheduler's construction
  // (magpie/chaos.h, where chaos_options is chaos::options); MAGPIE_CHAOS in the
  // environment does the same without a code change.
  std::optional<chaos_options> chaos{};
  // stall_report_after is how long a blocking wait on this scheduler's work or by one of
  // its threads (workers, attached threads, callers of execute), or its shutdown, may go
  // without progress before it is reported (once; diagnostic_kind::stalled, a warning)
  // naming what it waits for and the waiting thread; 0 turns the report off.
  // MAGPIE_STALL_REPORT_MS in the environment overrides it. Only a thread about to block
  // looks at the clock for it.
  std::chrono::milliseconds stall_report_after{5000};
};

// named_thread identifies a thread the user owns that drains its own queues: the four
// engine threads, or user-defined ones (`named_thread::user(n)`).
class named_thread {
 public:
  // max_count is how many named threads one scheduler serves (4 engine + 12 user).
  static constexpr std::uint32_t max_count = 16;

  // game is Unreal's game thread.
  static const named_thread game;
  // render is Unreal's rendering thread.
  static const named_thread render;
  // rhi is Unreal's RHI thread.
  static const named_thread rhi;
  // audio is Unreal's audio thread.
  static const named_thread audio;

  // user is the n-th user-defined named thread (n < 12).
  static constexpr named_thread user(std::uint32_t n) noexcept { return named_thread(4 + n); }

  // named_thread(index) and index convert between a named thread and its index (0–3: the
  // engine threads, 4 and up: user threads).
  constexpr explicit named_thread(std::uint32_t index) noexcept : index_(index) {}
  constexpr std::uint32_t index() const noexcept { return index_; }
  friend constexpr bool operator==(named_thread, named_thread) = default;

 private:
  std::uint32_t index_;
};

inline constexpr named_thread named_thread::game{0};
inline constexpr named_thread named_thread::render{1};
inline constexpr named_thread named_thread::rhi{2};
inline constexpr named_thread named_thread::audio{3};

// thread_queue picks one of a named thread's two queues: `main`, or `local` — work only
// that thread may pick up, e.g. while it waits without running arbitrary main-queue work.
enum class thread_queue : std::uint8_t { main, local };

// scheduler_counters is a snapshot for tests and tracing.
struct scheduler_counters {
  std::uint64_t executed;   // work items run by workers
  std::uint64_t stolen;     // of those, taken from another worker's deque
  unsigned parked_workers;  // workers (standby included) asleep right now
  unsigned standby_workers; // standby threads created so far
  unsigned blocked_workers; // workers inside a blocking_scope right now
};

// scheduler owns worker threads and the queues they drain. Several may live in one
// process (up to 256 at once); `default_scheduler()` is the lazily created shared one.
class scheduler {
 public:
  // scheduler starts the workers. Throws std::length_error when 256 schedulers are alive,
  // counting destroyed ones some of whose tasks are still alive (see ~scheduler).
  explicit scheduler(scheduler_options options = {});

  // ~scheduler calls shutdown(). Tasks of this scheduler may outlive it (handles kept): one
  // that becomes ready afterwards (behind an event triggered later) is reported and
  // completes holding task_never_ran, and until the last of them is gone the scheduler
  // still counts against the 256. What makes such a task ready must not race with the
  // destruction itself: it happens before the destructor starts or after it returns.
  //
  // A thread outside the pool may wait for this scheduler's tasks while it is destroyed:
  // a body it runs of them (retraction) is this scheduler's work, and the destructor
  // returns only after it (and what it launched) has run; from the moment every worker is
  // idle, such threads start none of its work any more (their waits are served by the pool
  // and the destroying thread). Nothing of the scheduler is freed while they can reach it.
  //
  // Destroyed on a thread attached to it as a named thread (a game thread that never
  // detaches), it detaches that thread after the shutdown, without a report: the thread
  // may then attach to another scheduler, and launches from it go to the default scheduler
  // again. A named thread still attached on another thread cannot be detached from here:
  // that is reported as misuse. That thread must not touch this scheduler again; its next
  // current() (which the free launch goes through), current_named_thread(), attach() or
  // blocking wait detaches it with a warning and goes on as a thread attached to none.
  ~scheduler();

  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // shutdown stops accepting work from outside (a launch from a thread that is not running
  // this scheduler's work is reported and discarded), lets running work launch more, runs
  // everything launched, reports by name and abandons coroutines still suspended behind
  // work that never completed (magpie/coroutine.h), reports by name and discards work
  // stranded in named-thread queues, and joins the workers. Idempotent.
  void shutdown();

  // worker_count is the number of workers: every one runs foreground work.
  unsigned worker_count() const noexcept;

  // background_worker_count is how many of the workers also take background work.
  unsigned background_worker_count() const noexcept;

  // counters takes a snapshot of the scheduler's counters.
  scheduler_counters counters() const noexcept;

  // launch starts `body` as a task on this scheduler and returns its handle:
  // launch(name, body [, prerequisites] [, placement]). Defined in <magpie/task.h>.
  template <class Body, class... Options>
  auto launch(const char* name, Body&& body, Options&&... options);

  // try_run_one runs one queued item on the calling thread, if it finds one: how waiting
  // threads help, and how work runs at all with zero workers. Returns whether it ran one.
  bool try_run_one();

  // attach registers the calling thread as `thread` for this scheduler. Called inside a work
  // item or task body the thread runs, it is reported as misuse and ignored.
  void attach(named_thread thread);

  // detach undoes attach for the calling thread. Called from inside the processing of one
  // of the thread's own queues (process_until_idle / process_until_request_return), or
  // inside any work item or task body the thread runs, it is reported as misuse and
  // ignored: return from the processing call (or the item) first.
  void detach();

  // process_until_idle runs `thread`'s queue until it is empty and returns how many items
  // ran. Only on that thread; re-entering a queue already being processed is reported.
  std::size_t process_until_idle(named_thread thread, thread_queue queue = thread_queue::main);

  // process_until_request_return runs `thread`'s queue, sleeping when it is empty, until
  // request_return is called for it. Same rules as process_until_idle.
  void process_until_request_return(named_thread thread, thread_queue queue = thread_queue::main);

  // request_return makes process_until_request_return on `thread` return once it has run
  // what is queued. Any thread.
  void request_return(named_thread thread, thread_queue queue = thread_queue::main);

  // is_processing says whether `thread` is inside a process_* call for `queue`.
  bool is_processing(named_thread thread, thread_queue queue = thread_queue::main) const noexcept;

  // is_attached says whether some thread is attached as `thread` to this scheduler now.
  bool is_attached(named_thread thread) const noexcept;

  // current is the scheduler the calling thread works for (as a worker, while running its
  // work, inside its execute(), or attached as a named thread), or nullptr.
  static scheduler* current() noexcept;

  // execute runs `f` on the calling thread as one of this scheduler's threads and returns
  // its result (oneTBB's task_arena::execute); an exception `f` throws propagates. The
  // scheduler follows the work: every task_group, parallel loop and free launch inside
  // `f`, at any depth and on whichever thread runs the pieces, uses this scheduler. It
  // nests (execute of another scheduler inside, and back); on one of this scheduler's own
  // threads it just calls `f`. On a scheduler that is shutting down it is reported as
  // misuse and `f` runs as if called directly.
  template <class F>
  auto execute(F&& f) -> std::invoke_result_t<F>;

  // current_named_thread is the named thread the calling thread is attached as, if any.
  static std::optional<named_thread> current_named_thread() noexcept;

  struct impl;

 private:
  friend struct detail::scheduler_access;

  // schedule queues `item` at priority `p`. From this scheduler's worker, normal work goes
  // to that worker's deque; everything else to the injection queue of its priority.
  void schedule(detail::work_item* item, priority p = priority::normal);

  // schedule queues `item` on a named thread's queue (FIFO per producer; high first).
  void schedule(detail::work_item* item, named_thread thread,
                thread_queue queue = thread_queue::main, bool high_priority = false);

  // execute_erased is execute's out-of-line part: `call(state)` in this scheduler's context.
  void execute_erased(void (*call)(void*), void* state);
  std::unique_ptr<impl> impl_;
};

namespace detail {
// schedule_item queues a work item on `owner` at priority `p` (from one of its workers,
// normal work goes to that worker's deque; else to the injection queue of its priority):
// for magpie's own layers and tests, which make work items; users launch tasks.
void schedule_item(scheduler& owner, work_item* item, priority p = priority::normal);

// schedule_item with a named thread queues `item` on that thread's queue (FIFO per
// producer; high first).
void schedule_item(scheduler& owner, work_item* item, named_thread thread,
                   thread_queue queue = thread_queue::main, bool high_priority = false);

// awaited_work describes, for reports, what a named thread's processing loop waits for:
// describe(state) names it ("task 'load'", "tasks 'a', 'b' and 2 more"); unattached_reported:
// the caller has reported already that it needs a named thread no thread has attached.
struct awaited_work {
  std::string (*describe)(const void* state);
  const void* state;
  bool unattached_reported = false;
};

// process_until_return_for is process_until_request_return for magpie's own layers waiting
// on a named thread (Unreal's return-task pattern): it also reports, as a blocking wait
// does, a wait that needs a named thread no thread has attached and a wait that makes no
// progress for stall_report_after, naming `awaited` and the calling thread.
void process_until_return_for(scheduler& owner, named_thread thread, thread_queue queue,
                              const awaited_work& awaited);
}  // namespace detail

template <class F>
auto scheduler::execute(F&& f) -> std::invoke_result_t<F> {
  using result = std::invoke_result_t<F>;
  using callable = std::remove_reference_t<F>;
  if constexpr (std::is_void_v<result>) {
    // Through a struct: a function named as itself has a function pointer for its address,
    // which does not convert to void*.
    struct call_state {
      callable* function;
    } state{std::addressof(f)};
    execute_erased([](void* erased) { std::invoke(std::forward<F>(*static_cast<call_state*>(erased)->function)); },
                   &state);
  } else {
    // A reference result is kept as a pointer; a value is moved out once.
    using kept = std::conditional_t<std::is_reference_v<result>, std::remove_reference_t<result>*,
                                    std::optional<result>>;
    struct call_state {
      callable* function;
      kept out;
    } state{std::addressof(f), kept{}};
    execute_erased(
        [](void* erased) {
          auto& each = *static_cast<call_state*>(erased);
          if constexpr (std::is_reference_v<result>) {
            result kept_result = std::invoke(std::forward<F>(*each.function));
            each.out = std::addressof(kept_result);
          } else {
            each.out.emplace(std::invoke(std::forward<F>(*each.function)));
          }
        },
        &state);
    if constexpr (std::is_reference_v<result>) {
      return static_cast<result>(*state.out);
    } else {
      return std::move(*state.out);
    }
  }
}

// blocking_scope brackets a blocking call made on a worker thread: while it lives, a
// standby worker takes the blocked worker's place (up to the cap, whose reaching is
// reported; past it, a standby runs only when every thread of the pool is blocked, so the
// pool narrows but never stops). On any thread, it first puts back on the queues the tasks
// a wait_all of this thread took and has not begun yet, so that others can run them.
//
//   { magpie::blocking_scope blocked; event.wait(); }
class blocking_scope {
 public:
  blocking_scope();
  ~blocking_scope();
  blocking_scope(const blocking_scope&) = delete;
  blocking_scope& operator=(const blocking_scope&) = delete;

 private:
  void* pool_;
};

// default_scheduler is the process-wide scheduler, created on first use (with the options
// set_default_scheduler_options gave, else default ones: MAGPIE_NUM_THREADS applies, see
// default_worker_count) and never destroyed (its workers are parked when idle and end with
// the process).
scheduler& default_scheduler();

// set_default_scheduler_options sets the options default_scheduler() will be made with.
// Only before its first use: once it exists the call is reported as misuse and ignored.
// Returns whether the options were taken.
bool set_default_scheduler_options(scheduler_options options);

}  // namespace magpie
