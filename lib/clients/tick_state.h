// The tick manager's private state: slots, the cached schedule, the cooldown heap and the
// frame in progress. Private to lib/clients/.
//
// A registered tick function owns a slot: the manager's record of it, at a stable address
// (slots live in a deque), which the schedule's units point at. A slot outlives its tick
// function's registration: unregistering clears the word of the member that runs it this
// frame (see member), so a unit that reaches it afterwards skips it, and the slot is reused
// only after the schedule that pointed at it has been rebuilt.
//
// The schedule is a list of units in creation order, each run by one magpie task: a chunk
// of ticks without a prerequisite to wait for, a chunk of ticks that wait for other units,
// a batch, or (during a frame) one newly spawned tick. A unit waits only for units created
// before it, so launching in creation order always finds its prerequisites' tasks, and
// waiting in creation order never waits for a unit whose prerequisites are still waited for.
#pragma once

#include <magpie/scheduler.h>
#include <magpie/task.h>
#include <magpie/tick_manager.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <utility>
#include <string>
#include <thread>
#include <vector>

namespace magpie::ticks {

inline constexpr std::uint32_t none = 0xffffffff;
inline constexpr double run_at_next_visit = -std::numeric_limits<double>::infinity();

// unit_key_count is how many kinds of unit a schedule files ticks into (see file()).
inline constexpr std::size_t unit_key_count = ticking_group_count * ticking_group_count * 16;

// group_index turns a group into an array index.
constexpr std::size_t group_index(ticking_group group) { return static_cast<std::size_t>(group); }

// tick_slot is the manager's record of one registered tick function. A unit running the
// tick reads its member (below), not the slot, unless it is an interval tick; what such a
// unit reads comes first.
struct tick_slot {
  // Written on the game thread before the units of the frame are launched.
  std::uint64_t due_frame = 0;  // an interval tick runs only in the frame it came due
  float delta = 0;              // an interval tick's delta_seconds: the time since it last ran
  // Tick times (tick_manager_options::measure_tick_times), each field in a hole the others
  // leave: written by the thread that ran the tick, read by the game thread once the frame's
  // units have completed (their completion orders the two).
  float measured_seconds = 0;  // how long its last run took
  // The tick function, for the game thread's bookkeeping and reports; cleared (seq_cst, as
  // its member's word) by unregistration.
  std::atomic<tick_function*> function{nullptr};
  // The tick function's name kept for traces (magpie::trace::intern), made the first time a
  // trace records the tick; relaxed: every value stored is a valid kept name.
  std::atomic<const char*> trace_name{nullptr};
  // Mirrored from the tick function when the schedule is built.
  bool interval = false;
  bool registered = false;
  std::uint32_t index = 0;
  std::uint64_t registration = 0;  // when it was registered: pause frames run in this order

  // Cooldown (game thread only).
  double expiry = run_at_next_visit;
  std::uint32_t heap_position = none;
  float chain_seconds = 0;  // tick times: the longest chain of its segment's ticks ending with it
  double last_run = 0;
  bool has_run = false;

  // Placement (game thread only): from the schedule for static ticks, per frame for the rest.
  bool in_schedule = false;  // registered and enabled when the schedule was built
  bool dynamic = false;      // waits (transitively) for an interval tick: placed per frame
  bool queued_new = false;   // on the newly-spawned list
  std::uint32_t measured_frame = 0;  // tick times: the frame it last ran in (its low 32 bits)
  std::uint64_t placed_frame = 0;
  std::uint32_t unit = none;    // the unit it was last filed into
  std::uint32_t member = none;  // its place among that unit's members
  ticking_group start = ticking_group::pre_physics;
  ticking_group end = ticking_group::pre_physics;
  bool game_thread = true;
  std::vector<tick_slot*> kept;  // prerequisites kept by the last build (cycle edges dropped)

  // Depth-first search marks.
  std::uint64_t visit_mark = 0;
  bool on_stack = false;
};

// member is one tick of a unit. Its word is all the unit reads to run an every-frame tick:
// the tick function's address with two flags in its low bits, or zero once it is
// unregistered. So a frame streams through the member list and the tick functions and
// leaves the slots (another cache line a tick, 100,000 ticks outgrow the caches) alone.
struct member {
  static constexpr std::uintptr_t disabled = 1;  // disabled during the frame: skipped
  static constexpr std::uintptr_t interval = 2;  // runs only in the frame it came due (see its slot)
  static constexpr std::uintptr_t flags = disabled | interval;
  static_assert(alignof(tick_function) > flags, "the flags live in a tick function's address");

