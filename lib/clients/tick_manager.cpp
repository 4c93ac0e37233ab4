// tick_manager: registration, frames, groups, the units' tasks, pause frames and dumps.
// The schedule itself is built in tick_schedule.cpp.
#include <magpie/diagnostics.h>
#include <magpie/task.h>
#include <magpie/tick_manager.h>

#include "tick_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <ostream>
#include <string>
#include <thread>

namespace magpie {

using ticks::none;
using ticks::tick_slot;
using ticks::unit;

namespace {

// The unit this thread is running, so that unregistering a tick of that very unit from one
// of its own ticks does not wait for itself.
thread_local const unit* running_unit = nullptr;

constexpr std::size_t last_group = ticks::group_index(ticking_group::last_demotable);

void report_misuse(const char* operation, const std::string& problem) {
  report(diagnostic_kind::misuse, std::string("tick_manager::") + operation + ": " + problem);
}

[[gnu::cold]] void report_tick_exception(const tick_slot& slot, std::exception_ptr error) {
  std::string what = "an exception not derived from std::exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    what = caught.what();
  } catch (...) {
  }
  const tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: only for its name
  std::string name = tick != nullptr ? tick->name() : std::string("(unregistered by its own tick)");
  report(diagnostic_kind::unhandled_exception,
         "tick function '" + name + "' threw: " + what + "; the frame goes on", severity::warning);
}

}  // namespace

std::string_view to_string(ticking_group group) noexcept {
  switch (group) {
    case ticking_group::pre_physics: return "pre_physics";
    case ticking_group::start_physics: return "start_physics";
    case ticking_group::during_physics: return "during_physics";
    case ticking_group::end_physics: return "end_physics";
    case ticking_group::post_physics: return "post_physics";
    case ticking_group::post_update_work: return "post_update_work";
    case ticking_group::last_demotable: return "last_demotable";
    case ticking_group::newly_spawned: return "newly_spawned";
  }
  return "unknown";
}

// ---- registration --------------------------------------------------------------------------

void tick_manager::state::add(tick_function& tick) {
  std::uint32_t index;
  if (!free_slots.empty()) {
    index = free_slots.back();
    free_slots.pop_back();
  } else {
    index = static_cast<std::uint32_t>(slots.size());
    slots.emplace_back().index = index;
  }
  tick_slot& slot = slots[index];
  // relaxed: a unit reaches this slot only through a launch made after this, which publishes it
  slot.function.store(&tick, std::memory_order_relaxed);
  slot.enabled.store(tick_access::enabled(tick), std::memory_order_relaxed);  // relaxed: as above
  slot.ran_frame.store(0, std::memory_order_relaxed);                        // relaxed: as above
  slot.registered = true;
  slot.interval = false;
  slot.has_run = false;
  slot.expiry = ticks::run_at_next_visit;
  slot.heap_position = none;
  slot.in_schedule = false;
  slot.dynamic = false;
  slot.queued_new = false;
  slot.placed_frame = 0;
  slot.unit = none;
  slot.kept.clear();
  tick_access::manager(tick) = owner;
  tick_access::slot(tick) = &slot;
  ++registered;
  mark_changed();
  if (!tick_access::enabled(tick)) return;
  if (tick_access::interval(tick) > 0) heap_push(&slot);
  if (in_frame) queue_new(slot);
}

void tick_manager::state::queue_new(tick_slot& slot) {
  if (slot.queued_new) return;
  slot.queued_new = true;
  newly_spawned.push_back(&slot);
}

// wait_until_not_running returns once the unit that may run `slot` this frame is not running
// it: called after the slot's function pointer was cleared, so a unit that starts later
// skips it (see unit::run_state).
void tick_manager::state::wait_until_not_running(tick_slot& slot) {
  bool placed = (slot.in_schedule && !slot.dynamic) || slot.placed_frame == frame;
  if (!placed || slot.unit == none || slot.unit >= units.size()) return;
  const unit& work = units[slot.unit];
  if (&work == running_unit) return;
  // seq_cst: the other half of the exchange of stores described at unit::run_state
  while (work.run_state.load(std::memory_order_seq_cst) == 1) std::this_thread::yield();
}

