// Per-thread facts that inline code (task_group's spawn and join) reads cheaply.
//
// task_group asks "am I on the thread that made this group, and is the deque it remembered
// still mine?" on every spawn and join; std::this_thread::get_id() is a call, these are
// thread-pointer-relative loads of the thread's context (thread_context.h).
#pragma once

#include <magpie/detail/thread_context.h>

#include <cstdint>

namespace magpie::detail {

// this_thread_tag names the calling thread among living threads (a dead thread's may be
// reused by a new one): the address of its context, which is never read through it.
inline const void* this_thread_tag() noexcept { return &current_thread_context; }

// this_thread_deque_generation is the calling thread's own-deque generation
// (thread_context::own_deque_generation).
inline std::uint64_t this_thread_deque_generation() noexcept { return current_thread_context.own_deque_generation; }

// renew_own_deque_generation gives the calling thread a fresh generation.
void renew_own_deque_generation() noexcept;

}  // namespace magpie::detail
