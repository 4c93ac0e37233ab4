"""The files the memory-order mutation sweep mutates, and the test suites that must kill the
mutants of each."""

from pathlib import Path

# ROOT is the checkout: this package lives in its tools/ folder.
ROOT = Path(__file__).resolve().parent.parent.parent

# The lock-free parts, in sweep priority order: templates with models first.
SCOPE = [
    "include/magpie/detail/deque.h",
    "include/magpie/detail/event_count.h",
    "include/magpie/detail/subsequent_list.h",
    "include/magpie/detail/task_state.h",
    "include/magpie/detail/task_base.h",
    "include/magpie/detail/task_pool.h",
    "include/magpie/detail/injection_queue.h",
    "include/magpie/detail/thread_context.h",
    "include/magpie/detail/work_item.h",
    "include/magpie/detail/atomics.h",
    "lib/tasks/task.cpp",
    "lib/tasks/task_references.cpp",
    "lib/tasks/task_launch.cpp",
    "lib/tasks/task_nesting.cpp",
    "lib/tasks/task_wait.cpp",
    "lib/tasks/wait_retraction.cpp",
    "lib/tasks/deque_owner_view.h",
    "lib/forkjoin/task_group.cpp",
    "lib/tasks/task_event.cpp",
    "lib/tasks/task_cycles.cpp",
    "lib/tasks/task_internal.h",
    "lib/scheduler/scheduler.cpp",
    "lib/scheduler/scheduler_shutdown.cpp",
    "lib/scheduler/scheduler_impl.h",
    "lib/scheduler/scheduler_slots.cpp",
    "lib/scheduler/scheduler_facade.cpp",
    "lib/tasks/pipe.cpp",
    "lib/primitives/task_pool.cpp",
    "lib/scheduler/task_census.cpp",
    "lib/scheduler/task_census.h",
    "lib/scheduler/lent_deques.cpp",
    "lib/scheduler/named_thread.cpp",
    "lib/tasks/concurrency_limiter.cpp",
]

# Test executables (test/<name>_test) whose cases exercise each file, most direct first.
# Each runs whole (fast and stress cases) under TSan with chaos; the first failure kills.
SUITES = {
    "include/magpie/detail/deque.h": ["deque", "scheduler", "lent_deques"],
    "include/magpie/detail/event_count.h": ["event_count", "scheduler", "wait"],
    "include/magpie/detail/subsequent_list.h": ["subsequent_list", "task", "task_prerequisites", "task_event"],
    "include/magpie/detail/task_state.h": ["task_state", "task", "task_prerequisites", "nested", "wait"],
    "include/magpie/detail/task_base.h": ["task", "task_prerequisites", "nested", "wait", "pipe", "pipe_wait"],
    "include/magpie/detail/task_pool.h": ["task_pool", "task", "task_prerequisites"],
    "include/magpie/detail/injection_queue.h": ["injection_queue", "scheduler"],
    "include/magpie/detail/thread_context.h": ["scheduler", "task_group", "task_group_threads"],
    "include/magpie/detail/work_item.h": ["scheduler"],
    "include/magpie/detail/atomics.h": ["event_count", "wait", "task", "task_prerequisites"],
    "lib/tasks/task.cpp": ["task", "task_prerequisites", "nested", "task_event", "pipe", "pipe_wait", "wait"],
    "lib/tasks/task_references.cpp": ["task", "task_prerequisites", "task_event", "wait", "nested"],
    "lib/tasks/task_launch.cpp": ["task", "task_prerequisites", "task_event", "pipe", "pipe_wait", "wait"],
    "lib/tasks/task_nesting.cpp": ["nested", "task", "task_prerequisites", "wait"],
    "lib/tasks/task_wait.cpp": ["wait", "task", "task_prerequisites", "nested"],
    "lib/tasks/wait_retraction.cpp": ["wait_retraction", "wait", "task", "task_prerequisites", "nested", "pipe", "pipe_wait"],
    "lib/tasks/deque_owner_view.h": ["deque", "wait_retraction", "held_runs", "wait_launch_order", "lent_deques"],
    "lib/forkjoin/task_group.cpp": ["task_group", "task_group_threads", "parallel_for"],
    "lib/tasks/task_event.cpp": ["task_event"],
    "lib/tasks/task_cycles.cpp": ["task", "task_prerequisites"],
    "lib/tasks/task_internal.h": ["task", "task_prerequisites", "pipe", "pipe_wait", "nested"],
    "lib/scheduler/scheduler.cpp": ["scheduler", "task", "task_prerequisites", "lent_deques", "wait"],
    "lib/scheduler/scheduler_shutdown.cpp": ["scheduler", "wait", "coroutine", "named_thread", "named_thread_shutdown"],
    "lib/scheduler/scheduler_impl.h": ["scheduler", "named_thread", "named_thread_shutdown", "lent_deques"],
    "lib/scheduler/scheduler_slots.cpp": ["scheduler", "lent_deques", "wait"],
    "lib/scheduler/scheduler_facade.cpp": ["scheduler"],
    "lib/tasks/pipe.cpp": ["pipe", "pipe_wait", "task", "task_prerequisites"],
    "lib/primitives/task_pool.cpp": ["task_pool", "task", "task_prerequisites"],
    "lib/scheduler/task_census.cpp": ["task", "task_prerequisites", "scheduler"],
    "lib/scheduler/task_census.h": ["task", "task_prerequisites", "scheduler"],
    "lib/scheduler/lent_deques.cpp": ["lent_deques", "scheduler"],
    "lib/scheduler/named_thread.cpp": ["named_thread", "named_thread_shutdown", "scheduler"],
    "lib/tasks/concurrency_limiter.cpp": ["concurrency_limiter", "concurrency_limiter_handover"],
}
