// tick_manager: registration, the public face (frames, groups, pause frames, stats, dump).
// The schedule is built in tick_schedule.cpp, the units run in tick_frame.cpp.
#include <magpie/diagnostics.h>
#include <magpie/task.h>
#include <magpie/tick_manager.h>
#include <magpie/trace.h>

#include "tick_state.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ostream>
#include <string>
#include <thread>

namespace magpie {

using ticks::none;
using ticks::tick_slot;
using ticks::running_unit;
using ticks::runs_on_this_thread;
using ticks::unit;

namespace {

constexpr std::size_t last_group = ticks::group_index(ticking_group::last_demotable);

void report_misuse(const char* operation, const std::string& problem) {
  report(diagnostic_kind::misuse, std::string("tick_manager::") + operation + ": " + problem);
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
  slot.registered = true;
  slot.registration = ++registrations;
  slot.interval = false;
  slot.has_run = false;
  slot.expiry = ticks::run_at_next_visit;
  slot.heap_position = none;
  slot.in_schedule = false;
  slot.dynamic = false;
  slot.queued_new = false;
  slot.placed_frame = 0;
  slot.unit = none;
  slot.member = none;
  slot.kept.clear();
  tick_access::set_manager(tick, owner);
  tick_access::set_slot(tick, &slot);
  ++registered;
  mark_changed();
  if (!tick_access::enabled(tick)) return;
  if (tick_access::interval(tick) > 0) heap_push(&slot);
  if (!in_frame) return;
  // A tick runs at most once a frame: one that was part of this frame ticks from the next.
  bool visited;
  {
    std::lock_guard guard(off_thread_guard);  // a destruction on another thread may change the list
    visited = std::find(visited_and_removed.begin(), visited_and_removed.end(), &tick) != visited_and_removed.end();
  }
  if (!visited) queue_new(slot);
}

void tick_manager::state::queue_new(tick_slot& slot) {
  if (slot.queued_new) return;
  slot.queued_new = true;
  newly_spawned.push_back(&slot);
}

// member_this_frame is the member that runs `slot` in the frame in progress, or null: a slot
// filed into the cached schedule or placed for this frame (frame units are gone after it).
ticks::member* tick_manager::state::member_this_frame(tick_slot& slot) {
  bool placed = (slot.in_schedule && !slot.dynamic) || slot.placed_frame == frame;
  if (!in_frame || !placed || slot.unit >= units.size()) return nullptr;
  auto& members = units[slot.unit].members;
  if (slot.member >= members.size() || members[slot.member].slot != &slot) return nullptr;
  return &members[slot.member];
}

// waiting_scope marks every unit the calling thread runs as waiting for `target` while it
// lives (see unit::waiting_for).
class waiting_scope {
 public:
  explicit waiting_scope(const unit& target) { mark(&target); }
  ~waiting_scope() { mark(nullptr); }
  waiting_scope(const waiting_scope&) = delete;
  waiting_scope& operator=(const waiting_scope&) = delete;

