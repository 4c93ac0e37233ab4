// Layer 5 — the world: one whole frame in Unreal's order (UWorld::Tick) — tick groups,
// timers, tickable objects — on a tick manager and a timer manager it owns.
//
//   magpie::world game;                               // on the game thread
//   magpie::tick_function ai("ai", [](float dt, magpie::level_tick) { think(dt); });
//   ai.register_tick_function(game.ticks());
//   magpie::timer_handle spawn;
//   game.timers().set_timer(spawn, [] { spawn_wave(); }, 30.f, /*loop=*/true);
//   struct hud : magpie::tickable_object {
//     using tickable_object::tickable_object;
//     void tick(float dt) override { redraw(dt); }
//   } overlay(game);
//   for (;;) game.tick(frame_seconds);
//
// world::tick(dt): dt is scaled by the time dilation; unless paused or level_tick::time_only
// it runs start_frame and the groups pre_physics, start_physics, during_physics (not
// blocking), end_physics and post_physics; then the timer manager ticks; then the tickable
// objects; then post_update_work, last_demotable with the newly-spawned passes, and
// end_frame. A time_only frame ticks only the tickable objects (as Unreal, no timers).
// Paused, it runs a pause frame instead: only tick functions that tick when paused and
// tickable objects tickable when paused; timers stand still.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/scheduler.h>
#include <magpie/tick_manager.h>
#include <magpie/timer_manager.h>

#include <cstdint>
#include <memory>

namespace magpie {

// tickable_tick_type says when a tickable object ticks: `conditional` when is_tickable()
// says so (asked every frame), `always` every frame, `never` not at all.
enum class tickable_tick_type : std::uint8_t { conditional, always, never };

class world;

// tickable_object ticks once a frame on the game thread, after the timers, in the order the
// objects were created (Unreal's FTickableGameObject). It registers itself with its world on
// construction and unregisters on destruction; one created while the tickables tick starts
// next frame, one destroyed meanwhile is not called afterwards. Threads: created on the
// world's game thread (elsewhere reported; it never ticks). Destroyed on the game thread at
// any time, from a tickable's own tick included; on any other thread (an any-thread tick
// function, say) at any time except while world::tick runs the tickables (after post_physics
// has completed, before post_update_work starts), since a subclass's members are gone before
// the world could stop calling it: such a destruction is reported, naming the thread. The
// world's list of tickables is guarded, so those threads never race on it.
class tickable_object {
 public:
  // tickable_object registers with `owner` (its game thread).
  explicit tickable_object(world& owner, tickable_tick_type type = tickable_tick_type::conditional);
  // ~tickable_object unregisters it from its world, on any thread (see above).
  virtual ~tickable_object();
  tickable_object(const tickable_object&) = delete;
  tickable_object& operator=(const tickable_object&) = delete;

  // tick does the object's per-frame work.
  virtual void tick(float delta_seconds) = 0;

  // is_tickable is asked every frame for a conditional object; default true.
  virtual bool is_tickable() const;

  // is_tickable_when_paused says whether it ticks in paused frames; default false.
  virtual bool is_tickable_when_paused() const;

  // set_tickable_tick_type changes when it ticks, from the next time the tickables tick.
  void set_tickable_tick_type(tickable_tick_type type);

  // tick_type is when it ticks.
  tickable_tick_type tick_type() const { return type_; }

 private:
  friend class world;
  world* world_;
  tickable_tick_type type_;
};

// world drives one whole frame in Unreal's order.
class world {
 public:
  // world on `pool`; the constructing thread is the game thread.
  explicit world(scheduler& pool = default_scheduler(), tick_manager_options options = {});
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  // ticks is the world's tick manager.
  tick_manager& ticks();

  // timers is the world's timer manager (it knows the world's frame counter). It belongs to
  // the game thread from the world's construction: a call from another thread (an any-thread
  // tick's) is reported, naming that thread, and refused.
  timer_manager& timers();

  // tick runs one frame of `delta_seconds` real time (scaled by the time dilation); a
  // delta that is not finite once scaled is reported and the frame refused.
  void tick(float delta_seconds, level_tick tick_type = level_tick::all);

  // set_paused pauses or resumes the world from the next frame.
  void set_paused(bool paused);
  // is_paused says whether the world is paused.
  bool is_paused() const;

  // set_time_dilation scales every later frame's delta (finite, >= 0; default 1).
  void set_time_dilation(float dilation);
  // time_dilation is the factor frames' deltas are scaled by.
  float time_dilation() const;

  // frame_counter is the number of frames ticked so far (the current one counted).
  std::uint64_t frame_counter() const;

  struct state;

 private:
  friend class tickable_object;
  std::unique_ptr<state> state_;
};

}  // namespace magpie
