// Layer 5 — tick manager: Unreal's FTickTaskManager semantics on magpie tasks, with the
// frame's schedule cached across frames. Built only on the public API.
//
//   magpie::tick_manager ticks;                      // on the game thread
//   magpie::tick_function move("move", [&](float dt, magpie::level_tick) { step(dt); });
//   magpie::tick_function animate("animate", [&](float dt, magpie::level_tick) { pose(dt); });
//   animate.set_tick_group(magpie::ticking_group::during_physics);
//   animate.set_run_on_any_thread(true);
//   animate.add_prerequisite(move);                  // animate runs after move, every frame
//   move.register_tick_function(ticks);
//   animate.register_tick_function(ticks);
//
//   ticks.start_frame(1.f / 60);
//   for (auto group : {pre_physics, start_physics, during_physics, end_physics, post_physics,
//                      post_update_work, last_demotable})
//     ticks.run_tick_group(group, group != during_physics);
//   ticks.end_frame();                               // magpie::world does all of this
//
// A frame runs the groups in order. A tick starts no earlier than its own group and its
// prerequisites' start groups (demotion, skipping start_physics and end_physics) and must be
// done by its end group, which a blocking run_tick_group waits for. Ticks without a
// prerequisite to wait for run in chunks (game-thread ones in one task per group, any-thread
// ones in about four chunks per worker); a tick with one gets a task of its own, or joins a
// batch. The schedule — who runs in which group, in which task, after which task — is
// rebuilt only when a tick is registered, unregistered, enabled, disabled, re-grouped,
// re-prioritised or given a different prerequisite; interval ticks coming off cooldown reuse
// it. Every tick function is destroyed safely at any time: one unregistered or destroyed
// mid-frame does not run afterwards, and a tick runs at most once a frame. See docs/ticks.md.
//
// Thread-safety: a tick manager belongs to the thread that constructed it (the game thread);
// frames are driven from it and registration, unregistration, prerequisites and settings of
// registered tick functions are changed from it (other threads are reported and refused:
// the call changes nothing). A tick function may be destroyed on any thread.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/scheduler.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace magpie {

// ticking_group is where in the frame a tick runs, in frame order. newly_spawned is not a
// group of its own: it names the passes after last_demotable that run ticks registered
// during the frame.
enum class ticking_group : std::uint8_t {
  pre_physics,
  start_physics,
  during_physics,
  end_physics,
  post_physics,
  post_update_work,
  last_demotable,
  newly_spawned
};

// ticking_group_count is the number of ticking groups, newly_spawned included.
inline constexpr std::size_t ticking_group_count = 8;

// to_string names a ticking group, e.g. "during_physics".
std::string_view to_string(ticking_group group) noexcept;

// level_tick is the kind of frame (Unreal's ELevelTick), handed to every tick.
enum class level_tick : std::uint8_t { time_only, viewports_only, all, pause_tick };

class tick_manager;

// tick_function is one thing that ticks every frame (or every interval): subclass it and
// override execute_tick, or give it a callable.
//
//   struct mover : magpie::tick_function {
//     void execute_tick(float dt, magpie::level_tick) override { position += speed * dt; }
//   };
class tick_function {
 public:
  // tick_function without a body: a subclass overrides execute_tick.
  tick_function();

  // tick_function that calls `body` each time it ticks; `name` is used in every report.
  tick_function(std::string name, std::function<void(float delta_seconds, level_tick)> body);

  // ~tick_function unregisters it and drops every prerequisite edge to and from it; safe at
  // any time and on any thread, also mid-frame and from inside its own execute_tick (an
  // any-thread tick on a worker included): it never runs afterwards. It waits only while
  // its tick may be running on another thread (a run started before it was unregistered
  // included), never for a run its own thread is making, nor for a thread that waits, in
  // a destruction, for a run of this one's (two ticks destroying each other); the game
  // thread's wait runs its own queue meanwhile and reports a stall; destroyed off the game
  // thread, the manager retires its record on the game thread. A subclass whose tick may be running on another thread when it is destroyed
  // stops it first: by the time this destructor runs, the subclass's members are gone.
  virtual ~tick_function();

  tick_function(const tick_function&) = delete;
  tick_function& operator=(const tick_function&) = delete;

  // register_tick_function adds it to `manager` (game thread). Registered during a frame, it
  // runs later in that frame, unless it was part of that frame already (unregistered and
  // registered again): then it ticks from the next one. Registering again with the same
  // manager does nothing.
  void register_tick_function(tick_manager& manager);

