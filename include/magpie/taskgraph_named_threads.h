// Layer 4 — compatibility: Unreal's ENamedThreads, bit for bit, and how each value maps to
// a magpie placement. Part of <magpie/taskgraph.h>; see docs/porting-from-unreal.md.
//
//   using magpie::taskgraph::named_threads;
//   named_threads::type where = named_threads::set_task_priority(named_threads::game_thread_local, 1);
//   named_threads::get_thread_index(where);   // game_thread
//   named_threads::get_queue_index(where);    // 1: the local queue
//   named_threads::get_task_priority(where);  // 1: high
#pragma once

#include <magpie/detail/language.h>

#include <magpie/scheduler.h>
#include <magpie/task.h>

#include <cstdint>

namespace magpie::taskgraph {

// named_threads holds Unreal's ENamedThreads::Type: a thread index in the low byte (0xff:
// any thread), the queue in bit 8, the task priority in bit 9 and the thread priority in
// bits 10–11, with Unreal's helpers. Thread indices map onto magpie's named threads: rhi,
// game, render (Unreal's actual rendering thread), audio, then user threads 0–11.
struct named_threads {
  // type is ENamedThreads::Type: thread indices, any_thread, and the queue and priority bits
  // and masks, combined with `|`.
  enum type : std::uint32_t {
    rhi_thread = 0,
    game_thread = 1,
    actual_rendering_thread = 2,
    audio_thread = 3,  // UE4's; UE5 dropped it from the enum, magpie keeps its slot
    first_user_thread = 4,
    last_user_thread = 15,
    any_thread = 0xff,

    main_queue = 0x000,
    local_queue = 0x100,
    num_queues = 2,
    thread_index_mask = 0xff,
    queue_index_mask = 0x100,
    queue_index_shift = 8,

    normal_task_priority = 0x000,
    high_task_priority = 0x200,
    num_task_priorities = 2,
    task_priority_mask = 0x200,
    task_priority_shift = 9,

    normal_thread_priority = 0x000,
    high_thread_priority = 0x400,
    background_thread_priority = 0x800,
    num_thread_priorities = 3,
    thread_priority_mask = 0xc00,
    thread_priority_shift = 10,

    game_thread_local = game_thread | local_queue,
    actual_rendering_thread_local = actual_rendering_thread | local_queue,
    any_hi_pri_thread_normal_task = any_thread | high_thread_priority | normal_task_priority,
    any_hi_pri_thread_hi_pri_task = any_thread | high_thread_priority | high_task_priority,
    any_normal_thread_normal_task = any_thread | normal_thread_priority | normal_task_priority,
    any_normal_thread_hi_pri_task = any_thread | normal_thread_priority | high_task_priority,
    any_background_thread_normal_task = any_thread | background_thread_priority | normal_task_priority,
    any_background_hi_pri_task = any_thread | background_thread_priority | high_task_priority,
  };

  // get_thread_index is the thread part of `t` (any_thread when it names none).
  static constexpr type get_thread_index(type t) noexcept {
    std::uint32_t index = t & thread_index_mask;
    return index == thread_index_mask ? any_thread : static_cast<type>(index);
  }

  // get_queue_index is 0 for the main queue, 1 for the local queue.
  static constexpr int get_queue_index(type t) noexcept {
    return static_cast<int>((t & queue_index_mask) >> queue_index_shift);
  }

  // get_task_priority is 0 for normal, 1 for high task priority.
  static constexpr int get_task_priority(type t) noexcept {
    return static_cast<int>((t & task_priority_mask) >> task_priority_shift);
  }

  // get_thread_priority_index is 0 normal, 1 high, 2 background thread priority.
  static constexpr int get_thread_priority_index(type t) noexcept {
    return static_cast<int>((t & thread_priority_mask) >> thread_priority_shift);
  }

  // set_task_priority replaces the task priority of `t` (0 normal, 1 high).
  static constexpr type set_task_priority(type t, int task_priority) noexcept {
    return static_cast<type>((t & ~std::uint32_t{task_priority_mask}) |
                             ((static_cast<std::uint32_t>(task_priority) << task_priority_shift) & task_priority_mask));
  }