 private:
  static void mark(const unit* target) {
    for (const unit* at = running_unit; at != nullptr; at = at->outer) {
      at->waiting_for.store(target, std::memory_order_seq_cst);  // seq_cst: see unit::waiting_for
    }
  }
};

namespace {

// waits_for_this_thread says whether the thread running `work` waits, in a destruction, for a
// unit this thread runs, directly or through the threads it waits for in turn: running ticks
// destroying one another in a ring that closes here. Of the threads in such a ring, the last
// to mark its wait sees every other mark (all seq_cst), so at least one of them sees the ring
// closed through itself. A ring that does not pass through this thread is its own threads'
// to break: the walk stops when it comes back to a unit it met (Brent's cycle check, no memory).
bool waits_for_this_thread(const unit& work) {
  const unit* at = &work;
  const unit* checkpoint = &work;
  for (std::size_t steps = 1, power = 1;; ++steps) {
    at = at->waiting_for.load(std::memory_order_seq_cst);  // seq_cst: see unit::waiting_for
    if (at == nullptr) return false;
    if (runs_on_this_thread(*at)) return true;
    if (at == checkpoint) return false;
    if (steps == power) {
      checkpoint = at;
      power *= 2;
      steps = 0;
    }
  }
}
}  // namespace

// wait_until_not_running returns once `work` is not running, or at once where waiting could
// not end: `work` runs on this thread, or its thread waits, in a destruction, for a unit this
// thread runs, directly or around a ring (see waits_for_this_thread: the destruction that
// sees the ring closed goes on without waiting, so the tick it destroys may still be running
// its body, as when a tick is destroyed under itself in Unreal). On the game thread the wait
// is a blocking task wait for the unit: it runs the game thread's queue meanwhile (a tick of
// that unit may be waiting for it), never re-entering a queue the thread is processing further down its
// stack, and it reports a stall (scheduler_options::stall_report_after). Called after a
// member word of the unit was cleared, so a unit that starts later skips it (see
// unit::run_state).
void tick_manager::state::wait_until_not_running(const unit& work) {
  if (runs_on_this_thread(work)) return;
  waiting_scope waiting(work);
  // After our own mark above: pairs with the other threads' marks (unit::waiting_for).
  if (waits_for_this_thread(work)) return;
  // seq_cst: the other half of the exchange of stores described at unit::run_state
  if (work.run_state.load(std::memory_order_seq_cst) != 1) return;
  if (on_game_thread()) {
    work.handle.wait();  // the game thread launched it: its handle is set
    return;
  }
  // Off the game thread the handle may still be being set by the launch: watch the state.
  while (work.run_state.load(std::memory_order_seq_cst) == 1) {  // seq_cst: as above
    std::this_thread::yield();
    if (waits_for_this_thread(work)) return;
  }
}

// stop_ticking (under off_thread_guard) makes sure `slot`'s tick never starts again: its
// function and its member word this frame are cleared. It returns the unit running the tick
// on another thread right now, if any, which may still be inside it.
const unit* tick_manager::state::stop_ticking(tick_slot& slot) {
  slot.function.store(nullptr, std::memory_order_seq_cst);  // seq_cst: as the word below
  ticks::member* running_it = member_this_frame(slot);
  if (running_it == nullptr) return nullptr;
  // seq_cst: pairs with run_unit's store of run_state (see unit::run_state)
  running_it->word.store(0, std::memory_order_seq_cst);
  const unit& work = units[slot.unit];
  return work.run_state.load(std::memory_order_seq_cst) == 1 && !runs_on_this_thread(work) ? &work : nullptr;
}

// retire_slot (under off_thread_guard, on the game thread) takes `slot` out of the cooldown
// heap and the newly spawned queue and hands it back for reuse.
void tick_manager::state::retire_slot(tick_slot& slot) {
  heap_remove(&slot);
  slot.registered = false;
  if (slot.queued_new) {
    slot.queued_new = false;
    newly_spawned.erase(std::find(newly_spawned.begin(), newly_spawned.end(), &slot));
  }
  retired_slots.push_back(slot.index);
  --registered;
  mark_changed();
}

// wait_counted waits, outside the guard, for `work` to finish running, counted in
// off_thread_waiters (incremented under the guard by the caller) until it no longer reads it.
void tick_manager::state::wait_counted(const unit& work) {
  wait_until_not_running(work);
  // release: finish_frame's acquire load sees that this wait no longer reads the unit
  off_thread_waiters.fetch_sub(1, std::memory_order_release);
}

// remove unregisters `tick` (game thread). It never waits: a unit that has not reached the
// tick skips it, and one running it right now finishes; a later destruction of the tick
// waits for that one (see forget), so the tick keeps a way to it until the frame ends.
void tick_manager::state::remove(tick_function& tick) {
  std::lock_guard guard(off_thread_guard);
  tick_slot& slot = slot_of(tick);
  const unit* still_running = stop_ticking(slot);
  if (in_frame && (slot.in_schedule || slot.placed_frame == frame)) {
    visited_and_removed.push_back(&tick);  // part of this frame already
  }
  retire_slot(slot);
  if (still_running != nullptr) retiring.emplace_back(&tick, still_running);
  // Also unregistered earlier this frame while running (then registered again): that run
  // may still be going on.
  bool retiring_here = std::any_of(retiring.begin(), retiring.end(), [&](const auto& entry) { return entry.first == &tick; });
  tick_access::set_slot(tick, retiring_here ? static_cast<void*>(this) : nullptr);
  tick_access::set_manager(tick, nullptr);
}

// forget drops every hold this manager has on `tick`, which is being destroyed (on any
// thread) or registered with another manager. Registered here, it is unregistered: off the
// game thread it never runs again and the game thread retires its slot (drain_orphans).
// Then forget waits for each unit of this frame that may still be running the tick on
// another thread: the one it is filed in and the one it was unregistered from while running.
void tick_manager::state::forget(tick_function& tick) {
  bool game = on_game_thread();
  std::array<const unit*, 2> runs{};
  {
    std::lock_guard guard(off_thread_guard);
    if (tick_access::manager(tick) == owner) {
      tick_slot& slot = slot_of(tick);
      runs[0] = stop_ticking(slot);
      if (game) {
        retire_slot(slot);
      } else {
        orphans.push_back(slot.index);
      }
      tick_access::set_manager(tick, nullptr);
    }
    auto found = std::find_if(retiring.begin(), retiring.end(), [&](const auto& entry) { return entry.first == &tick; });
    if (found != retiring.end()) {
      if (found->second != runs[0]) runs[1] = found->second;
      retiring.erase(found);
    }
    std::erase(visited_and_removed, &tick);
    tick_access::set_slot(tick, nullptr);
    if (!game) {
      int counted = static_cast<int>(std::count_if(runs.begin(), runs.end(), [](const unit* work) { return work != nullptr; }));
      off_thread_waiters.fetch_add(counted, std::memory_order_relaxed);  // relaxed: ordered by the guard
    }
  }
  for (const unit* work : runs) {
    if (work == nullptr) continue;
    if (game) {
      wait_until_not_running(*work);
    } else {
      wait_counted(*work);
    }
  }
}

// drain_orphans retires the slots of ticks destroyed off the game thread (game thread).
void tick_manager::state::drain_orphans() {
  std::lock_guard guard(off_thread_guard);
  for (std::uint32_t index : orphans) {
    retire_slot(slots[index]);
  }
  orphans.clear();
}

void tick_manager::state::enable_changed(tick_function& tick) {
  tick_slot& slot = slot_of(tick);
  bool enabled = tick_access::enabled(tick);
  if (ticks::member* running_it = member_this_frame(slot)) {
    // relaxed: see member::tick_function_address
    if (enabled) {
      running_it->word.fetch_and(~ticks::member::disabled, std::memory_order_relaxed);
    } else {
      running_it->word.fetch_or(ticks::member::disabled, std::memory_order_relaxed);
    }
  }
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
  // A tick that was part of this frame is not queued again (its unit checks the word), also
  // one that waits for an interval tick and was not placed this frame.
  bool in_this_frame = slot.in_schedule || slot.placed_frame == frame;
  if (in_frame && !in_this_frame) queue_new(slot);
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
    tick_access::set_manager(*tick, nullptr);
    tick_access::set_slot(*tick, nullptr);
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
  auto started = std::chrono::steady_clock::now();
  s.drain_orphans();
  std::lock_guard guard(s.off_thread_guard);  // the units and the slots' placement change
  s.in_frame = true;
  s.frame_started = started;
  s.blocked.fill(false);
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
  trace::client_scope traced(to_string(group).data());  // a literal: NUL-terminated
  s.blocked[index] = block_till_complete;
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
  // Registration order, which slot order is not once a tick took a freed slot. Ticks
  // registered by these ticks wait for the next frame (Unreal forbids spawning here).
  s.pause_order.clear();
  for (const tick_slot& slot : s.slots) {
    if (slot.function.load(std::memory_order_relaxed) != nullptr) {  // relaxed: game thread only here
      s.pause_order.emplace_back(slot.registration, slot.index);
    }
  }
  std::sort(s.pause_order.begin(), s.pause_order.end());
  for (auto [registration, index] : s.pause_order) {
    tick_slot& slot = s.slots[index];
    tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: game thread only here
    if (tick == nullptr || slot.registration != registration || !tick_access::enabled(*tick) ||
        !tick_access::when_paused(*tick)) {
      continue;
    }
    ++ran;
    try {
      tick_access::execute(*tick, delta_seconds, level_tick::pause_tick);
    } catch (...) {
      ticks::report_tick_exception(slot, std::current_exception());
    }
  }
  s.stats.ticks_run = ran;
}

tick_frame_stats tick_manager::last_frame_stats() const {
  tick_frame_stats result = state_->stats;
  if (state_->in_frame) result.ticks_run = state_->ticks_run.load(std::memory_order_relaxed);  // relaxed: a snapshot
  return result;
}

std::size_t tick_manager::registered_count() const {
  state& s = *state_;
  if (s.on_game_thread()) s.drain_orphans();  // ticks destroyed on workers
  return s.registered;
}

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