  // Cleared (seq_cst) by unregistration, which then checks whether the unit is running — see
  // unit::run_state; its flags change on the game thread, relaxed (see tick_function_address).
  std::atomic<std::uintptr_t> word;
  tick_slot* slot;

  member(tick_slot& of, tick_function& tick, bool enabled)
      : word(reinterpret_cast<std::uintptr_t>(&tick) | (enabled ? 0 : disabled) | (of.interval ? interval : 0)),
        slot(&of) {}
  // Copied only while its unit is filed, on the game thread, before any launch publishes it.
  member(const member& other) : word(other.word.load(std::memory_order_relaxed)), slot(other.slot) {}  // relaxed: see above
  member& operator=(const member&) = delete;

  // tick_function_address is the tick function a word names; a disabled tick may run once
  // more or not when disabled as its unit starts, so the flags publish nothing else.
  static tick_function* tick_function_address(std::uintptr_t word) {
    return reinterpret_cast<tick_function*>(word & ~flags);
  }
};

// cooldown is an interval tick's entry in the cooldown heap. It carries the slot's expiry and
// index, so that sifting compares entries without reaching into slots all over memory.
struct cooldown {
  double expiry;
  std::uint32_t index;
  tick_slot* slot;
  bool operator<(const cooldown& other) const {
    return expiry < other.expiry || (expiry == other.expiry && index < other.index);
  }
};

// unit is one magpie task's worth of ticks, run in order.
struct unit {
  std::vector<member> members;
  std::vector<std::uint32_t> prerequisites;  // units created earlier
  ticking_group start = ticking_group::pre_physics;
  ticking_group end = ticking_group::pre_physics;
  bool game_thread = true;
  bool high_priority = false;
  bool batch = false;
  bool single = false;  // one tick registered or enabled during the frame

  // Per frame.
  task<> handle;
  bool launched = false;
  // 0 idle, 1 running, 2 done. The runner stores 1 (seq_cst) before it loads its members'
  // words; unregistration clears a word (seq_cst) before it loads this: one of the two sees
  // the other, so a tick either is skipped or its unit is seen running (which a destruction
  // waits out; an unregistration does not).
  std::atomic<std::uint8_t> run_state{0};
  // The unit the thread running this one waits for in a tick's destruction, or null: set
  // (seq_cst) before that thread looks at the other units', so of threads waiting for one
  // another's units in a ring at least one sees the ring closed and does not wait (see
  // waits_for_this_thread in tick_manager.cpp).
  mutable std::atomic<const unit*> waiting_for{nullptr};
  // The unit its thread was running when it started this one (running_unit then), or null;
  // written and read only by that thread while it runs this one.
  const unit* outer = nullptr;
};

// running_unit is the unit this thread is running, so that destroying a tick of that very
// unit from one of its own ticks does not wait for itself.
// Constant-initialised, so that another file reads it with one load, without the call a
// thread_local that might need initialising costs.
extern constinit thread_local const unit* running_unit;

// runs_on_this_thread says whether this thread is running `work`: the unit it runs now, or
// one it was running when it went on to run that one (a tick running the game thread's
// queue, say), which cannot finish before this thread returns to it.
inline bool runs_on_this_thread(const unit& work) {
  for (const unit* at = running_unit; at != nullptr; at = at->outer) {
    if (at == &work) return true;
  }
  return false;
}

// report_tick_exception reports what a tick body threw; the frame goes on.
[[gnu::cold]] void report_tick_exception(const tick_slot& slot, std::exception_ptr error);

// name_of is a slot's tick function's name, for reports (game thread).
inline std::string name_of(const tick_slot& slot) {
  // relaxed: the game thread's own store, or a destruction's under the manager's guard
  const tick_function* tick = slot.function.load(std::memory_order_relaxed);
  return tick != nullptr ? tick->name() : std::string("(destroyed)");
}

// cycle_report is one cycle the build broke.
struct cycle_report {
  std::string text;
};

}  // namespace magpie::ticks

namespace magpie {

struct tick_manager::state {
  tick_manager* owner;
  scheduler* pool;
  tick_manager_options options;
  std::thread::id game_thread;