void tick_manager::state::remove(tick_function& tick) {
  tick_slot& slot = slot_of(tick);
  // seq_cst: pairs with run_unit's store of run_state (see unit::run_state)
  slot.function.store(nullptr, std::memory_order_seq_cst);
  if (in_frame) wait_until_not_running(slot);
  heap_remove(&slot);
  slot.registered = false;
  slot.enabled.store(false, std::memory_order_relaxed);  // relaxed: the cleared pointer decides
  if (slot.queued_new) {
    slot.queued_new = false;
    newly_spawned.erase(std::find(newly_spawned.begin(), newly_spawned.end(), &slot));
  }
  retired_slots.push_back(slot.index);
  tick_access::manager(tick) = nullptr;
  tick_access::slot(tick) = nullptr;
  --registered;
  mark_changed();
}

void tick_manager::state::enable_changed(tick_function& tick) {
  tick_slot& slot = slot_of(tick);
  bool enabled = tick_access::enabled(tick);
  slot.enabled.store(enabled, std::memory_order_relaxed);  // relaxed: see tick_slot::enabled
  mark_changed();
  if (!enabled) {
    heap_remove(&slot);
    slot.has_run = false;  // re-enabled, it starts afresh
    return;
  }
  if (tick_access::interval(tick) > 0) {
    heap_remove(&slot);
    slot.expiry = ticks::run_at_next_visit;
    heap_push(&slot);
  }
  bool in_this_frame = (slot.in_schedule && !slot.dynamic) || slot.placed_frame == frame;
  if (in_frame && !in_this_frame) queue_new(slot);  // a scheduled one is checked when its unit runs
}

void tick_manager::state::interval_changed(tick_function& tick, bool restart_cooldown) {
  tick_slot& slot = slot_of(tick);
  bool was = slot.heap_position != none;
  bool is = tick_access::interval(tick) > 0 && tick_access::enabled(tick);
  if (was != is) mark_changed();  // which ticks are interval ticks shapes the schedule
  if (!is) {
    heap_remove(&slot);
    return;
  }
  if (restart_cooldown) {
    slot.expiry = now + static_cast<double>(tick_access::interval(tick));
  } else if (!was) {
    slot.expiry = ticks::run_at_next_visit;
  }
  if (was) {
    heap_fix(&slot);
  } else {
    heap_push(&slot);
  }
}

// ---- running units ---------------------------------------------------------------------------

void tick_manager::state::run_unit(unit& work) {
  const unit* outer = running_unit;
  running_unit = &work;
  work.run_state.store(1, std::memory_order_seq_cst);  // seq_cst: see unit::run_state
  std::size_t ran = 0;
  tick_slot* const* members = work.members.data();
  std::size_t count = work.members.size();
  for (std::size_t at = 0; at < count; ++at) {
    // A chunk's slots and tick functions lie all over memory: fetch them a few ticks ahead
    // (the loads of the pointers below never fault, and prefetches never trap).
    if (at + 8 < count) __builtin_prefetch(members[at + 8]);
    if (at + 4 < count) {
      __builtin_prefetch(members[at + 4]->function.load(std::memory_order_relaxed));  // relaxed: only a hint
    }
    tick_slot* slot = members[at];
    tick_function* tick = slot->function.load(std::memory_order_seq_cst);  // seq_cst: see unit::run_state
    if (tick == nullptr || !slot->enabled.load(std::memory_order_relaxed)) continue;  // relaxed: see tick_slot
    float delta = frame_delta;
    if (slot->interval) {
      if (slot->due_frame != frame) continue;
      delta = slot->delta;
    }
    slot->ran_frame.store(frame, std::memory_order_relaxed);  // relaxed: see tick_slot::ran_frame
    ++ran;
    try {
      tick_access::execute(*tick, delta, tick_type);
    } catch (...) {
      report_tick_exception(*slot, std::current_exception());
    }
  }
  ticks_run.fetch_add(ran, std::memory_order_relaxed);  // relaxed: see state::ticks_run
  work.run_state.store(2, std::memory_order_release);   // release: pairs with wait_until_not_running's load
  running_unit = outer;
}

void tick_manager::state::launch(std::uint32_t index) {
  unit& work = units[index];
  prerequisite_scratch.clear();
  for (std::uint32_t before : work.prerequisites) prerequisite_scratch.emplace_back(units[before].handle);
  work.run_state.store(0, std::memory_order_relaxed);  // relaxed: published by the launch below
  work.launched = true;
  pending.push_back(index);
  ++stats.tasks_launched;
  if (work.batch) ++stats.batches;
  const char* name = work.batch ? "tick batch" : work.single ? "tick" : "tick chunk";
  placement where = work.game_thread ? on_thread(game_named, thread_queue::main, work.high_priority)
                                     : placement(work.high_priority ? priority::high : priority::normal);
  state* self = this;
  unit* target = &work;
  auto body = [self, target] { self->run_unit(*target); };
  if (prerequisite_scratch.empty()) {
    work.handle = pool->launch(name, body, where);
  } else {
    work.handle = pool->launch(name, body, prerequisite_scratch, where);
  }
}

