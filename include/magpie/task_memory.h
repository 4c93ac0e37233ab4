// Layer 1 — the memory behind tasks: each thread's task pool (detail/task_pool.h) keeps
// the 64 KiB slabs it carved blocks from, so that a burst of a million tasks is paid for
// once. trim_task_memory hands back what such a burst left behind:
//
//   launch_a_million_tasks();           // the launching thread's pool grows to ~128 MiB
//   magpie::wait_all(handles);
//   handles.clear();
//   magpie::trim_task_memory();         // the slabs with no live block go back to the system
//
// A thread trims its own pool (a thread's free lists are its own); worker threads trim
// theirs when they exit, at scheduler shutdown.
#pragma once

#include <magpie/detail/language.h>

#include <cstddef>

namespace magpie {

// trim_task_memory frees the calling thread's task-pool slabs that hold no live block,
// and returns how many bytes that gave back. It walks the thread's free blocks (about a
// millisecond per 30,000): call it after a burst, not per frame.
std::size_t trim_task_memory() noexcept;

// task_memory_held is how many bytes of slabs the calling thread's task pool holds.
std::size_t task_memory_held() noexcept;

}  // namespace magpie
