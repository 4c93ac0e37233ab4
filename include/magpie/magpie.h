// magpie — a work-stealing task scheduler with Unreal Engine's task semantics.
// Including this header reaches every public header.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/async.h>
#include <magpie/cancellation.h>
#include <magpie/concurrency_limiter.h>
#include <magpie/config.h>
#include <magpie/coroutine.h>
#include <magpie/delegate.h>
#include <magpie/diagnostics.h>
#include <magpie/parallel_for.h>
#include <magpie/pipe.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/task_group.h>
#include <magpie/task_memory.h>
#include <magpie/taskgraph.h>
#include <magpie/thread_pool.h>
#include <magpie/tick_manager.h>
#include <magpie/timer_manager.h>
#include <magpie/trace.h>
#include <magpie/wait.h>
#include <magpie/world.h>