void tick_manager::state::release(ticking_group group, std::vector<std::uint32_t>& launched) {
  for (std::uint32_t index : static_by_start[ticks::group_index(group)]) {
    launch(index);
    launched.push_back(index);
  }
  auto& extra = frame_by_start[ticks::group_index(group)];
  for (std::uint32_t index : extra) {
    launch(index);
    launched.push_back(index);
  }
  extra.clear();
}

// prerequisites_done says whether every unit `work` waits for has completed.
bool tick_manager::state::prerequisites_done(const unit& work) const {
  for (std::uint32_t before : work.prerequisites) {
    if (!units[before].handle.is_completed()) return false;
  }
  return true;
}

// settle_game_unit waits for a game-thread unit. Its prerequisites are older game-thread
// units (settled already) or any-thread units, which the workers run meanwhile: the game
// thread runs its own queue and waits in short spells rather than taking the workers' work,
// unless the workers make no progress for a while.
void tick_manager::state::settle_game_unit(const unit& work) {
  int idle_spells = 0;
  while (!work.handle.is_completed()) {
    if (prerequisites_done(work) && work.handle.try_retract_and_execute()) continue;
    if (pool->process_until_idle(game_named) != 0) {
      idle_spells = 0;
      continue;
    }
    if (++idle_spells > 8 && work.handle.try_retract_and_execute()) continue;  // take its prerequisites back
    work.handle.wait(std::chrono::microseconds(20));
  }
}

// wait_for waits for every launched unit that must complete by `up_to`: game-thread units
// first, oldest first (a unit's prerequisites are older), while the workers run the rest;
// then the rest, oldest first, the game thread taking back what has not started, from the
// one it waits for or later ones. It blocks only in short spells, so that a game-thread unit
// made ready meanwhile waits no longer than that.
void tick_manager::state::wait_for(ticking_group up_to) {
  due_scratch.clear();
  auto keep = std::remove_if(pending.begin(), pending.end(), [&](std::uint32_t index) {
    if (units[index].end > up_to) return false;
    due_scratch.push_back(index);
    return true;
  });
  pending.erase(keep, pending.end());
  std::sort(due_scratch.begin(), due_scratch.end());
  for (std::uint32_t index : due_scratch) {
    if (units[index].game_thread) settle_game_unit(units[index]);
  }
  std::size_t helper = 0;  // the next later unit the game thread may take back while it waits
  for (std::size_t at = 0; at < due_scratch.size(); ++at) {
    const task<>& handle = units[due_scratch[at]].handle;
    while (!handle.is_completed()) {
      if (handle.try_retract_and_execute()) continue;
      if (pool->process_until_idle(game_named) != 0) continue;
      bool helped = false;
      for (helper = std::max(helper, at + 1); helper < due_scratch.size() && !helped; ++helper) {
        const task<>& later = units[due_scratch[helper]].handle;
        helped = !later.is_completed() && later.try_retract_and_execute();
      }
      if (!helped) handle.wait(std::chrono::microseconds(20));
    }
  }
}

void tick_manager::state::run_group(ticking_group group, bool block) {
  launched_scratch.clear();
  release(group, launched_scratch);
  // The game thread runs its own ready units first, in release order (high priority
  // first), leaving any-thread units to the workers meanwhile.
  for (std::uint32_t index : launched_scratch) {
    const unit& work = units[index];
    if (work.game_thread && prerequisites_done(work)) work.handle.try_retract_and_execute();
  }
  if (block) {
    wait_for(group);
  } else {
    pool->process_until_idle(game_named);
  }
}

void tick_manager::state::run_newly_spawned_passes() {
  int passes = 0;
  while (!newly_spawned.empty()) {
    if (passes >= options.newly_spawned_pass_limit) {
      std::string names;
      for (tick_slot* slot : newly_spawned) {
        slot->queued_new = false;
        names.append(names.empty() ? "'" : ", '").append(slot->function.load(std::memory_order_relaxed)->name()).append("'");
      }
      newly_spawned.clear();
      report(diagnostic_kind::limit_reached,
             "tick_manager: newly spawned ticks still appearing after " + std::to_string(passes) +
                 " passes (runaway spawning); these tick from the next frame: " + names,
             severity::warning);
      break;
    }
    queue_newly_spawned(ticking_group::newly_spawned);
    run_group(ticking_group::newly_spawned, true);
    ++passes;
  }
  stats.newly_spawned_passes = passes;
}