  // set_thread_priority replaces the thread priority of `t` (0 normal, 1 high, 2 background).
  static constexpr type set_thread_priority(type t, int thread_priority) noexcept {
    return static_cast<type>(
        (t & ~std::uint32_t{thread_priority_mask}) |
        ((static_cast<std::uint32_t>(thread_priority) << thread_priority_shift) & thread_priority_mask));
  }

  // set_priorities sets both priorities of `t` at once.
  static constexpr type set_priorities(type t, int thread_priority, int task_priority) noexcept {
    return set_task_priority(set_thread_priority(t, thread_priority), task_priority);
  }

  // user_thread is the n-th user-defined named thread (n < 12): magpie's named_thread::user(n).
  static constexpr type user_thread(std::uint32_t n) noexcept { return static_cast<type>(first_user_thread + n); }

  // is_named says whether the thread part of `t` names one of magpie's 16 named threads.
  static constexpr bool is_named(type t) noexcept { return (t & thread_index_mask) <= last_user_thread; }

  // to_named_thread is the magpie named thread for the thread part of `t` (is_named(t)).
  static constexpr named_thread to_named_thread(type t) noexcept {
    switch (t & thread_index_mask) {
      case rhi_thread: return named_thread::rhi;
      case game_thread: return named_thread::game;
      case actual_rendering_thread: return named_thread::render;
      case audio_thread: return named_thread::audio;
      default: return named_thread::user((t & thread_index_mask) - first_user_thread);
    }
  }

  // from_named_thread is the thread index Unreal code uses for a magpie named thread.
  static constexpr type from_named_thread(named_thread thread) noexcept {
    if (thread == named_thread::rhi) return rhi_thread;
    if (thread == named_thread::game) return game_thread;
    if (thread == named_thread::render) return actual_rendering_thread;
    if (thread == named_thread::audio) return audio_thread;
    return static_cast<type>(thread.index());  // user threads keep their index (4 + n)
  }

  // queue_of is the magpie queue `t` names.
  static constexpr thread_queue queue_of(type t) noexcept {
    return get_queue_index(t) != 0 ? thread_queue::local : thread_queue::main;
  }

  // translate_priority is the magpie priority of a task for any thread, as Unreal translates
  // it for UE::Tasks: high thread priority → high, normal → normal, background →
  // background_normal, or background_high with high task priority.
  static constexpr priority translate_priority(type t) noexcept {
    switch (t & thread_priority_mask) {
      case high_thread_priority: return priority::high;
      case background_thread_priority:
        return get_task_priority(t) != 0 ? priority::background_high : priority::background_normal;
      default: return priority::normal;
    }
  }

  // get_render_thread is the thread render commands go to: the game thread until
  // set_render_thread names a rendering thread (Unreal: ENamedThreads::GetRenderThread).
  static type get_render_thread() noexcept;

  // get_render_thread_local is the render thread's local queue.
  static type get_render_thread_local() noexcept {
    return static_cast<type>(get_render_thread() | local_queue);
  }

  // set_render_thread makes `t` the render thread (the rendering thread calls it when it
  // starts, and sets it back to the game thread when it stops). Any thread.
  static void set_render_thread(type t) noexcept;
};

namespace internal {
// report_bad_thread reports a desired thread that is neither any_thread nor one of magpie's
// named threads.
void report_bad_thread(named_threads::type desired, const char* operation);
}  // namespace internal

// placement_for is where a task meant for `desired` runs: on workers at the translated
// priority for any_thread, else on that named thread's main or local queue, high or normal.
// A thread index magpie does not have is reported and treated as any_thread.
inline placement placement_for(named_threads::type desired, const char* operation = "placement_for") {
  if (named_threads::get_thread_index(desired) == named_threads::any_thread) {
    return named_threads::translate_priority(desired);
  }
  if (!named_threads::is_named(desired)) {
    internal::report_bad_thread(desired, operation);
    return priority::normal;
  }
  return on_thread(named_threads::to_named_thread(desired), named_threads::queue_of(desired),
                   named_threads::get_task_priority(desired) != 0);
}

}  // namespace magpie::taskgraph