  std::deque<ticks::tick_slot> slots;
  std::vector<std::uint32_t> free_slots;
  std::vector<std::uint32_t> retired_slots;  // free once the schedule is rebuilt
  // Guards what a tick destroyed off the game thread reads and writes (the units, the
  // placement of slots, prerequisite edges, orphans): taken by such a destruction, and by the
  // game thread where it changes those during a frame. Never held while a tick runs.
  std::mutex off_thread_guard;
  // Slots of ticks destroyed off the game thread, retired by the game thread (drain_orphans).
  std::vector<std::uint32_t> orphans;
  // Ticks unregistered this frame while a unit that may run them was running: a destruction
  // waits for that unit. Such a tick's slot_ points at this state until the frame ends,
  // unless it is registered again meanwhile (then its own slot).
  std::vector<std::pair<tick_function*, const ticks::unit*>> retiring;
  // Ticks that were part of this frame and were unregistered: registered again in the same
  // frame, they tick from the next one (a tick runs at most once a frame).
  std::vector<const tick_function*> visited_and_removed;
  // Destructions off the game thread waiting for a unit: the frame keeps its units until none.
  std::atomic<int> off_thread_waiters{0};
  std::size_t registered = 0;
  std::uint64_t registrations = 0;  // registrations so far, numbering the slots' registration
  std::vector<std::pair<std::uint64_t, std::uint32_t>> pause_order;  // run_pause_frame's scratch

  // The cached schedule.
  bool dirty = true;
  std::uint64_t change_version = 1;       // bumped by every change to the schedule's inputs
  std::uint64_t cycles_reported_version = 0;
  std::uint64_t build_mark = 0;
  std::deque<ticks::unit> units;
  std::size_t static_units = 0;
  std::array<std::vector<std::uint32_t>, ticking_group_count> static_by_start;
  // The most ticks a free any-thread chunk takes, by start group: set by the build from the
  // workers and the population (see size_chunks).
  std::array<std::size_t, ticking_group_count> free_chunk_limit{};
  std::vector<ticks::tick_slot*> static_filed;  // the cached schedule's ticks, in filing order
  std::vector<ticks::tick_slot*> dynamic_order;  // placed per frame, in prerequisite order
  std::size_t static_demoted = 0;
  std::size_t static_cycles = 0;
  std::vector<ticks::cycle_report> cycles;

  // Cooldowns: a binary min-heap of interval ticks by expiry.
  std::vector<ticks::cooldown> cooldown_heap;

  // The frame in progress.
  bool in_frame = false;
  bool attached_here = false;
  named_thread game_named = named_thread::game;
  std::uint64_t frame = 0;
  double now = 0;  // seconds, advanced by every frame's delta
  float frame_delta = 0;
  level_tick tick_type = level_tick::all;
  std::size_t next_group = 0;  // the group run_tick_group expects
  std::array<std::vector<std::uint32_t>, ticking_group_count> frame_by_start;
  std::vector<std::uint32_t> pending;  // launched units not yet waited for
  std::vector<ticks::tick_slot*> newly_spawned;
  std::vector<ticks::tick_slot*> frame_filed;  // ticks filed for this frame only, in filing order
  std::array<bool, ticking_group_count> blocked{};  // which groups' run_tick_group blocked this frame
  std::chrono::steady_clock::time_point frame_started;
  // Scratch lists kept between frames (no allocation per frame); handles by reference.
  std::vector<std::reference_wrapper<const task<>>> prerequisite_scratch;
  // start_frame's scratch lists: members, not thread_locals, so that a frame run from a
  // thread_local's destructor at thread exit finds them alive.
  std::vector<ticks::tick_slot*> still_due_scratch;  // take_due_cooldowns
  std::vector<ticks::tick_slot*> ticking_scratch;    // place_dynamic
  std::vector<std::uint32_t> due_scratch;
  std::vector<std::uint32_t> launched_scratch;
  std::vector<std::uint32_t> waits_scratch;
  std::vector<std::uint32_t> game_due_scratch;
  std::array<std::uint32_t, ticks::unit_key_count> frame_open{};  // open frame units, by kind
  tick_frame_stats stats{};
  // relaxed: a sum read on the game thread after every unit completed (the waits order it).
  std::atomic<std::size_t> ticks_run{0};

  state(tick_manager& manager, scheduler& on, tick_manager_options chosen)
      : owner(&manager), pool(&on), options(chosen), game_thread(std::this_thread::get_id()) {}