void tick_manager::state::finish_frame() {
  wait_for(ticking_group::newly_spawned);
  for (std::size_t index = 0; index < static_units; ++index) {
    unit& work = units[index];
    work.handle = task<>();
    work.launched = false;
  }
  while (units.size() > static_units) units.pop_back();
  for (auto& list : frame_by_start) list.clear();
  for (tick_slot* slot : newly_spawned) slot->queued_new = false;  // registered too late: next frame
  newly_spawned.clear();
  stats.ticks_run = ticks_run.load(std::memory_order_relaxed);  // relaxed: every unit was waited for
  if (attached_here) {
    pool->detach();
    attached_here = false;
  }
  in_frame = false;
}

// ---- the public face ---------------------------------------------------------------------------

tick_manager::tick_manager(scheduler& pool, tick_manager_options options)
    : state_(std::make_unique<state>(*this, pool, options)) {}

tick_manager::~tick_manager() {
  state& s = *state_;
  if (s.in_frame) {
    report_misuse("~tick_manager", "destroyed during a frame; the frame's ticks are finished first");
    s.finish_frame();
  }
  for (tick_slot& slot : s.slots) {
    tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: no frame runs
    if (tick == nullptr) continue;
    tick_access::manager(*tick) = nullptr;
    tick_access::slot(*tick) = nullptr;
  }
}

void tick_manager::start_frame(float delta_seconds, level_tick tick_type) {
  state& s = *state_;
  if (!s.on_game_thread()) {
    report_misuse("start_frame", "called from a thread other than the game thread (the constructing one); refused");
    return;
  }
  if (s.in_frame) {
    report_misuse("start_frame", "a frame is already running (end_frame first); refused");
    return;
  }
  if (!(delta_seconds >= 0) || std::isinf(delta_seconds)) {
    report_misuse("start_frame", "delta_seconds must be finite and >= 0; refused");
    return;
  }
  std::optional<named_thread> attached = scheduler::current_named_thread();
  if (attached && scheduler::current() != s.pool) {
    report_misuse("start_frame", "the game thread is attached to another scheduler; refused");
    return;
  }
  if (!attached) {
    s.pool->attach(named_thread::game);
    s.attached_here = true;
    s.game_named = named_thread::game;
  } else {
    s.game_named = *attached;
  }
  s.in_frame = true;
  ++s.frame;
  s.now += static_cast<double>(delta_seconds);
  s.frame_delta = delta_seconds;
  s.tick_type = tick_type;
  s.next_group = 0;
  s.stats = {};
  s.ticks_run.store(0, std::memory_order_relaxed);  // relaxed: no unit of this frame runs yet
  bool rebuild = s.dirty || !s.options.cache_schedule;
  if (rebuild) s.build();
  s.stats.schedule_rebuilt = rebuild;
  s.stats.demoted = s.static_demoted;
  s.stats.cycles_broken = s.static_cycles;
  s.take_due_cooldowns();
  s.place_dynamic();
}

void tick_manager::run_tick_group(ticking_group group, bool block_till_complete) {
  state& s = *state_;
  if (!s.on_game_thread()) {
    report_misuse("run_tick_group", "called from a thread other than the game thread; refused");
    return;
  }
  std::string named(to_string(group));
  if (!s.in_frame) {
    report_misuse("run_tick_group", named + " outside start_frame/end_frame; refused");
    return;
  }
  if (group == ticking_group::newly_spawned) {
    report_misuse("run_tick_group", "newly_spawned passes run as part of last_demotable; refused");
    return;
  }
  std::size_t index = ticks::group_index(group);
  if (index != s.next_group) {
    std::string problem = named + (index < s.next_group ? " already ran this frame" : " out of order");
    if (s.next_group <= last_group) {
      problem += " (next is " + std::string(to_string(static_cast<ticking_group>(s.next_group))) + ")";
    }
    report_misuse("run_tick_group", problem + "; refused");
    return;
  }
  if (group == ticking_group::last_demotable && !block_till_complete) {
    report_misuse("run_tick_group", "last_demotable always blocks (the frame ends after it); it blocks");
    block_till_complete = true;
  }
  s.run_group(group, block_till_complete);
  if (block_till_complete) {
    if (group == ticking_group::last_demotable) {
      s.run_newly_spawned_passes();
    } else {
      s.queue_newly_spawned(static_cast<ticking_group>(index + 1));
    }
  }
  s.next_group = index + 1;
}