  // unregister_tick_function removes it from its manager (game thread; from another thread
  // reported and refused); mid-frame it does not run afterwards. It never waits: a run
  // already started on another thread finishes.
  void unregister_tick_function();

  // is_tick_function_registered says whether it belongs to a manager.
  bool is_tick_function_registered() const;

  // set_tick_function_enable turns ticking on or off (default on). Disabling mid-frame stops
  // it unless it has started; enabling mid-frame runs it later this frame if it has not run
  // (disabled and enabled again before its turn, it runs in its own place).
  void set_tick_function_enable(bool enabled);

  // is_tick_function_enabled says whether it is enabled.
  bool is_tick_function_enabled() const;

  // set_tick_group sets the first group it may start in (default pre_physics).
  void set_tick_group(ticking_group group);
  // tick_group is the first group it may start in.
  ticking_group tick_group() const;

  // set_end_tick_group sets the group it must complete within (default pre_physics).
  void set_end_tick_group(ticking_group group);
  // end_tick_group is the group it must complete within (at least the group it starts in).
  ticking_group end_tick_group() const;

  // set_tick_interval sets the seconds between ticks (<= 0: every frame); the new interval
  // counts from its next tick.
  void set_tick_interval(float seconds);
  // tick_interval is the seconds between ticks (<= 0: every frame).
  float tick_interval() const;

  // update_tick_interval_and_cool_down sets the interval and restarts the cooldown with the
  // full new interval, counted from the current frame.
  void update_tick_interval_and_cool_down(float seconds);

  // set_high_priority makes it released first within its group.
  void set_high_priority(bool high_priority);
  // set_run_on_any_thread lets it run on a worker when it is not demoted (else: game thread).
  void set_run_on_any_thread(bool any_thread);
  // set_allow_tick_batching lets it share one task with ticks of the same group condition.
  void set_allow_tick_batching(bool allow);
  // set_tick_even_when_paused makes it tick in pause frames (with level_tick::pause_tick).
  void set_tick_even_when_paused(bool tick_when_paused);

  // is_high_priority, runs_on_any_thread, allows_tick_batching, ticks_even_when_paused
  // read those settings back.
  bool is_high_priority() const;
  bool runs_on_any_thread() const;
  bool allows_tick_batching() const;
  bool ticks_even_when_paused() const;

  // add_prerequisite makes it run after `prerequisite` whenever both tick in a frame. An
  // edge to itself is reported and refused; an edge that closes a cycle is reported and
  // dropped. Effective from the next frame.
  void add_prerequisite(tick_function& prerequisite);

  // remove_prerequisite drops the edge to `prerequisite`, if any.
  void remove_prerequisite(tick_function& prerequisite);

  // prerequisites lists its prerequisites, in the order they were added.
  const std::vector<tick_function*>& prerequisites() const;

  // actual_start_tick_group is the group it starts in this frame; valid from start_frame to
  // end_frame.
  ticking_group actual_start_tick_group() const;
  // actual_end_tick_group is the group it completes within this frame.
  ticking_group actual_end_tick_group() const;

  // name is the name used in every report ("" unless given).
  const std::string& name() const;

  // set_name renames it.
  void set_name(std::string name);

 protected:
  // execute_tick does the tick's work; the default calls the body. It may call
  // magpie::add_nested(t): the tick (and its end group) then completes only once t has.
  virtual void execute_tick(float delta_seconds, level_tick tick_type);

 private:
  friend class tick_manager;
  friend struct tick_access;

  // links: the name, the body and the prerequisite edges both ways, kept apart and made on
  // first use, so that a frame, which reads the object's first bytes and then a subclass's
  // own members, finds those members within a line or two of the start (100,000 ticks a
  // frame stream through every one of them).
  struct links;

  bool may_change(const char* operation);
  void changed_schedule();
  links& own_links();

  // Its manager while registered, and the manager's record of it (or, unregistered during a
  // frame while a run of it went on, the manager's state, until the frame ends). Written on
  // the game thread under the manager's guard where another thread's destruction may read
  // them; atomic so that such a destruction reads them without a race.
  std::atomic<tick_manager*> manager_{nullptr};
  std::atomic<void*> slot_{nullptr};
  std::unique_ptr<links> links_;
  float interval_ = 0;
  ticking_group group_ = ticking_group::pre_physics;
  ticking_group end_group_ = ticking_group::pre_physics;
  ticking_group actual_start_ = ticking_group::pre_physics;
  ticking_group actual_end_ = ticking_group::pre_physics;
  bool enabled_ = true;
  bool high_priority_ = false;
  bool any_thread_ = false;
  bool allow_batching_ = false;
  bool tick_when_paused_ = false;
};

