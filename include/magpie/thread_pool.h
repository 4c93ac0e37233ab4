// Layer 4 — compatibility: Unreal's FQueuedThreadPool and IQueuedWork — a pool of its own
// threads for long or blocking work, so that such work never occupies magpie's task workers.
//
//   struct compress : magpie::queued_work {
//     void do_threaded_work() override { write(zip(data)); delete this; }
//     void abandon() override { delete this; }   // the pool was destroyed first
//   };
//   magpie::queued_thread_pool io;
//   io.create(2, 0, "io");
//   io.add_queued_work(new compress, magpie::queued_work_priority::high);
//   io.destroy();   // abandons what is still queued, lets running work finish, joins
//
// Work runs FIFO within a priority, higher priorities first. Idle threads park on a futex
// (std::atomic::wait): an idle pool uses no CPU. The queue is guarded by a mutex, as
// Unreal's is: retract_queued_work removes work from the middle of a queue, and queued
// work is coarse (blocking I/O, compression), so a lock-free queue would buy nothing that
// matters here. Launch short work as magpie tasks instead.
#pragma once

#include <magpie/detail/language.h>

#include <cstddef>
#include <memory>

namespace magpie {

// queued_work is Unreal's IQueuedWork: work for a queued_thread_pool. The pool never
// deletes it: do_threaded_work and abandon decide its fate.
class queued_work {
 public:
  // queued_work holds nothing: copying a derived work item copies only what it adds.
  queued_work() = default;
  // queued_work(const queued_work&) is declared because the destructor is: a class with a
  // user-declared destructor and implicit copies draws deprecation warnings.
  queued_work(const queued_work&) = default;
  // operator= copies nothing, as the copy constructor.
  queued_work& operator=(const queued_work&) = default;
  virtual ~queued_work();

  // do_threaded_work runs the work on a pool thread.
  virtual void do_threaded_work() = 0;

  // abandon is called instead when the pool is destroyed (or was) before the work started.
  virtual void abandon() = 0;
};

// queued_work_priority is Unreal's EQueuedWorkPriority: higher priorities run first.
enum class queued_work_priority { highest, high, normal, low, lowest };

// queued_thread_pool is Unreal's FQueuedThreadPool: threads of its own that run queued_work.
class queued_thread_pool {
 public:
  queued_thread_pool();

  // ~queued_thread_pool destroys the pool (abandons what is queued) if it still runs. Run
  // on one of the pool's own threads, which cannot join itself, it is reported and the pool
  // is left to its threads: they run what is queued, then end instead of waiting for more
  // (nobody can add any), and the last one frees what they share. Nobody joins them.
  ~queued_thread_pool();

  queued_thread_pool(const queued_thread_pool&) = delete;
  queued_thread_pool& operator=(const queued_thread_pool&) = delete;

  // create starts `threads` threads named `name` with `stack_size` bytes of stack (0: the
  // system's default). False, reported, if the pool runs already or `threads` is 0.
  bool create(unsigned threads, std::size_t stack_size = 0, const char* name = "pool");

  // destroy abandons the queued work (abandon() once each, highest priority first), lets
  // the running work finish and joins the threads. Work added afterwards is abandoned at
  // once. Calls from several threads at once all return after the join. Not from one of the
  // pool's own threads (reported and ignored). The pool may be created again.
  void destroy();

  // add_queued_work queues `work`; any thread. Before create() or after destroy() it is
  // abandoned at once (before create(), reported too).
  void add_queued_work(queued_work* work, queued_work_priority priority = queued_work_priority::normal);

  // retract_queued_work takes `work` back if no thread has started it: true, and the pool
  // will neither run nor abandon it.
  bool retract_queued_work(queued_work* work);

  // get_num_threads is the number of threads the pool runs.
  unsigned get_num_threads() const;

  // get_num_idle_threads is how many of them are parked, waiting for work.
  unsigned get_num_idle_threads() const;

  struct state;

 private:
  // stop_and_join is destroy(), saying whether it was done: false when called, as
  // `operation`, from one of the pool's own threads (reported).
  bool stop_and_join(const char* operation);

  // state_ is shared with the pool's threads: each holds it until it ends.
  std::shared_ptr<state> state_;
};

// global_queued_thread_pool is Unreal's GThreadPool: created on first use with one thread
// per hardware thread less one (at least one), never destroyed. Async's thread_pool
// execution runs there.
queued_thread_pool& global_queued_thread_pool();

}  // namespace magpie
