// A per-thread address that names the calling thread, readable from inline code.
//
// task_group asks "am I on the thread that made this group?" on every spawn and join;
// std::this_thread::get_id() is a call, this is one thread-pointer-relative address.
#pragma once

namespace magpie::detail {

// thread_tag is never read or written: only its address matters. Constant-initialised,
// so an access needs no guard and no call.
extern constinit thread_local char thread_tag;

// this_thread_tag is unique among living threads (a dead thread's may be reused).
inline const void* this_thread_tag() noexcept { return &thread_tag; }

}  // namespace magpie::detail
