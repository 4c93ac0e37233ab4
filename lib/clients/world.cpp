// world: one frame in Unreal's order, and the tickable objects it runs after the timers.
#include <magpie/diagnostics.h>
#include <magpie/trace.h>
#include <magpie/world.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace magpie {

struct world::state {
  std::thread::id game_thread = std::this_thread::get_id();
  std::uint64_t frames = 0;
  tick_manager ticks;
  timer_manager timers;
  bool paused = false;
  float dilation = 1.f;
  bool in_tick = false;
  // Tickables in creation order; a slot is nulled when its object goes during the pass and
  // compacted after it. Objects made during the pass wait in `arrived` until it ends. The
  // guard orders a destruction on another thread against the game thread's creations and
  // its pass, which reads each entry under it (the pass is not a tick hot path).
  std::mutex tickables_guard;
  std::vector<tickable_object*> tickables;
  std::vector<tickable_object*> arrived;
  bool ticking_tickables = false;

  state(scheduler& pool, tick_manager_options options)
      : ticks(pool, options), timers([this] { return frames; }) {
    timers.claim_for_this_thread();  // the game thread's from the start, not the first user's
  }

  bool on_game_thread() const { return std::this_thread::get_id() == game_thread; }
  void tick_tickables(float delta);
};

namespace {

void report_misuse(const std::string& message) { report(diagnostic_kind::misuse, message); }

[[gnu::cold]] void report_exception(const char* where, std::exception_ptr error) {
  std::string what = "an exception not derived from std::exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    what = caught.what();
  } catch (...) {
  }
  report(diagnostic_kind::unhandled_exception, std::string(where) + " threw: " + what + "; the frame goes on",
         severity::warning);
}

}  // namespace

// ---- tickable objects -------------------------------------------------------------------------

tickable_object::tickable_object(world& owner, enum tickable_tick_type type) : world_(&owner), type_(type) {
  world::state& s = *owner.state_;
  if (!s.on_game_thread()) {
    report_misuse("tickable_object: created on a thread other than its world's game thread; it never ticks");
    world_ = nullptr;
    return;
  }
  std::lock_guard guard(s.tickables_guard);
  (s.ticking_tickables ? s.arrived : s.tickables).push_back(this);
}

tickable_object::~tickable_object() {
  if (world_ == nullptr) return;
  world::state& s = *world_->state_;
  bool during_pass = false;
  {
    std::lock_guard guard(s.tickables_guard);
    // Off the game thread during the pass, the pass may be calling it or about to: its
    // subclass is gone already, which no guard in this base can prevent.
    during_pass = s.ticking_tickables && !s.on_game_thread();
    auto gone = [this](std::vector<tickable_object*>& list, bool null_it) {
      auto found = std::find(list.begin(), list.end(), this);
      if (found == list.end()) return;
      if (null_it) {
        *found = nullptr;
      } else {
        list.erase(found);
      }
    };
    gone(s.tickables, s.ticking_tickables);
    gone(s.arrived, false);
  }
  if (during_pass) {
    std::ostringstream text;
    text << "tickable_object: destroyed on thread " << std::this_thread::get_id()
         << " while its world's tickables tick on the game thread; destroy it on the game thread, or "
            "elsewhere outside world::tick's tickables pass";
    report_misuse(text.str());
  }
}

bool tickable_object::is_tickable() const { return true; }

bool tickable_object::is_tickable_when_paused() const { return false; }

void tickable_object::set_tickable_tick_type(enum tickable_tick_type type) { type_ = type; }

