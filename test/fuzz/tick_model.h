// The tick manager fuzz target's program and reference model. The program: a handful of
// tick functions with decoded settings, and frames (normal or paused, with deltas) with
// changes between them — enable, register, groups, intervals, prerequisites — and at most
// one change per frame made from inside a game-thread tick. The model rebuilds the whole
// schedule every frame from the documented rules (docs/ticks.md): who ticks (enabled,
// registered, interval due), in which groups (demotion by the prerequisites that tick),
// with which delta, and what a mid-frame change must, may or must not make run.
#pragma once

#include "input_decoder.h"

#include <magpie/tick_manager.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace magpie::fuzz {

inline constexpr int max_ticks = 8;

struct tick_settings {
  ticking_group group = ticking_group::pre_physics;
  ticking_group end_group = ticking_group::pre_physics;
  float interval = 0;
  bool enabled = true;
  bool registered = true;
  bool high_priority = false;
  bool any_thread = false;
  bool batching = false;
  bool when_paused = false;
  bool throws = false;
  std::vector<int> prerequisites;  // lower indices only: the graph stays acyclic
};

enum class tick_change_kind : std::uint8_t {
  toggle_enabled,
  toggle_registered,
  set_group,
  set_end_group,
  set_interval,
  update_interval_and_cool_down,
  add_prerequisite,
  remove_prerequisite,
  add_self_prerequisite,  // refused and reported
  toggle_when_paused,
  toggle_any_thread,
};

struct tick_change {
  tick_change_kind kind = tick_change_kind::toggle_enabled;
  int tick = 0;
  int other = 0;  // add/remove_prerequisite: a lower index
  ticking_group group = ticking_group::pre_physics;
  float interval = 0;
};

// A change made from inside the body of `actor` while it runs: a game-thread tick, except
// destroy_self, which any tick may do (on a worker too), with `target` == `actor`.
struct mid_frame_change {
  enum class kind : std::uint8_t {
    disable,
    enable,
    unregister,
    register_again,
    disable_and_enable,          // both, one after the other
    unregister_and_register,     // both: it ticks again from the next frame
    destroy_self                 // the harness makes a fresh, unregistered one after the frame
  } what = kind::disable;
  int actor = -1;  // -1: none this frame
  int target = 0;
};

struct tick_frame {
  bool paused = false;
  bool time_only = false;  // level_tick::time_only, handed to every tick
  float delta = 0;
  std::vector<tick_change> before;  // made on the game thread before the frame
  mid_frame_change during;
};

struct tick_program {
  unsigned workers = 0;
  bool cache_schedule = true;
  bool allow_batching = true;
  std::vector<tick_settings> ticks;
  std::vector<tick_frame> frames;
};

tick_program decode_ticks(input_decoder& in);

// What the model expects of one tick in one frame.
enum class run_expectation : std::uint8_t { must_not_run, must_run, may_run };

struct tick_expectation {
  run_expectation run = run_expectation::must_not_run;
  bool scheduled = false;   // ticks from the start of the frame: groups, delta and edges are checked
  ticking_group start = ticking_group::pre_physics;
  ticking_group end = ticking_group::pre_physics;
  float delta = 0;
};

// tick_model follows the program frame by frame.
class tick_model {
 public:
  explicit tick_model(const tick_program& program);

  // change applies a change made between frames; false if it is refused (self prerequisite).
  bool change(const tick_change& what);

  // start_frame decides who ticks this frame and where; then mid_frame applies the frame's
  // mid-frame change, which needs to know who waits for whom this frame.
  std::vector<tick_expectation> start_frame(const tick_frame& frame);
  void mid_frame(const tick_frame& frame, std::vector<tick_expectation>& expected);

  // pause_frame lists the ticks a pause frame runs, in the order it runs them.
  std::vector<int> pause_frame() const;

  const tick_settings& settings(int tick) const { return ticks_[static_cast<std::size_t>(tick)]; }
  std::size_t registered_count() const;
  // effective_edges: the prerequisite edges between ticks that tick this frame.
  bool waits_for(int tick, int prerequisite, const std::vector<tick_expectation>& expected) const;

 private:
  struct cooldown {
    double expiry = -std::numeric_limits<double>::infinity();  // -inf: runs at its next visit
    double last_run = 0;
    bool has_run = false;
  };
  void set_registered(int tick, bool registered);
  void set_enabled(int tick, bool enabled);
  void destroy(int tick);  // unregistered, its edges both ways gone
  void run_now(int tick);  // an interval tick running outside the frame's start (mid-frame)
  bool reaches(int from, int to, const std::vector<tick_expectation>& expected) const;

  std::vector<tick_settings> ticks_;
  std::vector<cooldown> cooldowns_;
  std::vector<std::uint64_t> registered_at_;  // registration order
  std::uint64_t registrations_ = 0;
  double now_ = 0;
};

std::string describe(const tick_program& program);

}  // namespace magpie::fuzz
