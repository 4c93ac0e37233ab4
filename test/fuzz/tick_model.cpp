#include "tick_model.h"

#include <algorithm>
#include <sstream>

namespace magpie::fuzz {

namespace {

constexpr ticking_group frame_groups[] = {ticking_group::pre_physics,  ticking_group::start_physics,
                                          ticking_group::during_physics, ticking_group::end_physics,
                                          ticking_group::post_physics, ticking_group::post_update_work,
                                          ticking_group::last_demotable};

ticking_group decode_group(input_decoder& in) { return frame_groups[in.below(std::size(frame_groups))]; }

// Demotion skips the two groups a tick must ask for by name.
ticking_group skip_undemotable(ticking_group group) {
  if (group == ticking_group::start_physics) return ticking_group::during_physics;
  if (group == ticking_group::end_physics) return ticking_group::post_physics;
  return group;
}

tick_change decode_change(input_decoder& in, int count) {
  tick_change change;
  change.kind = static_cast<tick_change_kind>(in.below(static_cast<unsigned>(tick_change_kind::toggle_any_thread) + 1));
  change.tick = static_cast<int>(in.below(static_cast<unsigned>(count)));
  change.other = change.tick == 0 ? 0 : static_cast<int>(in.below(static_cast<unsigned>(change.tick)));
  change.group = decode_group(in);
  change.interval = in.pick({0.f, 0.1f, 0.25f, 0.5f});
  return change;
}

}  // namespace

tick_program decode_ticks(input_decoder& in) {
  tick_program program;
  program.workers = in.below(3);
  program.cache_schedule = in.chance(200);
  program.allow_batching = in.flag();
  int count = 2 + static_cast<int>(in.below(max_ticks - 1));
  for (int i = 0; i < count; ++i) {
    tick_settings tick;
    tick.group = decode_group(in);
    tick.end_group = decode_group(in);
    tick.interval = in.pick({0.f, 0.f, 0.f, 0.1f, 0.25f, 0.5f});
    tick.enabled = in.chance(220);
    tick.registered = in.chance(220);
    tick.high_priority = in.chance(64);
    tick.any_thread = in.flag();
    tick.batching = in.flag();
    tick.when_paused = in.chance(64);
    tick.throws = in.chance(20);
    unsigned wanted = i == 0 ? 0 : in.below(3);
    for (unsigned k = 0; k < wanted; ++k) {
      int p = static_cast<int>(in.below(static_cast<unsigned>(i)));
      if (std::find(tick.prerequisites.begin(), tick.prerequisites.end(), p) == tick.prerequisites.end()) {
        tick.prerequisites.push_back(p);
      }
    }
    program.ticks.push_back(tick);
  }
  while (!in.empty() && program.frames.size() < 10) {
    tick_frame frame;
    frame.paused = in.chance(32);
    frame.time_only = !frame.paused && in.chance(32);
    frame.delta = in.pick({1.f / 60, 0.05f, 0.1f, 0.3f, 0.f});
    unsigned changes = in.below(4);
    for (unsigned k = 0; k < changes; ++k) frame.before.push_back(decode_change(in, count));
    if (in.chance(128)) {
      using kind = mid_frame_change::kind;
      frame.during.what = in.pick({kind::disable, kind::enable, kind::unregister, kind::register_again,
                                   kind::disable_and_enable, kind::unregister_and_register, kind::destroy_self});
      frame.during.actor = static_cast<int>(in.below(static_cast<unsigned>(count)));
      frame.during.target = static_cast<int>(in.below(static_cast<unsigned>(count)));
      if (frame.during.what == kind::destroy_self) {
        frame.during.target = frame.during.actor;
      } else if (frame.during.target == frame.during.actor) {
        frame.during.actor = -1;
      }
    }
    program.frames.push_back(frame);
  }
  return program;
}

tick_model::tick_model(const tick_program& program)
    : ticks_(program.ticks), cooldowns_(program.ticks.size()), registered_at_(program.ticks.size(), 0) {
  for (std::size_t i = 0; i < ticks_.size(); ++i) {
    if (ticks_[i].registered) registered_at_[i] = ++registrations_;
  }
}

void tick_model::set_registered(int tick, bool registered) {
  auto at = static_cast<std::size_t>(tick);
  if (ticks_[at].registered == registered) return;
  ticks_[at].registered = registered;
  if (!registered) return;
  cooldowns_[at] = cooldown{};  // a registered tick starts afresh: runs at its next visit
  registered_at_[at] = ++registrations_;
}

void tick_model::set_enabled(int tick, bool enabled) {
  auto at = static_cast<std::size_t>(tick);
  if (ticks_[at].enabled == enabled) return;
  ticks_[at].enabled = enabled;
  if (!ticks_[at].registered) return;
  if (!enabled) {
    cooldowns_[at].has_run = false;  // re-enabled, it starts afresh
  } else {
    cooldowns_[at].expiry = -std::numeric_limits<double>::infinity();
  }
}

void tick_model::destroy(int tick) {
  set_registered(tick, false);
  ticks_[static_cast<std::size_t>(tick)].prerequisites.clear();
  for (tick_settings& other : ticks_) std::erase(other.prerequisites, tick);
}

void tick_model::run_now(int tick) {
  auto at = static_cast<std::size_t>(tick);
  if (ticks_[at].interval <= 0) return;
  cooldowns_[at].expiry = now_ + static_cast<double>(ticks_[at].interval);
  cooldowns_[at].last_run = now_;
  cooldowns_[at].has_run = true;
}

bool tick_model::change(const tick_change& what) {
  auto at = static_cast<std::size_t>(what.tick);
  tick_settings& tick = ticks_[at];
  switch (what.kind) {
    case tick_change_kind::toggle_enabled: set_enabled(what.tick, !tick.enabled); break;
    case tick_change_kind::toggle_registered: set_registered(what.tick, !tick.registered); break;
    case tick_change_kind::set_group: tick.group = what.group; break;
    case tick_change_kind::set_end_group: tick.end_group = what.group; break;
    case tick_change_kind::set_interval: {
      bool was = tick.registered && tick.enabled && tick.interval > 0;
      tick.interval = what.interval;
      bool is = tick.registered && tick.enabled && tick.interval > 0;
      if (is && !was) cooldowns_[at].expiry = -std::numeric_limits<double>::infinity();
      break;
    }
    case tick_change_kind::update_interval_and_cool_down:
      tick.interval = what.interval;
      if (tick.registered && tick.enabled && tick.interval > 0) {
        cooldowns_[at].expiry = now_ + static_cast<double>(tick.interval);
      }
      break;
    case tick_change_kind::add_prerequisite:
      if (what.tick > 0 && std::find(tick.prerequisites.begin(), tick.prerequisites.end(), what.other) == tick.prerequisites.end()) {
        tick.prerequisites.push_back(what.other);
      }
      break;
    case tick_change_kind::remove_prerequisite:
      std::erase(tick.prerequisites, what.other);
      break;
    case tick_change_kind::add_self_prerequisite: return false;
    case tick_change_kind::toggle_when_paused: tick.when_paused = !tick.when_paused; break;
    case tick_change_kind::toggle_any_thread: tick.any_thread = !tick.any_thread; break;
  }
  return true;
}

std::vector<tick_expectation> tick_model::start_frame(const tick_frame& frame) {
  now_ += static_cast<double>(frame.delta);
  std::vector<tick_expectation> expected(ticks_.size());
  for (std::size_t i = 0; i < ticks_.size(); ++i) {
    const tick_settings& tick = ticks_[i];
    if (!tick.registered || !tick.enabled) continue;
    tick_expectation& mine = expected[i];
    mine.delta = frame.delta;
    if (tick.interval > 0) {
      // Runs only when what is left of its cooldown is below this frame's delta, at most
      // once, keeping its phase; its delta is the time since it last ran.
      cooldown& cool = cooldowns_[i];
      if (!(cool.expiry < now_)) continue;
      mine.delta = cool.has_run ? static_cast<float>(now_ - cool.last_run) : frame.delta;
      cool.last_run = now_;
      cool.has_run = true;
      bool first = cool.expiry == -std::numeric_limits<double>::infinity();
      cool.expiry = first ? now_ + static_cast<double>(tick.interval) : cool.expiry + static_cast<double>(tick.interval);
    }
    mine.run = run_expectation::must_run;
    mine.scheduled = true;
  }
  // Groups, in index order: every prerequisite has a lower index.
  for (std::size_t i = 0; i < ticks_.size(); ++i) {
    tick_expectation& mine = expected[i];
    if (!mine.scheduled) continue;
    const tick_settings& tick = ticks_[i];
    ticking_group start = tick.group;
    for (int p : tick.prerequisites) {
      if (expected[static_cast<std::size_t>(p)].scheduled) start = std::max(start, expected[static_cast<std::size_t>(p)].start);
    }
    if (start != tick.group) start = skip_undemotable(start);
    ticking_group asked_end = std::max(tick.end_group, tick.group);
    ticking_group end = std::max(asked_end, start);
    for (int p : tick.prerequisites) {
      if (expected[static_cast<std::size_t>(p)].scheduled) end = std::max(end, expected[static_cast<std::size_t>(p)].end);
    }
    if (end != asked_end) end = skip_undemotable(end);
    mine.start = start;
    mine.end = end;
  }
  return expected;
}

bool tick_model::waits_for(int tick, int prerequisite, const std::vector<tick_expectation>& expected) const {
  const tick_settings& settings = ticks_[static_cast<std::size_t>(tick)];
  return expected[static_cast<std::size_t>(tick)].scheduled && expected[static_cast<std::size_t>(prerequisite)].scheduled &&
         std::find(settings.prerequisites.begin(), settings.prerequisites.end(), prerequisite) != settings.prerequisites.end();
}

// reaches says whether `to` waits, through edges between ticks of this frame, for `from`.
bool tick_model::reaches(int from, int to, const std::vector<tick_expectation>& expected) const {
  if (from == to) return true;
  for (int p : ticks_[static_cast<std::size_t>(to)].prerequisites) {
    if (waits_for(to, p, expected) && reaches(from, p, expected)) return true;
  }
  return false;
}

void tick_model::mid_frame(const tick_frame& frame, std::vector<tick_expectation>& expected) {
  const mid_frame_change& change = frame.during;
  if (change.actor < 0) return;
  auto target = static_cast<std::size_t>(change.target);
  tick_expectation& mine = expected[target];
  switch (change.what) {
    case mid_frame_change::kind::disable:
    case mid_frame_change::kind::unregister:
      // Not run afterwards: certain for what waits for the actor, which has not started;
      // what the actor waits for has run; anything else may or may not have started.
      if (mine.run == run_expectation::must_run) {
        if (reaches(change.actor, change.target, expected)) {
          mine.run = run_expectation::must_not_run;
        } else if (!reaches(change.target, change.actor, expected)) {
          mine.run = run_expectation::may_run;
        }
      }
      if (change.what == mid_frame_change::kind::disable) {
        set_enabled(change.target, false);
      } else {
        set_registered(change.target, false);
      }
      break;
    case mid_frame_change::kind::disable_and_enable:
    case mid_frame_change::kind::unregister_and_register: {
      bool was_on = ticks_[target].registered && ticks_[target].enabled;
      if (!was_on) {  // the first half does nothing: the second adds it, as enable or register_again
        bool enabling = change.what == mid_frame_change::kind::disable_and_enable;
        bool adds = enabling ? ticks_[target].registered : ticks_[target].enabled;
        if (enabling) {
          set_enabled(change.target, true);
        } else {
          set_registered(change.target, true);
        }
        if (adds) {
          mine.run = run_expectation::must_run;
          mine.scheduled = false;
          run_now(change.target);
        }
        break;
      }
      // Part of this frame: re-enabled before its turn it runs in its place; registered again
      // it ticks from the next frame (at most once a frame); what runs meanwhile may do either.
      if (mine.run == run_expectation::must_run && !reaches(change.target, change.actor, expected)) {
        bool waits_for_actor = reaches(change.actor, change.target, expected);
        if (change.what == mid_frame_change::kind::unregister_and_register) {
          mine.run = waits_for_actor ? run_expectation::must_not_run : run_expectation::may_run;
        } else if (!waits_for_actor) {
          mine.run = run_expectation::may_run;
        }
      }
      if (change.what == mid_frame_change::kind::disable_and_enable) {
        set_enabled(change.target, false);
        set_enabled(change.target, true);
      } else {
        set_registered(change.target, false);
        set_registered(change.target, true);
      }
      break;
    }
    case mid_frame_change::kind::destroy_self:
      destroy(change.target);  // it ran (it is the actor); what waits for it still runs
      break;
    case mid_frame_change::kind::enable:
    case mid_frame_change::kind::register_again: {
      bool was_off = change.what == mid_frame_change::kind::enable
                         ? ticks_[target].registered && !ticks_[target].enabled
                         : !ticks_[target].registered && ticks_[target].enabled;
      if (change.what == mid_frame_change::kind::enable) {
        set_enabled(change.target, true);
      } else {
        set_registered(change.target, true);
      }
      if (was_off) {  // runs later this frame
        mine.run = run_expectation::must_run;
        mine.scheduled = false;
        run_now(change.target);
      }
      break;
    }
  }
}

std::vector<int> tick_model::pause_frame() const {
  std::vector<int> order;
  for (std::size_t i = 0; i < ticks_.size(); ++i) {
    if (ticks_[i].registered && ticks_[i].enabled && ticks_[i].when_paused) order.push_back(static_cast<int>(i));
  }
  std::sort(order.begin(), order.end(), [this](int a, int b) {
    return registered_at_[static_cast<std::size_t>(a)] < registered_at_[static_cast<std::size_t>(b)];
  });
  return order;
}

std::size_t tick_model::registered_count() const {
  return static_cast<std::size_t>(std::count_if(ticks_.begin(), ticks_.end(), [](const tick_settings& t) { return t.registered; }));
}

std::string describe(const tick_program& program) {
  // A stream, not chained std::string operator+: GCC 12's -Wrestrict misfires on those at -O3.
  std::ostringstream text;
  text << std::fixed << "workers " << program.workers << " cache " << program.cache_schedule << " batching "
       << program.allow_batching << "\n";
  for (std::size_t i = 0; i < program.ticks.size(); ++i) {
    const tick_settings& t = program.ticks[i];
    text << "  tick " << i << ": group " << to_string(t.group) << " end " << to_string(t.end_group) << " interval "
         << t.interval << " enabled " << t.enabled << " registered " << t.registered << " high " << t.high_priority
         << " any " << t.any_thread << " batch " << t.batching << " paused " << t.when_paused << " throws " << t.throws
         << " after";
    for (int p : t.prerequisites) text << " " << p;
    text << "\n";
  }
  for (std::size_t f = 0; f < program.frames.size(); ++f) {
    const tick_frame& frame = program.frames[f];
    text << "  frame " << f << (frame.paused ? " paused" : "") << (frame.time_only ? " time_only" : "") << " delta "
         << frame.delta;
    for (const tick_change& c : frame.before) {
      text << " [change " << static_cast<int>(c.kind) << " tick " << c.tick << " other " << c.other << " group "
           << to_string(c.group) << " interval " << c.interval << "]";
    }
    if (frame.during.actor >= 0) {
      text << " {tick " << frame.during.actor << " does " << static_cast<int>(frame.during.what) << " to "
           << frame.during.target << "}";
    }
    text << "\n";
  }
  return text.str();
}

}  // namespace magpie::fuzz
