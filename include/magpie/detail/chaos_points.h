// The core's chaos points (magpie/chaos.h): one inline call at each decision point whose
// timing a race depends on. While chaos is off it costs one relaxed load and a branch that
// is never taken; a build without chaos (release, or -Dchaos=disabled: MAGPIE_CHAOS 0 in
// magpie/config.h) compiles it to nothing.
//
//   chaos::point(chaos::site::deque_push);   // between writing a slot and publishing it
//
// Templates reach it through their atomics policy (Atomics::chaos_point), so the Relacy
// models, which explore schedules themselves, compile it away.
#pragma once

#include <magpie/config.h>

#include <atomic>
#include <cstdint>

namespace magpie::detail::chaos {

// site names a decision point; tests and reports count injections per site.
enum class site : std::uint8_t {
  deque_push,         // a slot written, bottom not yet published
  deque_pop,          // bottom lowered, top not yet read (the owner's side of the race)
  deque_steal,        // the slot read, the CAS on top not yet tried
  task_launch,        // a task built, its launch lock not yet released
  execution_claim,    // before the CAS that claims a task's body
  completion,         // a body returned, the task not yet marked complete
  subsequents_close,  // before a task's subsequent list is closed
  park,               // a worker announced itself as a waiter, its last look not yet taken
  wake,               // work published, sleepers not yet looked for
  wait_block,         // a waiter about to block on a task
  pipe_handover,      // a pipe's running task done, the next one not yet handed on
  named_queue,        // work for a named thread about to be queued
  limiter_handover,   // a limiter slot's bit freed, the slot not yet given back
  count_,
};

// active is set while chaos::start's options are in force (lib/primitives/chaos.cpp).
extern std::atomic<bool> active;

// inject draws the calling thread's next decision and may yield, spin or sleep.
void inject(site where) noexcept;

#if MAGPIE_CHAOS
inline constexpr bool compiled_in = true;
inline void point(site where) noexcept {
  // relaxed: a point that misses a start or stop by a moment injects once more or less;
  // the decisions themselves come from the thread's own generator
  if (active.load(std::memory_order_relaxed)) [[unlikely]] {
    inject(where);
  }
}
#else
inline constexpr bool compiled_in = false;
inline void point(site) noexcept {}
#endif

}  // namespace magpie::detail::chaos
