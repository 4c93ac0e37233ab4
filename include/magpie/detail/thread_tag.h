// Per-thread facts that inline code (task_group's spawn and join) reads cheaply.
//
// task_group asks "am I on the thread that made this group, and is the deque it remembered
// still mine?" on every spawn and join; std::this_thread::get_id() is a call, these are
// thread-pointer-relative loads.
#pragma once

#include <cstdint>

namespace magpie::detail {

// thread_tag is never read or written: only its address matters. Constant-initialised,
// so an access needs no guard and no call.
extern constinit thread_local char thread_tag;

// this_thread_tag names the calling thread among living threads (a dead thread's may be
// reused by a new one).
inline const void* this_thread_tag() noexcept { return &thread_tag; }

// own_deque_generation changes whenever the calling thread's own deque may change: when it
// starts as a worker, attaches as a named thread or detaches. Zero on a thread that has
// done none of these (a new thread that reuses a dead one's tag starts at zero too); never
// the same value on two threads, or twice on one.
extern constinit thread_local std::uint64_t own_deque_generation;

// renew_own_deque_generation gives the calling thread a fresh generation.
void renew_own_deque_generation() noexcept;

}  // namespace magpie::detail