void world::state::tick_tickables(float delta) {
  {
    std::lock_guard guard(tickables_guard);
    ticking_tickables = true;
  }
  for (std::size_t index = 0;; ++index) {
    tickable_object* object = nullptr;
    {
      std::lock_guard guard(tickables_guard);
      if (index >= tickables.size()) break;
      object = tickables[index];
    }
    if (object == nullptr) continue;
    if (paused && !object->is_tickable_when_paused()) continue;
    switch (object->tick_type()) {
      case tickable_tick_type::never: continue;
      case tickable_tick_type::conditional:
        if (!object->is_tickable()) continue;
        break;
      case tickable_tick_type::always: break;
    }
    try {
      object->tick(delta);
    } catch (...) {
      report_exception("a tickable object", std::current_exception());
    }
  }
  std::lock_guard guard(tickables_guard);
  ticking_tickables = false;
  std::erase(tickables, nullptr);
  tickables.insert(tickables.end(), arrived.begin(), arrived.end());
  arrived.clear();
}

// ---- the world -----------------------------------------------------------------------------------

world::world(scheduler& pool, tick_manager_options options)
    : state_(std::make_unique<state>(pool, options)) {}

world::~world() {
  std::lock_guard guard(state_->tickables_guard);
  for (tickable_object* object : state_->tickables) {
    if (object != nullptr) object->world_ = nullptr;
  }
  for (tickable_object* object : state_->arrived) object->world_ = nullptr;
}

tick_manager& world::ticks() { return state_->ticks; }

timer_manager& world::timers() { return state_->timers; }

void world::tick(float delta_seconds, level_tick tick_type) {
  state& s = *state_;
  if (!s.on_game_thread()) {
    report_misuse("world::tick: called from a thread other than the game thread (the constructing one); refused");
    return;
  }
  if (s.in_tick) {
    report_misuse("world::tick: called from inside a frame of the same world; refused");
    return;
  }
  if (!(delta_seconds >= 0) || std::isinf(delta_seconds)) {
    report_misuse("world::tick: delta_seconds must be finite and >= 0; refused");
    return;
  }
  float delta = delta_seconds * s.dilation;
  if (std::isinf(delta)) {
    std::ostringstream text;
    text << "world::tick: the scaled delta (delta_seconds " << delta_seconds << " times the time dilation "
         << s.dilation << ") overflows to infinity; the frame is refused";
    report_misuse(text.str());
    return;
  }
  s.in_tick = true;
  trace::client_scope traced("frame", s.frames + 1);
  ++s.frames;
  bool paused = s.paused;
  // A time-only frame (Unreal's LEVELTICK_TimeOnly) runs neither tick functions nor timers.
  bool doing_ticks = tick_type != level_tick::time_only && !paused;
  if (doing_ticks) {
    s.ticks.start_frame(delta, tick_type);
    s.ticks.run_tick_group(ticking_group::pre_physics);
    s.ticks.run_tick_group(ticking_group::start_physics);
    s.ticks.run_tick_group(ticking_group::during_physics, false);
    s.ticks.run_tick_group(ticking_group::end_physics);
    s.ticks.run_tick_group(ticking_group::post_physics);
  } else if (paused) {
    s.ticks.run_pause_frame(delta);
  }
  if (doing_ticks) {
    try {
      trace::client_scope timers("timers");
      s.timers.tick(delta);
    } catch (...) {
      report_exception("a timer callback", std::current_exception());
    }
  }
  {
    trace::client_scope tickables("tickables");
    s.tick_tickables(delta);
  }
  if (doing_ticks) {
    s.ticks.run_tick_group(ticking_group::post_update_work);
    s.ticks.run_tick_group(ticking_group::last_demotable);
    s.ticks.end_frame();
  }
  s.in_tick = false;
}

void world::set_paused(bool paused) { state_->paused = paused; }

bool world::is_paused() const { return state_->paused; }

void world::set_time_dilation(float dilation) {
  if (!(dilation >= 0) || std::isinf(dilation)) {
    report_misuse("world::set_time_dilation: the dilation must be finite and >= 0; refused");
    return;
  }
  state_->dilation = dilation;
}

float world::time_dilation() const { return state_->dilation; }

std::uint64_t world::frame_counter() const { return state_->frames; }

}  // namespace magpie
