// The tick manager's frames: the units' tasks, launching them group by group, running their
// ticks, and waiting for them on the game thread.
#include <magpie/diagnostics.h>
#include <magpie/task.h>
#include <magpie/tick_manager.h>
#include <magpie/trace.h>

#include "tick_state.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <thread>

namespace magpie {

namespace ticks {

constinit thread_local const unit* running_unit = nullptr;

void report_tick_exception(const tick_slot& slot, std::exception_ptr error) {
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

}  // namespace ticks

using ticks::running_unit;
using ticks::tick_slot;
using ticks::unit;

namespace {

// traced_name is a tick's name for a trace slice: interned once per slot, since the tick
// function (and its name) may be gone before the trace is written.
const char* traced_name(tick_slot& slot, const tick_function& tick) {
  const char* name = slot.trace_name.load(std::memory_order_relaxed);  // relaxed: see tick_slot::trace_name
  if (name == nullptr) {
    name = trace::intern(tick.name());
    slot.trace_name.store(name, std::memory_order_relaxed);  // relaxed: as the load
  }
  return name;
}

}  // namespace

// run_members runs a unit's ticks in order and returns how many ran; Measure times each
// tick into its slot (one clock read per tick: the end of one tick starts the next).
template <bool Measure>
std::size_t tick_manager::state::run_members(unit& work) {
  using clock = std::chrono::steady_clock;
  std::size_t ran = 0;
  const ticks::member* members = work.members.data();
  std::size_t count = work.members.size();
  [[maybe_unused]] clock::time_point started;
  if constexpr (Measure) started = clock::now();
  for (std::size_t at = 0; at < count; ++at) {
    // A unit's tick functions lie all over memory (100,000 ticks outgrow the caches): fetch
    // them well ahead, from the member list itself, so that no fetch waits for another load.
    // Prefetches never trap, even on a tick destroyed meanwhile.
    if (at + 16 < count) {
      // relaxed: only an address to fetch ahead; the load below decides whether the tick runs
      std::uintptr_t ahead = members[at + 16].word.load(std::memory_order_relaxed);
      __builtin_prefetch(ticks::member::tick_function_address(ahead));
      if ((ahead & ticks::member::interval) != 0) __builtin_prefetch(members[at + 16].slot);
    }
    std::uintptr_t word = members[at].word.load(std::memory_order_seq_cst);  // seq_cst: see unit::run_state
    if (word == 0 || (word & ticks::member::disabled) != 0) continue;
    tick_function* tick = ticks::member::tick_function_address(word);
    tick_slot* slot = members[at].slot;
    float delta = frame_delta;
    if ((word & ticks::member::interval) != 0) {
      if (slot->due_frame != frame) continue;
      delta = slot->delta;
    }
    ++ran;
    {
      trace::client_scope traced(trace::client_events_on() ? traced_name(*slot, *tick) : nullptr);
      try {
        tick_access::execute(*tick, delta, tick_type);
      } catch (...) {
        ticks::report_tick_exception(*slot, std::current_exception());
      }
    }
    if constexpr (Measure) {
      // The slot outlives an unregistration during the frame: it is reused only after the
      // next build.
      clock::time_point finished = clock::now();
      slot->measured_seconds = std::chrono::duration<float>(finished - started).count();
      slot->measured_frame = static_cast<std::uint32_t>(frame);
      started = finished;
    }
  }
  return ran;
}

void tick_manager::state::run_unit(unit& work) {
  const unit* outer = running_unit;
  work.outer = outer;
  running_unit = &work;
  work.run_state.store(1, std::memory_order_seq_cst);  // seq_cst: see unit::run_state
  std::size_t ran = options.measure_tick_times ? run_members<true>(work) : run_members<false>(work);
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

// release launches `group`'s units: first the any-thread units whose prerequisites are
// launched already, so that the workers start on them while the game thread launches the
// rest; then the rest in filing order (a unit's prerequisites are filed before it, so each
// finds its prerequisites' tasks).
void tick_manager::state::release(ticking_group group, std::vector<std::uint32_t>& launched) {
  auto& extra = frame_by_start[ticks::group_index(group)];
  for (const auto* list : {&static_by_start[ticks::group_index(group)], &extra}) {
    for (std::uint32_t index : *list) {
      const unit& work = units[index];
      if (work.game_thread) continue;
      bool ready = std::all_of(work.prerequisites.begin(), work.prerequisites.end(),
                               [&](std::uint32_t before) { return units[before].launched; });
      if (!ready) continue;
      launch(index);
      launched.push_back(index);
    }
  }
  for (const auto* list : {&static_by_start[ticks::group_index(group)], &extra}) {
    for (std::uint32_t index : *list) {
      if (units[index].launched) continue;
      launch(index);
      launched.push_back(index);
    }
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

namespace {

// idle_spells is how the game thread blocks while the units it waits for run elsewhere: in
// short spells at first, so that it takes back a unit made ready meanwhile within one; after
// a run of spells in which nothing moved, in one blocking wait for the unit, which still runs
// the game thread's queue and takes the unit back if it can, and which reports a unit that
// never completes (scheduler_options::stall_report_after) instead of spinning silently.
class idle_spells {
 public:
  void progressed() { fruitless_ = 0; }
  void wait(const task<>& handle) {
    if (fruitless_ < fruitless_limit) {
      ++fruitless_;
      handle.wait(std::chrono::microseconds(20));
    } else {
      handle.wait();
      fruitless_ = 0;
    }
  }

 private:
  // At least 10 ms of spells (each lasts 20 us or more): longer than a frame's usual wait
  // for a long tick, so a frame that is only slow keeps helping.
  static constexpr int fruitless_limit = 500;
  int fruitless_ = 0;
};

}  // namespace

// settle_game_units waits for the game-thread units among due_scratch (filing order). It
// runs each one that is ready, oldest first, and its own queue; when none is ready (each
// waits for any-thread units), it takes back a ready any-thread unit no worker has started —
// one the oldest waiting unit waits for, else the newest one due, which the workers would
// reach last — rather than idle. It blocks only when there is none either (idle_spells).
void tick_manager::state::settle_game_units() {
  game_due_scratch.clear();
  for (std::uint32_t index : due_scratch) {
    if (units[index].game_thread) game_due_scratch.push_back(index);
  }
  std::size_t oldest = 0;
  idle_spells idle;
  for (;;) {
    while (oldest < game_due_scratch.size() && units[game_due_scratch[oldest]].handle.is_completed()) ++oldest;
    if (oldest == game_due_scratch.size()) return;
    bool progressed = false;
    for (std::size_t at = oldest; at < game_due_scratch.size() && !progressed; ++at) {
      const unit& work = units[game_due_scratch[at]];
      progressed = !work.handle.is_completed() && prerequisites_done(work) && work.handle.try_retract_and_execute();
    }
    if (progressed || pool->process_until_idle(game_named) != 0) {
      idle.progressed();
      continue;
    }
    const unit& waiting = units[game_due_scratch[oldest]];
    auto take_back = [&](std::uint32_t index) {
      const unit& other = units[index];
      return !other.game_thread && !other.handle.is_completed() && prerequisites_done(other) &&
             other.handle.try_retract_and_execute();
    };
    progressed = std::any_of(waiting.prerequisites.begin(), waiting.prerequisites.end(), take_back) ||
                 std::any_of(due_scratch.rbegin(), due_scratch.rend(), take_back);
    if (progressed) {
      idle.progressed();
    } else {
      idle.wait(waiting.handle);
    }
  }
}

// wait_for waits for every launched unit that must complete by `up_to`: game-thread units
// first (settle_game_units), while the workers run the rest; then the rest, oldest first.
// While one has not completed, the game thread takes back the newest ready unit no worker
// has started — the workers steal the oldest first, so the two rarely reach for the same
// one — and blocks only when none is left (idle_spells).
void tick_manager::state::wait_for(ticking_group up_to) {
  due_scratch.clear();
  auto keep = std::remove_if(pending.begin(), pending.end(), [&](std::uint32_t index) {
    if (units[index].end > up_to) return false;
    due_scratch.push_back(index);
    return true;
  });
  pending.erase(keep, pending.end());
  std::sort(due_scratch.begin(), due_scratch.end());
  settle_game_units();
  std::size_t newest = due_scratch.size();  // the units from here on have been looked at
  idle_spells idle;
  for (std::size_t at = 0; at < due_scratch.size(); ++at) {
    const task<>& handle = units[due_scratch[at]].handle;
    while (!handle.is_completed()) {
      if (pool->process_until_idle(game_named) != 0) {
        idle.progressed();
        continue;
      }
      bool helped = false;
      while (!helped && newest > at) {
        const unit& later = units[due_scratch[newest - 1]];
        helped = !later.handle.is_completed() && prerequisites_done(later) && later.handle.try_retract_and_execute();
        if (!helped) --newest;  // started, done or still waiting: the wait below takes care of it
      }
      if (helped) {
        idle.progressed();
      } else {
        idle.wait(handle);  // the wait takes the unit back if it can
      }
    }
    idle.progressed();  // a unit completed
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
        names.append(names.empty() ? "'" : ", '").append(ticks::name_of(*slot)).append("'");
      }
      newly_spawned.clear();
      report(diagnostic_kind::limit_reached,
             "tick_manager: newly spawned ticks still appearing after " + std::to_string(passes) +
                 " passes (runaway spawning); these tick from the next frame: " + names,
             severity::warning);
      break;
    }
    trace::client_scope pass("newly spawned pass");
    queue_newly_spawned(ticking_group::newly_spawned);
    run_group(ticking_group::newly_spawned, true);
    ++passes;
  }
  stats.newly_spawned_passes = passes;
}

void tick_manager::state::finish_frame() {
  wait_for(ticking_group::newly_spawned);
  drain_orphans();
  std::unique_lock guard(off_thread_guard);  // the units go and the frame ends
  // A destruction off the game thread that counted itself in under the guard may still read
  // its unit: the units stay until it is done. acquire: pairs with its release on the way out.
  while (off_thread_waiters.load(std::memory_order_acquire) != 0) {
    guard.unlock();
    std::this_thread::yield();
    guard.lock();
  }
  for (auto [tick, work] : retiring) {
    if (tick_access::slot(*tick) == this) tick_access::set_slot(*tick, nullptr);  // its unit is done
  }
  retiring.clear();
  visited_and_removed.clear();
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
  stats.frame_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - frame_started).count();
  if (options.measure_tick_times) measure_frame();
  frame_filed.clear();
  if (attached_here) {
    pool->detach();
    attached_here = false;
  }
  in_frame = false;
}

// measure_frame computes the frame's lower bound from its tick times (see tick_frame_stats):
// segment by segment, from the game-thread time, the any-thread time and the critical path.
// It walks the filed ticks in filing order, in which every tick comes after its
// prerequisites, so a tick's chain extends chains already known.
void tick_manager::state::measure_frame() {
  constexpr std::size_t groups = ticking_group_count;
  std::array<std::size_t, groups> segment_of{};
  std::size_t segments = 0;
  for (std::size_t group = 0; group < groups; ++group) {
    segment_of[group] = segments;
    if (blocked[group]) ++segments;  // the newly-spawned passes: one segment after the rest
  }
  struct segment_times {
    double game = 0, any = 0, critical = 0;
  };
  std::array<segment_times, groups + 1> times{};
  auto confined = [&](const tick_slot& slot) {
    return segment_of[ticks::group_index(slot.start)] == segment_of[ticks::group_index(slot.end)];
  };
  auto this_frame = static_cast<std::uint32_t>(frame);
  auto visit = [&](tick_slot& slot) {
    if (slot.measured_frame != this_frame || !confined(slot)) return;
    std::size_t segment = segment_of[ticks::group_index(slot.start)];
    float longest_before = 0;
    for (const tick_slot* before : slot.kept) {
      if (before->measured_frame == this_frame && confined(*before) &&
          segment_of[ticks::group_index(before->start)] == segment) {
        longest_before = std::max(longest_before, before->chain_seconds);
      }
    }
    slot.chain_seconds = longest_before + slot.measured_seconds;
    segment_times& into = times[segment];
    into.critical = std::max(into.critical, static_cast<double>(slot.chain_seconds));
    (slot.game_thread ? into.game : into.any) += slot.measured_seconds;
  };
  for (tick_slot* slot : static_filed) visit(*slot);
  for (tick_slot* slot : frame_filed) visit(*slot);
  double threads = static_cast<double>(pool->worker_count()) + 1;
  for (const segment_times& each : times) {
    stats.game_thread_seconds += each.game;
    stats.any_thread_seconds += each.any;
    stats.lower_bound_seconds += std::max({each.game, (each.game + each.any) / threads, each.critical});
  }
  stats.efficiency = stats.frame_seconds > 0 ? stats.lower_bound_seconds / stats.frame_seconds : 0;
}

}  // namespace magpie