// tick_manager_options configure a tick manager.
struct tick_manager_options {
  bool cache_schedule = true;          // false: rebuild the schedule every frame (Unreal's way)
  bool allow_batching = true;          // let ticks that allow batching share a task
  bool allow_async_ticks = true;       // false: any-thread ticks run on the game thread too
  int newly_spawned_pass_limit = 101;  // passes after last_demotable before runaway spawning is reported
  // measure_tick_times times every tick (one clock read per tick) so that each frame's
  // statistics carry its lower bound and efficiency; off, those read 0.
  bool measure_tick_times = false;
};

// tick_frame_stats describe the last frame a tick manager ran.
struct tick_frame_stats {
  std::size_t ticks_run;       // execute_tick calls
  std::size_t tasks_launched;  // magpie tasks launched to run them
  std::size_t batches;         // of those, batches of ticks that allow batching
  std::size_t demoted;         // ticks that start later than their own group
  std::size_t cycles_broken;   // prerequisite edges dropped because they closed a cycle
  bool schedule_rebuilt;       // false: the previous frame's schedule was reused
  int newly_spawned_passes;    // passes after last_demotable that found ticks to run
  double frame_seconds;        // wall time from start_frame's entry until end_frame has waited for every tick
  // The rest is measured only with tick_manager_options::measure_tick_times (else 0), from
  // this frame's tick times. A segment is the stretch of the frame that ends with a blocking
  // run_tick_group (the newly-spawned passes count as one); a tick belongs to the segment of
  // its actual start group if its actual end group lies in the same one (a tick that may run
  // across a wait is left out). For each segment: G = the time of its game-thread ticks,
  // A = that of its any-thread ticks, C = its critical path (the longest sum of tick times
  // along a chain of prerequisites within it), W = the scheduler's workers. The segment
  // cannot finish sooner than max(G, (G + A) / (W + 1), C): the game thread runs G alone,
  // the W workers and the game thread share G + A, and a chain runs in order.
  double game_thread_seconds;  // G summed over the segments
  double any_thread_seconds;   // A summed over the segments
  double lower_bound_seconds;  // the sum over the segments of max(G, (G + A) / (W + 1), C)
  double efficiency;           // lower_bound_seconds / frame_seconds: 1 is as fast as the ticks allow
};

// tick_manager runs registered tick functions frame by frame, group by group.
class tick_manager {
 public:
  // tick_manager on `pool`; the constructing thread becomes its game thread.
  explicit tick_manager(scheduler& pool = default_scheduler(), tick_manager_options options = {});

  // ~tick_manager unregisters every tick function still registered.
  ~tick_manager();

  tick_manager(const tick_manager&) = delete;
  tick_manager& operator=(const tick_manager&) = delete;

  // start_frame begins a frame of `delta_seconds` (finite, >= 0): reuses or rebuilds the
  // schedule and takes the interval ticks that come off cooldown.
  void start_frame(float delta_seconds, level_tick tick_type = level_tick::all);

  // run_tick_group releases `group`'s ticks; blocking, it returns once every tick whose end
  // group it is has completed, the game thread running its own ticks and helping meanwhile.
  // Groups run in frame order, each once, between start_frame and end_frame (else reported
  // and refused); last_demotable also runs the newly-spawned passes.
  void run_tick_group(ticking_group group, bool block_till_complete = true);

  // end_frame ends the frame (groups not run yet are reported, then run).
  void end_frame();

  // run_pause_frame ticks only the tick functions that tick when paused, on the game thread,
  // with level_tick::pause_tick, in registration order; no groups, no prerequisites.
  void run_pause_frame(float delta_seconds);

  // last_frame_stats describes the last frame (or the current one, so far).
  tick_frame_stats last_frame_stats() const;

  // registered_count is the number of registered tick functions.
  std::size_t registered_count() const;

  // dump writes every registered tick function by group, with its settings and
  // prerequisites (Unreal's "dumpticks").
  void dump(std::ostream& out) const;

  // owning_scheduler is the scheduler the ticks run on.
  scheduler& owning_scheduler() const;

  struct state;

 private:
  friend class tick_function;
  friend struct tick_access;
  std::unique_ptr<state> state_;
};

}  // namespace magpie