  bool on_game_thread() const { return std::this_thread::get_id() == game_thread; }
  // slot_of is a registered tick's slot. relaxed: read on the game thread, which wrote it, or
  // under the guard by a destruction that found the tick registered here.
  ticks::tick_slot& slot_of(const tick_function& tick) {
    return *static_cast<ticks::tick_slot*>(tick.slot_.load(std::memory_order_relaxed));
  }

  void mark_changed() {
    dirty = true;
    ++change_version;
  }

  // Registration (tick_manager.cpp).
  void add(tick_function& tick);
  void remove(tick_function& tick);
  void forget(tick_function& tick);
  void drain_orphans();
  void enable_changed(tick_function& tick);
  void interval_changed(tick_function& tick, bool restart_cooldown);
  void queue_new(ticks::tick_slot& slot);
  ticks::member* member_this_frame(ticks::tick_slot& slot);
  void wait_until_not_running(const ticks::unit& work);
  const ticks::unit* stop_ticking(ticks::tick_slot& slot);
  void retire_slot(ticks::tick_slot& slot);
  void wait_counted(const ticks::unit& work);

  // Cooldowns (tick_schedule.cpp).
  void heap_push(ticks::tick_slot* slot);
  void heap_remove(ticks::tick_slot* slot);
  void heap_fix(ticks::tick_slot* slot);
  void take_due_cooldowns();
  void mark_running(ticks::tick_slot& slot);

  // The schedule (tick_schedule.cpp).
  void build();
  void place(ticks::tick_slot& slot, ticking_group context, const std::vector<ticks::tick_slot*>& before);
  bool needed_edge(const ticks::tick_slot& before, const ticks::tick_slot& after) const;
  bool runs_this_frame(const ticks::tick_slot& slot) const;
  void place_dynamic();
  void queue_newly_spawned(ticking_group context);
  std::uint32_t add_frame_unit(ticks::tick_slot& slot);
  void file(ticks::tick_slot& slot, std::array<std::uint32_t, ticks::unit_key_count>& open, bool for_frame);
  void size_chunks();

  // Frames (tick_manager.cpp).
  void release(ticking_group group, std::vector<std::uint32_t>& launched);
  void launch(std::uint32_t index);
  void run_unit(ticks::unit& work);
  template <bool Measure>
  std::size_t run_members(ticks::unit& work);
  bool prerequisites_done(const ticks::unit& work) const;
  void settle_game_units();
  void wait_for(ticking_group up_to);
  void run_group(ticking_group group, bool block);
  void run_newly_spawned_passes();
  void finish_frame();
  void measure_frame();
};

// tick_access lets the tick manager's sources reach a tick function's private parts.
struct tick_access {
  static void execute(tick_function& tick, float delta, level_tick type) { tick.execute_tick(delta, type); }
  // manager, slot and their setters. The game thread writes them (under the manager's guard
  // where a destruction may read them concurrently). acquire and release: a destruction on
  // another thread that finds them cleared — by an unregistration, or by the end of the frame
  // that kept a way to a run — sees what the game thread saw before, among it the end of
  // every run of the tick that it waited for, so it frees nothing a run still reads.
  static tick_manager* manager(const tick_function& tick) { return tick.manager_.load(std::memory_order_acquire); }
  static void set_manager(tick_function& tick, tick_manager* value) {
    tick.manager_.store(value, std::memory_order_release);
  }
  static void* slot(const tick_function& tick) { return tick.slot_.load(std::memory_order_acquire); }
  static void set_slot(tick_function& tick, void* value) { tick.slot_.store(value, std::memory_order_release); }
  static tick_manager::state& state_of(tick_manager& manager) { return *manager.state_; }
  static void set_actual(tick_function& tick, ticking_group start, ticking_group end) {
    tick.actual_start_ = start;
    tick.actual_end_ = end;
  }
  static const tick_function& read(const tick_function& tick) { return tick; }
  static ticking_group group(const tick_function& tick) { return tick.group_; }
  static ticking_group end_group(const tick_function& tick) { return tick.end_group_; }
  static bool enabled(const tick_function& tick) { return tick.enabled_; }
  static bool high(const tick_function& tick) { return tick.high_priority_; }
  static bool any_thread(const tick_function& tick) { return tick.any_thread_; }
  static bool batching(const tick_function& tick) { return tick.allow_batching_; }
  static bool when_paused(const tick_function& tick) { return tick.tick_when_paused_; }
  static float interval(const tick_function& tick) { return tick.interval_; }
};

}  // namespace magpie