void tick_manager::end_frame() {
  state& s = *state_;
  if (!s.on_game_thread()) {
    report_misuse("end_frame", "called from a thread other than the game thread; refused");
    return;
  }
  if (!s.in_frame) {
    report_misuse("end_frame", "no frame is running; refused");
    return;
  }
  if (s.next_group <= last_group) {
    report(diagnostic_kind::misuse,
           "tick_manager::end_frame: called before run_tick_group(" +
               std::string(to_string(static_cast<ticking_group>(s.next_group))) + "); the remaining groups run now",
           severity::warning);
    while (s.next_group <= last_group) run_tick_group(static_cast<ticking_group>(s.next_group), true);
  }
  s.finish_frame();
}

void tick_manager::run_pause_frame(float delta_seconds) {
  state& s = *state_;
  if (!s.on_game_thread()) {
    report_misuse("run_pause_frame", "called from a thread other than the game thread; refused");
    return;
  }
  if (s.in_frame) {
    report_misuse("run_pause_frame", "a frame is running (end_frame first); refused");
    return;
  }
  if (!(delta_seconds >= 0) || std::isinf(delta_seconds)) {
    report_misuse("run_pause_frame", "delta_seconds must be finite and >= 0; refused");
    return;
  }
  s.stats = {};
  std::size_t ran = 0;
  // Ticks registered by these ticks wait for the next frame (Unreal forbids spawning here).
  std::size_t count = s.slots.size();
  for (std::size_t index = 0; index < count; ++index) {
    tick_slot& slot = s.slots[index];
    tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: game thread only here
    if (tick == nullptr || !tick_access::enabled(*tick) || !tick_access::when_paused(*tick)) continue;
    ++ran;
    try {
      tick_access::execute(*tick, delta_seconds, level_tick::pause_tick);
    } catch (...) {
      report_tick_exception(slot, std::current_exception());
    }
  }
  s.stats.ticks_run = ran;
}

tick_frame_stats tick_manager::last_frame_stats() const {
  tick_frame_stats result = state_->stats;
  if (state_->in_frame) result.ticks_run = state_->ticks_run.load(std::memory_order_relaxed);  // relaxed: a snapshot
  return result;
}

std::size_t tick_manager::registered_count() const { return state_->registered; }

scheduler& tick_manager::owning_scheduler() const { return *state_->pool; }

void tick_manager::dump(std::ostream& out) const {
  const state& s = *state_;
  out << "tick manager: " << s.registered << " registered, frame " << s.frame << ", schedule "
      << (s.dirty ? "to be rebuilt" : "cached") << ", " << s.cooldown_heap.size() << " cooling down\n";
  for (std::size_t group = 0; group <= last_group; ++group) {
    bool header = false;
    for (const tick_slot& slot : s.slots) {
      const tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: game thread
      if (tick == nullptr) continue;
      bool placed = slot.in_schedule && !s.dirty && !slot.dynamic;
      ticking_group shown = placed ? slot.start : tick->tick_group();
      if (ticks::group_index(shown) != group) continue;
      if (!header) {
        out << to_string(static_cast<ticking_group>(group)) << ":\n";
        header = true;
      }
      out << "  '" << tick->name() << "'";
      if (placed && slot.start != tick->tick_group()) out << " (demoted from " << to_string(tick->tick_group()) << ")";
      out << " ends " << to_string(placed ? slot.end : tick->end_tick_group());
      if (!tick->is_tick_function_enabled()) out << ", disabled";
      if (tick->tick_interval() > 0) out << ", every " << tick->tick_interval() << " s";
      if (tick->is_high_priority()) out << ", high priority";
      if (tick->runs_on_any_thread()) out << ", any thread";
      if (tick->allows_tick_batching()) out << ", batchable";
      if (tick->ticks_even_when_paused()) out << ", ticks when paused";
      if (!tick->prerequisites().empty()) {
        out << "; after";
        for (const tick_function* before : tick->prerequisites()) out << " '" << before->name() << "'";
      }
      out << "\n";
    }
  }
}

}  // namespace magpie
