// What a thread knows about the scheduler it works for, in a header so that inline code
// (task_group's constructor, on every fork) reads it without a call. Written only by
// lib/: a worker's start, attach/detach, and the two places that run another scheduler's
// work (which hide the deque while they do).
#pragma once

#include <magpie/detail/deque.h>
#include <magpie/detail/work_item.h>
#include <magpie/scheduler.h>

#include <atomic>

namespace magpie {
struct worker;  // lib/scheduler/scheduler_impl.h
}

namespace magpie::detail {

struct thread_context {
  scheduler::impl* owner = nullptr;  // set for workers, attached threads and helpers
  worker* self = nullptr;            // set on worker threads
  unsigned running = 0;              // depth of work items this thread runs as a non-worker
  unsigned helping = 0;              // depth of try_run_one calls on this thread
  // depth of waits that hold queued work out of its queues meanwhile (a concurrency
  // limiter's runner): what runs beneath one may wait for that work, so a wait there is
  // not at top level (lib/tasks/wait_launch_order.cpp).
  unsigned holding = 0;
  int named = -1;                    // attached named thread index, or -1
  magpie::scheduler* facade = nullptr;
  // own_deque's answer for `owner`, kept beside `self` and `named` so the launch and wait
  // paths read one field instead of working it out from them.
  work_stealing_deque<work_item*>* deque = nullptr;
  // While `deque` is set: what a push onto it must check first (an attached thread's
  // scheduler may stop accepting work from outside; nullptr on a worker), and whether
  // the scheduler has workers to wake for what is pushed.
  const std::atomic<bool>* push_gate = nullptr;
  bool wakes_workers = false;
  // A worker or standby thread of some scheduler, whichever scheduler's work it runs now
  // (running another's, `self` is hidden): its stack is the pool's, not the user's.
  bool pool_thread = false;
};

// The calling thread's context: constant-initialised, so every access is one
// thread-pointer-relative load (no guard, no call) — it sits on the spawn and launch paths.
// Inline code in public headers reads its fields by name and never binds a reference or a
// pointer to it: compiled into a consumer's GCC 12 build with -fsanitize=address,undefined,
// the null check of such a reference can branch on the flags of the address check before
// it and report a null thread_context where there is none.
extern constinit thread_local thread_context current_thread_context;

}  // namespace magpie::detail
