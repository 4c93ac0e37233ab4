// Private to lib/: what the fork-join layer keeps per thread, in one place.
//
// forkjoin_tls is constant-initialised and trivially destructible, so reading a field is
// one thread-pointer-relative load, as cheap as a thread_local of its own: no guard, no
// call, no destructor registration; nothing needs doing at thread exit, and a join or an
// await run from another thread_local's destructor finds the fields as they were.
//
// Outside it: the thread's tag and own-deque generation, which task_group's inline spawn
// and join read (include/magpie/detail/thread_tag.h).
#pragma once

#include <cstdint>

namespace magpie::detail {

// max_foreign_depth bounds how deeply a joining thread (a task_group's joiner, a coroutine's
// join on a thread outside the pool) nests work that is not its own children: each level is
// a frame on its stack.
inline constexpr int max_foreign_depth = 64;

// join_spin_checks is how many times a joiner with nothing to run looks at its count (and,
// between looks, pauses) before it sleeps or suspends.
inline constexpr int join_spin_checks = 256;

// forkjoin_thread_state is the fork-join layer's per-thread data. Every field is read and
// written by its own thread only.
struct forkjoin_thread_state {
  // How deeply this thread, joining, nests work that is not its join's children
  // (task_group.cpp, coroutine_fork.cpp), bounded by max_foreign_depth.
  int foreign_depth = 0;

  // An await on this thread was refused at the inline-run depth bound and no inline run has
  // completed its task since; and how many awaits suspended at once since the last that
  // tried (coroutine.cpp, run_awaited_here).
  bool past_inline_bound = false;
  unsigned awaits_since_probe = 0;

  // This thread's stripe of the coroutine waiting table, handed out round robin on first
  // use (coroutine.cpp, own_stripe); unassigned_stripe until then.
  static constexpr std::uint8_t unassigned_stripe = 0xff;
  std::uint8_t stripe = unassigned_stripe;
};

// forkjoin_tls is the calling thread's forkjoin_thread_state.
extern constinit thread_local forkjoin_thread_state forkjoin_tls;

}  // namespace magpie::detail
